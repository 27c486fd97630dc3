import {
  type Lognormal,
  lognormalCdf,
  lognormalMean,
  type Random,
  randomInt,
  sampleExponential,
  sampleLognormal,
  seededRandom,
} from "@infergrid/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type AttainmentParams,
  ascendingServiceTime,
  attainment,
  meanServiceTimeMs,
  prefixCapacity,
  responseTimeQuantile,
  type SizingParams,
  sizeBackends,
  utilisation,
  waitingTimeQuantileEq1,
} from "./response-time-model.js";

// A deterministic 100 ms service time, as a one-sample empirical distribution: F(x) = 1 iff x >= 100.
const det100 = { kind: "empirical", samplesMs: [100] } as const;
// Close to the paper's trace 2 (mean 117 ms): scale chosen so the mean is 117 ms.
const trace2: Lognormal = { shape: 0.3, loc: 0, scale: 117 / Math.exp(0.045) };

describe("attainment, hand-computed", () => {
  it("deterministic service: 1 - rho^(m+1) where m extra probes fit in the budget", () => {
    // rho = 20/s * 0.1 s / 4 = 0.5; budget 130 - 100 = 30 ms fits 3 extra probes of 10 ms: P(K <= 4) = 1 - 0.5^4.
    const p: AttainmentParams = { ratePerSec: 20, serviceTime: det100, rtMaxMs: 130, slMin: 0.99, probeCostMs: 10 };
    expect(utilisation(p, 4)).toBeCloseTo(0.5, 12);
    expect(attainment(p, 4)).toBeCloseTo(0.9375, 12);
    // A fixed 5 ms delay leaves 25 ms: 2 extra probes, P(K <= 3) = 1 - 0.5^3.
    expect(attainment({ ...p, fixedDelayMs: 5 }, 4)).toBeCloseTo(0.875, 12);
    // n = 5: rho = 0.4, 1 - 0.4^4 = 0.9744.
    expect(attainment(p, 5)).toBeCloseTo(0.9744, 12);
    // Budget below the service time: never met.
    expect(attainment({ ...p, rtMaxMs: 99 }, 4)).toBe(0);
  });

  it("zero load and zero probe cost reduce to the service-time CDF", () => {
    const base: AttainmentParams = {
      ratePerSec: 0,
      serviceTime: { kind: "lognormal", dist: trace2 },
      rtMaxMs: 150,
      slMin: 0.99,
      probeCostMs: 10,
    };
    expect(attainment(base, 3)).toBeCloseTo(lognormalCdf(trace2, 150), 12);
    expect(attainment({ ...base, ratePerSec: 50, probeCostMs: 0, fixedDelayMs: 4 }, 10)).toBeCloseTo(lognormalCdf(trace2, 146), 12);
  });

  it("is exactly the convolution sum for a two-point service time", () => {
    // S = 50 or 100 ms with probability 1/2; rho = 0.5; probes cost 30 ms; RT_max 140.
    // k=1: F(140) = 1; k=2: F(110) = 1; k=3: F(80) = 1/2; k=4: F(50) = 1/2; k=5: F(20) = 0.
    // = 0.5 + 0.25 + 0.125 * 0.5 + 0.0625 * 0.5 = 0.84375.
    // Mean 75 ms; rho = rate * 0.075 / n = 0.5 at n = 2 for rate = 13.33/s.
    const params: AttainmentParams = {
      ratePerSec: (2 * 0.5) / 0.075,
      serviceTime: { kind: "empirical", samplesMs: [50, 100] },
      rtMaxMs: 140,
      slMin: 0.99,
      probeCostMs: 30,
    };
    expect(utilisation(params, 2)).toBeCloseTo(0.5, 12);
    expect(attainment(params, 2)).toBeCloseTo(0.84375, 12);
  });

  it("utilisation >= 1 has no steady state: attainment 0", () => {
    const p: AttainmentParams = { ratePerSec: 40, serviceTime: det100, rtMaxMs: 1000, slMin: 0.99, probeCostMs: 1 };
    expect(utilisation(p, 4)).toBe(1);
    expect(attainment(p, 4)).toBe(0);
    expect(attainment(p, 3)).toBe(0);
    expect(attainment(p, 5)).toBeGreaterThan(0.99);
  });

  it("Eq. 1 brackets the discrete waiting-time quantile the model uses", () => {
    // rho 0.5, p = 0.99, cost 10, d1 = 2: Eq. 1 gives 2 + (ln 0.01 / ln 0.5 - 1) * 10 = 58.44 ms; the discrete
    // quantile is the 7th probe (1 - 0.5^7 >= 0.99 > 1 - 0.5^6): 2 + 6 * 10 = 62 ms.
    expect(waitingTimeQuantileEq1(0.5, 0.99, 10, 2)).toBeCloseTo(2 + (Math.log(0.01) / Math.log(0.5) - 1) * 10, 10);
    // A negligible service time (1e-9 ms) isolates the waiting time; the rate sets rho = 0.5 with one backend.
    const tiny: AttainmentParams = {
      ratePerSec: 0.5 / 1e-12,
      serviceTime: { kind: "empirical", samplesMs: [1e-9] },
      rtMaxMs: 0,
      slMin: 0.99,
      probeCostMs: 10,
      fixedDelayMs: 2,
    };
    expect(utilisation(tiny, 1)).toBeCloseTo(0.5, 6);
    expect(responseTimeQuantile(tiny, 1, 0.99)).toBeCloseTo(62, 3);
    expect(responseTimeQuantile(tiny, 1, 0.99)).toBeGreaterThanOrEqual(waitingTimeQuantileEq1(0.5, 0.99, 10, 2));
  });
});

