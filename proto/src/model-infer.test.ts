import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { openInference } from "./index.js";
import { type DecodedModelInfer, decodeModelInfer } from "./model-infer.js";

const input = fc.record({
  name: fc.string({ maxLength: 8 }),
  datatype: fc.constantFrom("FP32", "INT64", ""),
  shape: fc.array(fc.integer({ min: -2, max: 5 }), { maxLength: 3 }),
  contents: fc.option(
    fc.record({
      fp32Contents: fc.array(fc.float({ noNaN: true }), { maxLength: 12 }),
      int64Contents: fc.array(fc.integer({ min: -5, max: 5 }), { maxLength: 2 }),
    }),
    { nil: undefined },
  ),
});

const request = fc.record({
  modelName: fc.string({ maxLength: 10 }),
  modelVersion: fc.constantFrom("", "2"),
  id: fc.string({ maxLength: 10 }),
  inputs: fc.array(input, { maxLength: 3 }),
  outputs: fc.array(fc.record({ name: fc.string({ maxLength: 6 }) }), { maxLength: 2 }),
  rawInputContents: fc.array(fc.uint8Array({ maxLength: 16 }), { maxLength: 2 }),
  parameters: fc.constantFrom<Record<string, openInference.IInferParameter>>({}, { priority: { int64Param: 3 } }),
});

function decoded(bytes: Uint8Array): DecodedModelInfer {
  const d = decodeModelInfer(bytes);
  if ("undecodable" in d) throw new Error(d.undecodable);
  return d;
}

describe("decodeModelInfer", () => {
  it("reads what the generated decoder reads, FP32 values as their little-endian bytes", () => {
    fc.assert(
      fc.property(request, (props) => {
        const bytes = openInference.ModelInferRequest.encode(props).finish();
        const ours = decoded(bytes);
        const theirs = openInference.ModelInferRequest.decode(bytes);
        expect(ours.modelName).toBe(theirs.modelName);
        expect(ours.modelVersion).toBe(theirs.modelVersion);
        expect(ours.id).toBe(theirs.id);
        expect(ours.outputs).toEqual(theirs.outputs.map((o) => o.name));
        expect(ours.rawInputContents.map((b) => Array.from(b))).toEqual(theirs.rawInputContents.map((b) => Array.from(b)));
        expect(ours.inputsBeyond).toBe(0);
        expect(ours.inputs.length).toBe(theirs.inputs.length);
        ours.inputs.forEach((t, i) => {
          const g = theirs.inputs[i];
          expect(t.name).toBe(g?.name);
          expect(t.datatype).toBe(g?.datatype);
          expect(t.shape).toEqual(g?.shape);
          const floats = new Float32Array(new Uint8Array(t.fp32).buffer);
          expect(Array.from(floats)).toEqual(g?.contents?.fp32Contents ?? []);
          expect(t.otherContents).toBe((g?.contents?.int64Contents?.length ?? 0) > 0 ? "int64_contents" : undefined);
        });
      }),
    );
  });

  it("takes floats written one field each (not packed), as proto3 readers must", () => {
    // Field 5 (an input) holding field 5 (contents) holding field 6 twice as fixed32, not packed.
    const one = Buffer.alloc(4);
    one.writeFloatLE(1.5);
    const two = Buffer.alloc(4);
    two.writeFloatLE(-2);
    const contents = Buffer.concat([Buffer.from([(6 << 3) | 5]), one, Buffer.from([(6 << 3) | 5]), two]);
    const tensor = Buffer.concat([Buffer.from([(1 << 3) | 2, 1, 0x78, (5 << 3) | 2, contents.length]), contents]);
    const bytes = Buffer.concat([Buffer.from([(5 << 3) | 2, tensor.length]), tensor]);
    const ours = decoded(bytes);
    expect(Array.from(new Float32Array(new Uint8Array(ours.inputs[0]?.fp32 ?? []).buffer))).toEqual([1.5, -2]);
    expect(openInference.ModelInferRequest.decode(bytes).inputs[0]?.contents?.fp32Contents).toEqual([1.5, -2]);
  });

  it("says what is wrong with bytes that are not a request, and never throws", () => {
    expect(decodeModelInfer(Uint8Array.from([0x0a, 0xff, 0xff, 0xff]))).toEqual({
      undecodable: expect.stringMatching(/^not a ModelInferRequest: /),
    });
    // A packed fp32_contents of 3 bytes.
    const bad = Uint8Array.from([(5 << 3) | 2, 7, (5 << 3) | 2, 5, (6 << 3) | 2, 3, 1, 2, 3]);
    expect(decodeModelInfer(bad)).toEqual({ undecodable: "not a ModelInferRequest: fp32_contents is not a whole number of floats" });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (garbage) => {
        expect(() => decodeModelInfer(garbage)).not.toThrow();
      }),
    );
  });
});
