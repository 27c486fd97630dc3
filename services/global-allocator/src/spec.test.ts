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

  it("refuses a profile the slow loop cannot plan with: an infinite mean, or a bad profile on an ONNX model", () => {
    const huge = { ...valid, model: { ...valid.model, profile: { shape: 40, locMs: 1, scaleMs: 1 } } };
    expect(() => normalizeSpec(huge, defaults)).toThrow(
      /spec\.model\.profile: its mean service time must be at most 3600000 ms \(got Infinity ms\)/,
    );
    const onnx = { kind: control.ModelKind.MODEL_KIND_ONNX, onnxModel: "resnet18" };
    expect(() => normalizeSpec({ ...valid, model: { ...onnx, profile: { shape: Number.NaN, locMs: 1, scaleMs: 1 } } }, defaults)).toThrow(
      /spec\.model\.profile\.shape/,
    );
    expect(
      normalizeSpec({ ...valid, model: { ...onnx, profile: { shape: 0.3, locMs: 5, scaleMs: 2 } } }, defaults).model?.profile?.locMs,
    ).toBe(5);
  });

  it("refuses an ONNX model no backend has in its catalogue, naming the ones there are", () => {
    const onnx = (onnxModel: string) => ({ ...valid, model: { kind: control.ModelKind.MODEL_KIND_ONNX, onnxModel } });
    expect(() => normalizeSpec(onnx("resnet50"), defaults)).toThrow(
      'spec.model.onnx_model: no model "resnet50" in the catalogue (known: ppocr-mobile-cls, resnet18)',
    );
    expect(() => normalizeSpec(onnx("constructor"), defaults)).toThrow(/no model "constructor" in the catalogue/);
    expect(normalizeSpec(onnx(" ppocr-mobile-cls "), defaults).model?.onnxModel).toBe("ppocr-mobile-cls");
  });
});

describe("normalizeSpec: per-instance-type profiles", () => {
  const profile = (instanceType: string, points: control.BatchLatency.$Properties[]) => ({ instanceType, points });
  const withProfiles = (instanceProfiles: control.InstanceProfile.$Properties[]): control.ServiceSpec.$Properties => ({
    ...valid,
    model: { ...valid.model, instanceProfiles },
  });
  const good = [
    profile("g4dn.xlarge", [
      { batch: 1, meanMs: 5, p99Ms: 8 },
      { batch: 64, meanMs: 20, p99Ms: 30 },
    ]),
    profile("r5n.large", [{ batch: 1, meanMs: 12, p99Ms: 12 }]),
  ];

  it("keeps valid profiles in the normalized spec (trimmed), and a spec without them unchanged", () => {
    const s = normalizeSpec(withProfiles([{ ...good[0], instanceType: " g4dn.xlarge " }, good[1]!]), defaults, [
      "g4dn.xlarge",
      "r5n.large",
    ]);
    expect((s.model?.instanceProfiles ?? []).map((p) => [p.instanceType, (p.points ?? []).map((x) => x.batch)])).toEqual([
      ["g4dn.xlarge", [1, 64]],
      ["r5n.large", [1]],
    ]);
    expect(sameSpec(normalizeSpec(valid, defaults), normalizeSpec(valid, defaults, ["g4dn.xlarge"]))).toBe(true);
    expect(normalizeSpec(valid, defaults).model?.instanceProfiles).toEqual([]);
  });

  it("refuses each kind of bad profile with a message naming the field", () => {
    const cases: [control.InstanceProfile.$Properties[], RegExp][] = [
      [[profile("", good[0]!.points)], /instance_profiles\[0\]\.instance_type is required/],
      [[good[0]!, profile("g4dn.xlarge", good[1]!.points)], /instance_profiles\[1\]\.instance_type: g4dn.xlarge has a profile already/],
      [[profile("r5n.large", [])], /instance_profiles\[0\]\.points: at least one point/],
      [[profile("r5n.large", [{ batch: 0, meanMs: 1, p99Ms: 1 }])], /points\[0\]\.batch must be a positive integer \(got 0\)/],
      [[profile("r5n.large", [{ batch: 2.5, meanMs: 1, p99Ms: 1 }])], /points\[0\]\.batch must be a positive integer/],
      [
        [
          profile("r5n.large", [
            { batch: 4, meanMs: 1, p99Ms: 1 },
            { batch: 4, meanMs: 2, p99Ms: 2 },
          ]),
        ],
        /points\[1\]\.batch must be above the previous point's \(4\)/,
      ],
      [[profile("r5n.large", [{ batch: 1, meanMs: 0, p99Ms: 1 }])], /points\[0\]\.mean_ms must be a finite number > 0/],
      [[profile("r5n.large", [{ batch: 1, meanMs: Number.NaN, p99Ms: 1 }])], /points\[0\]\.mean_ms/],
      [[profile("r5n.large", [{ batch: 1, meanMs: 5, p99Ms: 4 }])], /points\[0\]\.p99_ms must be a finite number >= mean_ms \(5\)/],
    ];
    for (const [profiles, message] of cases) {
      expect(() => normalizeSpec(withProfiles(profiles), defaults), String(message)).toThrow(message);
    }
  });

  it("with a price list, refuses a profile for a type the list does not name, naming it", () => {
    const typo = withProfiles([good[0]!, profile("r5n.larg", good[1]!.points)]);
    expect(() => normalizeSpec(typo, defaults, ["g4dn.xlarge", "r5n.large"])).toThrow(
      /instance_profiles\[1\]\.instance_type: r5n.larg is not in the allocator's instance-type price list \(g4dn.xlarge, r5n.large\)/,
    );
    // Without a price list any type goes.
    expect(normalizeSpec(typo, defaults).model?.instanceProfiles).toHaveLength(2);
  });
});

describe("normalizeSpec: a Themis profile", () => {
  it("keeps a valid one and names the field of a bad one", () => {
    const themis = { gamma: 20, eps: 10, delta: 2, eta: 3, spread: 0.1 };
    const s = normalizeSpec({ ...valid, model: { ...valid.model, themis } }, defaults);
    expect(s.model?.themis).toEqual(control.ThemisProfile.create(themis));
    expect(normalizeSpec(valid, defaults).model?.themis).toBeNull();
    expect(() => normalizeSpec({ ...valid, model: { ...valid.model, themis: { ...themis, delta: -1 } } }, defaults)).toThrow(
      /spec\.model\.themis\.delta must be a finite number >= 0/,
    );
    expect(() => normalizeSpec({ ...valid, model: { ...valid.model, themis: { ...themis, gamma: Number.NaN } } }, defaults)).toThrow(
      /spec\.model\.themis\.gamma/,
    );
  });
});
