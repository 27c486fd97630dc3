import { describe, expect, it } from "vitest";
import { ClairvoyantPool, clairvoyantStart } from "./clairvoyant.js";
import { erlangC, fixedPolicy, mmcMeanWait, mmcWaitPercentile, peakSizedReplicas } from "./fixed.js";
import { hpaPolicy, hpaRecommendation } from "./hpa.js";
import { kpaPolicy } from "./kpa.js";
import { rayDesiredReplicas, rayServePolicy } from "./ray-serve.js";
import { observation as obs } from "./test-support.js";
import type { Observation, ScalingPolicy } from "./types.js";
import { CumulativeWindow } from "./window.js";

/** Runs a policy over a list of (time, observation) and returns the replicas decided each time. */
function drive<S>(policy: ScalingPolicy<S>, steps: { now: number; o: Observation }[], initial = 1): number[] {
  let state = policy.initialState(0, initial);
  return steps.map(({ now, o }) => {
    const { decision, state: next } = policy.decide({ now, state, observed: o });
    state = next;
    return decision.replicas;
  });
}

describe("Kubernetes HPA", () => {
  const util = hpaPolicy({ target: { kind: "utilisation", target: 0.5 }, maxReplicas: 100 });

  it("scales by ceil(metric / target x ready pods)", () => {
    // 4 pods at 90 % against 50 %: ratio 1.8, ceil(7.2) = 8, within the up limit max(4 + 4, 2 x 4) = 8.
    expect(drive(util, [{ now: 15_000, o: obs({ ready: 4, target: 4, utilisation: 0.9 }) }])).toEqual([8]);
  });

  it("does nothing within the 10 % tolerance", () => {
    expect(hpaRecommendation(0.54, 0.5, 4, 4, 0.1)).toBe(4);
    expect(hpaRecommendation(0.46, 0.5, 4, 4, 0.1)).toBe(4);
    expect(hpaRecommendation(0.56, 0.5, 4, 4, 0.1)).toBe(5);
  });

  it("limits scale-up to max(4 pods, 100 %) per period", () => {
    // 2 pods at 100 % against 20 %: ratio 5 asks for 10; the limit is max(2 + 4, 2 x 2) = 6.
    const p = hpaPolicy({ target: { kind: "utilisation", target: 0.2 }, maxReplicas: 100 });
    expect(drive(p, [{ now: 15_000, o: obs({ ready: 2, target: 2, utilisation: 1 }) }])).toEqual([6]);
    // 10 pods: the 100 % policy allows 20, more than 10 + 4.
    expect(drive(p, [{ now: 15_000, o: obs({ ready: 10, target: 10, utilisation: 1 }) }])).toEqual([20]);
  });

  it("counts starting pods at 0 when scaling up and skips a flip", () => {
    // 2 of 4 ready at 90 %: with the 2 missing at 0, the ratio is 1.8 / 2 = 0.9: a flip, no change.
    expect(hpaRecommendation(0.9, 0.5, 4, 2, 0.1)).toBe(4);
    // 2 of 3 ready at 100 %: (2 x 1.0) / (0.5 x 3) = 1.333, ceil(4) = 4.
    expect(hpaRecommendation(1, 0.5, 3, 2, 0.1)).toBe(4);
    // Scaling down, missing pods count at the target: 2 of 4 ready at 10 %: (0.2 + 1.0) / 2 = 0.6 -> ceil(2.4) = 3.
    expect(hpaRecommendation(0.1, 0.5, 4, 2, 0.1)).toBe(3);
  });

  it("holds the highest recommendation of the last 300 s before scaling down", () => {
    const steps = [{ now: 0, o: obs({ ready: 8, target: 8, utilisation: 0.5 }) }];
    for (let t = 15_000; t <= 300_000; t += 15_000) steps.push({ now: t, o: obs({ ready: 8, target: 8, utilisation: 0.1 }) });
    const out = drive(util, steps);
    // ceil(0.2 x 8) = 2 is recommended from 15 s, but 8 (at 0 s) is in the window until 300 s.
    expect(out.slice(0, -1).every((n) => n === 8)).toBe(true);
    expect(out.at(-1)).toBe(2);
  });

  it("targets requests per replica", () => {
    const rps = hpaPolicy({ target: { kind: "requests-per-replica", target: 3 }, maxReplicas: 100 });
    // 12 req/s over 2 pods = 6 per pod against 3: 4 pods.
    expect(drive(rps, [{ now: 15_000, o: obs({ ready: 2, target: 2, requestRate: 12 }) }])).toEqual([4]);
  });
});

