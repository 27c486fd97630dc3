import { decodeRoutedInfer, inference, ROUTED_INPUTS_KEPT } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { effectiveDeadline } from "./deadline.js";
import { inputsProblem, MAX_ELEMENTS, MAX_INPUTS, routedRequestProblem, tensorProblem } from "./validate.js";

const routed = (req: inference.InferRequest.$Properties) =>
  routedRequestProblem(decodeRoutedInfer(inference.InferRequest.encode(req).finish()));

describe("request validation", () => {
  it("accepts a well-formed tensor and an empty input map", () => {
    expect(tensorProblem("x", { dims: [2, 3], data: [1, 2, 3, 4, 5, 6] })).toBeUndefined();
    expect(routed({ service: "resnet", inputs: {} })).toEqual({ shapes: new Map() });
  });

  it("names what is wrong", () => {
    expect(tensorProblem("x", { dims: [2, 3], data: [1, 2] })).toBe('input "x": dims [2,3] need 6 values, got 2');
    expect(tensorProblem("x", { dims: [-1], data: [] })).toContain("non-negative integers");
    expect(tensorProblem("x", { dims: [1], data: [Number.NaN] })).toContain("value 0 is not a finite number");
    expect(tensorProblem("x", { dtype: "int8", dims: [], data: [] })).toContain("float32 only");
    expect(routed({ service: "" })).toEqual({ problem: "service is required" });
    expect(routed({ service: "Bad Name" })).toEqual({ problem: expect.stringContaining("not a valid service name") });
    expect(routed({ service: "a", deadlineUnixMs: -5 })).toEqual({ problem: expect.stringContaining("deadline_unix_ms") });
  });
});

describe("a routed request's check (broker and frontend: the form, not the values)", () => {
  it("keeps more input entries than it ever accepts, and counts the rest", () => {
    expect(MAX_INPUTS).toBeLessThan(ROUTED_INPUTS_KEPT);
    const many = decodeRoutedInfer(
      inference.InferRequest.encode({
        service: "a",
        inputs: Object.fromEntries(Array.from({ length: ROUTED_INPUTS_KEPT + 7 }, (_, i) => [`x${i}`, { dims: [1], data: [1] }])),
      }).finish(),
    );
    expect(many.inputs).toHaveLength(ROUTED_INPUTS_KEPT);
    expect(many.inputsBeyond).toBe(7);
    // Fields after the counted entries are still read, and bytes cut short among them are refused, not counted.
    const bytes = inference.InferRequest.encode({
      service: "a",
      inputs: Object.fromEntries(Array.from({ length: ROUTED_INPUTS_KEPT + 3 }, (_, i) => [`x${i}`, { dims: [1], data: [1] }])),
    }).finish();
    const after = new Uint8Array([...bytes, ...inference.InferRequest.encode({ requestId: "late" }).finish()]);
    expect(decodeRoutedInfer(after)).toMatchObject({ requestId: "late", inputsBeyond: 3 });
    expect(decodeRoutedInfer(bytes.subarray(0, bytes.length - 2)).undecodable).toMatch(/not a valid InferRequest/);
  });

  it("gives the decoded check's messages for header and form, and the shapes when all is well", () => {
    const cases: Array<[inference.InferRequest.$Properties, string]> = [
      [{ service: "" }, "service is required"],
      [{ service: "a", requestId: "r".repeat(129) }, "request_id is longer than 128 characters"],
      [{ service: "a", inputs: { x: { dims: [2, 3], data: [1, 2] } } }, 'input "x": dims [2,3] need 6 values, got 2'],
      [{ service: "a", inputs: { x: { dims: [-1], data: [] } } }, 'input "x": dims must be non-negative integers, got [-1]'],
      // An empty tensor may not claim a batch beyond what a full one could carry.
      [
        { service: "a", inputs: { x: { dims: [1e15, 0], data: [] } } },
        `input "x": dims [1000000000000000,0] span more than ${MAX_ELEMENTS} values (zeros aside)`,
      ],
      [
        { service: "a", inputs: { x: { dims: [0, 4096, 4096], data: [] } } },
        `input "x": dims [0,4096,4096] span more than ${MAX_ELEMENTS} values (zeros aside)`,
      ],
      [{ service: "a", inputs: { x: { dtype: "int8", dims: [], data: [] } } }, 'input "x": dtype "int8" is not supported (float32 only)'],
      [{ service: "a", inputs: { x: { dims: [1, 1, 1, 1, 1, 1, 1, 1, 1], data: [1] } } }, 'input "x": 9 dims, at most 8'],
      [{ service: "a", inputs: { ["n".repeat(129)]: { dims: [1], data: [1] } } }, "input names must be 1 to 128 characters"],
      [
        { service: "a", inputs: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`x${i}`, { dims: [1], data: [1] }])) },
        "65 inputs, at most 64",
      ],
      // Beyond the entries a routed request keeps, the rest are counted, not read: the count is still exact.
      [
        { service: "a", inputs: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`x${i}`, { dims: [1], data: [1] }])) },
        "10000 inputs, at most 64",
      ],
    ];
    for (const [c, problem] of cases) expect(routed(c)).toEqual({ problem });
    // The backend's whole check on decoded tensors says the same of the form.
    for (const [c, problem] of cases.slice(2)) expect(inputsProblem(c.inputs)).toBe(problem);
    const ok = routed({ service: "a", inputs: { x: { dims: [2, 2], data: [1, 2, 3, 4] } } });
    expect(ok).toEqual({ shapes: new Map([["x", { dtype: "", dims: [2, 2], values: 4 }]]) });
  });

  it("caps the values of all inputs together, where the form is read and where the values are decoded", () => {
    const half = MAX_ELEMENTS / 2;
    const atCap = { a: { dims: [half], data: new Float32Array(half) }, b: { dims: [half], data: new Float32Array(half) } };
    const over = { ...atCap, c: { dims: [1], data: new Float32Array(1) } };
    const message = `${MAX_ELEMENTS + 1} values in all inputs, at most ${MAX_ELEMENTS}`;
    expect(inputsProblem(atCap)).toBeUndefined();
    expect(inputsProblem(over)).toBe(message);
    const asSent = (inputs: Record<string, { dims: number[]; data: Float32Array }>) =>
      routed({
        service: "a",
        inputs: Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, { dims: t.dims, data: Array.from(t.data) }])),
      });
    expect(asSent(atCap)).toHaveProperty("shapes");
    expect(asSent(over)).toEqual({ problem: message });
  });

  it("leaves values to the backend, and refuses bytes that are not a request", () => {
    expect(routed({ service: "a", inputs: { x: { dims: [1], data: [Number.NaN] } } })).toHaveProperty("shapes");
    expect(routedRequestProblem(decodeRoutedInfer(Uint8Array.from([0x0a, 0x7f])))).toEqual({
      problem: expect.stringContaining("not a valid InferRequest"),
    });
  });
});

describe("effectiveDeadline", () => {
  it("takes the earliest of the three", () => {
    expect(effectiveDeadline(1000, Number.POSITIVE_INFINITY, 0, 5000)).toBe(6000);
    expect(effectiveDeadline(1000, 3000, 0, 5000)).toBe(3000);
    expect(effectiveDeadline(1000, 3000, 2500, 5000)).toBe(2500);
    expect(effectiveDeadline(1000, 0, 900, 5000)).toBe(900);
  });
});
