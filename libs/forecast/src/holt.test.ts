import { seededRandom, standardNormal } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { forecastRates } from "./holt.js";

const Q = [0.5, 0.9, 0.99];
const q = (f: ReturnType<typeof forecastRates>, quantile: number) => f.quantiles.find((x) => x.quantile === quantile)?.rates ?? [];

describe("forecastRates", () => {
  it("a constant series: the level, with Poisson counting noise as the least spread", () => {
    const f = forecastRates(Array(20).fill(10), { steps: 7, quantiles: Q, windowSeconds: 10 });
    expect(f.model).toBe("holt");
    expect(f.observed).toBe(10);
    expect(f.trend).toBeCloseTo(0, 12);
    for (const m of f.mean) expect(m).toBeCloseTo(10, 12);
    // sd of a 10/s rate counted over 10 s is sqrt(10 / 10) = 1, growing with sqrt(step).
    expect(q(f, 0.5)[0]).toBeCloseTo(10, 9);
    expect(q(f, 0.9)[0]).toBeCloseTo(11.2816, 3);
    expect(q(f, 0.99)[0]).toBeCloseTo(12.3263, 3);
    expect(q(f, 0.9)[3]).toBeCloseTo(10 + 1.28155 * 2, 3);
  });

  it("a ramp: follows the trend exactly, no residual spread", () => {
    const ramp = Array.from({ length: 20 }, (_, t) => 5 + 2 * t); // 5 .. 43
    const f = forecastRates(ramp, { steps: 7, quantiles: Q });
    expect(f.trend).toBeCloseTo(2, 9);
    expect(f.mean.map((m) => Math.round(m * 1e6) / 1e6)).toEqual([45, 47, 49, 51, 53, 55, 57]);
    expect(q(f, 0.99)).toEqual(q(f, 0.5));
    // Half-window steps: the same line at half the pace.
    const half = forecastRates(ramp, { steps: 2, stepWindows: 0.5, quantiles: Q });
    expect(half.mean[0]).toBeCloseTo(44, 9);
    expect(half.mean[1]).toBeCloseTo(45, 9);
  });

  it("a falling ramp never forecasts a negative rate", () => {
    const f = forecastRates([30, 25, 20, 15, 10, 5], { steps: 7, quantiles: [0.01, 0.5, 0.9], windowSeconds: 1 });
    expect(f.mean[0]).toBeCloseTo(0, 9);
    for (const s of f.quantiles) for (const r of s.rates) expect(r).toBeGreaterThanOrEqual(0);
    expect(Math.min(...q(f, 0.01))).toBe(0);
  });

  it("too little history: the latest rate with a wide spread", () => {
    const f = forecastRates([3, 7], { steps: 3, quantiles: Q });
    expect(f.model).toBe("last-value");
    expect(f.mean).toEqual([7, 7, 7]);
    expect(f.spread[0]).toBeCloseTo(3.5, 9);
    expect(q(f, 0.9)[0]).toBeCloseTo(7 + 1.28155 * 3.5, 3);
    const none = forecastRates([], { steps: 2, quantiles: Q });
    expect(none.observed).toBe(0);
    expect(q(none, 0.99)).toEqual([0, 0]);
  });

  it("a noisy series: level near the truth, spread near the noise, about 90% of next points under p90", () => {
    const random = seededRandom(42);
    const noisy = (n: number) => Array.from({ length: n }, () => 50 + 5 * standardNormal(random));
    const f = forecastRates(noisy(200), { steps: 7, quantiles: Q });
    expect(Math.abs((q(f, 0.5)[0] ?? 0) - 50)).toBeLessThan(5);
    // One-step errors of the smoothed level are a bit wider than the noise itself (sd 5).
    expect(f.spread[0]).toBeGreaterThan(5);
    expect(f.spread[0]).toBeLessThan(8);
    expect(q(f, 0.9)[0]).toBeGreaterThan(q(f, 0.5)[0] ?? 0);
    expect(q(f, 0.99)[6]).toBeGreaterThan(q(f, 0.99)[0] ?? 0);

    let under90 = 0;
    let under50 = 0;
    const trials = 400;
    for (let i = 0; i < trials; i++) {
      const series = noisy(61);
      const next = series.pop() ?? 0;
      const g = forecastRates(series, { steps: 1, quantiles: Q });
      if (next <= (q(g, 0.9)[0] ?? 0)) under90++;
      if (next <= (q(g, 0.5)[0] ?? 0)) under50++;
    }
    expect(under90 / trials).toBeGreaterThan(0.85);
    expect(under90 / trials).toBeLessThan(0.97);
    expect(under50 / trials).toBeGreaterThan(0.42);
    expect(under50 / trials).toBeLessThan(0.58);
  });

  it("refuses quantiles outside (0, 1) and a non-positive number of steps", () => {
    expect(() => forecastRates([1, 2, 3], { steps: 0, quantiles: Q })).toThrow(RangeError);
    expect(() => forecastRates([1, 2, 3], { steps: 1, quantiles: [1] })).toThrow(RangeError);
  });
});
