import { createLogger } from "@infergrid/runtime";
import { themisPolicy } from "@infergrid/themis";
import { describe, expect, it } from "vitest";
import type { ForecastView } from "./signals.js";
import { forecastPeak, type ListedBackend, ThemisController, type ThemisService } from "./themis-controller.js";

/** ResNet-18 as fitted to the shared ONNX Runtime measurements: about 40 ms a request on one core, 25/s. */
const PROFILE = { gamma: 35.34, eps: 0, delta: 1.14, eta: 3.7 };
const logger = createLogger("test", "themis", "silent");

interface Harness {
  controller: ThemisController;
  rate: { value: number | undefined };
  forecast: { value: number | undefined };
  resizes: { id: string; cores: number; maxBatch: number }[];
  events: string[];
  fail: { value: boolean };
}

function harness(stableTicks = 3): Harness {
  const rate = { value: undefined as number | undefined };
  const forecast = { value: undefined as number | undefined };
  const resizes: Harness["resizes"] = [];
  const events: string[] = [];
  const fail = { value: false };
  const controller = new ThemisController(
    { ratePerS: () => rate.value, forecastPeakPerS: () => forecast.value },
    {
      resize: async (id, cores, maxBatch) => {
        resizes.push({ id, cores, maxBatch });
        if (fail.value) throw new Error("backend unreachable");
      },
      onResize: (what) => events.push(what),
    },
    {
      nodeCores: 8,
      maxBatch: 16,
      maxListLength: 64,
      horizonMs: 10_000,
      resizeRetryMs: 3_000,
      // Replicas started in the surge, so that the test sees the whole move (this system may start them later).
      policy: themisPolicy({ stableTicks, scaleDownDelayMs: 0, startHorizontalInSurge: true }),
    },
    logger,
  );
  return { controller, rate, forecast, resizes, events, fail };
}

const service = (list: ListedBackend[], maxBackends = 0): ThemisService => ({
  name: "resnet18",
  profile: PROFILE,
  sloMs: 1000,
  coldStartMs: 10_000,
  list,
  maxBackends,
});
const warm = (id: string, cores = 1, maxBatch = 1): ListedBackend => ({ id, warm: true, cores, maxBatch });
const cold = (id: string): ListedBackend => ({ id, warm: false, cores: 1, maxBatch: 1 });
const settle = () => new Promise((r) => setImmediate(r));

