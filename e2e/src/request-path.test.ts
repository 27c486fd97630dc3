import { createConnection, type Socket } from "node:net";
import { subjects } from "@infergrid/control-plane";
import { InferenceServiceDefinition, type inference, OpenInferenceDefinition } from "@infergrid/proto";
import { grpc, isServiceError, unaryCall } from "@infergrid/runtime";
import type { ServiceProcess } from "@infergrid/testkit";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ocrClsInput } from "./ocr-input.js";
import { emulatedSpec, infer, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * The whole request path on real processes: a real nats-server, the allocator, 4 backends,
 * 2 frontends and the broker, over real gRPC and HTTP. Every bad input gets its status; every
 * request sent ends in exactly one answer.
 */
let cluster: TestCluster;

async function grpcStatus(promise: Promise<unknown>): Promise<{ code: grpc.status; details: string; metadata: grpc.Metadata }> {
  try {
    await promise;
  } catch (err) {
    if (isServiceError(err)) return { code: err.code, details: err.details, metadata: err.metadata };
    throw err;
  }
  throw new Error("expected the call to fail");
}

async function postJson(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${cluster.httpUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

beforeAll(async () => {
  cluster = await startCluster({
    backends: 4,
    frontends: 2,
    brokerEnv: { INFERGRID_MAX_REQUEST_BYTES: String(256 * 1024), INFERGRID_HTTP_RECEIVE_TIMEOUT_MS: "1500" },
  });
  await registerService(cluster, emulatedSpec("echo", { maxBackends: 1, initialBackends: 1 }));
  await registerService(cluster, emulatedSpec("extra", { maxBackends: 1, initialBackends: 1 }));
  await registerService(cluster, {
    name: "ocr-cls",
    model: { kind: 2, onnxModel: "ppocr-mobile-cls" },
    sla: { latencyThresholdMs: 500, percentile: 99, burstFactor: 2 },
    minBackends: 1,
    maxBackends: 1,
    initialBackends: 1,
  });
  await registerService(
    cluster,
    emulatedSpec("slow", { locMs: 1500, scaleMs: 1, shape: 0.01, maxBackends: 1, initialBackends: 1, rtMaxMs: 5000 }),
  );
  await Promise.all([
    waitUntilServing(cluster, "echo"),
    waitUntilServing(cluster, "ocr-cls", ocrClsInput("upright")),
    waitUntilServing(cluster, "slow"),
  ]);
  // The pool is used up now: a fourth service gets an empty list.
  await registerService(cluster, emulatedSpec("starved", { maxBackends: 1 }));
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

describe("the request path broker -> frontend -> backend", () => {
  it("answers over gRPC on the emulated model, through a frontend and a backend", async () => {
    const res = await infer(cluster, { service: "echo", requestId: "r-1", inputs: { x: { dims: [2], data: [1, 2] } } });
    expect(res.requestId).toBe("r-1");
    expect(res.backendId).toMatch(/^backend-\d$/);
    expect(res.frontendId).toMatch(/^frontend-\d$/);
    expect(res.timing?.attempts).toBeGreaterThanOrEqual(1);
    expect(res.outputs?.y?.dims).toEqual([1]);
  });

  it("answers over HTTP/JSON", async () => {
    const res = await postJson("/v1/infer", { service: "echo", request_id: "h-1", inputs: { x: { dims: [1], data: [3] } } });
    expect(res.status).toBe(200);
    expect(res.body.requestId).toBe("h-1");
    expect(res.body.backendId).toMatch(/^backend-\d$/);
    const viaPath = await postJson("/v1/services/echo/infer", { inputs: {} });
    expect(viaPath.status).toBe(200);
    // A timeout with a fraction of a millisecond is a timeout, not a server error.
    const fractional = await postJson("/v1/infer", { service: "echo", inputs: {} }, { "x-request-timeout-ms": "2500.5" });
    expect(fractional.status).toBe(200);
  });

  it("runs the real ONNX model: a fixed input gives the same checked output every time, over gRPC and HTTP", async () => {
    const outputs: number[][] = [];
    for (let i = 0; i < 3; i++) {
      const res = await infer(cluster, { service: "ocr-cls", inputs: ocrClsInput("upright") });
      const [name] = Object.keys(res.outputs ?? {});
      const t = res.outputs?.[name ?? ""];
      expect(t?.dims).toEqual([1, 2]);
      const probs = t?.data ?? [];
      expect((probs[0] ?? 0) + (probs[1] ?? 0)).toBeCloseTo(1, 5);
      outputs.push(probs);
    }
    expect(outputs[1]).toEqual(outputs[0]);
    expect(outputs[2]).toEqual(outputs[0]);
    const http = await postJson("/v1/infer", { service: "ocr-cls", inputs: ocrClsInput("upright") });
    expect(http.status).toBe(200);
    const httpOutputs = http.body.outputs as Record<string, { data: number[] }>;
    const first = Object.values(httpOutputs)[0]?.data ?? [];
    expect(first[0]).toBeCloseTo(outputs[0]?.[0] ?? -1, 6);
  });
});

describe("the Open Inference Protocol (KServe v2) at the broker", () => {
  it("answers a v2 inference request on the emulated and the real ONNX model, as the v1 route does", async () => {
    const echo = await postJson("/v2/models/echo/infer", {
      id: "v2-1",
      inputs: [{ name: "x", shape: [1, 2], datatype: "FP32", data: [[1, 2]] }],
    });
    expect(echo.status).toBe(200);
    expect(echo.body.model_name).toBe("echo");
    expect(echo.body.id).toBe("v2-1");
    expect((echo.body.parameters as { backend_id: string }).backend_id).toMatch(/^backend-\d$/);
    expect(echo.body.outputs).toEqual([{ name: "y", shape: [1], datatype: "FP32", data: [expect.any(Number)] }]);

    const { x } = ocrClsInput("upright");
    const v2 = await postJson("/v2/models/ocr-cls/infer", { inputs: [{ name: "x", shape: x?.dims, datatype: "FP32", data: x?.data }] });
    expect(v2.status).toBe(200);
    const v1 = await infer(cluster, { service: "ocr-cls", inputs: ocrClsInput("upright") });
    const [v1Output] = Object.entries(v1.outputs ?? {});
    const [v2Output] = v2.body.outputs as { name: string; shape: number[]; datatype: string; data: number[] }[];
    expect(v2Output?.name).toBe(v1Output?.[0]);
    expect(v2Output?.shape).toEqual([1, 2]);
    expect(v2Output?.datatype).toBe("FP32");
    expect(v2Output?.data[0]).toBeCloseTo(v1Output?.[1].data?.[0] ?? -1, 6);
  });

  it("health and server metadata; its errors in the protocol's body, with this system's statuses", async () => {
    const get = async (path: string) => {
      const res = await fetch(`${cluster.httpUrl}${path}`);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    expect(await get("/v2/health/live")).toEqual({ status: 200, body: { live: true } });
    expect(await get("/v2/health/ready")).toEqual({ status: 200, body: { ready: true } });
    expect(await get("/v2")).toEqual({
      status: 200,
      body: { name: "infergrid", version: expect.stringMatching(/^\d+\.\d+\.\d+/), extensions: [] },
    });

    // A model is ready while its service's list holds a backend ("starved" has none); 404 for no such service.
    expect(await get("/v2/models/echo/ready")).toEqual({ status: 200, body: { name: "echo", ready: true } });
    expect(await get("/v2/models/starved/ready")).toEqual({ status: 400, body: { name: "starved", ready: false } });
    expect(await get("/v2/models/no-such-service/ready")).toEqual({
      status: 404,
      body: { error: 'no model "no-such-service": no service of that name is registered' },
    });
    expect(await get("/v2/models/ocr-cls")).toEqual({
      status: 200,
      body: {
        name: "ocr-cls",
        versions: [],
        platform: "onnxruntime_onnx",
        inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3, 48, 192] }],
        outputs: [{ name: "softmax_0.tmp_0", datatype: "FP32", shape: [-1, 2] }],
      },
    });

    const int64 = await postJson("/v2/models/echo/infer", { inputs: [{ name: "ids", shape: [1], datatype: "INT64", data: [5] }] });
    expect(int64).toMatchObject({
      status: 400,
      body: { error: 'input "ids": datatype INT64 is not supported; InferGrid carries FP32 tensors only' },
    });
    const unknown = await postJson("/v2/models/no-such-service/infer", { inputs: [] });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toContain("no-such-service");
    expect((await postJson("/v2/models/echo/infer", "{not json")).body.error).toEqual(expect.any(String));
    const binary = await fetch(`${cluster.httpUrl}/v2/models/echo/infer`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream", "inference-header-content-length": "2" },
      body: "{}",
    });
    expect(binary.status).toBe(415);
    expect(((await binary.json()) as { error: string }).error).toContain("binary-data extension");
    const versioned = await postJson("/v2/models/echo/versions/3/infer", { inputs: [] });
    expect(versioned.status).toBe(404);
    expect(versioned.body.error).toContain("services have no versions");
    const missingOutput = await postJson("/v2/models/echo/infer", { inputs: [], outputs: [{ name: "z" }] });
    expect(missingOutput).toMatchObject({ status: 400, body: { error: 'the model produced no output "z" (it produced "y")' } });
    const deadline = await postJson("/v2/models/slow/infer", { inputs: [] }, { "x-request-timeout-ms": "200" });
    expect(deadline.status).toBe(504);
    expect(deadline.body.error).toEqual(expect.any(String));
  });
});

describe("the Open Inference Protocol (KServe v2) over gRPC at the broker", () => {
  const call = <Req, Res>(method: grpc.MethodDefinition<Req, Res>, request: Req) =>
    unaryCall(cluster.brokerClient, method, request, { deadline: Date.now() + 10_000 });
  const le = (values: ArrayLike<number>) => Buffer.from(Float32Array.from(values).buffer);

  it("ModelInfer on the emulated model (fp32_contents) and on the real ONNX model (raw bytes, answered raw), as Infer answers", async () => {
    const echo = await call(OpenInferenceDefinition.ModelInfer, {
      modelName: "echo",
      id: "g-1",
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], contents: { fp32Contents: [1, 2] } }],
    });
    expect(echo.modelName).toBe("echo");
    expect(echo.id).toBe("g-1");
    expect(echo.outputs?.[0]).toMatchObject({ name: "y", datatype: "FP32", shape: [1] });
    expect(echo.outputs?.[0]?.contents?.fp32Contents).toHaveLength(1);
    expect(echo.parameters?.backend_id?.stringParam).toMatch(/^backend-\d$/);

    const { x } = ocrClsInput("upright");
    const ocr = await call(OpenInferenceDefinition.ModelInfer, {
      modelName: "ocr-cls",
      inputs: [{ name: "x", datatype: "FP32", shape: x?.dims }],
      rawInputContents: [le(x?.data ?? [])],
    });
    const v1 = await infer(cluster, { service: "ocr-cls", inputs: ocrClsInput("upright") });
    const [v1Output] = Object.entries(v1.outputs ?? {});
    expect(ocr.outputs?.[0]?.name).toBe(v1Output?.[0]);
    expect(ocr.outputs?.[0]?.shape).toEqual([1, 2]);
    const raw = ocr.rawOutputContents?.[0] as Uint8Array;
    const probs = new Float32Array(new Uint8Array(raw).buffer);
    expect(probs[0]).toBeCloseTo(v1Output?.[1].data?.[0] ?? -1, 6);
  });

  it("the server's liveness, readiness and metadata; refusals with this system's statuses and messages", async () => {
    expect(await call(OpenInferenceDefinition.ServerLive, {})).toMatchObject({ live: true });
    expect(await call(OpenInferenceDefinition.ServerReady, {})).toMatchObject({ ready: true });
    expect(await call(OpenInferenceDefinition.ServerMetadata, {})).toMatchObject({
      name: "infergrid",
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
    });

    const int64 = await grpcStatus(
      call(OpenInferenceDefinition.ModelInfer, {
        modelName: "echo",
        inputs: [{ name: "ids", datatype: "INT64", shape: [1], contents: { int64Contents: [5] } }],
      }),
    );
    expect(int64).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'input "ids": datatype INT64 is not supported; InferGrid carries FP32 tensors only',
    });
    const unknown = await grpcStatus(call(OpenInferenceDefinition.ModelInfer, { modelName: "no-such-service" }));
    expect(unknown.code).toBe(grpc.status.NOT_FOUND);
    expect(unknown.details).toContain("no-such-service");
    const versioned = await grpcStatus(call(OpenInferenceDefinition.ModelInfer, { modelName: "echo", modelVersion: "2" }));
    expect(versioned.code).toBe(grpc.status.NOT_FOUND);
    const shortRaw = await grpcStatus(
      call(OpenInferenceDefinition.ModelInfer, {
        modelName: "echo",
        inputs: [{ name: "x", datatype: "FP32", shape: [2] }],
        rawInputContents: [le([1])],
      }),
    );
    expect(shortRaw).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'input "x": raw_input_contents holds 4 bytes, shape [2] of FP32 needs 8',
    });
    // Bytes that are not a ModelInferRequest at all.
    const garbled = { ...OpenInferenceDefinition.ModelInfer, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b };
    const notMessage = await grpcStatus(
      unaryCall(cluster.brokerClient, garbled, Buffer.from([0x0a, 0xff, 0xff, 0xff]), { deadline: Date.now() + 5000 }),
    );
    expect(notMessage.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(notMessage.details).toMatch(/^not a ModelInferRequest/);
    expect(await call(OpenInferenceDefinition.ModelReady, { name: "echo" })).toMatchObject({ ready: true });
    expect(await call(OpenInferenceDefinition.ModelReady, { name: "starved" })).toMatchObject({ ready: false });
    expect((await grpcStatus(call(OpenInferenceDefinition.ModelReady, { name: "no-such-service" }))).code).toBe(grpc.status.NOT_FOUND);
    expect(await call(OpenInferenceDefinition.ModelMetadata, { name: "echo" })).toMatchObject({
      name: "echo",
      platform: "infergrid_emulated",
    });
    // A catalogue model's tensors, as a Triton client reads them before it builds a request.
    const ocr = await call(OpenInferenceDefinition.ModelMetadata, { name: "ocr-cls" });
    expect(ocr.inputs?.map((t) => [t.name, t.datatype, (t.shape ?? []).map(Number)])).toEqual([["x", "FP32", [-1, 3, 48, 192]]]);
    expect(ocr.outputs?.map((t) => [t.name, t.datatype, (t.shape ?? []).map(Number)])).toEqual([["softmax_0.tmp_0", "FP32", [-1, 2]]]);
  });
});

