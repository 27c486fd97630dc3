import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { batchWaitMs, fitThemisProfile, processingMs, throughputPerS } from "./latency-profile.js";
import { measuredSamples } from "./measured-profiles.js";

const grid = (f: (b: number, c: number) => number) =>
  [1, 2, 4, 8, 16].flatMap((c) => [1, 2, 4, 8, 16].map((b) => ({ batch: b, cores: c, ms: f(b, c) })));

describe("Themis's latency profile", () => {
  it("follows Eq. 1, its throughput is b / l and the batch wait is (b - 1) / lambda", () => {
    const p = { gamma: 60, eps: 5, delta: 2, eta: 1 };
    expect(processingMs(p, 4, 2)).toBeCloseTo((60 * 4 + 5) / 2 + 8 + 1);
    expect(throughputPerS(p, 4, 2)).toBeCloseTo(4000 / processingMs(p, 4, 2));
    expect(batchWaitMs(1, 10)).toBe(0);
    expect(batchWaitMs(5, 20)).toBeCloseTo(200);
    expect(batchWaitMs(2, 0)).toBe(Number.POSITIVE_INFINITY);
  });

  it("recovers known parameters from exact synthetic data", () => {
    fc.assert(
      fc.property(
        fc.record({
          gamma: fc.double({ min: 1, max: 200, noNaN: true }),
          eps: fc.double({ min: 0, max: 50, noNaN: true }),
          delta: fc.double({ min: 0, max: 20, noNaN: true }),
          eta: fc.double({ min: 0.5, max: 20, noNaN: true }),
        }),
        (p) => {
          const fit = fitThemisProfile(grid((b, c) => processingMs(p, b, c)));
          expect(fit.maxAbsPctError).toBeLessThan(1e-6);
          for (const k of ["gamma", "eps", "delta", "eta"] as const) expect(fit.profile[k]).toBeCloseTo(p[k], 3);
        },
      ),
      { numRuns: 50 },
    );
  });

  it("keeps every coefficient non-negative, with a bounded error, on noisy data", () => {
    const p = { gamma: 30, eps: 0, delta: 0, eta: 4 };
    let seed = 7;
    const noise = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return 1 + 0.1 * (seed / 2 ** 31 - 0.5);
    };
    const fit = fitThemisProfile(grid((b, c) => processingMs(p, b, c) * noise()));
    for (const v of Object.values(fit.profile)) expect(v).toBeGreaterThanOrEqual(0);
    expect(fit.meanAbsPctError).toBeLessThan(0.05);
    expect(fit.profile.gamma).toBeGreaterThan(25);
  });

  it("fits the measured ResNet-18 on ONNX Runtime (shared profiles) within 15 % on average", () => {
    const json: unknown = JSON.parse(
      readFileSync(new URL("../../../../shared/profiles/measured-ort-cpu-16core.json", import.meta.url), "utf8"),
    );
    const samples = measuredSamples(json, "resnet18");
    expect(samples.length).toBeGreaterThanOrEqual(20);
    const fit = fitThemisProfile(samples);
    expect(fit.meanAbsPctError).toBeLessThan(0.15);
    // Batch 1 on one core: the measurement and the fit agree on the order of magnitude.
    const b1 = samples.find((s) => s.batch === 1 && s.cores === 1);
    expect(b1).toBeDefined();
    if (b1) expect(processingMs(fit.profile, 1, 1) / b1.ms).toBeGreaterThan(0.7);
  });

  it("refuses bad samples and too few points with a message that says why", () => {
    expect(() => fitThemisProfile([{ batch: 0, cores: 1, ms: 3 }])).toThrow(/integer batch/);
    expect(() => fitThemisProfile([{ batch: 1, cores: 1, ms: 3 }])).toThrow(/at least 4 distinct/);
    expect(() => measuredSamples({ models: {} }, "x")).toThrow(/no model "x"/);
  });
});
