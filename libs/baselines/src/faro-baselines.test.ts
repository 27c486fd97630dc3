import type { ServiceForecast } from "@infergrid/faro";
import { describe, expect, it } from "vitest";
import {
  aiadPolicy,
  fairSharePolicy,
  fairShareReplicas,
  markPlannedRate,
  markPolicy,
  markReplicas,
  oneshotPolicy,
  oneshotReplicas,
  tickLoad,
} from "./faro-baselines.js";
import { faroPublishedPolicy, forecastOrObserved, violatingTick } from "./faro-published-policy.js";
import { observation as obs } from "./test-support.js";
import type { ScalingPolicy, TickWindow } from "./types.js";

const tick = (p99Ms: number, t: Partial<TickWindow> = {}): TickWindow => ({
  ended: 100,
  dropped: 0,
  violations: 0,
  p99Ms,
  serviceMeanMs: 166,
  arrivals: 100,
  spanMs: 10_000,
  ...t,
});

/**
 * Runs a policy tick by tick (every 10 s) over the given p99s, feeding back each decision as the next
 * tick's target (the controller does the same), and returns the replicas decided each tick.
 */
function driveP99<S>(policy: ScalingPolicy<S>, p99s: readonly number[], initial: number): number[] {
  let state = policy.initialState(0, initial);
  let target = initial;
  return p99s.map((p99, i) => {
    const { decision, state: next } = policy.decide({
      now: (i + 1) * 10_000,
      state,
      observed: obs({ ready: target, target, tick: Number.isNaN(p99) ? tick(p99, { ended: 0, arrivals: 0 }) : tick(p99) }),
    });
    state = next;
    target = decision.replicas;
    return target;
  });
}

const SLO = 720;

describe("FairShare", () => {
  it("gives each job floor(capacity / jobs) for the whole run", () => {
    // Faro's clusters with 10 jobs: 36 -> 3, 32 -> 3, 16 -> 1.
    expect(fairShareReplicas(36, 10)).toBe(3);
    expect(fairShareReplicas(32, 10)).toBe(3);
    expect(fairShareReplicas(16, 10)).toBe(1);
    const p = fairSharePolicy(36, 10);
    expect(p.name).toBe("fairshare");
    expect(p.decide({ now: 60_000, state: null, observed: obs({ target: 3, tick: tick(5000) }) }).decision.replicas).toBe(3);
  });
});

describe("reading a tick", () => {
  it("is over above the SLO, under below it, and unknown when it says nothing", () => {
    expect(tickLoad(tick(721), SLO)).toBe("over");
    expect(tickLoad(tick(Number.POSITIVE_INFINITY), SLO)).toBe("over");
    expect(tickLoad(tick(719), SLO)).toBe("under");
    expect(tickLoad(tick(720), SLO)).toBe("unknown");
    // Idle (nothing arrived, nothing ended): under. Arrivals but nothing ended: no evidence.
    expect(tickLoad(tick(Number.NaN, { ended: 0, arrivals: 0 }), SLO)).toBe("under");
    expect(tickLoad(tick(Number.NaN, { ended: 0, arrivals: 5 }), SLO)).toBe("unknown");
    expect(tickLoad(undefined, SLO)).toBe("unknown");
  });
});