describe("ThemisController", () => {
  it("sizes nothing before the first load report: the list keeps what it has", () => {
    const h = harness();
    expect(h.controller.tick(0, [service([warm("a")])])).toEqual([]);
    expect(h.controller.target("resnet18")).toBeUndefined();
    expect(h.controller.sizes("resnet18")).toBe(true);
    expect(h.resizes).toEqual([]);
  });

  it("absorbs a step in place at once, starts 1-core replicas, and shrinks only once they are warm", async () => {
    const h = harness(3);
    let t = 0;
    h.rate.value = 5;
    h.controller.tick(t, [service([warm("a")])]);
    // 5/s on one 1-core backend: nothing to do, a list of one.
    expect(h.resizes).toEqual([]);
    expect(h.controller.target("resnet18")).toEqual({ length: 1, remove: [] });

    // The step: 40/s is more than one core carries (about 25/s).
    h.rate.value = 40;
    t += 1000;
    const [report] = h.controller.tick(t, [service([warm("a")])]);
    expect(report?.decision.mode).toBe("vertical");
    expect(report?.peakSource).toBe("observed");
    expect(report?.peakPerS).toBe(40);
    expect(h.resizes).toHaveLength(1);
    const up = h.resizes[0];
    expect(up?.id).toBe("a");
    expect(up?.cores).toBeGreaterThan(1);
    expect(up?.cores).toBeLessThanOrEqual(8);
    expect(h.events).toEqual(["up"]);
    // The surge starts the 1-core replicas the step needs while the resized backend carries it.
    const grown = h.controller.target("resnet18")?.length ?? 0;
    expect(grown).toBeGreaterThanOrEqual(2);

    // The heartbeat still shows 1 core: planned at the size asked, so no second resize, and the replicas asked
    // of the pool but not listed yet count as starting (the list does not grow again).
    t += 1000;
    h.controller.tick(t, [service([warm("a")])]);
    expect(h.resizes).toHaveLength(1);
    expect(h.controller.target("resnet18")?.length).toBe(grown);

    // The resize applied; the new backends are listed and still cold: a stays big.
    const newIds = Array.from({ length: grown - 1 }, (_, i) => `n${i}`);
    for (let i = 0; i < 5; i++) {
      t += 1000;
      h.controller.tick(t, [service([warm("a", up?.cores, up?.maxBatch), ...newIds.map(cold)])]);
    }
    expect(h.resizes).toHaveLength(1);
    expect(h.controller.target("resnet18")?.length).toBe(grown);

    // They are warm: after K stable ticks every backend goes back to 1 core, none removed.
    for (let i = 0; i < 4; i++) {
      t += 1000;
      h.controller.tick(t, [service([warm("a", up?.cores, up?.maxBatch), ...newIds.map((id) => warm(id))])]);
    }
    const down = h.resizes.slice(1);
    expect(down.map((r) => r.id)).toEqual(["a"]);
    expect(down[0]?.cores).toBe(1);
    expect(h.events).toEqual(["up", "down"]);
    expect(h.controller.lastDecision("resnet18")?.mode).toBe("horizontal");
    expect(h.controller.target("resnet18")).toEqual({ length: grown, remove: [] });
    await settle();
  });

  it("removes surplus replicas once the load is back down and stable", () => {
    const h = harness(2);
    h.rate.value = 5;
    const list = [warm("a"), warm("b"), warm("c")];
    let target = h.controller.target("resnet18");
    for (let t = 0; t <= 20_000 && (target?.remove.length ?? 0) === 0; t += 1000) {
      h.controller.tick(t, [service(list)]);
      target = h.controller.target("resnet18");
    }
    // 5/s needs one 1-core replica: two of the three leave.
    expect(target?.length).toBe(1);
    expect(target?.remove).toHaveLength(2);
    expect(h.resizes).toEqual([]);
  });

  it("plans from the forecast's peak when there is one", () => {
    const h = harness();
    h.rate.value = 5;
    h.forecast.value = 60;
    const [report] = h.controller.tick(0, [service([warm("a")])]);
    expect(report?.peakSource).toBe("forecast");
    expect(report?.peakPerS).toBe(60);
    // 60/s expected: replicas are started ahead of it (this system's proactive start), nothing resized.
    expect(h.controller.target("resnet18")?.length).toBeGreaterThan(1);
    expect(h.resizes).toEqual([]);
  });

  it("plans a rate beyond what the largest list serves as that rate: an absurd load report does not take it down", () => {
    // One 1-core replica at batch 16 serves 16 * 1000 / (35.34 * 16 + 1.14 * 16 + 3.7) ms = 27.2/s.
    const perBackend = (16 * 1000) / (35.34 * 16 + 1.14 * 16 + 3.7);
    for (const [maxBackends, longest] of [
      [0, 64],
      [10, 10],
    ] as const) {
      const h = harness();
      h.rate.value = 1e15;
      h.forecast.value = 1e15;
      let length = 0;
      for (let t = 0; t <= 5_000; t += 1000) {
        const [report] = h.controller.tick(t, [service([warm("a")], maxBackends)]);
        expect(report?.ratePerS).toBeCloseTo(longest * perBackend, 6);
        expect(report?.peakPerS).toBe(report?.ratePerS);
        length = h.controller.target("resnet18")?.length ?? 0;
      }
      // Sized for the ceiling: about the longest list (the machine plans each backend below full use).
      expect(length).toBeGreaterThanOrEqual(longest);
      expect(length).toBeLessThanOrEqual(2 * longest);
    }
  });

  it("asks again when a resize failed or the heartbeats never show it", async () => {
    const h = harness();
    h.rate.value = 40;
    h.fail.value = true;
    h.controller.tick(0, [service([warm("a")])]);
    await settle();
    expect(h.events).toEqual(["up", "failed"]);
    h.fail.value = false;
    h.controller.tick(1000, [service([warm("a")])]);
    expect(h.resizes).toHaveLength(2);
    // Accepted, but the backend keeps reporting 1 core: asked again after the retry time, not before.
    h.controller.tick(2000, [service([warm("a")])]);
    expect(h.resizes).toHaveLength(2);
    h.controller.tick(4500, [service([warm("a")])]);
    expect(h.resizes).toHaveLength(3);
  });

  it("forgets a service that is gone", () => {
    const h = harness();
    h.rate.value = 5;
    h.controller.tick(0, [service([warm("a")])]);
    h.controller.tick(1000, []);
    expect(h.controller.sizes("resnet18")).toBe(false);
    expect(h.controller.target("resnet18")).toBeUndefined();
  });
});

describe("forecastPeak", () => {
  const f = (issuedAt: number, rates: number[][]): ForecastView => ({
    issuedAt,
    stepMs: 5_000,
    observedRatePerS: 0,
    model: "holt",
    quantiles: rates.map((r, i) => ({ quantile: [0.1, 0.5, 0.9][i] ?? 0.5, ratePerS: r })),
  });

  it("takes the top quantile's largest step that overlaps the next window", () => {
    const forecast = f(10_000, [
      [1, 1, 1, 1],
      [2, 2, 2, 2],
      [10, 30, 20, 90],
    ]);
    // Steps cover [10, 15), [15, 20), [20, 25), [25, 30) s; the window [12, 22) s overlaps the first three.
    expect(forecastPeak(forecast, 12_000, 10_000)).toBe(30);
    expect(forecastPeak(forecast, 25_000, 10_000)).toBe(90);
  });

  it("has nothing to say without a forecast or when its steps are all past", () => {
    expect(forecastPeak(undefined, 0, 10_000)).toBeUndefined();
    expect(forecastPeak(f(0, [[5, 5]]), 20_000, 10_000)).toBeUndefined();
  });
});
