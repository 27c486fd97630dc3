import { describe, expect, it } from "vitest";
import { lognormalCdf, lognormalMean, lognormalQuantile, sampleLognormal, samplePoisson } from "./distributions.js";
import { seededRandom } from "./random.js";

const resnet34 = { shape: 0.3602, loc: 72.86, scale: 86.69 };

describe("lognormal (scipy parameterisation)", () => {
  it("has the mean the Faro profile states (about 166 ms)", () => {
    expect(lognormalMean(resnet34)).toBeCloseTo(165.8, 0);
  });

  it("quantile and cdf are inverse", () => {
    for (const p of [0.01, 0.5, 0.9, 0.99]) {
      expect(lognormalCdf(resnet34, lognormalQuantile(resnet34, p))).toBeCloseTo(p, 6);
    }
    expect(lognormalCdf(resnet34, 72)).toBe(0);
  });

  it("samples have the analytic mean", () => {
    const random = seededRandom(7);
    let sum = 0;
    const n = 50_000;
    for (let i = 0; i < n; i++) sum += sampleLognormal(random, resnet34);
    expect(sum / n).toBeGreaterThan(lognormalMean(resnet34) * 0.99);
    expect(sum / n).toBeLessThan(lognormalMean(resnet34) * 1.01);
  });
});

describe("seeded randomness", () => {
  it("repeats for a seed and differs across seeds", () => {
    const a = seededRandom(1);
    const b = seededRandom(1);
    const c = seededRandom(2);
    const xs = [a.uniform(), a.uniform(), a.uniform()];
    expect([b.uniform(), b.uniform(), b.uniform()]).toEqual(xs);
    expect(c.uniform()).not.toBe(xs[0]);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
  });

  it("draws Poisson counts with the right mean, small and large", () => {
    const random = seededRandom(3);
    for (const mean of [0.5, 12, 900]) {
      let sum = 0;
      for (let i = 0; i < 20_000; i++) sum += samplePoisson(random, mean);
      expect(Math.abs(sum / 20_000 - mean)).toBeLessThan(mean * 0.02 + 0.02);
    }
  });
});

describe("standard normal", () => {
  it("matches tabulated values", async () => {
    const { normalCdf, normalQuantile } = await import("./distributions.js");
    expect(normalCdf(0)).toBeCloseTo(0.5, 7);
    expect(normalCdf(1.959964)).toBeCloseTo(0.975, 6);
    expect(normalCdf(-2.326348)).toBeCloseTo(0.01, 6);
    expect(normalQuantile(0.99)).toBeCloseTo(2.326348, 5);
    expect(normalQuantile(0.001)).toBeCloseTo(-3.090232, 5);
  });
});

describe("seeded randomness from small seeds", () => {
  it("has no bias in the first draws", async () => {
    const { seededRandom: seeded } = await import("./random.js");
    const firsts = Array.from({ length: 200 }, (_, seed) => seeded(seed).uniform());
    const mean = firsts.reduce((a, b) => a + b, 0) / firsts.length;
    // 200 uniform draws: the mean is within 0.5 +- 0.1 with overwhelming probability.
    expect(Math.abs(mean - 0.5)).toBeLessThan(0.1);
    expect(firsts.filter((x) => x > 0.99).length).toBeLessThan(10);
  });
});
