import fc from "fast-check";
import protobuf from "protobufjs/minimal.js";
import { describe, expect, it } from "vitest";
import { backend, inference } from "./index.js";
import {
  decodeExecuteRequest,
  decodeRoutedExecuteReply,
  decodeRoutedInfer,
  encodeRoutedExecute,
  encodeRoutedInfer,
  encodeRoutedInferResponse,
  entryShape,
  executeRequestDeserialize,
  float32Entry,
  inputShapes,
} from "./routed.js";

const tensor = fc.record({
  dims: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 }),
  data: fc.array(fc.float({ noNaN: true }), { maxLength: 40 }),
});
const inputs = fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), tensor, { maxKeys: 4 });
const request = fc.record({
  service: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
  requestId: fc.string({ maxLength: 12 }),
  deadlineUnixMs: fc.integer({ min: 0, max: 2 ** 45 }),
  inputs,
});

/** Values as protobuf carries them: float32. */
function asFloat32(m: Record<string, { dims: number[]; data: number[] }>) {
  return Object.fromEntries(Object.entries(m).map(([k, t]) => [k, { dims: t.dims, data: Array.from(Float32Array.from(t.data)) }]));
}

function plainTensors(m: Record<string, inference.Tensor.$Properties>) {
  return Object.fromEntries(Object.entries(m).map(([k, t]) => [k, { dims: (t.dims ?? []).map(Number), data: [...(t.data ?? [])] }]));
}