describe("Oneshot", () => {
  const p = oneshotPolicy({ sloMs: SLO, maxReplicas: 20 });

  it("scales to ceil(current x p99 / SLO) after 30 s (3 ticks) of overload", () => {
    // 2 replicas, p99 900, 900, 1080 ms: on the third tick ceil(2 x 1080 / 720) = ceil(3) = 3.
    expect(driveP99(p, [900, 900, 1080], 2)).toEqual([2, 2, 3]);
    // 4 replicas at p99 1000 ms: ceil(4 x 1.389) = ceil(5.56) = 6.
    expect(driveP99(p, [1000, 1000, 1000], 4)).toEqual([4, 4, 6]);
  });

  it("needs an unbroken run, and a new one after each move", () => {
    // A tick under the SLO breaks the run: no scale-up on the 5th tick (only 2 over in a row).
    expect(driveP99(p, [900, 900, 500, 900, 900], 2)).toEqual([2, 2, 2, 2, 2]);
    // Six ticks over: a move on the 3rd (ceil(2 x 1.5) = 3) and the 6th (ceil(3 x 1.5) = ceil(4.5) = 5).
    expect(driveP99(p, [1080, 1080, 1080, 1080, 1080, 1080], 2)).toEqual([2, 2, 3, 3, 3, 5]);
  });

  it("scales down the same way after 5 minutes (30 ticks) of underload, at least 1", () => {
    // 5 replicas at p99 360 ms (half the SLO): on the 30th tick ceil(5 x 0.5) = ceil(2.5) = 3.
    const got = driveP99(p, new Array<number>(30).fill(360), 5);
    expect(got.slice(0, 29).every((n) => n === 5)).toBe(true);
    expect(got[29]).toBe(3);
    // 2 replicas at p99 100 ms: ceil(2 x 0.139) = 1; an idle job (nothing ended) goes to the minimum, 1.
    expect(driveP99(p, new Array<number>(30).fill(100), 2)[29]).toBe(1);
    expect(driveP99(p, new Array<number>(30).fill(Number.NaN), 4)[29]).toBe(1);
  });

  it("reads an infinite p99 (drops) as the largest ratio: the job's max, or double without one", () => {
    const inf = Number.POSITIVE_INFINITY;
    expect(driveP99(p, [inf, inf, inf], 2)).toEqual([2, 2, 20]);
    expect(oneshotReplicas(3, inf, SLO, { minReplicas: 1, maxReplicas: Number.POSITIVE_INFINITY })).toBe(6);
    // Exactly at the ratio no rounding error adds a replica: 3 x 720 / 720 = 3.
    expect(oneshotReplicas(3, 720, SLO, { minReplicas: 1, maxReplicas: 10 })).toBe(3);
    // The bound: ceil(8 x 3) = 24 is cut to 20.
    expect(oneshotReplicas(8, 2160, SLO, { minReplicas: 1, maxReplicas: 20 })).toBe(20);
  });
});

describe("AIAD", () => {
  const p = aiadPolicy({ sloMs: SLO, maxReplicas: 4 });

  it("adds one replica per 30 s of overload, within the max", () => {
    expect(driveP99(p, [900, 900, 900, 900, 900, 900], 2)).toEqual([2, 2, 3, 3, 3, 4]);
    expect(driveP99(p, [900, 900, 900, 900, 900, 900, 900, 900, 900], 3)).toEqual([3, 3, 4, 4, 4, 4, 4, 4, 4]);
  });

  it("removes one replica per 5 minutes of underload, never below 1", () => {
    const got = driveP99(p, new Array<number>(90).fill(300), 3);
    expect(got[28]).toBe(3);
    expect(got[29]).toBe(2);
    expect(got[59]).toBe(1);
    expect(got[89]).toBe(1);
  });

  it("restarts the underload run on an overloaded tick", () => {
    const p99s = [...new Array<number>(29).fill(300), 900, ...new Array<number>(29).fill(300)];
    expect(driveP99(p, p99s, 3).every((n) => n === 3)).toBe(true);
  });
});

describe("MArk/Cocktail/Barista", () => {
  // 7 steps, levels 0.5 / 0.6 / 0.9 (req/s).
  const forecast: ServiceForecast = {
    kind: "quantiles",
    levels: [0.5, 0.6, 0.9],
    values: [
      [4, 5, 9],
      [7, 8, 12],
      [9, 10, 15],
      [5, 6, 9],
      [3, 4, 6],
      [3, 4, 6],
      [3, 4, 6],
    ],
  };

  it("sizes for ceil(max planned rate x p / SLO), p and the SLO in seconds, at least 1", () => {
    // The 0.6 quantile's maximum over the 7 steps is 10 req/s; 10 x 0.18 / 0.72 = 2.5 -> 3.
    expect(markPlannedRate(forecast, { kind: "quantile", q: 0.6 })).toBe(10);
    expect(markReplicas(10, 180, 720)).toBe(3);
    // 8 req/s: 8 x 0.18 / 0.72 = 2 exactly -> 2 (no rounding error adds one); 0 req/s -> 1.
    expect(markReplicas(8, 180, 720)).toBe(2);
    expect(markReplicas(0, 180, 720)).toBe(1);
    // The 0.6 quantile between given levels is interpolated: 0.5 -> 4, 0.9 -> 12 gives 6 at 0.6; 6 x 0.25 = 1.5 -> 2.
    const sparse: ServiceForecast = { kind: "quantiles", levels: [0.5, 0.9], values: [[4, 12]] };
    expect(markPlannedRate(sparse, { kind: "quantile", q: 0.6 })).toBeCloseTo(6, 12);
    const p = markPolicy({ sloMs: 720, meanServiceMs: 180, maxReplicas: 10 });
    const d = (f: ServiceForecast | undefined, target = 1) =>
      p.decide({ now: 10_000, state: null, observed: obs({ target, ...(f ? { forecast: f } : {}) }) }).decision.replicas;
    expect(d(forecast)).toBe(3);
    expect(d(sparse)).toBe(2);
    // Before the first forecast the count is held; the max bound applies (100 req/s would ask for 25).
    expect(d(undefined, 4)).toBe(4);
    expect(d({ kind: "quantiles", levels: [0.6], values: [[100]] })).toBe(10);
    // The maximum can be limited to the first steps: the first two give 8 -> 2.
    const first2 = markPolicy({ sloMs: 720, meanServiceMs: 180, horizonSteps: 2 });
    expect(first2.decide({ now: 10_000, state: null, observed: obs({ forecast }) }).decision.replicas).toBe(2);
  });
});

