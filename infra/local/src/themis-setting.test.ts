import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processingMs } from "@infergrid/themis";
import { describe, expect, it } from "vitest";
import { OptionsError } from "./options.js";
import { loadThemisSetting, planThemisWorkload, stepRates, themisServiceName } from "./themis-setting.js";

const STEP = { baseRps: 5, stepRps: 40, atS: 10, forS: 20, durationS: 50 };
const INPUT = { model: "resnet18", profiles: undefined, sloMs: 1000, nodeCores: 8, coldStartMs: 10_000, step: STEP };

function problemOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    if (err instanceof OptionsError) return err.message;
    throw err;
  }
  throw new Error("expected an OptionsError");
}

describe("loadThemisSetting", () => {
  it("fits ResNet-18's measured latencies and puts the profile, SLO and cold start in the service's spec", () => {
    const t = loadThemisSetting(INPUT);
    expect(t.fit.samples).toBeGreaterThanOrEqual(16);
    expect(t.fit.meanAbsPctError).toBeLessThan(0.25);
    // One request on one core takes tens of ms; eight cores make it faster, not slower.
    const one = processingMs(t.fit.profile, 1, 1);
    expect(one).toBeGreaterThan(10);
    expect(one).toBeLessThan(200);
    expect(processingMs(t.fit.profile, 1, 8)).toBeLessThan(one);
    const spec = t.service.spec;
    expect(spec.name).toBe("resnet18");
    expect(spec.model?.themis).toMatchObject({ gamma: t.fit.profile.gamma, eta: t.fit.profile.eta });
    expect(spec.model?.coldStartMs).toBe(10_000);
    expect(spec.sla?.latencyThresholdMs).toBe(1000);
    expect(t.service.meanServiceMs).toBeCloseTo(one, 6);
  });

  it("names the option that is wrong", () => {
    expect(problemOf(() => loadThemisSetting({ ...INPUT, model: "vgg16" }))).toMatch(/^--themis: no model "vgg16".*resnet18/);
    expect(problemOf(() => loadThemisSetting({ ...INPUT, profiles: "/nonexistent.json" }))).toContain("--profiles: no such file");
    expect(problemOf(() => loadThemisSetting({ ...INPUT, step: { ...STEP, atS: 40 } }))).toContain("past --duration 50");
    expect(problemOf(() => loadThemisSetting({ ...INPUT, sloMs: 5 }))).toMatch(/^--slo-ms 5: a single request takes/);
  });

  it("takes a profile file written by npm run profile: its fit as it is, for the model it names", () => {
    const dir = mkdtempSync(join(tmpdir(), "themis-profile-"));
    try {
      const file = join(dir, "resnet18.json");
      const samples = [1, 2].flatMap((cores) =>
        [1, 2, 4].map((batch) => {
          const ms = (14 * batch) / cores + 6 * batch;
          return { batch, cores, ms, minMs: ms, maxMs: ms, fittedMs: ms };
        }),
      );
      const written = {
        model: "resnet18",
        machine: { cpuModel: "test CPU", cores: 2, platform: "linux", runtime: "onnxruntime-node 1.30.0" },
        date: "2026-11-24T18:00:00.000Z",
        profile: { gamma: 14, eps: 0, delta: 6, eta: 0 },
        fit: { meanAbsPctError: 0.05, maxAbsPctError: 0.18, rmseMs: 3.4 },
        method: { warmups: 2, runs: 5, statistic: "median", pinnedCpus: true, loadAverage: 0.5 },
        samples,
        resizes: [{ fromCores: 1, toCores: 2, ms: 885 }],
      };
      writeFileSync(file, JSON.stringify(written));
      const t = loadThemisSetting({ ...INPUT, profiles: file });
      expect(t.fit).toEqual({ profile: written.profile, ...written.fit, samples: 6 });
      expect(t.service.spec.model?.themis).toMatchObject({ gamma: 14, delta: 6 });
      expect(problemOf(() => loadThemisSetting({ ...INPUT, model: "resnet34", profiles: file }))).toMatch(
        /^--profiles: .*resnet18\.json is the profile of "resnet18", not of --themis resnet34/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("serves mobilenet_v3_small under a name services may have", () => {
    expect(themisServiceName("mobilenet_v3_small")).toBe("mobilenet-v3-small");
  });
});

describe("the load step", () => {
  it("is the base rate, the step's rate for its seconds, then the base rate again", () => {
    const rates = stepRates({ baseRps: 5, stepRps: 40, atS: 2, forS: 3, durationS: 7 });
    expect(rates).toEqual([5, 5, 40, 40, 40, 5, 5]);
    const plan = planThemisWorkload(loadThemisSetting({ ...INPUT, step: { baseRps: 5, stepRps: 40, atS: 2, forS: 3, durationS: 7 } }));
    // One trace minute per wall second at rate scale 1: a count is requests per second.
    expect(plan.compression).toBe(60);
    expect(plan.rateScale).toBe(1);
    expect([...(plan.trace.counts.get("resnet18") ?? [])]).toEqual(rates);
    expect(plan.durationMs).toBe(7000);
    expect(plan.peakRps).toBe(40);
  });
});