describe("Knative KPA", () => {
  const kpa = kpaPolicy({ containerConcurrency: 1, maxReplicas: 100 });

  it("sizes on the stable window at 70 % of the container concurrency", () => {
    // 2.8 requests in the system / 0.7 = 4 pods; 4 / 5 ready is far below the panic threshold.
    expect(drive(kpa, [{ now: 2000, o: obs({ ready: 5, target: 5, concurrency: 2.8, concurrencyShort: 2.8 }) }])).toEqual([4]);
  });

  it("scales down at most to half the ready pods per decision", () => {
    expect(drive(kpa, [{ now: 2000, o: obs({ ready: 10, target: 10, concurrency: 0.7, concurrencyShort: 0.7 }) }])).toEqual([5]);
  });

  it("panics at 200 %, never scales down in panic, and leaves panic a stable window later", () => {
    const steps = [
      // Panic window: 3.5 / 0.7 = 5 pods on 2 ready = 250 % >= 200 %: panic, 5.
      { now: 2000, o: obs({ ready: 2, target: 2, concurrency: 1.4, concurrencyShort: 3.5 }) },
      // Load gone: still in panic, holds 5.
      { now: 4000, o: obs({ ready: 5, target: 5, concurrency: 1.4, concurrencyShort: 0.7 }) },
      { now: 61_000, o: obs({ ready: 5, target: 5, concurrency: 1.4, concurrencyShort: 0.7 }) },
      // 60 s after panic was last extended (at 2 s): back to the stable count ceil(1.4 / 0.7) = 2... bounded by
      // the scale-down rate floor(5 / 2) = 2.
      { now: 62_001, o: obs({ ready: 5, target: 5, concurrency: 1.4, concurrencyShort: 0.7 }) },
    ];
    expect(drive(kpa, steps)).toEqual([5, 5, 5, 2]);
  });
});

describe("Ray Serve", () => {
  it("computes ceil(running x ongoing per replica / target)", () => {
    expect(rayDesiredReplicas(12, 2, 2)).toBe(6);
    expect(rayDesiredReplicas(1, 4, 2)).toBe(1);
    expect(rayDesiredReplicas(0, 0, 2)).toBe(0);
  });

  it("upscales only after the desired count held for more than 30 s of 0.1 s loops", () => {
    const ray = rayServePolicy({ maxReplicas: 100 });
    const steps = Array.from({ length: 301 }, (_, i) => ({ now: (i + 1) * 100, o: obs({ ready: 2, target: 2, concurrency: 12 }) }));
    const out = drive(ray, steps, 2);
    expect(out[299]).toBe(2); // counter 300 is not > 300
    expect(out[300]).toBe(6);
  });

  it("resets the delay when the desired count falls back", () => {
    const ray = rayServePolicy({ maxReplicas: 100 });
    const steps = Array.from({ length: 600 }, (_, i) => ({
      now: (i + 1) * 100,
      o: obs({ ready: 2, target: 2, concurrency: i === 200 ? 4 : 12 }),
    }));
    const out = drive(ray, steps, 2);
    // The interruption at loop 201 restarts the count: 300 more loops are needed after it.
    expect(out.indexOf(6)).toBe(201 + 300);
  });

  it("downscales after 600 s", () => {
    const ray = rayServePolicy({ maxReplicas: 100 });
    const steps = Array.from({ length: 6001 }, (_, i) => ({ now: (i + 1) * 100, o: obs({ ready: 4, target: 4, concurrency: 1 }) }));
    const out = drive(ray, steps, 4);
    expect(out[5999]).toBe(4);
    expect(out[6000]).toBe(1);
  });
});