describe("routed messages: tensors forwarded as the bytes they came as", () => {
  it("InferRequest -> broker -> frontend -> ExecuteRequest keeps header and inputs exactly", () => {
    fc.assert(
      fc.property(request, (req) => {
        const routed = decodeRoutedInfer(inference.InferRequest.encode(req).finish());
        expect(routed.undecodable).toBeUndefined();
        expect([routed.service, routed.requestId, routed.deadlineUnixMs]).toEqual([req.service, req.requestId, req.deadlineUnixMs]);
        // The broker's re-encoding is still an InferRequest with the same content.
        const relayed = inference.InferRequest.decode(encodeRoutedInfer(routed));
        expect(plainTensors(relayed.inputs)).toEqual(asFloat32(req.inputs));
        // The frontend's ExecuteRequest carries the inputs under their own field number.
        const again = decodeRoutedInfer(encodeRoutedInfer(routed));
        const exec = backend.ExecuteRequest.decode(
          encodeRoutedExecute({
            service: again.service,
            requestId: again.requestId,
            frontendId: "fe-1",
            inputs: again.inputs,
            attempt: 2,
            holdId: "h",
            deadlineUnixMs: req.deadlineUnixMs,
          }),
        );
        expect(plainTensors(exec.inputs)).toEqual(asFloat32(req.inputs));
        expect([exec.service, exec.requestId, exec.frontendId, exec.attempt, exec.holdId, exec.deadlineUnixMs]).toEqual([
          req.service,
          req.requestId,
          "fe-1",
          2,
          "h",
          req.deadlineUnixMs,
        ]);
      }),
      { numRuns: 200 },
    );
  });

  it("as chunks, a routed message is the same bytes, each large tensor a view of the bytes it came as", () => {
    // Tensors up to 8,000 values: some over the 16 KiB from which chunks() leaves a field where it is.
    const big = fc.record({
      dims: fc.constant(1).map((n) => [n]),
      data: fc.array(fc.float({ noNaN: true }), { minLength: 0, maxLength: 8_000 }),
    });
    const bigRequest = fc.record({
      service: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
      requestId: fc.string({ maxLength: 12 }),
      deadlineUnixMs: fc.integer({ min: 0, max: 2 ** 45 }),
      inputs: fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), big, { maxKeys: 3 }),
    });
    fc.assert(
      fc.property(bigRequest, fc.integer({ min: 0, max: 9 }), (req, attempt) => {
        const received = inference.InferRequest.encode(req).finish();
        const routed = decodeRoutedInfer(received);
        const whole = encodeRoutedInfer(routed);
        const chunks = encodeRoutedInfer.chunks(routed);
        expect(Buffer.concat(chunks).equals(whole)).toBe(true);
        // Every chunk of 16 KiB or more is an input as it arrived: a view into the received bytes, not a copy.
        for (const c of chunks) if (c.length >= 16 * 1024) expect(c.buffer).toBe(received.buffer);
        const exec = {
          service: routed.service,
          requestId: routed.requestId,
          frontendId: "fe-1",
          inputs: routed.inputs,
          attempt,
          holdId: "",
          deadlineUnixMs: req.deadlineUnixMs,
        };
        expect(Buffer.concat(encodeRoutedExecute.chunks(exec)).equals(encodeRoutedExecute(exec))).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it("ExecuteReply -> frontend -> InferResponse keeps the outputs and reads status, report and compute time", () => {
    fc.assert(
      fc.property(inputs, fc.double({ min: 0, max: 1e4, noNaN: true }), (outputs, computeMs) => {
        const reply = decodeRoutedExecuteReply(
          backend.ExecuteReply.encode({
            status: backend.ExecuteStatus.EXECUTE_STATUS_OK,
            report: { state: backend.BackendState.BACKEND_STATE_BUSY, frontendsSeen: 3 },
            outputs,
            computeMs,
          }).finish(),
        );
        expect(reply.status).toBe(backend.ExecuteStatus.EXECUTE_STATUS_OK);
        expect(reply.report?.frontendsSeen).toBe(3);
        expect(reply.computeMs).toBe(computeMs);
        const res = inference.InferResponse.decode(
          encodeRoutedInferResponse({
            requestId: "r",
            service: "s",
            outputs: reply.outputs,
            backendId: "b",
            frontendId: "f",
            timing: { totalMs: 5, computeMs, attempts: 1 },
          }),
        );
        expect(plainTensors(res.outputs)).toEqual(asFloat32(outputs));
        expect([res.requestId, res.service, res.backendId, res.frontendId, res.timing?.attempts]).toEqual(["r", "s", "b", "f", 1]);
      }),
      { numRuns: 200 },
    );
  });

  it("reads an input's dims and counts its values without decoding them, packed or not", () => {
    const packed = inference.InferRequest.encode({
      service: "s",
      inputs: { img: { dtype: "float32", dims: [2, 3], data: [1, 2, 3, 4, 5, 6] } },
    }).finish();
    expect(entryShape(decodeRoutedInfer(packed).inputs[0] ?? new Uint8Array())).toEqual({
      name: "img",
      shape: { dtype: "float32", dims: [2, 3], values: 6 },
    });
    // The same tensor with unpacked dims (varints) and unpacked values (fixed32), as another encoder may write it.
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).string("img");
    w.uint32((2 << 3) | 2).fork();
    w.uint32((2 << 3) | 0).int64(2);
    w.uint32((2 << 3) | 0).int64(3);
    for (let i = 0; i < 6; i++) w.uint32((3 << 3) | 5).float(i);
    w.ldelim();
    expect(entryShape(w.finish())).toEqual({ name: "img", shape: { dtype: "", dims: [2, 3], values: 6 } });
    // A name with no tensor reads as the generated decoder reads it: null.
    const bare = protobuf.Writer.create()
      .uint32((1 << 3) | 2)
      .string("x")
      .finish();
    expect(entryShape(bare)).toEqual({ name: "x", shape: null });
  });

  it("says what is wrong with bytes that are not a request, and never throws", () => {
    expect(decodeRoutedInfer(Uint8Array.from([0x0a, 0x7f, 0x61])).undecodable).toMatch(/not a valid InferRequest/);
    expect(decodeRoutedInfer(Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff])).undecodable).toBeDefined();
    // A packed float field that is not a whole number of floats.
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).string("x");
    w.uint32((2 << 3) | 2)
      .fork()
      .uint32((3 << 3) | 2)
      .bytes(Uint8Array.from([1, 2, 3]))
      .ldelim();
    const read = inputShapes([w.finish()]);
    expect(read).toEqual({ ok: false, error: "malformed inputs: packed float data is not a whole number of float32 values" });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const r = decodeRoutedInfer(bytes);
        if (r.undecodable === undefined) inputShapes(r.inputs);
      }),
      { numRuns: 500 },
    );
  });

  it("the backend decodes an ExecuteRequest as the generated decoder does, values into Float32Arrays", () => {
    fc.assert(
      fc.property(request, fc.integer({ min: 0, max: 9 }), (req, attempt) => {
        const bytes = backend.ExecuteRequest.encode({ ...req, frontendId: "fe", attempt, holdId: "h1" }).finish();
        // req.deadlineUnixMs rides along as the ExecuteRequest's own deadline field.
        const ours = decodeExecuteRequest(bytes);
        const theirs = backend.ExecuteRequest.decode(bytes);
        expect(ours.undecodable).toBeUndefined();
        expect([ours.service, ours.requestId, ours.frontendId, ours.attempt, ours.holdId, ours.deadlineUnixMs]).toEqual([
          theirs.service,
          theirs.requestId,
          theirs.frontendId,
          theirs.attempt,
          theirs.holdId,
          theirs.deadlineUnixMs,
        ]);
        for (const t of Object.values(ours.inputs)) expect(t?.data).toBeInstanceOf(Float32Array);
        const plain = Object.fromEntries(
          Object.entries(ours.inputs).map(([k, t]) => [k, { dims: t?.dims ?? [], data: Array.from(t?.data ?? []) }]),
        );
        expect(plain).toEqual(plainTensors(theirs.inputs));
      }),
      { numRuns: 200 },
    );
    // Unpacked values, and packed data split over two fields (protobuf concatenates them).
    const w = protobuf.Writer.create();
    w.uint32((4 << 3) | 2).fork();
    w.uint32((1 << 3) | 2).string("x");
    w.uint32((2 << 3) | 2).fork();
    w.uint32((3 << 3) | 5).float(1.5);
    w.uint32((3 << 3) | 2).bytes(new Uint8Array(Float32Array.of(2.5, -3).buffer));
    w.ldelim().ldelim();
    expect(Array.from(decodeExecuteRequest(w.finish()).inputs.x?.data ?? [])).toEqual([1.5, 2.5, -3]);
    expect(decodeExecuteRequest(Uint8Array.from([0x22, 0x7f])).undecodable).toMatch(/not a valid ExecuteRequest/);
    // Lent arrays: the values land in what floatsFor gave, for one packed run and for runs put together.
    const lent: Float32Array[] = [];
    const floatsFor = (n: number) => {
      const a = new Float32Array(new ArrayBuffer(4 * n + 64), 16, n).fill(Number.NaN);
      lent.push(a);
      return a;
    };
    const packed = executeRequestDeserialize.withScratch(
      Buffer.from(backend.ExecuteRequest.encode({ service: "s", inputs: { x: { dims: [3], data: [1, 2, 3] } } }).finish()),
      floatsFor,
    );
    expect(packed.inputs.x?.data).toBe(lent[0]);
    expect(Array.from(lent[0] ?? [])).toEqual([1, 2, 3]);
    const split = executeRequestDeserialize.withScratch(Buffer.from(w.finish()), floatsFor);
    expect(split.inputs.x?.data).toBe(lent.at(-1));
    expect(Array.from(split.inputs.x?.data ?? [])).toEqual([1.5, 2.5, -3]);
    expect(Array.from(executeRequestDeserialize(Buffer.from(w.finish())).inputs.x?.data ?? [])).toEqual([1.5, 2.5, -3]);
  });

  it("an input written around its float32 bytes is the entry the generated encoder writes, read alike by every hop", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 12 }),
        fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 3 }),
        fc.array(fc.float({ noNaN: true }), { maxLength: 40 }),
        (name, dims, values) => {
          const floats = Float32Array.from(values);
          const entry = float32Entry(name, dims, new Uint8Array(floats.buffer));
          const request = { service: "svc", requestId: "r", deadlineUnixMs: 0, inputs: [entry] };
          const decoded = inference.InferRequest.decode(encodeRoutedInfer(request));
          expect(decoded.inputs[name]?.dims).toEqual(dims);
          expect(decoded.inputs[name]?.dtype).toBe("float32");
          expect(Array.from(decoded.inputs[name]?.data ?? [])).toEqual(Array.from(floats));
          expect(entryShape(entry)).toEqual({ name, shape: { dtype: "float32", dims, values: floats.length } });
        },
      ),
    );
    expect(() => float32Entry("x", [-1], new Uint8Array())).toThrow(RangeError);
  });

  it("leaves large values where they are (a split entry) and writes them the same, whole or as chunks", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4090, max: 4200 }),
        fc.array(fc.float({ noNaN: true }), { minLength: 1, maxLength: 3 }),
        (count, small) => {
          // Values a view into a larger buffer, as the broker's are into a request's body.
          const body = new Uint8Array(8 + count * 4 + 8);
          const floats = new Float32Array(body.buffer, 8, count);
          for (let i = 0; i < count; i++) floats[i] = i / 7;
          const values = new Uint8Array(body.buffer, 8, count * 4);
          const big = float32Entry("image", [1, count], values);
          expect(big instanceof Uint8Array).toBe(count * 4 < 16 * 1024);
          const tiny = float32Entry("scale", [small.length], new Uint8Array(Float32Array.from(small).buffer));
          const request = { service: "svc", requestId: "r", deadlineUnixMs: 5, inputs: [tiny, big] };
          const whole = encodeRoutedInfer(request);
          const chunks = encodeRoutedInfer.chunks(request);
          expect(Buffer.concat(chunks).equals(whole)).toBe(true);
          // The values go out as the caller's bytes, not a copy of them.
          if (!(big instanceof Uint8Array)) expect(chunks.some((c) => c.buffer === body.buffer)).toBe(true);
          const decoded = inference.InferRequest.decode(whole);
          expect(Array.from(decoded.inputs.image?.data ?? [])).toEqual(Array.from(floats));
          expect(decoded.inputs.image?.dims).toEqual([1, count]);
          expect(Array.from(decoded.inputs.scale?.data ?? [])).toEqual(Array.from(Float32Array.from(small)));
          const joined = big instanceof Uint8Array ? big : Buffer.concat([big.head, big.data]);
          expect(entryShape(big)).toEqual(entryShape(joined));
          expect(entryShape(big)).toEqual({ name: "image", shape: { dtype: "float32", dims: [1, count], values: count } });
          // Passed on by the frontend in an Execute, the same bytes.
          const execute = { service: "svc", requestId: "r", frontendId: "f", inputs: [big], attempt: 1, deadlineUnixMs: 9 };
          expect(Buffer.concat(encodeRoutedExecute.chunks(execute)).equals(encodeRoutedExecute(execute))).toBe(true);
          expect(Array.from(backend.ExecuteRequest.decode(encodeRoutedExecute(execute)).inputs.image?.data ?? [])).toEqual(
            Array.from(floats),
          );
        },
      ),
      { numRuns: 30 },
    );
  });

  it("skips fields it does not know, as a generated decoder does", () => {
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).string("svc");
    w.uint32((99 << 3) | 0).uint32(7);
    w.uint32((98 << 3) | 2).bytes(Uint8Array.from([1, 2]));
    const r = decodeRoutedInfer(w.finish());
    expect(r).toEqual({ service: "svc", requestId: "", deadlineUnixMs: 0, inputs: [] });
  });
});
