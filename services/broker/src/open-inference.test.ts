import { inference } from "@infergrid/proto";
import { GrpcStatusError, grpc } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { fromOpenInference, toOpenInference } from "./open-inference.js";

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
    for (const { request, outputs } of [flat, nested]) {
      expect(request.service).toBe("resnet");
      expect(request.requestId).toBe("req-7");
      expect(request.inputs.x?.dims).toEqual([2, 3]);
      expect(request.inputs.x?.data).toEqual([1, 2, 3, 4, 5, 6]);
      expect(request.inputs.x?.dtype).toBe("float32");
      expect(outputs).toBeUndefined();
    }
    // A scalar has shape [] and one value; no id leaves it to the broker.
    const scalar = fromOpenInference({ inputs: [fp32("t", [], 0.5)], outputs: [{ name: "y" }] }, "resnet");
    expect(scalar.request.requestId).toBe("");
    expect(scalar.request.inputs.t?.data).toEqual([0.5]);
    expect(scalar.outputs).toEqual(["y"]);
    // It survives the wire as the request path carries it.
    const bytes = inference.InferRequest.encode(flat.request).finish();
    expect(inference.InferRequest.decode(bytes).inputs.x?.data).toEqual([1, 2, 3, 4, 5, 6]);
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