/** The model's own process: K geometric(1 - rho), S lognormal, RT = fixed + (K-1) c + S. */
function monteCarloModel(random: Random, rho: number, dist: Lognormal, c: number, rtMax: number, samples: number): number {
  let hits = 0;
  for (let i = 0; i < samples; i++) {
    let extra = 0;
    while (random.uniform() < rho) extra++;
    if (extra * c + sampleLognormal(random, dist) <= rtMax) hits++;
  }
  return hits / samples;
}

/**
 * A discrete-event simulation of the real system: Poisson arrivals, n single-request backends, each probe
 * goes to a backend chosen uniformly at random (with replacement, as the model assumes), is accepted if it is
 * idle on arrival (after d1), otherwise comes back after d2 and is retried after Delta.
 */
function simulateRandomDispatch(
  random: Random,
  n: number,
  ratePerSec: number,
  dist: Lognormal,
  d1: number,
  d2: number,
  delta: number,
  requests: number,
): number[] {
  const busyUntil = new Float64Array(n);
  // Binary heap of probes by the time they reach a backend; each probe remembers its request's arrival.
  const heapTime: number[] = [];
  const heapArrival: number[] = [];
  const push = (t: number, a: number) => {
    heapTime.push(t);
    heapArrival.push(a);
    let i = heapTime.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((heapTime[parent] ?? 0) <= t) break;
      heapTime[i] = heapTime[parent] ?? 0;
      heapArrival[i] = heapArrival[parent] ?? 0;
      i = parent;
    }
    heapTime[i] = t;
    heapArrival[i] = a;
  };
  const pop = (): [number, number] => {
    const top: [number, number] = [heapTime[0] ?? 0, heapArrival[0] ?? 0];
    const lastT = heapTime.pop() ?? 0;
    const lastA = heapArrival.pop() ?? 0;
    const size = heapTime.length;
    if (size > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= size) break;
        const r = l + 1;
        const child = r < size && (heapTime[r] ?? 0) < (heapTime[l] ?? 0) ? r : l;
        if ((heapTime[child] ?? 0) >= lastT) break;
        heapTime[i] = heapTime[child] ?? 0;
        heapArrival[i] = heapArrival[child] ?? 0;
        i = child;
      }
      heapTime[i] = lastT;
      heapArrival[i] = lastA;
    }
    return top;
  };
  const latencies: number[] = [];
  let nextArrival = 0;
  let issued = 0;
  while (latencies.length < requests) {
    if (issued < requests && (heapTime.length === 0 || nextArrival + d1 <= (heapTime[0] ?? 0))) {
      push(nextArrival + d1, nextArrival);
      issued++;
      nextArrival += sampleExponential(random, ratePerSec / 1000);
      continue;
    }
    const [t, arrival] = pop();
    const b = randomInt(random, n);
    if ((busyUntil[b] ?? 0) <= t) {
      const s = sampleLognormal(random, dist);
      busyUntil[b] = t + s;
      latencies.push(t + s - arrival);
    } else {
      push(t + d2 + delta + d1, arrival);
    }
  }
  return latencies;
}

