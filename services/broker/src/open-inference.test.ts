import {
  type DecodedModelInfer,
  decodeModelInfer,
  encodeRoutedInfer,
  inference,
  openInference,
  type RoutedInferRequest,
} from "@infergrid/proto";
import { GrpcStatusError, grpc } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { fromModelInfer, fromOpenInference, toModelInfer, toOpenInference } from "./open-inference.js";

function refusal(body: unknown): string {
  try {
    fromOpenInference(body, "resnet");
  } catch (err) {
    expect(err).toBeInstanceOf(GrpcStatusError);
    expect((err as GrpcStatusError).code).toBe(grpc.status.INVALID_ARGUMENT);
    return (err as GrpcStatusError).message;
  }
  throw new Error("expected a refusal");
}

const fp32 = (name: string, shape: number[], data: unknown) => ({ name, shape, datatype: "FP32", data });

/** The routed request as the frontend's generated decoder reads it off the wire. */
const onWire = (request: RoutedInferRequest) => inference.InferRequest.decode(encodeRoutedInfer(request));

describe("fromOpenInference", () => {
  it("reads a request of the protocol as the model's service, flat or nested data alike (row-major)", () => {
    const flat = fromOpenInference({ id: "req-7", inputs: [fp32("x", [2, 3], [1, 2, 3, 4, 5, 6])] }, "resnet");
    const nested = fromOpenInference(
      {
        id: "req-7",
        parameters: { priority: 1 },
        inputs: [
          fp32(
            "x",
            [2, 3],
            [
              [1, 2, 3],
              [4, 5, 6],
            ],
          ),
        ],
      },
      "resnet",
    );
    for (const { request: routed, outputs } of [flat, nested]) {
      const request = onWire(routed);
      expect(request.service).toBe("resnet");
      expect(request.requestId).toBe("req-7");
      expect(request.inputs.x?.dims).toEqual([2, 3]);
      expect(request.inputs.x?.data).toEqual([1, 2, 3, 4, 5, 6]);
      expect(request.inputs.x?.dtype).toBe("float32");
      expect(outputs).toBeUndefined();
    }
    // A scalar has shape [] and one value; no id leaves it to the broker.
    const scalar = fromOpenInference({ inputs: [fp32("t", [], 0.5)], outputs: [{ name: "y" }] }, "resnet");
    expect(onWire(scalar.request).requestId).toBe("");
    expect(onWire(scalar.request).inputs.t?.data).toEqual([0.5]);
    expect(onWire(scalar.request).inputs.t?.dims).toEqual([]);
    expect(scalar.outputs).toEqual(["y"]);
  });

  it("refuses what it cannot carry, naming the input and what is wrong", () => {
    expect(refusal({ inputs: [{ name: "ids", shape: [1, 2], datatype: "INT64", data: [3, 4] }] })).toBe(
      'input "ids": datatype INT64 is not supported; InferGrid carries FP32 tensors only',
    );
    expect(refusal({ inputs: [{ name: "x", shape: [1], datatype: "float32", data: [1] }] })).toBe(
      'input "x": "float32" is not a datatype of the protocol',
    );
    expect(refusal({ inputs: [fp32("x", [2, 2], [1, 2, 3])] })).toBe('input "x": shape [2,2] holds 4 values, data has 3');
    expect(refusal({ inputs: [fp32("x", [2], [1, "2"])] })).toBe('input "x": data holds a string, not a number');
    expect(refusal({ inputs: [fp32("x", [1], { a: 1 })] })).toBe('input "x": data holds an object, not a number');
    expect(refusal({ inputs: [fp32("x", [1], [1]), fp32("x", [1], [2])] })).toBe('input "x" is given twice');
    expect(refusal({ inputs: [{ ...fp32("x", [1], []), parameters: { binary_data_size: 4 } }] })).toBe(
      `input "x": binary tensor data (Triton's binary-data extension) is not supported; send data as JSON`,
    );
    expect(refusal({ inputs: [{ name: "x", shape: [1], datatype: "FP32" }] })).toBe('input "x": data is missing');
    let deep: unknown = 1;
    for (let i = 0; i < 9; i++) deep = [deep];
    expect(refusal({ inputs: [fp32("x", [1, 1, 1, 1, 1, 1, 1, 1, 1], deep)] })).toBe('input "x": data nests deeper than 8 arrays');
    expect(refusal({ outputs: [{ name: "y" }, { name: "y" }], inputs: [] })).toBe("an output is asked for twice");
  });

  it("refuses a body that is not a request of the protocol, with the field's path", () => {
    expect(refusal([1, 2])).toMatch(/^malformed inference request: /);
    expect(refusal({})).toMatch(/^malformed inference request: inputs: /);
    expect(refusal({ inputs: [fp32("x", [-1], [])] })).toBe("malformed inference request: inputs[0].shape[0]: must not be negative");
    expect(refusal({ inputs: [fp32("x", [1.5], [])] })).toBe("malformed inference request: inputs[0].shape[0]: must be an integer");
    expect(refusal({ inputs: [fp32("", [1], [1])] })).toBe("malformed inference request: inputs[0].name: must not be empty");
    expect(refusal({ id: 7, inputs: [] })).toMatch(/^malformed inference request: id: /);
  });
});

