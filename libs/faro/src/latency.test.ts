import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import {
  erlangB,
  erlangC,
  mdcLatency,
  mmcWaitPercentile,
  onTimeFraction,
  RHO_MAX,
  relaxedMdcLatency,
  replicasForLatency,
  upperBoundLatency,
} from "./latency.js";

/** FIFO M/D/c by discrete-event simulation: k-th percentile of the sojourn time after a warm-up. */
function simulateMdc(lambda: number, p: number, c: number, n: number, seed: number): (k: number) => number {
  const rnd = seededRandom(seed);
  const free = new Float64Array(c);
  const lat = new Float64Array(n);
  let t = 0;
  for (let i = 0; i < n; i++) {
    t += -Math.log(1 - rnd.uniform()) / lambda;
    let m = 0;
    for (let s = 1; s < c; s++) if (free[s]! < free[m]!) m = s;
    const start = Math.max(t, free[m]!);
    free[m] = start + p;
    lat[i] = start + p - t;
  }
  const kept = lat.slice(Math.floor(n / 10)).sort();
  return (k) => kept[Math.floor((k / 100) * (kept.length - 1))]!;
}

/**
 * FIFO M/D/c where a request that cannot start by `target - p` is dropped on arrival (the frontends'
 * pruning): the share of requests served within `target`, after a warm-up.
 */
function simulateMdcDeadline(lambda: number, p: number, c: number, target: number, n: number, seed: number): number {
  const rnd = seededRandom(seed);
  const free = new Float64Array(c);
  let t = 0;
  let served = 0;
  const warm = Math.floor(n / 10);
  for (let i = 0; i < n; i++) {
    t += -Math.log(1 - rnd.uniform()) / lambda;
    let m = 0;
    for (let s = 1; s < c; s++) if (free[s]! < free[m]!) m = s;
    const start = Math.max(t, free[m]!);
    if (start + p - t > target) continue;
    free[m] = start + p;
    if (i >= warm) served++;
  }
  return served / (n - warm);
}

function erlangCDirect(c: number, a: number): number {
  let sum = 0;
  let term = 1;
  for (let i = 0; i < c; i++) {
    sum += term;
    term *= a / (i + 1);
  }
  const top = term * (c / (c - a));
  return top / (sum + top);
}

describe("Erlang formulas", () => {
  it("match the textbook sums for small c", () => {
    for (const [c, a] of [
      [1, 0.5],
      [4, 3],
      [8, 6],
      [20, 17.5],
    ] as const) {
      expect(erlangC(c, a)).toBeCloseTo(erlangCDirect(c, a), 12);
    }
    expect(erlangB(1, 1)).toBeCloseTo(0.5, 12);
  });
  it("stay finite and in (0, 1) for thousands of servers", () => {
    const v = erlangC(5000, 4900);
    expect(v).toBeGreaterThan(0);
    expect(v).toBeLessThan(1);
    expect(erlangC(5000, 4000)).toBeLessThan(1e-40);
    expect(erlangC(5000, 4000)).toBeGreaterThan(0);
    expect(erlangC(10, 12)).toBe(1);
  });
});

describe("M/D/c latency (Sec. 3.3)", () => {
  it("reproduces the paper's worked example: p = 150 ms, 40 req/s, SLO 600 ms, p99.99", () => {
    expect(mdcLatency(99.99, 0.15, 40, 7)).toBeCloseTo(0.804, 3);
    expect(mdcLatency(99.99, 0.15, 40, 8)).toBeCloseTo(0.457, 3);
    expect(replicasForLatency("mdc", 99.99, 0.15, 40, 0.6)).toBe(8);
    expect(replicasForLatency("upperBound", 99.99, 0.15, 40, 0.6)).toBe(10);
    expect(upperBoundLatency(0.15, 40, 10)).toBeCloseTo(0.6, 12);
  });
  it("is half the M/M/c wait plus the service time, and infinite when unstable", () => {
    expect(mdcLatency(99, 0.1, 30, 4)).toBeCloseTo(mmcWaitPercentile(99, 0.1, 30, 4) / 2 + 0.1, 12);
    expect(mdcLatency(99, 0.1, 50, 5)).toBe(Number.POSITIVE_INFINITY);
    expect(mdcLatency(99, 0.1, 0, 1)).toBe(0.1);
  });
  it("matches simulated M/D/c p99 within 10 % (and beats the M/M/c estimate)", () => {
    const cases: [number, number, number][] = [
      [30, 0.1, 4],
      [75, 0.1, 10],
      [40, 0.15, 8],
      [160, 0.18, 32],
      [5, 0.2, 2],
    ];
    for (const [lambda, p, c] of cases) {
      const sim = simulateMdc(lambda, p, c, 150_000, 7)(99);
      const model = mdcLatency(99, p, lambda, c);
      expect(Math.abs(model - sim) / sim).toBeLessThan(0.1);
      const mmc = mmcWaitPercentile(99, p, lambda, c) + p;
      expect(Math.abs(model - sim)).toBeLessThan(Math.abs(mmc - sim));
    }
  });
});

