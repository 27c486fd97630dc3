import { stickyLengths, withLeftover } from "@infergrid/allocation";
import { control } from "@infergrid/proto";
import { createLogger } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { type PlannedSpec, type PlannerOptions, plannedSpec, SharePlanner } from "./planner.js";
import { SignalBook } from "./signals.js";

const logger = createLogger("test", "planner-test", "silent");
const options: PlannerOptions = {
  objective: { kind: "fairSum" },
  solvePeriodMs: 60_000,
  tickMs: 10_000,
  plan: { kind: "quantile", q: 0.9 },
  reactiveTicks: 2,
  coldStartMs: 0,
  forecastMaxAgeMs: 120_000,
  defaultServiceTimeMs: 100,
};
const spec = (name: string, over: Partial<PlannedSpec> = {}): PlannedSpec => ({
  name,
  minBackends: 1,
  maxBackends: 0,
  initialBackends: 2,
  latencyThresholdMs: 500,
  percentile: 99,
  profileMeanMs: 100,
  ...over,
});
const forecast = (service: string, rate: number, at: number) =>
  control.Forecast.create({
    service,
    issuedAtUnixMs: at,
    stepMs: 60_000,
    steps: 2,
    quantiles: [
      { quantile: 0.5, ratePerS: [rate, rate] },
      { quantile: 0.9, ratePerS: [rate * 1.2, rate * 1.2] },
    ],
    model: "test",
  });
const report = (service: string, end: number, completed: number, withinSlo: number) =>
  control.LoadReport.create({
    frontendId: "fe",
    service,
    windowStartUnixMs: end - 10_000,
    windowEndUnixMs: end,
    arrivals: completed,
    completed,
    withinSlo,
    serviceTimeMeanMs: 100,
  });
const shareOf = (p: SharePlanner, name: string) => p.describe(name)?.share;

