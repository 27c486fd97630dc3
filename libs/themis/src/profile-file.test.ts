import { describe, expect, it } from "vitest";
import { fitThemisProfile, processingMs } from "./latency-profile.js";
import { parseThemisProfileFile, type ThemisProfileFile, themisProfileFileSchema } from "./profile-file.js";

const truth = { gamma: 40, eps: 5, delta: 2, eta: 1 };
const points = [1, 2].flatMap((cores) => [1, 2, 4].map((batch) => ({ batch, cores, ms: processingMs(truth, batch, cores) })));
const fit = fitThemisProfile(points);
const valid: ThemisProfileFile = {
  model: "resnet18",
  machine: { cpuModel: "Test CPU", cores: 2, platform: "linux-x64", runtime: "onnxruntime-node 1.30.0" },
  date: "2026-11-24T18:00:00.000Z",
  profile: fit.profile,
  fit: { meanAbsPctError: fit.meanAbsPctError, maxAbsPctError: fit.maxAbsPctError, rmseMs: fit.rmseMs },
  method: { warmups: 2, runs: 10, statistic: "median", pinnedCpus: true, loadAverage: 0.1 },
  samples: points.map((p) => ({ ...p, minMs: p.ms, maxMs: p.ms, fittedMs: processingMs(fit.profile, p.batch, p.cores) })),
  resizes: [{ fromCores: 1, toCores: 2, ms: 120 }],
};

describe("themisProfileFileSchema", () => {
  it("accepts a profile file and round-trips it through JSON", () => {
    expect(fit.profile.gamma).toBeCloseTo(40, 6);
    expect(parseThemisProfileFile(JSON.stringify(valid))).toEqual(valid);
  });

  it("names each bad field and the file", () => {
    const bad = { ...valid, profile: { ...valid.profile, gamma: -1 }, machine: { ...valid.machine, cores: 0 }, date: "yesterday" };
    const attempt = () => parseThemisProfileFile(JSON.stringify(bad), "profiles/resnet18.json");
    expect(attempt).toThrow(/^profiles\/resnet18\.json: /);
    expect(attempt).toThrow(/profile\.gamma/);
    expect(attempt).toThrow(/machine\.cores/);
    expect(attempt).toThrow(/date/);
  });

  it("refuses fewer than 4 samples, unknown fields and text that is not JSON", () => {
    expect(themisProfileFileSchema.safeParse({ ...valid, samples: valid.samples.slice(0, 3) }).success).toBe(false);
    expect(themisProfileFileSchema.safeParse({ ...valid, extra: 1 }).success).toBe(false);
    expect(() => parseThemisProfileFile("{", "p.json")).toThrow(/^p\.json: not JSON/);
  });
});
