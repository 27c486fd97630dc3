/**
 * The Dispatcher against real Worker instances served over real gRPC on 127.0.0.1, in this process: the
 * backend's service is registered the way services/backend-worker/src/main.ts registers it (without NATS,
 * the registry or metrics), with a real BackendMachine and emulated model behind it.
 */
import { createServer } from "node:net";
import { type Random, seededRandom } from "@infergrid/core";
import { retryAfterMs } from "@infergrid/dataplane";
import { BackendServingDefinition, backend, control, decodeRoutedInfer, encodeRoutedInferResponse, inference } from "@infergrid/proto";
import { ClientCache, createLogger, type GrpcServerHandle, grpc, startGrpcServer, statusOf, unaryHandler } from "@infergrid/runtime";
import { BackendMachine } from "@infergrid/swayam";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Worker } from "../../backend-worker/src/worker.js";
import { BackendTracker } from "./backend-tracker.js";
import { Dispatcher, type DispatcherOptions, type DispatchResult } from "./dispatcher.js";
import { type BackendRef, type ServiceView, toView } from "./service-table.js";

const SERVICE = "svc";
const logger = createLogger("test", "dispatcher-int-test", "silent");
const B = backend.BackendState;
const INPUTS = { x: { dims: [1], data: [1] } };

/** A backend-worker in this process: its Worker, its gRPC server, and what it saw. */
interface TestBackend {
  id: string;
  ref: BackendRef;
  worker: Worker;
  server: GrpcServerHandle;
  holdsEnded: string[];
  /** How each Park call ended (the ParkStatus name), once per call. */
  parks: string[];
  /** Execute calls: request id and status name (or the gRPC error code name). */
  executes: { requestId: string; status: string }[];
  /** Execute calls whose caller went away before they were answered (request ids). */
  executesCancelled: string[];
  /** Park calls received so far (answered or not). */
  parksReceived: () => number;
}

const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startBackend(id: string, locMs: number, holdMs = 1_000): Promise<TestBackend> {
  const holdsEnded: string[] = [];
  const parks: string[] = [];
  const executes: { requestId: string; status: string }[] = [];
  const executesCancelled: string[] = [];
  let parksReceived = 0;
  const worker = new Worker(
    id,
    new BackendMachine({ concurrency: 1, idleTimeoutMs: 60_000 }),
    1,
    logger,
    { onHoldEnded: (how) => holdsEnded.push(how), onDecommissioned: () => {} },
    { holdMs },
  );
  const server = await startGrpcServer({
    host: "127.0.0.1",
    port: 0,
    register: (s) =>
      s.addService(BackendServingDefinition, {
        Execute: unaryHandler(logger, async (req, call) => {
          // As main.ts: grpc-js also says "cancelled" when an answered call's stream closes.
          let answered = false;
          call.once("cancelled", () => {
            if (!answered) executesCancelled.push(req.requestId ?? "");
          });
          try {
            const reply = await worker.execute(req);
            answered = true;
            executes.push({ requestId: req.requestId ?? "", status: backend.ExecuteStatus[reply.status ?? 0] ?? "UNKNOWN" });
            return reply;
          } catch (err) {
            answered = true;
            executes.push({ requestId: req.requestId ?? "", status: grpc.status[statusOf(err).code] });
            throw err;
          }
        }),
        WarmUp: unaryHandler(logger, async (req) => worker.warmUp(req)),
        Park: unaryHandler(logger, async (req, call) => {
          parksReceived += 1;
          const withdrawn = new AbortController();
          call.on("cancelled", () => withdrawn.abort());
          const reply = await worker.park(req, withdrawn.signal);
          parks.push(backend.ParkStatus[reply.status ?? 0] ?? "UNKNOWN");
          return reply;
        }),
        Release: unaryHandler(logger, async (req) => worker.releaseHold(req)),
      }),
  });
  cleanups.push(() => server.server.forceShutdown());
  worker.onAssignment(
    control.BackendAssignment.create({
      backendId: id,
      service: SERVICE,
      version: 1,
      model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs, scaleMs: 0 }, coldStartMs: 1 },
    }),
  );
  worker.warmUp({ service: SERVICE });
  await vi.waitFor(() => expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 2000, interval: 2 });
  return {
    id,
    ref: { backendId: id, address: server.address, instanceType: "cpu-1" },
    worker,
    server,
    holdsEnded,
    parks,
    executes,
    executesCancelled,
    parksReceived: () => parksReceived,
  };
}