describe("Faro as published (central controller policy)", () => {
  const jobs = [
    { name: "hot", meanServiceMs: 180, sloMs: 720, percentile: 99 },
    { name: "cool", meanServiceMs: 180, sloMs: 720, percentile: 99 },
  ];
  const flat = (r: number): ServiceForecast => ({ kind: "quantiles", levels: [0.6], values: new Array(7).fill([r]) });
  const cluster = { capacity: 10, coldStartMs: 10_000 };

  it("reads the violation signal as the allocator does: violations / ended over 1 - percentile", () => {
    expect(violatingTick(obs({ tick: tick(900, { violations: 2, ended: 100 }) }), 99)).toBe(true);
    expect(violatingTick(obs({ tick: tick(700, { violations: 1, ended: 100 }) }), 99)).toBe(false);
    expect(violatingTick(obs({ tick: tick(Number.NaN, { violations: 0, ended: 0 }) }), 99)).toBe(false);
    // Without a forecast yet, the tick's arrival rate is planned flat: 50 arrivals in 10 s = 5 req/s.
    expect(forecastOrObserved(obs({ tick: tick(100, { arrivals: 50 }) }))).toEqual({ kind: "quantiles", levels: [0.5], values: [[5]] });
  });

  it("solves every 5 minutes, raises a violating job by 1 after 3 ticks, and never scales down between solves", () => {
    const p = faroPublishedPolicy({ jobs });
    let state = p.initialState(0, [1, 1], cluster);
    const step = (now: number, forecasts: ServiceForecast[], violating: boolean[], ready: number[]) => {
      const observed = forecasts.map((f, j) =>
        obs({ ready: ready[j] ?? 1, target: ready[j] ?? 1, forecast: f, tick: tick(500, { violations: violating[j] ? 10 : 0 }) }),
      );
      const r = p.decide({ now, state, observed, cluster });
      state = r.state;
      return r.decisions;
    };
    // 20 req/s of 180 ms is 3.6 busy replicas; 1 req/s needs 1. The first tick solves.
    const first = step(10_000, [flat(20), flat(1)], [false, false], [1, 1]);
    expect(first.map((d) => d.reason)).toEqual(["solve", "solve"]);
    // M/D/c p99 at 20 req/s: 4 replicas 1.16 s, 5 replicas 0.42 s; utility 1 at 5, and stage 3 gives back the rest.
    const [hot, cool] = first.map((d) => d.replicas) as [number, number];
    expect([hot, cool]).toEqual([5, 1]);
    // The cool job violates 3 ticks in a row: +1 on the third (free capacity permitting), nothing else moves.
    const ready = [hot, cool];
    expect(step(20_000, [flat(20), flat(1)], [false, true], ready).map((d) => d.replicas)).toEqual([hot, cool]);
    expect(step(30_000, [flat(20), flat(1)], [false, true], ready).map((d) => d.replicas)).toEqual([hot, cool]);
    const raised = step(40_000, [flat(20), flat(1)], [false, true], ready);
    expect(raised.map((d) => d.replicas)).toEqual([5, 2]);
    expect(raised[1]?.reason).toBe("reactive");
    // The load falls: no scale-down before the next solve, 300 s after the first.
    const low = [flat(1), flat(1)];
    expect(step(300_000, low, [false, false], ready)[0]?.replicas).toBe(hot);
    const resolved = step(310_000, low, [false, false], ready);
    expect(resolved[0]?.reason).toBe("solve");
    expect(resolved[0]?.replicas).toBeLessThan(hot);
  });
});
