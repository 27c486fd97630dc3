import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { digestOutputs, EMULATED_ITEM_INPUT, itemRandom, itemSeed, jobItemInputs, nominalItemMs } from "./job-item.js";

const emulated: control.ModelSpec.$Properties = { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { locMs: 4, scaleMs: 0 } };

describe("job items from (seed, item)", () => {
  it("gives each (seed, item, stream) its own seed, the same every time", () => {
    expect(itemSeed(7, 3, "input")).toBe(itemSeed(7, 3, "input"));
    const seeds = new Set<number>();
    for (const seed of [0, 1])
      for (let item = 0; item < 50; item++) for (const s of ["input", "time"] as const) seeds.add(itemSeed(seed, item, s));
    expect(seeds.size).toBe(200);
    expect(itemRandom(1, 2, "time").uniform()).toBe(itemRandom(1, 2, "time").uniform());
  });

  it("builds an emulated model's input at the item's batch, deterministically", () => {
    const a = jobItemInputs(emulated, 4, 11, 5);
    const t = a[EMULATED_ITEM_INPUT];
    expect(t?.dims).toEqual([4, 1]);
    expect(t?.data).toHaveLength(4);
    expect(Array.from(t?.data ?? []).every((v) => v >= -1 && v < 1)).toBe(true);
    expect(jobItemInputs(emulated, 4, 11, 5)).toEqual(a);
    expect(jobItemInputs(emulated, 4, 11, 6)).not.toEqual(a);
    expect(jobItemInputs(emulated, 4, 12, 5)).not.toEqual(a);
    expect(jobItemInputs(emulated, 0, 11, 5)[EMULATED_ITEM_INPUT]?.dims).toEqual([1, 1]);
  });

  it("builds an ONNX model's inputs from its catalogue entry, and refuses a model not in it", () => {
    const onnx = { kind: control.ModelKind.MODEL_KIND_ONNX, onnxModel: "ppocr-mobile-cls" };
    const inputs = jobItemInputs(onnx, 2, 1, 0);
    expect(Object.keys(inputs)).toEqual(["x"]);
    expect(inputs.x?.dims).toEqual([2, 3, 48, 192]);
    expect(inputs.x?.data).toHaveLength(2 * 3 * 48 * 192);
    expect(() => jobItemInputs({ kind: control.ModelKind.MODEL_KIND_ONNX, onnxModel: "nope" }, 1, 1, 0)).toThrow(/catalogue/);
  });

  it("digests outputs by name order, dims and float32 values", () => {
    const y = { dims: [1], data: [1.5] };
    const z = { dims: [2], data: new Float32Array([1, 2]) };
    const d = digestOutputs({ y, z });
    expect(d).toMatch(/^[0-9a-f]{64}$/);
    expect(digestOutputs({ z, y })).toBe(d);
    expect(digestOutputs({ y, z: { dims: [2, 1], data: [1, 2] } })).not.toBe(d);
    expect(digestOutputs({ y: { dims: [1], data: [1.5000001] }, z })).not.toBe(d);
    // float32: a value that rounds to the same float32 is the same output.
    expect(digestOutputs({ y: { dims: [1], data: [Math.fround(1.5)] }, z })).toBe(d);
    expect(digestOutputs({ w: y, z })).not.toBe(d);
  });

  it("expects an item's nominal time from the emulated profile at its batch", () => {
    expect(nominalItemMs(emulated, 3, 1, undefined)).toBe(4);
    const themis = { ...emulated, themis: { gamma: 10, eps: 0, delta: 1, eta: 2 } };
    expect(nominalItemMs(themis, 4, 2, undefined)).toBe((10 * 4) / 2 + 4 + 2);
    expect(
      nominalItemMs(emulated, 2, 1, {
        points: [
          { batch: 1, meanMs: 5, p99Ms: 9 },
          { batch: 2, meanMs: 8, p99Ms: 12 },
        ],
      }),
    ).toBe(8);
    expect(nominalItemMs({ kind: control.ModelKind.MODEL_KIND_ONNX, onnxModel: "resnet18" }, 1, 1, undefined)).toBe(0);
  });
});