/** A ModelInferRequest as the broker reads it off the wire. */
function received(props: openInference.IModelInferRequest): DecodedModelInfer {
  const decoded = decodeModelInfer(openInference.ModelInferRequest.encode(props).finish());
  if ("undecodable" in decoded) throw new Error(decoded.undecodable);
  return decoded;
}

function grpcRefusal(props: openInference.IModelInferRequest): { code: grpc.status; message: string } {
  try {
    fromModelInfer(received(props));
  } catch (err) {
    expect(err).toBeInstanceOf(GrpcStatusError);
    return { code: (err as GrpcStatusError).code, message: (err as GrpcStatusError).message };
  }
  throw new Error("expected a refusal");
}

const le = (values: number[]) => new Uint8Array(Float32Array.from(values).buffer);

describe("fromModelInfer", () => {
  it("reads values from fp32_contents, or from raw_input_contents (little-endian, any offset), as the same request", () => {
    const viaContents = fromModelInfer(
      received({
        modelName: "resnet",
        id: "g-1",
        inputs: [{ name: "x", datatype: "FP32", shape: [2, 2], contents: { fp32Contents: [1, 2.5, -3, 4] } }],
        outputs: [{ name: "y" }],
      }),
    );
    expect(viaContents.raw).toBe(false);
    expect(viaContents.outputs).toEqual(["y"]);
    expect(onWire(viaContents.request).service).toBe("resnet");
    expect(onWire(viaContents.request).requestId).toBe("g-1");
    expect(onWire(viaContents.request).inputs.x?.data).toEqual([1, 2.5, -3, 4]);
    // Raw bytes at an odd offset of a larger buffer, as a decoded message's bytes can be.
    const padded = new Uint8Array(17);
    padded.set(le([1, 2.5, -3, 4]), 1);
    const viaRaw = fromModelInfer(
      received({
        modelName: "resnet",
        inputs: [{ name: "x", datatype: "FP32", shape: [2, 2] }],
        rawInputContents: [padded.subarray(1)],
      }),
    );
    expect(viaRaw.raw).toBe(true);
    expect(viaRaw.outputs).toBeUndefined();
    expect(onWire(viaRaw.request).inputs.x?.data).toEqual([1, 2.5, -3, 4]);
    expect(onWire(viaRaw.request).inputs.x?.dims).toEqual([2, 2]);
  });

  it("refuses what it cannot carry with INVALID_ARGUMENT, and a version with NOT_FOUND, naming what is wrong", () => {
    const x = { name: "x", datatype: "FP32", shape: [2] };
    expect(grpcRefusal({ modelName: "resnet", inputs: [{ ...x, contents: { fp32Contents: [1] } }] })).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      message: 'input "x": shape [2] holds 2 values, data has 1',
    });
    expect(grpcRefusal({ modelName: "resnet", inputs: [{ ...x, datatype: "INT64", contents: { int64Contents: [1, 2] } }] }).message).toBe(
      'input "x": datatype INT64 is not supported; InferGrid carries FP32 tensors only',
    );
    expect(grpcRefusal({ modelName: "resnet", inputs: [{ ...x, contents: { int64Contents: [1, 2] } }] }).message).toBe(
      'input "x": its values are in int64_contents, which FP32 does not use (fp32_contents)',
    );
    expect(grpcRefusal({ modelName: "resnet", inputs: [x], rawInputContents: [le([1])] }).message).toBe(
      'input "x": raw_input_contents holds 4 bytes, shape [2] of FP32 needs 8',
    );
    expect(grpcRefusal({ modelName: "resnet", inputs: [x, { ...x, name: "z" }], rawInputContents: [le([1, 2])] }).message).toBe(
      "raw_input_contents holds 1 tensors for 2 inputs",
    );
    expect(
      grpcRefusal({ modelName: "resnet", inputs: [{ ...x, contents: { fp32Contents: [1, 2] } }], rawInputContents: [le([1, 2])] }).message,
    ).toBe('input "x": values both in contents and in raw_input_contents');
    expect(grpcRefusal({ inputs: [] }).message).toBe("model_name is required");
    // A dimension past 2^53 beside a zero (no values either way) is refused, not a server error (JSON prints it rounded).
    expect(grpcRefusal({ modelName: "resnet", inputs: [{ ...x, shape: [0, 2 ** 60] }] })).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      message: 'input "x": shape [0,1152921504606847000] must be non-negative integers',
    });
    const many = Array.from({ length: 65 }, (_, i) => ({ ...x, name: `x${i}`, contents: { fp32Contents: [1, 2] } }));
    expect(grpcRefusal({ modelName: "resnet", inputs: many }).message).toBe("65 inputs, at most 64");
    expect(grpcRefusal({ modelName: "resnet", modelVersion: "2", inputs: [] })).toEqual({
      code: grpc.status.NOT_FOUND,
      message: `InferGrid's services have no versions: ask for model "resnet" without one (version "2" asked)`,
    });
  });
});