/** An address nothing listens on. */
async function closedAddress(): Promise<string> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const address = srv.address();
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return `127.0.0.1:${address.port}`;
}

interface Frontend {
  dispatcher: Dispatcher;
  tracker: BackendTracker;
  entry: ServiceView;
  /** Sends one request through the dispatcher with a prefix of n and a deadline deadlineMs from now. */
  send(
    requestId: string,
    o?: { n?: number; deadlineMs?: number; inputs?: inference.InferRequest.$Properties["inputs"]; signal?: AbortSignal },
  ): Promise<DispatchResult>;
}

/** Always the first untried entry: the dispatch order is known. */
const FIRST: Random = { uniform: () => 0 };

function frontend(refs: BackendRef[], options: Partial<DispatcherOptions> = {}, random: Random = FIRST): Frontend {
  const clients = new ClientCache();
  cleanups.push(() => clients.closeAll());
  const tracker = new BackendTracker(5_000);
  const dispatcher = new Dispatcher(
    clients,
    tracker,
    random,
    { retryGapMs: 5, attemptTimeoutMs: 2_000, retryAfterMs: 1_000, answerReserveMs: 15, parkWindowMs: 100, ...options },
    logger,
  );
  const view = toView(
    SERVICE,
    control.ServiceEntry.create({ spec: { name: SERVICE, sla: { latencyThresholdMs: 1_000 } }, backends: refs, version: 1 }),
  );
  if (typeof view === "string") throw new Error(view);
  const entry = view;
  return {
    dispatcher,
    tracker,
    entry,
    send: (requestId, o = {}) => {
      const now = Date.now();
      return dispatcher.dispatch(
        () => ({ frontendId: "fe-1", entry, n: o.n ?? refs.length, pruneServiceMs: undefined }),
        decodeRoutedInfer(inference.InferRequest.encode({ service: SERVICE, requestId, inputs: o.inputs ?? INPUTS }).finish()),
        1,
        now,
        now + (o.deadlineMs ?? 3_000),
        {
          onReply: (backendId, reply, at) => tracker.report(backendId, reply.report, at),
          onRefusedCold: () => {},
        },
        o.signal,
      );
    },
  };
}

/** The outputs the backend answered with, decoded as the client would. */
function outputsOf(res: DispatchResult): Record<string, inference.Tensor.$Properties> {
  const response = encodeRoutedInferResponse({
    requestId: "",
    service: SERVICE,
    outputs: res.reply.outputs,
    backendId: "",
    frontendId: "",
    timing: {},
  });
  return inference.InferResponse.decode(response).outputs;
}

/** Occupies a backend's one slot with a request that takes its model's service time. */
function occupy(b: TestBackend): Promise<backend.ExecuteReply.$Properties> {
  return b.worker.execute({ service: SERVICE, requestId: "occupier", frontendId: "other-fe", inputs: INPUTS });
}

/** The settled backends: free, no slot held, and no hold that ended otherwise than used or given back. */
async function expectSettled(backends: TestBackend[]): Promise<void> {
  await vi.waitFor(
    () => {
      for (const b of backends) expect(b.worker.report().state, b.id).toBe(B.BACKEND_STATE_WARM_IDLE);
    },
    { timeout: 2_000, interval: 5 },
  );
  for (const b of backends) expect(b.holdsEnded, b.id).not.toContain("expired");
}

async function failure(p: Promise<unknown>): Promise<ReturnType<typeof statusOf>> {
  const outcome = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(outcome, "the dispatch should have failed").toBeDefined();
  return statusOf(outcome);
}

