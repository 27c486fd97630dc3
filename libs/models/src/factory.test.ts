import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { EmulatedModel } from "./emulated-model.js";
import { createModelRuntime, type ModelSpec } from "./factory.js";
import { OnnxModel } from "./onnx-model.js";
import { ModelNotFoundError } from "./types.js";

describe("createModelRuntime", () => {
  it("builds an emulated model that uses the injected sleep and random", async () => {
    const sleeps: number[] = [];
    const spec: ModelSpec = { kind: "emulated", name: "resnet34", profile: { shape: 0.3602, loc: 72.86, scale: 86.69 }, coldStartMs: 900 };
    const runtime = createModelRuntime(spec, { sleep: async (ms) => void sleeps.push(ms), random: seededRandom(5) });
    const again = createModelRuntime(spec, { sleep: async () => {}, random: seededRandom(5) });
    expect(runtime).toBeInstanceOf(EmulatedModel);
    expect(runtime.name).toBe("resnet34");
    expect(await runtime.load()).toEqual({ coldStartMs: 900 });
    await again.load();
    const { computeMs } = await runtime.infer({});
    expect(computeMs).toBe((await again.infer({})).computeMs);
    expect(sleeps).toEqual([900, computeMs]);
  });

  it("builds an emulated model with Themis's profile on the spec's cores", async () => {
    const sleeps: number[] = [];
    const spec: ModelSpec = {
      kind: "emulated",
      profile: { shape: 0, loc: 1, scale: 0 },
      themis: { gamma: 20, eps: 10, delta: 2, eta: 3 },
      cores: 2,
      coldStartMs: 0,
    };
    const runtime = createModelRuntime(spec, { sleep: async (ms) => void sleeps.push(ms) });
    expect(runtime.cores).toBe(2);
    await runtime.load();
    expect((await runtime.infer({})).computeMs).toBe((20 + 10) / 2 + 2 + 3);
    expect(sleeps).toEqual([20]);
  });

  it("builds an ONNX model by catalogue name without loading it", () => {
    const runtime = createModelRuntime({ kind: "onnx", model: "ppocr-mobile-cls", intraOpThreads: 1 });
    expect(runtime).toBeInstanceOf(OnnxModel);
    expect(runtime.name).toBe("ppocr-mobile-cls");
  });

  it("throws ModelNotFoundError for an unknown model name or kind", () => {
    expect(() => createModelRuntime({ kind: "onnx", model: "bert-base" })).toThrow(ModelNotFoundError);
    expect(() => createModelRuntime({ kind: "tensorrt" } as unknown as ModelSpec)).toThrow(/unknown model kind "tensorrt"/);
  });
});
