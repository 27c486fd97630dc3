import { describe, expect, it } from "vitest";
import {
  type HybridConfig,
  type HybridService,
  hybridTick,
  initialHybridState,
  planForecast,
  type ServiceForecast,
} from "./hybrid-loop.js";

/** Upper-bound latency (1 s window): a service at rate r needs ceil(0.1 r / 0.5) = ceil(r / 5) replicas. */
const svc = (id: string, extra: Partial<HybridService> = {}): HybridService => ({
  id,
  processingTime: 0.1,
  slo: { latency: 0.5, percentile: 99 },
  latencyModel: "upperBound",
  ...extra,
});
const flat = (rate: number, steps = 2): ServiceForecast => ({ kind: "samples", samples: [Array(steps).fill(rate)] });
const quiet = [false, false];

describe("planForecast", () => {
  const samples: ServiceForecast = {
    kind: "samples",
    samples: [
      [1, 10],
      [2, 20],
      [3, 30],
    ],
  };
  it("reads a per-step quantile, the per-step maximum, or the window maximum", () => {
    expect(planForecast(samples, { kind: "quantile", q: 0.5 })).toEqual([2, 20]);
    expect(planForecast(samples, { kind: "quantile", q: 0.75 })).toEqual([2.5, 25]);
    expect(planForecast(samples, { kind: "max" })).toEqual([3, 30]);
    expect(planForecast(samples, { kind: "windowMax", q: 0.5 })).toEqual([20, 20]);
  });
  it("interpolates between the published quantile levels", () => {
    const q: ServiceForecast = { kind: "quantiles", levels: [0.5, 0.9], values: [[10, 20]] };
    expect(planForecast(q, { kind: "quantile", q: 0.6 })).toEqual([12.5]);
    expect(planForecast(q, { kind: "quantile", q: 0.1 })).toEqual([10]);
    expect(planForecast(q, { kind: "max" })).toEqual([20]);
    // Levels out of order read as in order; equal levels keep their order (the later one wins past them).
    const shuffled: ServiceForecast = { kind: "quantiles", levels: [0.9, 0.5, 0.6, 0.6], values: [[20, 10, 11, 13]] };
    expect(planForecast(shuffled, { kind: "quantile", q: 0.75 })).toEqual([13 + (7 * 0.15) / 0.3]);
    expect(planForecast(shuffled, { kind: "quantile", q: 0.6 })).toEqual([11]);
    expect(planForecast(shuffled, { kind: "quantile", q: 0.55 })).toEqual([10.5]);
  });
});