describe("toOpenInference", () => {
  const answer = inference.InferResponse.encode(
    inference.InferResponse.create({
      requestId: "req-7",
      service: "resnet",
      backendId: "backend-2",
      frontendId: "frontend-0",
      timing: { totalMs: 12.5, computeMs: 9, attempts: 1 },
      outputs: {
        probs: { dtype: "float32", dims: [1, 2], data: [0.25, 0.75] },
        label: { dtype: "float32", dims: [1], data: [1] },
      },
    }),
  ).finish();

  it("answers every output, or the ones asked for in the order asked, with what served it as parameters", () => {
    const all = toOpenInference(answer, "resnet", undefined);
    expect(all).toEqual({
      model_name: "resnet",
      id: "req-7",
      parameters: { backend_id: "backend-2", frontend_id: "frontend-0", total_ms: 12.5, compute_ms: 9, attempts: 1 },
      outputs: [
        { name: "probs", shape: [1, 2], datatype: "FP32", data: [0.25, 0.75] },
        { name: "label", shape: [1], datatype: "FP32", data: [1] },
      ],
    });
    expect(toOpenInference(answer, "resnet", ["label", "probs"]).outputs.map((o) => o.name)).toEqual(["label", "probs"]);
  });

  it("an output asked for that the model did not produce is an INVALID_ARGUMENT naming those it did", () => {
    expect(() => toOpenInference(answer, "resnet", ["logits"])).toThrow(
      'the model produced no output "logits" (it produced "probs", "label")',
    );
  });
});

describe("toModelInfer", () => {
  const answer = inference.InferResponse.encode(
    inference.InferResponse.create({
      requestId: "g-1",
      backendId: "backend-1",
      frontendId: "frontend-1",
      timing: { totalMs: 3.5, computeMs: 2, attempts: 2 },
      outputs: { y: { dtype: "float32", dims: [1, 3], data: [0.5, -1, 2] } },
    }),
  ).finish();

  it("answers raw when the request was raw, else in fp32_contents; what served it as parameters", () => {
    const wire = (r: openInference.IModelInferResponse) =>
      openInference.ModelInferResponse.decode(openInference.ModelInferResponse.encode(r).finish());
    const contents = wire(toModelInfer(answer, "resnet", undefined, false));
    expect(contents.modelName).toBe("resnet");
    expect(contents.id).toBe("g-1");
    expect(contents.outputs[0]?.shape).toEqual([1, 3]);
    expect(contents.outputs[0]?.datatype).toBe("FP32");
    expect(contents.outputs[0]?.contents?.fp32Contents).toEqual([0.5, -1, 2]);
    expect(contents.rawOutputContents).toEqual([]);
    expect(contents.parameters.backend_id?.stringParam).toBe("backend-1");
    expect(contents.parameters.attempts?.int64Param).toBe(2);
    const raw = wire(toModelInfer(answer, "resnet", ["y"], true));
    expect(raw.outputs[0]?.contents?.fp32Contents ?? []).toEqual([]);
    const bytes = raw.rawOutputContents[0] as Uint8Array;
    expect(Array.from(new Float32Array(new Uint8Array(bytes).buffer))).toEqual([0.5, -1, 2]);
  });
});