describe("attainment against Monte Carlo", () => {
  it("matches a Monte Carlo of the modelled process (lognormal) within 4 sigma", () => {
    const rho = 0.8;
    const c = 20;
    const rtMax = 300;
    const samples = 200_000;
    const mean = lognormalMean(trace2);
    const n = 10;
    const params: AttainmentParams = {
      ratePerSec: (rho * n * 1000) / mean,
      serviceTime: { kind: "lognormal", dist: trace2 },
      rtMaxMs: rtMax,
      slMin: 0.99,
      probeCostMs: c,
    };
    const model = attainment(params, n);
    const mc = monteCarloModel(seededRandom(7), rho, trace2, c, rtMax, samples);
    const sigma = Math.sqrt((model * (1 - model)) / samples);
    expect(model).toBeGreaterThan(0.6);
    expect(model).toBeLessThan(0.95);
    expect(Math.abs(model - mc)).toBeLessThan(4 * sigma);
  });

  it("approximates a simulation of real random dispatch at moderate load, and is optimistic at high load", () => {
    // The model assumes independent probes; in the real process a busy backend stays busy for a whole service
    // time and retrying requests compete, so the tail grows faster than rho^k at high utilisation.
    const n = 20;
    const mean = lognormalMean(trace2);
    const d1 = 1;
    const d2 = 1;
    const delta = 5;
    const at = (rho: number): AttainmentParams => ({
      ratePerSec: (rho * n * 1000) / mean,
      serviceTime: { kind: "lognormal", dist: trace2 },
      rtMaxMs: 250,
      slMin: 0.99,
      probeCostMs: d1 + d2 + delta,
      fixedDelayMs: d1,
    });
    const simulate = (params: AttainmentParams) => {
      const latencies = simulateRandomDispatch(seededRandom(11), n, params.ratePerSec, trace2, d1, d2, delta, 100_000);
      const sorted = [...latencies].sort((a, b) => a - b);
      return {
        attainment: latencies.filter((l) => l <= params.rtMaxMs).length / latencies.length,
        p99: sorted[Math.floor(0.99 * sorted.length)] ?? 0,
      };
    };
    for (const rho of [0.3, 0.5]) {
      const params = at(rho);
      const sim = simulate(params);
      expect(Math.abs(attainment(params, n) - sim.attainment)).toBeLessThan(0.003);
      expect(Math.abs(responseTimeQuantile(params, n, 0.99) / sim.p99 - 1)).toBeLessThan(0.03);
    }
    const high = at(0.8);
    const sim = simulate(high);
    expect(attainment(high, n)).toBeGreaterThan(sim.attainment + 0.02);
    expect(responseTimeQuantile(high, n, 0.99)).toBeLessThan(sim.p99 * 0.85);
  });
});