describe("bad input gets a clear status", () => {
  it("unknown service -> NOT_FOUND / 404", async () => {
    const s = await grpcStatus(infer(cluster, { service: "no-such-service" }));
    expect(s.code).toBe(grpc.status.NOT_FOUND);
    expect(s.details).toContain("no-such-service");
    const h = await postJson("/v1/infer", { service: "no-such-service" });
    expect(h.status).toBe(404);
    expect((h.body.error as { code: string }).code).toBe("NOT_FOUND");
  });

  it("malformed or wrongly typed payload -> INVALID_ARGUMENT / 400", async () => {
    const s = await grpcStatus(infer(cluster, { service: "echo", inputs: { x: { dims: [2, 2], data: [1] } } }));
    expect(s.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(s.details).toContain("need 4 values, got 1");
    // The model itself refuses a tensor of the wrong shape; the status comes back unchanged.
    const onnx = await grpcStatus(
      infer(cluster, { service: "ocr-cls", inputs: { x: { dims: [1, 3, 10, 10], data: new Array(300).fill(0) } } }),
    );
    expect(onnx.code).toBe(grpc.status.INVALID_ARGUMENT);
    const wrongType = await postJson("/v1/infer", { service: "echo", inputs: { x: { dims: [1], data: ["a"] } } });
    expect(wrongType.status).toBe(400);
    expect((wrongType.body.error as { message: string }).message).toContain("number");
    const notJson = await postJson("/v1/infer", "{not json");
    expect(notJson.status).toBe(400);
    const notObject = await postJson("/v1/infer", [1, 2]);
    expect(notObject.status).toBe(400);
    // The broker and the frontend forward tensors as bytes and check their form; the values are checked by the
    // backend that decodes them, with the same status and message.
    const nan = await grpcStatus(infer(cluster, { service: "echo", inputs: { x: { dims: [2], data: [1, Number.NaN] } } }));
    expect([nan.code, nan.details]).toEqual([grpc.status.INVALID_ARGUMENT, 'input "x": value 1 is not a finite number']);
    // Bytes that are not an InferRequest at all: the client's fault, not the server's.
    const garbage = await grpcStatus(
      new Promise((resolve, reject) =>
        cluster.brokerClient.makeUnaryRequest(
          InferenceServiceDefinition.Infer.path,
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.from([0x0a, 0x7f, 0x61]),
          { deadline: Date.now() + 5000 },
          (err, res) => (err ? reject(err) : resolve(res)),
        ),
      ),
    );
    expect(garbage.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(garbage.details).toContain("not a valid InferRequest");
  });

  it("a body cut short, or a request that never finishes arriving: the error envelope, and the socket is freed", async () => {
    const url = new URL(cluster.httpUrl);
    const raw = (write: (s: Socket) => void): Promise<{ text: string; ms: number }> =>
      new Promise((resolve, reject) => {
        const t0 = Date.now();
        let text = "";
        const s = createConnection(Number(url.port), url.hostname, () => write(s));
        s.on("data", (d) => {
          text += String(d);
        });
        s.on("close", () => resolve({ text, ms: Date.now() - t0 }));
        s.on("error", reject);
      });
    const head = "POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
    const short = await raw((s) => {
      s.write(`${head}{"service":`);
      s.end();
    });
    expect(short.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(short.text.slice(short.text.indexOf("\r\n\r\n") + 4))).toEqual({
      error: { code: "INVALID_ARGUMENT", message: "the connection ended before the body its Content-Length announced" },
    });
    // Headers sent, the body never: answered 408 once the broker's receive timeout (1.5 s here) has passed.
    const slow = await raw((s) => s.write(`${head}{"service":`));
    expect(slow.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(slow.text).toContain('"code":"DEADLINE_EXCEEDED"');
    expect(slow.ms).toBeGreaterThanOrEqual(1_400);
    expect(slow.ms).toBeLessThan(6_000);
  });

  it("payload over the configured limit -> RESOURCE_EXHAUSTED / 413", async () => {
    const big = { x: { dims: [100_000], data: new Array(100_000).fill(0.5) } };
    const s = await grpcStatus(infer(cluster, { service: "echo", inputs: big }));
    expect(s.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const h = await postJson("/v1/infer", { service: "echo", inputs: big });
    expect(h.status).toBe(413);
  });

  it("deadline already past -> DEADLINE_EXCEEDED / 504", async () => {
    const s = await grpcStatus(infer(cluster, { service: "echo", deadlineUnixMs: Date.now() - 1000 }));
    expect(s.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    const h = await postJson("/v1/infer", { service: "echo", deadlineUnixMs: Date.now() - 1000 });
    expect(h.status).toBe(504);
  });

  it("no backend can take it in time -> UNAVAILABLE / 503 with a retry hint", async () => {
    const empty = await grpcStatus(infer(cluster, { service: "starved" }));
    expect(empty.code).toBe(grpc.status.UNAVAILABLE);
    expect(Number(empty.metadata.get("x-infergrid-retry-after-ms")[0])).toBeGreaterThan(0);
    // "slow" has one backend that takes 1.5 s: while it works, a request with a 400 ms budget is refused until it gives up.
    const occupying = infer(cluster, { service: "slow" });
    try {
      await new Promise((r) => setTimeout(r, 200));
      const busy = await grpcStatus(infer(cluster, { service: "slow" }, 400));
      expect(busy.code).toBe(grpc.status.UNAVAILABLE);
      expect(busy.details).toContain("refusals");
      expect(Number(busy.metadata.get("x-infergrid-retry-after-ms")[0])).toBeGreaterThan(0);
    } finally {
      await occupying;
    }
    const h = await postJson("/v1/infer", { service: "starved" });
    expect(h.status).toBe(503);
    expect(Number(h.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });

  it("a client that goes away (gRPC cancel, HTTP hang-up): the request ends CANCELLED at the broker and the frontend, and never runs", async () => {
    const before = await Promise.all([metric(cluster.broker, "infergrid_broker_requests_total", 'code="CANCELLED"'), frontendsCancelled()]);
    const ranBefore = await slowRuns();
    // "slow" has one backend that takes 1.5 s: while it works, the requests below wait for it (parked), then leave.
    const occupying = infer(cluster, { service: "slow" });
    try {
      await new Promise((r) => setTimeout(r, 200));
      const gone = new AbortController();
      const cancelled = grpcStatus(
        unaryCall(
          cluster.brokerClient,
          InferenceServiceDefinition.Infer,
          { service: "slow" },
          { deadline: Date.now() + 10_000, signal: gone.signal },
        ),
      );
      const hangUp = new AbortController();
      const hungUp = fetch(`${cluster.httpUrl}/v1/infer`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ service: "slow", inputs: {} }),
        signal: hangUp.signal,
      }).then(
        () => "answered",
        () => "hung up",
      );
      await new Promise((r) => setTimeout(r, 300));
      gone.abort();
      hangUp.abort();
      expect((await cancelled).code).toBe(grpc.status.CANCELLED);
      expect(await hungUp).toBe("hung up");
      // Both ended at the broker (gRPC and HTTP) and at a frontend as CANCELLED, while the occupying request still ran.
      await vi.waitFor(
        async () => {
          expect((await metric(cluster.broker, "infergrid_broker_requests_total", 'code="CANCELLED"')) - before[0]).toBe(2);
          expect((await frontendsCancelled()) - before[1]).toBe(2);
        },
        { timeout: 1_000, interval: 20 },
      );
    } finally {
      await occupying;
    }
    // The backend ran the occupying request only: the two that left were never run when it came free.
    await new Promise((r) => setTimeout(r, 300));
    expect((await slowRuns()) - ranBefore).toBe(1);
  });

  it("a garbled NATS message is logged and dropped, and the services go on", async () => {
    const nc = await connect({ servers: cluster.nats.url });
    nc.publish(subjects.heartbeat("frontend", "garbage"), new Uint8Array([0xff, 0xff, 0xff, 0x01]));
    nc.publish(subjects.heartbeat("backend", "garbage"), new Uint8Array([0x0a, 0xff]));
    nc.publish(subjects.load("echo"), new Uint8Array([0x12, 0x50]));
    await nc.flush();
    await nc.close();
    await cluster.broker.waitForLog((l) => l.msg === "dropped a garbled message", 5000);
    await cluster.allocator.waitForLog((l) => l.msg === "dropped a garbled message", 5000);
    const res = await infer(cluster, { service: "echo" });
    expect(res.backendId).toBeTruthy();
    expect(cluster.broker.isRunning() && cluster.allocator.isRunning()).toBe(true);
  });
});

describe("every accepted request ends in exactly one response or one explicit error", () => {
  it("counts answers and errors against requests sent, and against the broker's own counters", async () => {
    const metricsBefore = await brokerRequestCount();
    const kinds: inference.InferRequest.$Properties[] = [
      { service: "echo" },
      { service: "echo", inputs: { x: { dims: [3], data: [1] } } },
      { service: "nope" },
      { service: "starved" },
      { service: "echo", deadlineUnixMs: Date.now() - 1 },
    ];
    const sent = 200;
    let ok = 0;
    let failed = 0;
    const codes = new Map<string, number>();
    await Promise.all(
      Array.from({ length: sent }, async (_, i) => {
        try {
          await unaryCall(cluster.brokerClient, InferenceServiceDefinition.Infer, kinds[i % kinds.length] ?? {}, {
            deadline: Date.now() + 10_000,
          });
          ok += 1;
        } catch (err) {
          failed += 1;
          const code = isServiceError(err) ? grpc.status[err.code] : "thrown";
          codes.set(code, (codes.get(code) ?? 0) + 1);
        }
      }),
    );
    console.log(`sent ${sent}: ${ok} answered, ${failed} failed explicitly ${JSON.stringify(Object.fromEntries(codes))}`);
    expect(ok + failed).toBe(sent);
    expect(ok).toBe(40);
    expect(codes.get("INVALID_ARGUMENT")).toBe(40);
    expect(codes.get("NOT_FOUND")).toBe(40);
    expect(codes.get("UNAVAILABLE")).toBe(40);
    expect(codes.get("DEADLINE_EXCEEDED")).toBe(40);
    expect((await brokerRequestCount()) - metricsBefore).toBe(sent);
  });
});

/** The sum of a metric's series whose labels include `label` (all of them with ""), as a process exports it. */
async function metric(p: ServiceProcess, name: string, label: string): Promise<number> {
  const text = await (await fetch(`http://${p.ready.metricsAddress}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) if (line.startsWith(`${name}{`) && line.includes(label)) total += Number(line.split(" ").pop());
  return total;
}

async function frontendsCancelled(): Promise<number> {
  const counts = await Promise.all(cluster.frontends.map((f) => metric(f, "infergrid_frontend_requests_total", 'code="CANCELLED"')));
  return counts.reduce((a, b) => a + b, 0);
}

/** Requests the backends ran to the end (OK), over all backends: "slow" is the only service busy meanwhile. */
async function slowRuns(): Promise<number> {
  const counts = await Promise.all(
    cluster.backends.map((b) => metric(b, "infergrid_backend_requests_total", 'status="EXECUTE_STATUS_OK"')),
  );
  return counts.reduce((a, b) => a + b, 0);
}

async function brokerRequestCount(): Promise<number> {
  const text = await (await fetch(`http://${cluster.broker.ready.metricsAddress}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("infergrid_broker_requests_total{") && line.includes('protocol="grpc"')) total += Number(line.split(" ").pop());
  }
  return total;
}
