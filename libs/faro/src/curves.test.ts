import { describe, expect, it } from "vitest";
import { buildCurve, coldStartWeights, jobUtility, planningRates } from "./curves.js";

describe("planning rates from a probabilistic forecast (Sec. 3.5.2)", () => {
  const samples = [
    [10, 20, 30],
    [12, 18, 40],
    [14, 22, 20],
    [16, 24, 10],
    [18, 16, 50],
  ];
  it("takes a quantile across samples per step (linear interpolation)", () => {
    expect(planningRates(samples, { kind: "quantile", q: 0.5 })).toEqual([14, 20, 30]);
    expect(planningRates(samples, { kind: "quantile", q: 0.6 })).toEqual([14.8, 20.8, 34]);
  });
  it("or the maximum of the samples per step", () => {
    expect(planningRates(samples, { kind: "max" })).toEqual([18, 24, 50]);
  });
  it("rejects empty or ragged input", () => {
    expect(() => planningRates([], { kind: "max" })).toThrow(/no samples/);
    expect(() => planningRates([[1, 2], [1]], { kind: "max" })).toThrow(/length/);
  });
});

describe("utility tables (Sec. 4.1)", () => {
  const job = { id: "a", processingTime: 0.15, slo: { latency: 0.6, percentile: 99.99 }, rates: [40] };
  it("stop where the job reaches utility 1 (the worked example: 8 replicas under M/D/c)", () => {
    const curve = buildCurve(job, {}, 1000);
    expect(curve.hi).toBe(8);
    expect(curve.values[curve.values.length - 1]).toBe(1);
    expect(jobUtility(job, 7)).toBeCloseTo(0.6 / 0.8041727, 5);
    expect(jobUtility({ ...job, utility: { kind: "step" } }, 7)).toBe(0);
    expect(jobUtility({ ...job, latencyModel: "upperBound", utility: { kind: "step" } }, 9)).toBe(0);
    expect(jobUtility({ ...job, latencyModel: "upperBound", utility: { kind: "step" } }, 10)).toBe(1);
  });
  it("are non-decreasing in the replica count", () => {
    const curve = buildCurve({ ...job, rates: [5, 80, 200], minReplicas: 0 }, { coldStartSeconds: 30 }, 300);
    for (let i = 1; i < curve.values.length; i++) expect(curve.values[i]!).toBeGreaterThanOrEqual(curve.values[i - 1]!);
    expect(curve.values[0]).toBe(0);
  });
  it("cold-start weights: the share of each step inside the cold start", () => {
    expect(coldStartWeights(4, 60, 90)).toEqual([1, 0.5, 0, 0]);
    expect(coldStartWeights(2, 60, 0)).toEqual([0, 0]);
  });
});
