import { control } from "@infergrid/proto";
import { attainment } from "@infergrid/swayam";
import { makeTrace } from "@infergrid/workload";
import { describe, expect, it } from "vitest";
import { RESNET34_PROFILE, traceJobService } from "./catalogue.js";
import { applyFixedPeak, peakSizes } from "./fixed-peak.js";
import { OptionsError } from "./options.js";
import type { WorkloadPlan } from "./workload-plan.js";

function plan(peaks: Record<string, number>): WorkloadPlan {
  const jobs = Object.keys(peaks);
  const counts = new Map(jobs.map((j) => [j, Float64Array.from([1, peaks[j] ?? 0, 2])]));
  return {
    trace: makeTrace(jobs, counts, 3, "test"),
    services: jobs.map((j) => traceJobService(j, j)),
    compression: 60,
    rateScale: 1,
    peakRps: 0,
    scaling: "rate-scale",
    durationMs: 3000,
    description: "test",
  };
}

describe("fixed-peak", () => {
  it("sizes each service for its own busiest minute with Swayam's model: the smallest n meeting the SLA there", () => {
    // At compression 60 a trace minute lasts one second: 30 in the busiest minute is 30 req/s.
    const sizes = peakSizes(plan({ a: 30, b: 6 }));
    const n = sizes.get("a") ?? 0;
    const params = {
      ratePerSec: 30,
      serviceTime: {
        kind: "lognormal" as const,
        dist: { shape: RESNET34_PROFILE.shape, loc: RESNET34_PROFILE.locMs, scale: RESNET34_PROFILE.scaleMs },
      },
      rtMaxMs: 720,
      slMin: 0.99,
      probeCostMs: 6,
    };
    expect(attainment(params, n)).toBeGreaterThanOrEqual(0.99);
    expect(attainment(params, n - 1)).toBeLessThan(0.99);
    expect(sizes.get("b")).toBeLessThan(n);
  });

  it("fixes min, max and initial list length at that size, and refuses a pool too small for it", () => {
    const p = plan({ a: 30, b: 6 });
    const sizes = peakSizes(p);
    const needed = (sizes.get("a") ?? 0) + (sizes.get("b") ?? 0);
    expect(() => applyFixedPeak(p, needed - 1)).toThrow(OptionsError);
    applyFixedPeak(p, needed);
    for (const svc of p.services) {
      const n = sizes.get(svc.name);
      expect([svc.spec.minBackends, svc.spec.maxBackends, svc.spec.initialBackends]).toEqual([n, n, n]);
      expect(svc.spec.model?.kind).toBe(control.ModelKind.MODEL_KIND_EMULATED);
    }
  });
});