describe("sizeBackends", () => {
  const lognormalParams: SizingParams = {
    ratePerSec: 100,
    serviceTime: { kind: "lognormal", dist: trace2 },
    rtMaxMs: 5 * 117,
    slMin: 0.99,
    probeCostMs: 7,
    fixedDelayMs: 1,
    maxN: 100,
  };

  it("finds n by hand for a deterministic service", () => {
    // rho = 2 / n; need 1 - rho^4 >= 0.99: n = 6 gives 1 - (1/3)^4 = 0.98765, n = 7 gives 1 - (2/7)^4 = 0.99334.
    const r = sizeBackends({ ratePerSec: 20, serviceTime: det100, rtMaxMs: 130, slMin: 0.99, probeCostMs: 10, maxN: 50 });
    expect(r).toMatchObject({ n: 7, feasible: true, shortfall: 0 });
    expect(r.attainment).toBeCloseTo(1 - (2 / 7) ** 4, 12);
    expect(r.utilisation).toBeCloseTo(2 / 7, 12);
  });

  it("returns the smallest sufficient n (checked against a linear scan)", () => {
    for (const rate of [1, 10, 50, 100, 250, 400]) {
      const params = { ...lognormalParams, ratePerSec: rate };
      const r = sizeBackends(params);
      let scan = 1;
      while (attainment(params, scan) < params.slMin) scan++;
      expect(r.n).toBe(scan);
      expect(r.feasible).toBe(true);
      expect(r.attainment).toBeGreaterThanOrEqual(0.99);
    }
  });

  it("is monotone: attainment in n and in load, sizing in load", () => {
    let previous = -1;
    for (let n = 1; n <= 60; n++) {
      const a = attainment(lognormalParams, n);
      expect(a).toBeGreaterThanOrEqual(previous);
      previous = a;
    }
    let previousA = 2;
    let previousN = 0;
    for (let rate = 0; rate <= 600; rate += 7) {
      const params = { ...lognormalParams, ratePerSec: rate };
      const a = attainment(params, 30);
      expect(a).toBeLessThanOrEqual(previousA);
      previousA = a;
      const n = sizeBackends(params).n;
      expect(n).toBeGreaterThanOrEqual(previousN);
      previousN = n;
    }
    expect(previousN).toBeGreaterThan(70);
  });

  it("zero load gives minN (default 1)", () => {
    expect(sizeBackends({ ...lognormalParams, ratePerSec: 0 })).toMatchObject({ n: 1, feasible: true, shortfall: 0, utilisation: 0 });
    expect(sizeBackends({ ...lognormalParams, ratePerSec: 0, minN: 3 }).n).toBe(3);
  });

  it("never picks an unstable n near utilisation 1", () => {
    // Offered load 9.99 backends' worth with a near-constant service: n = 10 has rho 0.999, useless for 99 %.
    const params: SizingParams = { ...lognormalParams, ratePerSec: 9.99 / (meanServiceTimeMs(lognormalParams.serviceTime) / 1000) };
    const r = sizeBackends(params);
    expect(r.utilisation).toBeLessThan(1);
    expect(r.n).toBeGreaterThan(10);
    expect(attainment(params, r.n - 1)).toBeLessThan(0.99);
  });

  it("caps at maxN and reports the shortfall", () => {
    const uncapped = sizeBackends({ ...lognormalParams, ratePerSec: 300 });
    const capped = sizeBackends({ ...lognormalParams, ratePerSec: 300, maxN: 20 });
    expect(uncapped.n).toBeGreaterThan(20);
    expect(capped).toMatchObject({ n: 20, feasible: false, shortfall: uncapped.n - 20 });
    // Overloaded at the cap: utilisation >= 1 so attainment 0.
    const overloaded = sizeBackends({ ...lognormalParams, ratePerSec: 300, maxN: 5 });
    expect(overloaded.utilisation).toBeGreaterThanOrEqual(1);
    expect(overloaded.attainment).toBe(0);
    expect(overloaded.shortfall).toBe(uncapped.n - 5);
  });

  it("maxUtilisation bounds rho from above without changing the model", () => {
    const free = sizeBackends({ ...lognormalParams, ratePerSec: 200 });
    expect(free.utilisation).toBeGreaterThan(0.8);
    const capped = sizeBackends({ ...lognormalParams, ratePerSec: 200, maxUtilisation: 0.5 });
    // Offered load 200/s * 117 ms = 23.4 backends' worth: at most 0.5 utilisation needs 47.
    expect(capped.n).toBe(47);
    expect(capped.utilisation).toBeLessThanOrEqual(0.5);
    expect(capped.attainment).toBeCloseTo(attainment({ ...lognormalParams, ratePerSec: 200 }, 47), 12);
    expect(() => sizeBackends({ ...lognormalParams, maxUtilisation: 0 })).toThrow(RangeError);
  });

  it("reports an infinite shortfall when no number of backends can meet the SLA", () => {
    // RT_max below the service time's 99th percentile: even an idle system misses.
    const r = sizeBackends({ ...lognormalParams, rtMaxMs: 150 });
    expect(lognormalCdf(trace2, 149)).toBeLessThan(0.99);
    expect(r).toMatchObject({ n: 100, feasible: false, shortfall: Number.POSITIVE_INFINITY });
  });

  it("an empirical sample of the lognormal sizes like the lognormal", () => {
    const random = seededRandom(3);
    const samplesMs = Array.from({ length: 50_000 }, () => sampleLognormal(random, trace2));
    const empirical = { ...lognormalParams, serviceTime: { kind: "empirical" as const, samplesMs } };
    for (const rate of [20, 100, 300]) {
      const a = sizeBackends({ ...lognormalParams, ratePerSec: rate, maxN: 1000 });
      const b = sizeBackends({ ...empirical, ratePerSec: rate, maxN: 1000 });
      expect(Math.abs(a.n - b.n)).toBeLessThanOrEqual(1);
      expect(
        Math.abs(attainment({ ...lognormalParams, ratePerSec: rate }, a.n) - attainment({ ...empirical, ratePerSec: rate }, a.n)),
      ).toBeLessThan(0.003);
    }
    expect(() => sizeBackends({ ...lognormalParams, serviceTime: { kind: "empirical", samplesMs: [] } })).toThrow(RangeError);
  });

  it("sees changed samples in a new ServiceTime object, and grown ones in a reused object", () => {
    const samples = [100];
    const base = { ratePerSec: 20, rtMaxMs: 130, slMin: 0.99, probeCostMs: 10, maxN: 50 };
    expect(sizeBackends({ ...base, serviceTime: { kind: "empirical", samplesMs: samples } }).n).toBe(7);
    samples[0] = 50; // rho halves and 8 probes fit: 1 - (1/n)^9 >= 0.99 at n = 2
    expect(sizeBackends({ ...base, serviceTime: { kind: "empirical", samplesMs: samples } }).n).toBe(2);
    const reused = { kind: "empirical" as const, samplesMs: [100] };
    expect(sizeBackends({ ...base, serviceTime: reused }).n).toBe(7);
    reused.samplesMs.push(100, 100, 100);
    reused.samplesMs[0] = 50;
    // Mean 87.5 ms; a quarter of requests fit 8 probes, the rest 3.
    expect(attainment({ ...base, serviceTime: reused }, 7)).toBeCloseTo(0.25 * (1 - (1.75 / 7) ** 9) + 0.75 * (1 - (1.75 / 7) ** 4), 12);
  });

  it("an empirical sample's convolution is the sum over the probe grid of its step CDF, grid after grid", () => {
    const sample = fc.array(fc.integer({ min: 40, max: 400 }), { minLength: 1, maxLength: 60 });
    fc.assert(
      fc.property(sample, fc.double({ min: 0.01, max: 0.95, noNaN: true }), fc.integer({ min: 1, max: 30 }), (xs, rho, cost) => {
        const serviceTime = ascendingServiceTime(Float64Array.from(xs).sort());
        const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
        const F = (x: number) => xs.filter((v) => v <= x).length / xs.length;
        // Two budgets on the same samples: each grid is filled from the top, the second after the first.
        for (const rtMaxMs of [500, 260]) {
          let expected = 0;
          for (let k = 0; rtMaxMs - 1 - k * cost >= Math.min(...xs); k++) expected += (1 - rho) * rho ** k * F(rtMaxMs - 1 - k * cost);
          const params = { ratePerSec: (rho * 1000) / mean, serviceTime, rtMaxMs, slMin: 0.99, probeCostMs: cost, fixedDelayMs: 1 };
          expect(attainment(params, 1)).toBeCloseTo(Math.min(1, expected), 9);
        }
      }),
    );
  });

  it("sizes samples handed over in order exactly as the same samples given plainly", () => {
    const sample = fc.array(fc.double({ min: 1, max: 400, noNaN: true }), { minLength: 1, maxLength: 80 });
    fc.assert(
      fc.property(sample, fc.double({ min: 0, max: 200, noNaN: true }), (xs, rate) => {
        const base = { ratePerSec: rate, rtMaxMs: 500, slMin: 0.99, probeCostMs: 6, fixedDelayMs: 1, maxN: 200 };
        const plain = { kind: "empirical" as const, samplesMs: xs };
        const ordered = ascendingServiceTime(Float64Array.from(xs).sort());
        expect(sizeBackends({ ...base, serviceTime: ordered })).toEqual(sizeBackends({ ...base, serviceTime: plain }));
        expect(meanServiceTimeMs(ordered)).toBe(meanServiceTimeMs(plain));
      }),
    );
    expect(() => ascendingServiceTime(Float64Array.from([2, 1]))).toThrow(RangeError);
    expect(() => ascendingServiceTime(new Float64Array(0))).toThrow(RangeError);
  });
});

