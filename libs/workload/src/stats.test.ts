import { sampleLognormal, seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { LatencyHistogram, percentile, percentiles } from "./stats.js";

describe("percentile", () => {
  const sample = [15, 20, 35, 40, 50];

  it("nearest-rank returns an observed value", () => {
    expect(percentile(sample, 0)).toBe(15);
    expect(percentile(sample, 5)).toBe(15);
    expect(percentile(sample, 30)).toBe(20);
    expect(percentile(sample, 40)).toBe(20);
    expect(percentile(sample, 50)).toBe(35);
    expect(percentile(sample, 100)).toBe(50);
    expect(percentile([3, 1, 2], 50)).toBe(2);
  });

  it("linear interpolates between ranks (numpy's default)", () => {
    expect(percentile(sample, 40, "linear")).toBeCloseTo(29, 12);
    expect(percentile(sample, 75, "linear")).toBe(40);
    expect(percentile([1, 2, 3, 4], 50, "linear")).toBe(2.5);
    expect(percentiles(sample, [0, 100], "linear")).toEqual([15, 50]);
  });

  it("rejects empty samples, NaN and p outside [0, 100]", () => {
    expect(() => percentile([], 50)).toThrow(/empty/);
    expect(() => percentile([1, Number.NaN], 50)).toThrow(/NaN/);
    expect(() => percentile([1], 101)).toThrow(RangeError);
    expect(() => percentile([1], Number.NaN)).toThrow(RangeError);
  });
});

describe("LatencyHistogram", () => {
  it("reports percentiles within its relative error of the exact nearest-rank values", () => {
    const random = seededRandom(21);
    const histogram = new LatencyHistogram();
    const values: number[] = [];
    for (let i = 0; i < 50_000; i++) {
      // Latencies in ms spread over several decades: a ResNet-like body plus a heavy tail.
      const v = i % 100 === 0 ? 2_000 * random.uniform() ** 4 : sampleLognormal(random, { shape: 0.6, loc: 0, scale: 166 });
      values.push(v);
      histogram.record(v);
    }
    expect(histogram.count).toBe(50_000);
    expect(histogram.max).toBe(Math.max(...values));
    expect(histogram.min).toBe(Math.min(...values));
    expect(histogram.mean).toBeCloseTo(values.reduce((a, b) => a + b, 0) / values.length, 6);
    let worst = 0;
    for (const p of [0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100]) {
      const exact = percentile(values, p);
      worst = Math.max(worst, Math.abs(histogram.percentile(p) - exact) / exact);
    }
    expect(worst).toBeLessThanOrEqual(0.005 + 1e-12);
    expect(worst).toBeGreaterThan(0);
    const summary = histogram.summary();
    expect(Math.abs(summary.p99 / percentile(values, 99) - 1)).toBeLessThanOrEqual(0.005 + 1e-12);
  });

  it("honours a coarser stated error and merges like one histogram", () => {
    const random = seededRandom(5);
    const a = new LatencyHistogram({ relativeError: 0.02 });
    const b = new LatencyHistogram({ relativeError: 0.02 });
    const values: number[] = [];
    for (let i = 0; i < 20_000; i++) {
      const v = 0.5 + 1000 * random.uniform() ** 3;
      values.push(v);
      (i % 2 === 0 ? a : b).record(v);
    }
    a.merge(b);
    expect(a.count).toBe(20_000);
    for (const p of [1, 50, 90, 99]) {
      const exact = percentile(values, p);
      expect(Math.abs(a.percentile(p) - exact) / exact).toBeLessThanOrEqual(0.02 + 1e-12);
    }
    expect(() => a.merge(new LatencyHistogram())).toThrow(/different relativeError/);
  });

  it("handles zero, repeated values, empty state and bad input", () => {
    const h = new LatencyHistogram();
    expect(h.percentile(50)).toBeNaN();
    expect(h.summary().count).toBe(0);
    h.record(0, 3);
    h.record(10, 1);
    expect(h.percentile(50)).toBe(0);
    expect(h.percentile(100)).toBe(10);
    expect(h.count).toBe(4);
    expect(() => h.record(-1)).toThrow(RangeError);
    expect(() => h.record(Number.POSITIVE_INFINITY)).toThrow(RangeError);
    h.reset();
    expect(h.count).toBe(0);
    h.record(7);
    expect(h.percentile(99)).toBe(7);
  });
});