describe("share served in time with late requests dropped (the attainment objective)", () => {
  it("matches simulated M/D/c with deadline drops within 1 point, from light load to 4x overload", () => {
    // ResNet-34's 166 ms at Faro's 720 ms SLO on 1-8 backends, and a tighter SLO.
    const cases: [number, number, number, number][] = [
      [3, 0.166, 1, 0.72],
      [5.5, 0.166, 1, 0.72],
      [9, 0.166, 2, 0.72],
      [12, 0.166, 2, 0.72],
      [20, 0.166, 2, 0.72],
      [40, 0.166, 8, 0.72],
      [60, 0.166, 8, 0.72],
      [30, 0.1, 4, 0.25],
      [100, 0.166, 4, 0.72],
    ];
    for (const [lambda, p, c, target] of cases) {
      const sim = simulateMdcDeadline(lambda, p, c, target, 200_000, 11);
      const model = onTimeFraction(p, lambda, c, target);
      expect(Math.abs(model - sim), `lambda ${lambda}, c ${c}: model ${model}, simulated ${sim}`).toBeLessThan(0.01);
    }
  });
  it("tends to the fluid c / (lambda p) at heavy overload and to 1 when idle; rises with every backend", () => {
    expect(onTimeFraction(0.166, 100, 4, 0.72)).toBeCloseTo(4 / (100 * 0.166), 2);
    expect(onTimeFraction(0.166, 0, 4, 0.72)).toBe(1);
    expect(onTimeFraction(0.166, 5, 0, 0.72)).toBe(0);
    expect(onTimeFraction(0.166, 5, 2, 0.1)).toBe(0);
    for (let c = 1; c < 30; c++) {
      const f = onTimeFraction(0.166, 60, c, 0.72);
      if (f < 1 - 1e-12) expect(onTimeFraction(0.166, 60, c + 1, 0.72)).toBeGreaterThan(f);
      else expect(onTimeFraction(0.166, 60, c + 1, 0.72)).toBe(1);
    }
  });
});

describe("relaxation beyond rho_max (Sec. 3.4)", () => {
  it("is continuous at rho_max and grows linearly in lambda past it", () => {
    const p = 0.1;
    const c = 10;
    const lmax = (RHO_MAX * c) / p;
    expect(relaxedMdcLatency(99, p, lmax, c)).toBeCloseTo(mdcLatency(99, p, lmax, c), 9);
    const at = relaxedMdcLatency(99, p, lmax, c);
    expect(relaxedMdcLatency(99, p, 2 * lmax, c)).toBeCloseTo(2 * at, 9);
    expect(Number.isFinite(relaxedMdcLatency(99, p, 500, c))).toBe(true);
  });
  it("has no plateau: latency strictly falls with every added replica while overloaded", () => {
    let prev = Number.POSITIVE_INFINITY;
    for (let c = 1; c <= 40; c++) {
      const l = relaxedMdcLatency(99, 0.15, 200, c);
      expect(l).toBeLessThan(prev);
      prev = l;
    }
  });
  it("rejects bad input with a clear error", () => {
    expect(() => mdcLatency(100, 0.1, 1, 1)).toThrow(/percentile/);
    expect(() => mdcLatency(99, 0, 1, 1)).toThrow(/processing time/);
    expect(() => mdcLatency(99, 0.1, -1, 1)).toThrow(/arrival rate/);
    expect(() => mdcLatency(99, 0.1, 1, 1.5)).toThrow(/replicas/);
  });
});