describe("SharePlanner", () => {
  it("holds a service with no forecast and no reports at its initial share", () => {
    const planner = new SharePlanner(new SignalBook(60_000), options, logger);
    planner.tick(0, [spec("a"), spec("b", { initialBackends: 3 })], 10);
    expect(shareOf(planner, "a")).toBe(2);
    expect(shareOf(planner, "b")).toBe(3);
  });

  it("plans from forecasts: the busier service gets more, each enough for its rate, within the capacity", () => {
    const signals = new SignalBook(60_000);
    signals.onForecast(forecast("busy", 40, 0));
    signals.onForecast(forecast("quiet", 2, 0));
    const planner = new SharePlanner(signals, options, logger);
    planner.tick(1000, [spec("busy"), spec("quiet")], 12);
    const busy = shareOf(planner, "busy") ?? 0;
    const quiet = shareOf(planner, "quiet") ?? 0;
    // 48 req/s x 0.1 s = 4.8 busy servers at the planned quantile: at least 6 for p99 under 500 ms.
    expect(busy).toBeGreaterThanOrEqual(6);
    expect(quiet).toBeGreaterThanOrEqual(1);
    expect(busy).toBeGreaterThan(quiet);
    expect(busy + quiet).toBeLessThanOrEqual(12);
    expect(planner.describe("busy")?.predictedRatePerS).toBeCloseTo(48, 9);
  });

  it("plans the loans' floor plan beside its own, from the same signals, at the floor plan's quantile", () => {
    const signals = new SignalBook(60_000);
    // The median says 20 req/s, the 0.9 quantile 60: the floor plan must hold the service's upper forecast.
    signals.onForecast(
      control.Forecast.create({
        service: "bursty",
        issuedAtUnixMs: 0,
        stepMs: 60_000,
        steps: 2,
        quantiles: [
          { quantile: 0.5, ratePerS: [20, 20] },
          { quantile: 0.9, ratePerS: [60, 60] },
        ],
        model: "test",
      }),
    );
    const median: PlannerOptions = { ...options, objective: { kind: "sum" }, plan: { kind: "quantile", q: 0.5 } };
    const planner = new SharePlanner(signals, { ...median, floorPlan: { kind: "quantile", q: 0.9 } }, logger);
    planner.tick(1000, [spec("bursty")], 40);
    const share = shareOf(planner, "bursty") ?? 0;
    const floor = planner.floorShare("bursty") ?? 0;
    // 20 req/s x 0.1 s = 2 busy servers; 60 req/s, 6: each plan at least that, the floor plan above the other.
    expect(share).toBeGreaterThanOrEqual(3);
    expect(floor).toBeGreaterThanOrEqual(7);
    expect(floor).toBeGreaterThan(share);
    expect(new SharePlanner(signals, median, logger).floorShare("bursty")).toBeUndefined();
  });

  it("grows a violating service by one after the reactive ticks, between solves", () => {
    const signals = new SignalBook(600_000);
    signals.onForecast(forecast("a", 5, 0));
    const planner = new SharePlanner(signals, options, logger);
    planner.tick(0, [spec("a")], 20);
    const first = shareOf(planner, "a") ?? 0;
    // Two ticks in a row with 5 % of requests late (p99 allows 1 %).
    signals.onLoadReport(report("a", 10_000, 100, 95), 10_000);
    planner.tick(10_000, [spec("a")], 20);
    expect(shareOf(planner, "a")).toBe(first);
    signals.onLoadReport(report("a", 20_000, 100, 95), 20_000);
    planner.tick(20_000, [spec("a")], 20);
    expect(shareOf(planner, "a")).toBe(first + 1);
    // A healthy tick: no more raises.
    signals.onLoadReport(report("a", 30_000, 100, 100), 30_000);
    planner.tick(30_000, [spec("a")], 20);
    expect(shareOf(planner, "a")).toBe(first + 1);
  });

  it("caps each list at its share and sets the warm floor inside it", () => {
    const signals = new SignalBook(60_000);
    signals.onForecast(forecast("a", 20, 0));
    signals.onForecast(forecast("b", 1, 0));
    const planner = new SharePlanner(signals, options, logger);
    planner.tick(0, [spec("a"), spec("b")], 8);
    const decision = planner.policy({
      services: [
        { name: "a", minBackends: 1, maxBackends: 0, initialBackends: 2, currentList: [] },
        { name: "b", minBackends: 1, maxBackends: 0, initialBackends: 2, currentList: ["x1", "x2", "x3", "x4"] },
      ],
      freeBackends: ["y1", "y2", "y3", "y4"],
      poolSize: 8,
    });
    const a = shareOf(planner, "a") ?? 0;
    const b = shareOf(planner, "b") ?? 0;
    const lengths = stickyLengths([a, b], withLeftover([a, b], 8, [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY]), [0, 4], 8);
    expect(lengths[0]).toBeGreaterThanOrEqual(a);
    expect(decision.lists.get("a")).toHaveLength(lengths[0] ?? -1);
    // b keeps the head of what it held (its backends stay where they are warm unless a's share needs them).
    expect(decision.lists.get("b")).toEqual(["x1", "x2", "x3", "x4"].slice(0, lengths[1]));
    expect((lengths[0] ?? 0) + (lengths[1] ?? 0)).toBe(8);
    // The pool is sized for the shares, not the lengths.
    expect(decision.services.get("a")?.demand).toBe(a);
    for (const n of ["a", "b"]) expect(decision.minWarm.get(n) ?? 0).toBeLessThanOrEqual(decision.lists.get(n)?.length ?? 0);
  });

  it("falls back to the static split when the minimums do not fit the capacity", () => {
    const planner = new SharePlanner(new SignalBook(60_000), options, logger);
    planner.tick(0, [spec("a", { minBackends: 3 }), spec("b", { minBackends: 3 })], 4);
    expect(planner.describe("a")).toBeUndefined();
    const decision = planner.policy({
      services: [
        { name: "a", minBackends: 3, maxBackends: 0, initialBackends: 2, currentList: [] },
        { name: "b", minBackends: 3, maxBackends: 0, initialBackends: 2, currentList: [] },
      ],
      freeBackends: ["1", "2", "3", "4"],
      poolSize: 4,
    });
    expect(decision.lists.get("a")).toHaveLength(2);
    expect(decision.lists.get("b")).toHaveLength(2);
  });

  it("reads a spec's profile mean and fills defaults", () => {
    const p = plannedSpec({ name: "x", model: { profile: { shape: 0, locMs: 10, scaleMs: 90 } }, sla: { latencyThresholdMs: 300 } });
    expect(p).toMatchObject({ name: "x", latencyThresholdMs: 300, percentile: 99, minBackends: 0, maxBackends: 0 });
    expect(p.profileMeanMs).toBeCloseTo(100, 9);
  });
});