describe("hybridTick", () => {
  const config: HybridConfig = { services: [svc("a"), svc("b")], capacity: 10, objective: { kind: "sum" } };

  it("solves at once, then shrinks to each need: 20/s needs 4, 10/s needs 2; 4 backends stay free", () => {
    const s0 = initialHybridState(config);
    expect(s0.shares).toEqual([1, 1]);
    const { state, decision } = hybridTick(config, s0, { now: 0, forecasts: [flat(20), flat(10)], violating: quiet });
    expect(decision.kind).toBe("solve");
    expect(decision.shares).toEqual([4, 2]);
    expect(decision.allocation?.objective).toBeCloseTo(2, 9);
    expect(state.lastSolveAt).toBe(0);
  });

  it("raises a service by one after three consecutive violating ticks, never earlier, never down", () => {
    let st = hybridTick(config, initialHybridState(config), { now: 0, forecasts: [flat(20), flat(10)], violating: quiet }).state;
    const kinds: string[] = [];
    for (let t = 1; t <= 6; t++) {
      const r = hybridTick(config, st, { now: t * 10_000, violating: [false, true] });
      st = r.state;
      kinds.push(r.decision.kind);
    }
    // Raised at ticks 3 and 6 (the count restarts after a raise).
    expect(kinds).toEqual(["hold", "hold", "reactive", "hold", "hold", "reactive"]);
    expect(st.shares).toEqual([4, 4]);
    // A tick without violations resets the count.
    st = hybridTick(config, st, { now: 70_000, violating: [false, true] }).state;
    st = hybridTick(config, st, { now: 80_000, violating: [false, false] }).state;
    st = hybridTick(config, st, { now: 90_000, violating: [false, true] }).state;
    expect(st.overloadTicks).toEqual([0, 1]);
    expect(st.shares).toEqual([4, 4]);
  });

  it("never raises past the free capacity or the service's max; the longest-violating goes first", () => {
    const tight: HybridConfig = {
      ...config,
      capacity: 7,
      services: [svc("a"), svc("b", { maxReplicas: 2 })],
      reactiveTicks: 1,
      reactiveStep: 2,
    };
    let st = hybridTick(tight, initialHybridState(tight), { now: 0, forecasts: [flat(20), flat(10)], violating: quiet }).state;
    expect(st.shares).toEqual([4, 2]);
    // b is at its max; a gets min(2, 1 free) = 1.
    let r = hybridTick(tight, st, { now: 10_000, violating: [true, true] });
    expect(r.decision.shares).toEqual([5, 2]);
    expect(r.decision.raised).toEqual([0]);
    st = r.state;
    r = hybridTick(tight, st, { now: 20_000, violating: [true, true] });
    expect(r.decision.kind).toBe("hold");
    expect(r.decision.shares).toEqual([5, 2]);
  });

  it("re-solves every period, which undoes reactive raises the forecast does not support", () => {
    const c1 = { ...config, reactiveTicks: 1 };
    let st = hybridTick(c1, initialHybridState(c1), { now: 0, forecasts: [flat(20), flat(10)], violating: quiet }).state;
    st = hybridTick(c1, st, { now: 10_000, violating: [false, true] }).state;
    expect(st.shares).toEqual([4, 3]);
    // Not due yet: forecasts are ignored before the period ends.
    const early = hybridTick(c1, st, { now: 290_000, forecasts: [flat(40), flat(10)], violating: quiet });
    expect(early.decision.kind).toBe("hold");
    const r = hybridTick(c1, st, { now: 300_000, forecasts: [flat(40), flat(10)], violating: quiet });
    expect(r.decision.kind).toBe("solve");
    expect(r.decision.shares).toEqual([8, 2]);
  });

  it("over-subscribed: Sum gives the capacity where the utility per backend is highest", () => {
    const small: HybridConfig = { ...config, capacity: 5 };
    // Relaxed upper-bound utility: u = c / need. a: 4 needed, b: 2. Marginal utility of a backend: a 1/4, b 1/2.
    const r = hybridTick(small, initialHybridState(small), { now: 0, forecasts: [flat(20), flat(10)], violating: quiet });
    expect(r.decision.shares).toEqual([3, 2]);
    expect(r.decision.allocation?.objective).toBeCloseTo(1.75, 9);
  });

  it("plans replicas added now as serving only after the cold start", () => {
    // One step of 60 s, cold start 60 s: added replicas never serve within the window; with 1 warm the
    // planned utility of a (need 4) is 1/4 whatever it gets, so the shrink leaves it at 1.
    const cold: HybridConfig = { ...config, coldStartSeconds: 60 };
    const r = hybridTick(cold, initialHybridState(cold), { now: 0, forecasts: [flat(20, 1), flat(10, 1)], violating: quiet, warm: [1, 2] });
    expect(r.decision.shares).toEqual([1, 2]);
    expect(r.decision.allocation?.utilities[0]).toBeCloseTo(0.25, 9);
    // Two steps: the second is served by the new replicas: (1/4 + 1) / 2.
    const r2 = hybridTick(cold, initialHybridState(cold), {
      now: 0,
      forecasts: [flat(20, 2), flat(10, 2)],
      violating: quiet,
      warm: [1, 2],
    });
    expect(r2.decision.shares).toEqual([4, 2]);
    expect(r2.decision.allocation?.utilities[0]).toBeCloseTo(0.625, 9);
  });

  it("keeps warm what the next step's chosen quantile needs, and spreads headroom at a higher plan", () => {
    const spread: ServiceForecast = {
      kind: "samples",
      samples: [
        [10, 10],
        [20, 20],
        [30, 30],
      ],
    };
    const c: HybridConfig = {
      ...config,
      plan: { kind: "quantile", q: 0.5 },
      headroom: { kind: "max" },
      warm: { kind: "quantile", q: 0 },
    };
    const r = hybridTick(c, initialHybridState(c), { now: 0, forecasts: [spread, flat(10)], violating: quiet });
    // Plan: a at 20/s needs 4, b 2; headroom at the max: a at 30/s needs 6 (4 free, it takes 2).
    expect(r.decision.shares).toEqual([6, 2]);
    // Warm: a at the smallest sample, 10/s, needs 2; b at 10/s needs 2.
    expect(r.decision.minWarm).toEqual([2, 2]);
  });

  it("rejects minimums beyond the capacity and malformed signals", () => {
    expect(() => initialHybridState({ ...config, capacity: 1 })).toThrow(/exceed the capacity/);
    expect(() => hybridTick(config, initialHybridState(config), { now: 0, violating: [true] })).toThrow(/one entry per service/);
  });

  it("waits for forecasts when a solve is due and still reacts meanwhile", () => {
    const c1 = { ...config, reactiveTicks: 1 };
    const r = hybridTick(c1, initialHybridState(c1), { now: 0, violating: [true, false] });
    expect(r.decision.kind).toBe("reactive");
    expect(r.decision.shares).toEqual([2, 1]);
    expect(r.state.lastSolveAt).toBeUndefined();
  });
});
