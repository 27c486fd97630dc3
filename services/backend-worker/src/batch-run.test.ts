import { InvalidModelInputError, makeOcrClsSampleInput, OCR_CLS_OUTPUT, OnnxModel, type TensorValue } from "@infergrid/models";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBatch, splitOutputs, stackInputs } from "./batch-run.js";

const t = (dims: number[], data: number[]): TensorValue => ({ dims, data });

describe("stackInputs / splitOutputs", () => {
  it("stacks requests along the batch dimension and cuts outputs back by each one's rows", () => {
    const stacked = stackInputs([
      { x: t([1, 2], [1, 2]), y: t([1], [9]) },
      { y: t([2], [8, 7]), x: t([2, 2], [3, 4, 5, 6]) },
    ]);
    expect(stacked?.rows).toEqual([1, 2]);
    expect(stacked?.inputs.x?.dims).toEqual([3, 2]);
    expect(Array.from(stacked?.inputs.x?.data ?? [])).toEqual([1, 2, 3, 4, 5, 6]);
    expect(Array.from(stacked?.inputs.y?.data ?? [])).toEqual([9, 8, 7]);
    const parts = splitOutputs({ z: t([3, 1], [10, 20, 30]) }, [1, 2]);
    expect(parts?.map((p) => ({ dims: p.z?.dims, data: Array.from(p.z?.data ?? []) }))).toEqual([
      { dims: [1, 1], data: [10] },
      { dims: [2, 1], data: [20, 30] },
    ]);
  });

  it("refuses what cannot be stacked or split", () => {
    expect(stackInputs([{ x: t([1, 2], [1, 2]) }, { x: t([1, 3], [1, 2, 3]) }])).toBeUndefined(); // item shapes differ
    expect(stackInputs([{ x: t([1], [1]) }, { w: t([1], [1]) }])).toBeUndefined(); // names differ
    expect(stackInputs([{ x: t([1, 2], [1, 2]) }, { x: t([1, 2], [1]) }])).toBeUndefined(); // data does not match dims
    expect(
      stackInputs([
        { x: t([1], [1]), y: t([2], [1, 2]) },
        { x: t([1], [1]), y: t([1], [1]) },
      ]),
    ).toBeUndefined(); // rows differ
    expect(stackInputs([{}, {}])).toBeUndefined();
    expect(splitOutputs({ y: t([1], [5]) }, [1, 1])).toBeUndefined(); // not batch-major
  });
});

describe("runBatch on a real ONNX model (ppocr-mobile-cls, largest batch 8)", () => {
  const model = new OnnxModel({ model: "ppocr-mobile-cls" });
  const upright = makeOcrClsSampleInput("upright").x;
  const flipped = makeOcrClsSampleInput("flipped").x;
  const one = (x: TensorValue) => ({ x });
  const two = (a: TensorValue, b: TensorValue) => {
    const data = new Float32Array(a.data.length + b.data.length);
    data.set(a.data, 0);
    data.set(b.data, a.data.length);
    return { x: { dims: [2, ...a.dims.slice(1)], data } };
  };
  const probs = (r: unknown) => {
    if (r instanceof Error) throw r;
    return Array.from((r as { outputs: Record<string, TensorValue> }).outputs[OCR_CLS_OUTPUT]?.data ?? []);
  };
  let alone: { up: number[]; flip: number[] };

  beforeAll(async () => {
    await model.load();
    alone = { up: probs(await model.infer(one(upright))), flip: probs(await model.infer(one(flipped))) };
  });
  afterAll(() => model.unload());

  it("answers each request with its own rows of one stacked call", async () => {
    const answers = await runBatch(model, [one(upright), one(flipped), two(flipped, upright)]);
    expect(answers).toHaveLength(3);
    const close = (got: number[], want: number[]) => {
      expect(got).toHaveLength(want.length);
      for (const [i, v] of got.entries()) expect(v).toBeCloseTo(want[i] ?? Number.NaN, 4);
    };
    close(probs(answers[0]), alone.up);
    close(probs(answers[1]), alone.flip);
    close(probs(answers[2]), [...alone.flip, ...alone.up]);
    expect(alone.up[0]).toBeGreaterThan(0.5); // the classifier tells them apart: the check can fail
    expect(alone.flip[1]).toBeGreaterThan(0.5);
  });

  it("beyond the model's largest batch, or with one malformed request, each still gets its own answer", async () => {
    const many = Array.from({ length: 9 }, (_, i) => one(i % 2 === 0 ? upright : flipped));
    const answers = await runBatch(model, many);
    expect(answers.map((a) => (probs(a)[0] ?? 0) > 0.5)).toEqual([true, false, true, false, true, false, true, false, true]);
    const mixed = await runBatch(model, [one(upright), { x: { dims: [1, 3, 48, 100], data: new Float32Array(3 * 48 * 100) } }]);
    expect(probs(mixed[0])[0]).toBeGreaterThan(0.5);
    expect(mixed[1]).toBeInstanceOf(InvalidModelInputError);
  });
});