describe("Dispatcher over real gRPC to in-process Workers", { timeout: 8_000 }, () => {
  it("(a) answers a request on a warm backend at the first attempt", async () => {
    const b1 = await startBackend("b1", 3);
    const fe = frontend([b1.ref]);
    const res = await fe.send("r1");
    expect(res.backendId).toBe("b1");
    expect(res.attempts).toBe(1);
    expect(res.reply.status).toBe(backend.ExecuteStatus.EXECUTE_STATUS_OK);
    expect(outputsOf(res).y?.data).toEqual([3]);
    expect(res.reply.computeMs).toBe(3);
    expect(b1.executes).toEqual([{ requestId: "r1", status: "EXECUTE_STATUS_OK" }]);
    expect(fe.tracker.state("b1")).toBe(B.BACKEND_STATE_WARM_IDLE);
  });

  it("(b) with one backend busy on a long request and n = 2, the request goes to the other at once", async () => {
    const [b1, b2] = await Promise.all([startBackend("b1", 200), startBackend("b2", 3)]);
    const fe = frontend([b1.ref, b2.ref]);
    const long = occupy(b1);
    const started = Date.now();
    const res = await fe.send("r1");
    expect(Date.now() - started).toBeLessThan(150); // not after the long request
    expect(res.backendId).toBe("b2");
    expect(res.attempts).toBe(2); // b1 first (refused busy), then b2
    expect(b1.executes).toEqual([{ requestId: "r1", status: "EXECUTE_STATUS_REFUSED_BUSY" }]);
    expect(b1.parks).toEqual([]); // an untried entry was left: no parking
    expect(b2.executes).toEqual([{ requestId: "r1", status: "EXECUTE_STATUS_OK" }]);
    expect((await long).status).toBe(backend.ExecuteStatus.EXECUTE_STATUS_OK);
  });

  it("(c) with every prefix backend busy, parks and runs in the first slot freed; the other park is withdrawn, no hold is left", async () => {
    const [b1, b2] = await Promise.all([startBackend("b1", 80), startBackend("b2", 300)]);
    const fe = frontend([b1.ref, b2.ref], { parkWindowMs: 400 });
    const long1 = occupy(b1);
    const long2 = occupy(b2);
    const started = Date.now();
    const res = await fe.send("r1");
    const took = Date.now() - started;
    expect(res.backendId).toBe("b1");
    expect(res.attempts).toBe(3); // two refusals, then the held slot
    expect(took).toBeGreaterThanOrEqual(150); // b1's long request, then this one
    expect(took).toBeLessThan(280); // not after b2's long request
    expect(b1.executes.map((e) => e.status)).toEqual(["EXECUTE_STATUS_REFUSED_BUSY", "EXECUTE_STATUS_OK"]);
    expect(b1.parks).toEqual(["PARK_STATUS_HELD"]);
    expect(b1.holdsEnded).toEqual(["executed"]);
    // b2's park was withdrawn while it waited (Release by park id).
    await vi.waitFor(() => expect(b2.parks).toEqual(["PARK_STATUS_WITHDRAWN"]), { timeout: 1_000, interval: 5 });
    await Promise.all([long1, long2]);
    await expectSettled([b1, b2]);
    expect(b2.holdsEnded).toEqual([]);
    expect(b2.executes.map((e) => e.status)).toEqual(["EXECUTE_STATUS_REFUSED_BUSY"]);
  });

  it("(d) suspects a backend it cannot reach and answers from another", async () => {
    const b1 = await startBackend("b1", 3);
    const dead = { backendId: "dead", address: await closedAddress(), instanceType: "cpu-1" };
    const fe = frontend([dead, b1.ref]);
    const res = await fe.send("r1");
    expect(res.backendId).toBe("b1");
    expect(res.attempts).toBe(2);
    expect(fe.tracker.usable("dead", Date.now())).toBe(false);
    expect(fe.tracker.usable("b1", Date.now())).toBe(true);
    // The next request skips the suspected entry: b1 at the first attempt.
    const next = await fe.send("r2");
    expect(next.backendId).toBe("b1");
    expect(next.attempts).toBe(1);
  });

  it("(e) a tensor the model rejects ends in INVALID_ARGUMENT without a retry", async () => {
    const [b1, b2] = await Promise.all([startBackend("b1", 3), startBackend("b2", 3)]);
    const fe = frontend([b1.ref, b2.ref]);
    const s = await failure(fe.send("bad", { inputs: { x: { dims: [2], data: [1] } } }));
    expect(s.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(s.details).toContain("dims");
    expect([...b1.executes, ...b2.executes]).toEqual([{ requestId: "bad", status: "INVALID_ARGUMENT" }]);
    expect(fe.tracker.usable("b1", Date.now())).toBe(true); // the backend is not blamed
    // Values are checked where they are decoded: the backend refuses a non-finite one, and nothing retries it.
    const nan = await failure(fe.send("nan", { inputs: { x: { dims: [1], data: [Number.NaN] } } }));
    expect(nan.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(nan.details).toBe('input "x": value 0 is not a finite number');
    expect([...b1.executes, ...b2.executes].filter((e) => e.requestId === "nan")).toEqual([
      { requestId: "nan", status: "INVALID_ARGUMENT" },
    ]);
  });

  it("(f) a deadline too short to try anything: DEADLINE_EXCEEDED, nothing sent", async () => {
    const b1 = await startBackend("b1", 3);
    const fe = frontend([b1.ref]);
    const s = await failure(fe.send("late", { deadlineMs: 10 })); // within the answer reserve (15 ms)
    expect(s.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(retryAfterMs(s.metadata)).toBeUndefined();
    expect(b1.executes).toEqual([]);
  });

  it("(f) a deadline that runs out while a backend computes: DEADLINE_EXCEEDED, and the backend is not suspected", async () => {
    const b1 = await startBackend("b1", 300);
    const fe = frontend([b1.ref]);
    const s = await failure(fe.send("r1", { deadlineMs: 100 }));
    expect(s.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(s.details).toContain("deadline passed while a backend ran it");
    expect(fe.tracker.usable("b1", Date.now())).toBe(true);
  });

  it("(f) nothing frees before the deadline: UNAVAILABLE with a retry-after hint, before the deadline, parks ended", async () => {
    const [b1, b2] = await Promise.all([startBackend("b1", 800), startBackend("b2", 800)]);
    const fe = frontend([b1.ref, b2.ref]);
    const long = [occupy(b1), occupy(b2)];
    const started = Date.now();
    const s = await failure(fe.send("r1", { deadlineMs: 300 }));
    // Due by the deadline less the answer reserve (15 ms); timers on a loaded machine fire late, hence the slack.
    expect(Date.now() - started).toBeLessThan(300 + 50);
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
    expect(retryAfterMs(s.metadata)).toBe(1_000);
    expect(s.details).toContain("no backend could take the request");
    await Promise.all(long);
    await expectSettled([b1, b2]);
    // It parked (on a loaded machine the probes may leave time for one entry only), and every park ended.
    expect(b1.parks.length + b2.parks.length).toBeGreaterThan(0);
    for (const b of [b1, b2]) {
      expect(
        b.parks.every((p) => p === "PARK_STATUS_TIMED_OUT" || p === "PARK_STATUS_WITHDRAWN"),
        b.parks.join(),
      ).toBe(true);
      expect(b.holdsEnded, b.id).toEqual([]);
    }
  });

  it("(h) its caller goes away while it is parked: CANCELLED at once, its parks withdrawn, no slot held", async () => {
    const [b1, b2] = await Promise.all([startBackend("b1", 400), startBackend("b2", 400)]);
    const fe = frontend([b1.ref, b2.ref], { parkWindowMs: 1_000 });
    const long = [occupy(b1), occupy(b2)];
    const gone = new AbortController();
    const outcome = failure(fe.send("r1", { signal: gone.signal }));
    await vi.waitFor(() => expect(b1.parksReceived() + b2.parksReceived()).toBe(2), { timeout: 1_000, interval: 2 });
    const abortedAt = Date.now();
    gone.abort();
    const s = await outcome;
    expect(s.code).toBe(grpc.status.CANCELLED);
    expect(s.details).toContain("cancelled by the caller");
    expect(Date.now() - abortedAt).toBeLessThan(50);
    await vi.waitFor(() => expect([...b1.parks, ...b2.parks]).toEqual(["PARK_STATUS_WITHDRAWN", "PARK_STATUS_WITHDRAWN"]), {
      timeout: 1_000,
      interval: 5,
    });
    await Promise.all(long);
    await expectSettled([b1, b2]);
    // The slots freed went to nobody: the cancelled request never ran.
    for (const b of [b1, b2]) {
      expect(b.holdsEnded, b.id).toEqual([]);
      expect(b.executes.map((e) => e.status)).toEqual(["EXECUTE_STATUS_REFUSED_BUSY"]);
    }
  });

  it("(h) its caller goes away while a backend computes it: CANCELLED at once, the Execute cancelled, the backend not suspected", async () => {
    const b1 = await startBackend("b1", 300);
    const fe = frontend([b1.ref]);
    const gone = new AbortController();
    const outcome = failure(fe.send("r1", { signal: gone.signal }));
    await vi.waitFor(() => expect(b1.worker.report().state).toBe(B.BACKEND_STATE_BUSY), { timeout: 1_000, interval: 2 });
    const abortedAt = Date.now();
    gone.abort();
    const s = await outcome;
    expect(s.code).toBe(grpc.status.CANCELLED);
    expect(Date.now() - abortedAt).toBeLessThan(50);
    await vi.waitFor(() => expect(b1.executesCancelled).toEqual(["r1"]), { timeout: 1_000, interval: 5 });
    expect(fe.tracker.usable("b1", Date.now())).toBe(true);
    // Already cancelled when it arrives: nothing is sent.
    const before = new AbortController();
    before.abort();
    expect((await failure(fe.send("r2", { signal: before.signal }))).code).toBe(grpc.status.CANCELLED);
    await expectSettled([b1]);
    expect(b1.executes.map((e) => e.requestId)).toEqual(["r1"]);
  });

  it("(g) a burst of 30 concurrent requests on 2 backends: each ends exactly once, runs at most once, none hangs", async () => {
    const [b1, b2] = await Promise.all([startBackend("b1", 4), startBackend("b2", 4)]);
    const fe = frontend([b1.ref, b2.ref], {}, seededRandom(7));
    const ends = new Map<string, string[]>();
    const ids = Array.from({ length: 30 }, (_, i) => `r${i}`);
    const started = Date.now();
    await Promise.all(
      ids.map((id) =>
        fe.send(id, { deadlineMs: 4_000 }).then(
          (res) => ends.set(id, [...(ends.get(id) ?? []), `ok:${res.backendId}`]),
          (err: unknown) => ends.set(id, [...(ends.get(id) ?? []), `error:${grpc.status[statusOf(err).code]}`]),
        ),
      ),
    );
    const took = Date.now() - started;
    for (const id of ids) expect(ends.get(id), id).toHaveLength(1);
    const answered = ids.filter((id) => ends.get(id)?.[0]?.startsWith("ok:"));
    // 30 x 4 ms on two backends is far within the deadline: every request is answered.
    expect(answered).toHaveLength(30);
    expect(took).toBeLessThan(3_000);

    // No request ran twice; each answer names the backend that ran it.
    const ran = [...b1.executes.map((e) => ({ ...e, by: "b1" })), ...b2.executes.map((e) => ({ ...e, by: "b2" }))].filter(
      (e) => e.status === "EXECUTE_STATUS_OK",
    );
    expect(ran).toHaveLength(30);
    for (const id of ids) expect(ran.filter((e) => e.requestId === id).map((e) => `ok:${e.by}`)).toEqual(ends.get(id));
    expect(b1.executes.length + b2.executes.length).toBeGreaterThan(30); // some were refused

    // Every hold ended used or given back; the backends are free once the withdrawals have landed.
    await expectSettled([b1, b2]);
    const holds = [...b1.holdsEnded, ...b2.holdsEnded];
    const heldParks = [...b1.parks, ...b2.parks].filter((p) => p === "PARK_STATUS_HELD").length;
    expect(heldParks).toBeGreaterThan(0); // late binding was exercised
    expect(holds).toHaveLength(heldParks);
    expect(holds.filter((h) => h === "executed").length).toBeLessThanOrEqual(30);
  });
});