describe("a prefix that mixes instance types (entry weights)", () => {
  const base: SizingParams = { ratePerSec: 40, serviceTime: det100, rtMaxMs: 300, slMin: 0.99, probeCostMs: 5, maxN: 100 };
  it("weighs each entry's capacity, entries past the weights count 1", () => {
    expect(prefixCapacity(3)).toBe(3);
    expect(prefixCapacity(3, [2, 0.5])).toBe(3.5);
    expect(prefixCapacity(0, [2])).toBe(0);
    // 40 req/s x 100 ms = 4 average entries busy; two entries twice as fast carry it like four.
    expect(utilisation({ ...base, entryWeights: [2, 2] }, 2)).toBeCloseTo(utilisation(base, 4), 12);
  });
  it("weights of 1 size as identical entries do; fast entries first need fewer, slow ones more", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 200 }), (rate) => {
        const p = { ...base, ratePerSec: rate };
        const plain = sizeBackends(p).n;
        expect(sizeBackends({ ...p, entryWeights: Array(100).fill(1) }).n).toBe(plain);
        expect(sizeBackends({ ...p, entryWeights: Array(100).fill(2) }).n).toBeLessThanOrEqual(plain);
        expect(sizeBackends({ ...p, entryWeights: Array(100).fill(0.5) }).n).toBeGreaterThanOrEqual(plain);
      }),
      { numRuns: 50 },
    );
    // Exact: 4 busy average entries; with 2 entries of weight 4 first a prefix of 2 does; behind 7 entries of weight 0.5 it takes 8.
    const fastFirst = sizeBackends({ ...base, entryWeights: [4, 4, 0.5, 0.5, 0.5, 0.5] });
    const slowFirst = sizeBackends({ ...base, entryWeights: [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 4] });
    expect(fastFirst.n).toBeLessThan(sizeBackends(base).n);
    expect(slowFirst.n).toBeGreaterThan(sizeBackends(base).n);
    expect(fastFirst.feasible && slowFirst.feasible).toBe(true);
  });
  it("past the weights, entries add 1 each (the stable start is found beyond the array)", () => {
    const p = { ...base, ratePerSec: 100 }; // 10 average entries busy
    const n = sizeBackends({ ...p, entryWeights: [0.5, 0.5] }).n;
    expect(n).toBe(sizeBackends(p).n + 1); // the two half entries count as one
  });
});