describe("fixed peak allocation", () => {
  it("Erlang C matches its textbook values", () => {
    expect(erlangC(1, 0.5)).toBeCloseTo(0.5, 12);
    expect(erlangC(2, 1)).toBeCloseTo(1 / 3, 12);
    // c = 4, a = 3.2: direct formula.
    const a = 3.2;
    const c = 4;
    let sum = 0;
    let term = 1;
    for (let k = 0; k < c; k++) {
      sum += term;
      term *= a / (k + 1);
    }
    const top = (term * c) / (c - a);
    expect(erlangC(c, a)).toBeCloseTo(top / (sum + top), 12);
    expect(mmcMeanWait(1, 0.005, 100)).toBeCloseTo(100, 9); // M/M/1 at rho 0.5: rho / (mu - lambda) = 100 ms
  });

  it("reproduces Faro's worked example (p = 150 ms, 40 req/s, k = 99.99: 7 -> 0.804 s, 8 -> 0.457 s)", () => {
    const latency = (c: number) => mmcWaitPercentile(c, 0.04, 150, 99.99) / 2 + 150;
    expect(latency(7)).toBeCloseTo(804, -1);
    expect(latency(8)).toBeCloseTo(457, -1);
  });

  it("sizes for the peak conservatively and never changes", () => {
    // 24 req/s of 166 ms, p99 service 275 ms, SLO 720 ms: the wait's p99 must fit in 445 ms.
    const n = peakSizedReplicas({ peakRatePerSec: 24, meanServiceMs: 166, servicePercentileMs: 275, sloMs: 720, percentile: 99 });
    expect(mmcWaitPercentile(n, 0.024, 166, 99)).toBeLessThanOrEqual(445);
    expect(mmcWaitPercentile(n - 1, 0.024, 166, 99)).toBeGreaterThan(445);
    expect(n).toBe(6);
    expect(drive(fixedPolicy(7), [{ now: 60_000, o: obs({ ready: 3, target: 3, utilisation: 1 }) }])).toEqual([7]);
  });
});

describe("clairvoyant baselines", () => {
  it("start each request at the latest time that meets RT_max", () => {
    expect(clairvoyantStart(1000, 200, 720)).toBeCloseTo(1520, 2);
    expect(clairvoyantStart(1000, 900, 720)).toBe(1000);
  });

  it("ClairA1 holds a backend exactly while it serves", () => {
    const pool = new ClairvoyantPool({ variant: "A1", setupMs: 10_000, idleTimeoutMs: 300_000 });
    const a = pool.acquire(0, 100);
    const b = pool.acquire(50, 100);
    expect(pool.size).toBe(2);
    expect(pool.release(a.index, 100)).toEqual({ from: 0, to: 100 });
    expect(pool.release(b.index, 150)).toEqual({ from: 50, to: 150 });
    expect(a.coldStart || b.coldStart).toBe(false);
  });

  it("ClairA2 sets up ahead, reuses the lowest free backend and collects after T idle", () => {
    const pool = new ClairvoyantPool({ variant: "A2", setupMs: 10_000, idleTimeoutMs: 1000 });
    const a = pool.acquire(20_000, 100); // set up from 10 s
    const b = pool.acquire(20_050, 100); // a is busy: a second backend
    expect([a.index, b.index, a.coldStart, b.coldStart]).toEqual([0, 1, true, true]);
    pool.release(a.index, 20_100);
    pool.release(b.index, 20_150);
    expect(pool.collect(20_500)).toEqual([]);
    const c = pool.acquire(20_500, 100); // backend 0 is free again: no set-up
    expect([c.index, c.coldStart]).toEqual([0, false]);
    pool.release(c.index, 20_600);
    // b idled from 20.15 s: collected at 21.15 s; a (idle from 20.6 s) stays until 21.6 s.
    expect(pool.collect(21_200)).toEqual([{ from: 10_050, to: 21_150 }]);
    expect(pool.finish(30_000)).toEqual([{ from: 10_000, to: 21_600 }]);
  });
});

describe("CumulativeWindow", () => {
  it("averages an integral over the window, or over the history it has", () => {
    const w = new CumulativeWindow(10);
    // Concurrency 2 for 0-4 s, then 6: the integral in request-ms.
    const cum = (t: number) => (t <= 4000 ? 2 * t : 8000 + 6 * (t - 4000));
    for (let t = 0; t <= 8000; t += 1000) w.push(t, cum(t));
    expect(w.average(8000, cum(8000), 2000)).toBeCloseTo(6, 9);
    expect(w.average(8000, cum(8000), 8000)).toBeCloseTo(4, 9);
    expect(w.average(8000, cum(8000), 60_000)).toBeCloseTo(4, 9);
    expect(w.average(9000, cum(9000), 5000)).toBeCloseTo(6, 9);
  });
});
