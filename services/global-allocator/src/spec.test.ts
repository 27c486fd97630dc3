import { control } from "@infergrid/proto";
import { GrpcStatusError } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { normalizeSpec, sameSpec } from "./spec.js";

const defaults = { initialBackends: 5, minBackends: 1, burstFactor: 2 };
const valid: control.ServiceSpec.$Properties = {
  name: "resnet",
  model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.36, locMs: 72.86, scaleMs: 86.69 }, coldStartMs: 0 },
  sla: { latencyThresholdMs: 500, percentile: 99 },
};

describe("normalizeSpec", () => {
  it("fills in the defaults: initial 5, min 1, burst factor 2", () => {
    const s = normalizeSpec(valid, defaults);
    expect([s.initialBackends, s.minBackends, s.maxBackends, s.sla?.burstFactor]).toEqual([5, 1, 0, 2]);
    expect(sameSpec(s, normalizeSpec(valid, defaults))).toBe(true);
    expect(sameSpec(s, normalizeSpec({ ...valid, maxBackends: 4 }, defaults))).toBe(false);
  });

  it("names the field of a non-finite number", () => {
    const bad = { ...valid, model: { ...valid.model, profile: { shape: Number.NaN, locMs: 1, scaleMs: 1 } } };
    expect(() => normalizeSpec(bad, defaults)).toThrow(/spec\.model\.profile\.shape/);
    expect(() => normalizeSpec({ ...valid, sla: { latencyThresholdMs: Number.POSITIVE_INFINITY, percentile: 99 } }, defaults)).toThrow(
      /latency_threshold_ms/,
    );
    try {
      normalizeSpec({ ...valid, sla: { latencyThresholdMs: 10, percentile: 0 } }, defaults);
    } catch (err) {
      expect(err).toBeInstanceOf(GrpcStatusError);
      expect((err as GrpcStatusError).code).toBe(3);
    }
  });
});
