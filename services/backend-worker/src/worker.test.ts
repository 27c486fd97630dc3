import { setTimeout as sleep } from "node:timers/promises";
import { EmulatedModel } from "@infergrid/models";
import { backend, control } from "@infergrid/proto";
import { createLogger, GrpcStatusError, grpc } from "@infergrid/runtime";
import { BackendMachine } from "@infergrid/swayam";
import { describe, expect, it, vi } from "vitest";
import { type ExecuteInput, toModelSpec, Worker } from "./worker.js";

const SERVICE = "svc";
const logger = createLogger("test", "worker-test", "silent");
const S = backend.ExecuteStatus;
const P = backend.ParkStatus;
const B = backend.BackendState;
const INPUTS = { x: { dims: [1], data: [1] } };

interface Options {
  /** Constant service time of the emulated model (scale 0: no draw). */
  locMs?: number;
  coldStartMs?: number;
  holdMs?: number;
  concurrency?: number;
  idleTimeoutMs?: number;
  now?: () => number;
  instanceType?: string;
}

/** A Worker over a real BackendMachine, with what its events reported. */
function setup(o: Options = {}) {
  const machine = new BackendMachine({ concurrency: o.concurrency ?? 1, idleTimeoutMs: o.idleTimeoutMs ?? 60_000 });
  const holdsEnded: string[] = [];
  const decommissioned: string[] = [];
  const late = { count: 0 };
  const worker = new Worker(
    "b1",
    machine,
    1,
    logger,
    {
      onHoldEnded: (how) => holdsEnded.push(how),
      onDecommissioned: (s) => decommissioned.push(s),
      onLate: () => {
        late.count += 1;
      },
    },
    { holdMs: o.holdMs ?? 1_000, ...(o.instanceType ? { instanceType: o.instanceType } : {}) },
    o.now,
  );
  return { worker, machine, holdsEnded, decommissioned, late };
}

function assignment(service: string, version: number, locMs: number, coldStartMs: number): control.BackendAssignment {
  return control.BackendAssignment.create({
    backendId: "b1",
    service,
    version,
    model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs, scaleMs: 0 }, coldStartMs },
  });
}

/** Assigned to SERVICE, warmed up, and warm. */
async function warmWorker(o: Options = {}) {
  const t = setup(o);
  t.worker.onAssignment(assignment(SERVICE, 1, o.locMs ?? 2, o.coldStartMs ?? 1));
  expect(t.worker.warmUp({ service: SERVICE }).accepted).toBe(true);
  await vi.waitFor(() => expect(t.worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 1000, interval: 1 });
  return t;
}

function execute(w: Worker, extra: ExecuteInput = {}): Promise<backend.ExecuteReply.$Properties> {
  return w.execute({ service: SERVICE, requestId: "r", frontendId: "fe-1", inputs: INPUTS, attempt: 1, ...extra });
}

/** A Park call whose every answer is recorded: a call must end exactly once. */
function park(w: Worker, req: backend.ParkRequest.$Properties, signal?: AbortSignal) {
  const answers: backend.ParkReply.$Properties[] = [];
  const reply = w.park({ service: SERVICE, frontendId: "fe-1", ageMs: 0, waitMs: 5_000, ...req }, signal).then((r) => {
    answers.push(r);
    return r;
  });
  return { reply, answers };
}

/** Lets pending promise callbacks and zero-delay work run. */
const settle = () => sleep(0);

describe("Worker: assignment, warm-up and Execute", { timeout: 5_000 }, () => {
  it("refuses until assigned and warm, then executes on the emulated model", async () => {
    const { worker } = setup();
    expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_REFUSED_NOT_ASSIGNED);
    expect(worker.warmUp({ service: SERVICE }).accepted).toBe(false);

    worker.onAssignment(assignment(SERVICE, 1, 3, 40));
    expect(worker.service).toBe(SERVICE);
    const cold = await execute(worker);
    expect(cold.status).toBe(S.EXECUTE_STATUS_REFUSED_COLD);
    expect(cold.report?.state).toBe(B.BACKEND_STATE_COLD);
    expect(worker.warmUp({ service: "other" }).accepted).toBe(false);

    expect(worker.warmUp({ service: SERVICE }).accepted).toBe(true);
    const loading = await execute(worker);
    expect(loading.status).toBe(S.EXECUTE_STATUS_REFUSED_PROVISIONING);
    expect(loading.report?.state).toBe(B.BACKEND_STATE_PROVISIONING);

    await vi.waitFor(() => expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 1000, interval: 1 });
    // Warm: the reply to a warm-up says how long the load took.
    expect(worker.warmUp({ service: SERVICE }).coldStartMs).toBe(40);
    const ok = await execute(worker);
    expect(ok.status).toBe(S.EXECUTE_STATUS_OK);
    expect(ok.computeMs).toBe(3);
    expect(ok.outputs?.y?.data).toEqual([3]);
    expect(ok.report?.state).toBe(B.BACKEND_STATE_WARM_IDLE);
    expect(ok.report?.frontendsSeen).toBe(1);
    expect((await execute(worker, { service: "other" })).status).toBe(S.EXECUTE_STATUS_REFUSED_NOT_ASSIGNED);
  });

  it("refuses busy while its one slot runs a request, and serves again after", async () => {
    const { worker } = await warmWorker({ locMs: 30 });
    const first = execute(worker);
    const second = await execute(worker, { frontendId: "fe-2" });
    expect(second.status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);
    expect(second.report?.state).toBe(B.BACKEND_STATE_BUSY);
    expect(second.report?.frontendsSeen).toBe(2); // a refused request counts its frontend too
    expect((await first).status).toBe(S.EXECUTE_STATUS_OK);
    expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_OK);
  });

  it("answers INVALID_ARGUMENT for a tensor the model rejects, and frees the slot", async () => {
    const { worker } = await warmWorker();
    const err = await execute(worker, { inputs: { x: { dims: [], data: [1, 2] } } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrpcStatusError);
    expect((err as GrpcStatusError).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_OK);
  });

  it("checks the values it decodes before the request takes a slot: dims vs data, non-finite, undecodable", async () => {
    const { worker } = await warmWorker();
    const cases: Array<[ExecuteInput["inputs"], string]> = [
      [{ x: { dims: [2], data: [1] } }, 'input "x": dims [2] need 2 values, got 1'],
      [{ x: { dims: [2], data: Float32Array.of(1, Number.POSITIVE_INFINITY) } }, 'input "x": value 1 is not a finite number'],
    ];
    for (const [inputs, message] of cases) {
      const err = await execute(worker, { inputs }).catch((e: unknown) => e);
      expect([(err as GrpcStatusError).code, (err as GrpcStatusError).details]).toEqual([grpc.status.INVALID_ARGUMENT, message]);
    }
    const garbled = await worker
      .execute({ service: "svc", undecodable: "the request is not a valid ExecuteRequest: x" })
      .catch((e: unknown) => e);
    expect((garbled as GrpcStatusError).code).toBe(grpc.status.INVALID_ARGUMENT);
    // None of them took the slot.
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    expect(worker.report().frontendsSeen ?? 0).toBe(0);
  });
});

describe("Worker: a call read after its caller's deadline", () => {
  it("is refused DEADLINE_EXCEEDED unrun, takes no slot, and is counted; one still in time runs", async () => {
    let clock = 10_000;
    const { worker, late } = await warmWorker({ now: () => clock });
    clock = 20_000;
    const err = await execute(worker, { deadlineUnixMs: 19_500 }).catch((e: unknown) => e);
    expect([(err as GrpcStatusError).code, (err as GrpcStatusError).details]).toEqual([
      grpc.status.DEADLINE_EXCEEDED,
      "the caller's deadline passed 500 ms before the backend could start the request; not run",
    ]);
    expect(late.count).toBe(1);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    expect((await execute(worker, { deadlineUnixMs: 20_500 })).status).toBe(S.EXECUTE_STATUS_OK);
    // 0: the caller said nothing, as older frontends do.
    expect((await execute(worker, { deadlineUnixMs: 0 })).status).toBe(S.EXECUTE_STATUS_OK);
  });

  it("reads a frontend's stamp by its clock's lag: an hour ahead, it is served; a call read late is still refused", async () => {
    const HOUR = 3_600_000;
    let clock = 10_000;
    const { worker, late } = await warmWorker({ now: () => clock });
    // The frontend's clock reads an hour more than this one; its calls take 1 ms to arrive, with 300 ms left.
    const call = (sentAt: number, readAt: number) => {
      clock = readAt;
      return execute(worker, { deadlineUnixMs: sentAt + HOUR + 300, callDeadline: readAt + 300, caller: "10.0.0.7:41234" });
    };
    for (let t = 11_000; t < 12_000; t += 100) expect((await call(t, t + 1)).status).toBe(S.EXECUTE_STATUS_OK);
    // Sent at 12,000, read at 13,000 (this backend was frozen): the 300 ms its caller gave it were over.
    const err = await call(12_000, 13_000).catch((e: unknown) => e);
    expect([(err as GrpcStatusError).code, (err as GrpcStatusError).details]).toEqual([
      grpc.status.DEADLINE_EXCEEDED,
      "the caller's deadline passed 699 ms before the backend could start the request; not run",
    ]);
    expect(late.count).toBe(1);
    expect((await call(13_100, 13_101)).status).toBe(S.EXECUTE_STATUS_OK);
  });
});

describe("Worker: late binding (Park, holds, Release)", { timeout: 5_000 }, () => {
  it("holds a free slot at once; Execute with the hold id runs in it; an unknown or used hold is refused busy", async () => {
    const { worker, holdsEnded } = await warmWorker({ holdMs: 500 });
    const p = park(worker, { parkId: "p1" });
    const held = await p.reply;
    expect(held.status).toBe(P.PARK_STATUS_HELD);
    expect(held.holdId).toBeTruthy();
    expect(held.holdMs).toBe(500);
    // The held slot is taken: a plain Execute is refused busy.
    expect(held.report?.state).toBe(B.BACKEND_STATE_BUSY);
    expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);
    expect((await execute(worker, { holdId: "no-such-hold" })).status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);

    const ran = await execute(worker, { holdId: held.holdId ?? "" });
    expect(ran.status).toBe(S.EXECUTE_STATUS_OK);
    expect(holdsEnded).toEqual(["executed"]);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    // A hold is used once.
    expect((await execute(worker, { holdId: held.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);
    expect(holdsEnded).toEqual(["executed"]);
    expect(p.answers).toHaveLength(1);
  });

  it("a park on a busy backend waits; freed slots go to the oldest request first (by age)", async () => {
    const { worker, holdsEnded } = await warmWorker({ locMs: 20 });
    const running = execute(worker);
    const young = park(worker, { parkId: "young", ageMs: 0 });
    const old = park(worker, { parkId: "old", ageMs: 50 });
    await settle();
    expect(young.answers).toHaveLength(0);
    expect(old.answers).toHaveLength(0);

    expect((await running).status).toBe(S.EXECUTE_STATUS_OK);
    const oldReply = await old.reply;
    expect(oldReply.status).toBe(P.PARK_STATUS_HELD);
    await settle();
    expect(young.answers).toHaveLength(0); // still waiting: the one slot is held for the older request

    expect((await execute(worker, { holdId: oldReply.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_OK);
    const youngReply = await young.reply;
    expect(youngReply.status).toBe(P.PARK_STATUS_HELD);
    expect((await execute(worker, { holdId: youngReply.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_OK);
    expect(holdsEnded).toEqual(["executed", "executed"]);
    expect(young.answers).toHaveLength(1);
    expect(old.answers).toHaveLength(1);
  });

  it("with a model profiled for its type, a freed slot goes to the parked request that must start first", async () => {
    const t = setup({ instanceType: "gpu" });
    t.worker.onAssignment(
      control.BackendAssignment.create({
        backendId: "b1",
        service: SERVICE,
        version: 1,
        model: {
          kind: control.ModelKind.MODEL_KIND_EMULATED,
          profile: { shape: 0, locMs: 20, scaleMs: 0 },
          coldStartMs: 1,
          instanceProfiles: [
            {
              instanceType: "gpu",
              points: [
                { batch: 10, meanMs: 2, p99Ms: 3 },
                { batch: 1000, meanMs: 40, p99Ms: 50 },
              ],
            },
          ],
        },
      }),
    );
    expect(t.worker.warmUp({ service: SERVICE }).accepted).toBe(true);
    await vi.waitFor(() => expect(t.worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 1000, interval: 1 });
    const running = execute(t.worker);
    // The small query is older by 5 ms, but the large one needs 38 ms more: it must start first.
    const small = park(t.worker, { parkId: "small", ageMs: 5, batch: 10 });
    const large = park(t.worker, { parkId: "large", ageMs: 0, batch: 1000 });
    await settle();
    expect((await running).status).toBe(S.EXECUTE_STATUS_OK);
    expect((await large.reply).status).toBe(P.PARK_STATUS_HELD);
    await settle();
    expect(small.answers).toHaveLength(0);
    expect((await execute(t.worker, { holdId: (await large.reply).holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_OK);
    expect((await small.reply).status).toBe(P.PARK_STATUS_HELD);
  });

  it("a hold not used within holdMs is given back and the slot serves the next parked request", async () => {
    const { worker, holdsEnded } = await warmWorker({ holdMs: 60 });
    const heldAt = Date.now();
    const first = await park(worker, { parkId: "p1" }).reply;
    expect(first.status).toBe(P.PARK_STATUS_HELD);
    const second = park(worker, { parkId: "p2" });
    await sleep(10);
    expect(second.answers).toHaveLength(0);
    expect(holdsEnded).toEqual([]);

    const secondReply = await second.reply;
    expect(Date.now() - heldAt).toBeGreaterThanOrEqual(58); // holdMs (a timer may fire a millisecond early by Date.now)
    expect(holdsEnded).toEqual(["expired"]);
    expect(secondReply.status).toBe(P.PARK_STATUS_HELD);
    expect(secondReply.holdId).not.toBe(first.holdId);
    // The expired hold's slot moved on: its Execute is refused busy, the new hold's runs.
    expect((await execute(worker, { holdId: first.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);
    expect((await execute(worker, { holdId: secondReply.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_OK);
    expect(holdsEnded).toEqual(["expired", "executed"]);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
  });

  it("Release by hold id gives the slot back (to the next parked request); a second Release finds nothing", async () => {
    const { worker, holdsEnded } = await warmWorker();
    const first = await park(worker, { parkId: "p1" }).reply;
    const second = park(worker, { parkId: "p2" });
    await settle();
    expect(second.answers).toHaveLength(0);

    const released = worker.releaseHold({ holdId: first.holdId ?? "" });
    expect(released.released).toBe(true);
    expect(holdsEnded).toEqual(["released"]);
    const secondReply = await second.reply;
    expect(secondReply.status).toBe(P.PARK_STATUS_HELD);
    expect(worker.releaseHold({ holdId: first.holdId ?? "" }).released).toBe(false);
    expect(worker.releaseHold({ holdId: secondReply.holdId ?? "" }).released).toBe(true);
    expect(holdsEnded).toEqual(["released", "released"]);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_OK);
  });

  it("an Execute in a held slot refused before it runs (bad input, read too late) gives the slot back at once", async () => {
    const { worker, holdsEnded } = await warmWorker({ locMs: 5, holdMs: 60_000 });
    const cases: [ExecuteInput, string][] = [
      [{ inputs: { x: { dims: [1], data: [Number.NaN] } } }, "INVALID_ARGUMENT"],
      [{ deadlineUnixMs: Date.now() - 1 }, "DEADLINE_EXCEEDED"],
    ];
    for (const [extra, code] of cases) {
      const held = await park(worker, { parkId: `p-${code}` }).reply;
      expect(held.status).toBe(P.PARK_STATUS_HELD);
      const refused = await execute(worker, { holdId: held.holdId ?? "", ...extra }).then(
        () => "OK",
        (err: unknown) => (err instanceof GrpcStatusError ? grpc.status[err.code] : "thrown"),
      );
      expect(refused).toBe(code);
      // Free now, not in a minute when the hold would have expired: a request without a hold is taken.
      expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
      expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_OK);
    }
    expect(holdsEnded).toEqual(["released", "released"]);
  });

  it("Release by park id withdraws a waiting park, and gives back a slot already held for it", async () => {
    const { worker, holdsEnded } = await warmWorker({ locMs: 20 });
    const running = execute(worker);
    const waiting = park(worker, { parkId: "p-wait" });
    await settle();
    const withdrawn = worker.releaseHold({ parkId: "p-wait" });
    expect(withdrawn.released).toBe(false); // no slot was held for it
    expect((await waiting.reply).status).toBe(P.PARK_STATUS_WITHDRAWN);
    await running;
    await settle();
    // The withdrawn park got no slot when the request finished.
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    expect(holdsEnded).toEqual([]);

    const held = await park(worker, { parkId: "p-held" }).reply;
    expect(held.status).toBe(P.PARK_STATUS_HELD);
    expect(worker.releaseHold({ parkId: "p-held" }).released).toBe(true);
    expect(holdsEnded).toEqual(["released"]);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    expect((await execute(worker, { holdId: held.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);
    expect(worker.releaseHold({ parkId: "p-held" }).released).toBe(false);
    expect(waiting.answers).toHaveLength(1);
  });

  it("an aborted park call (the frontend cancelled it) ends WITHDRAWN and is skipped when the slot frees", async () => {
    const { worker, holdsEnded } = await warmWorker({ locMs: 20 });
    const running = execute(worker);
    const cancel = new AbortController();
    const cancelled = park(worker, { parkId: "p-cancel", ageMs: 100 }, cancel.signal);
    const other = park(worker, { parkId: "p-other" });
    cancel.abort();
    expect((await cancelled.reply).status).toBe(P.PARK_STATUS_WITHDRAWN);
    await running;
    // The older park is dead: the slot goes to the younger one.
    expect((await other.reply).status).toBe(P.PARK_STATUS_HELD);
    const gone = new AbortController();
    gone.abort();
    expect((await park(worker, { parkId: "p-pre" }, gone.signal).reply).status).toBe(P.PARK_STATUS_WITHDRAWN);
    expect(holdsEnded).toEqual([]);
    expect(cancelled.answers).toHaveLength(1);
  });

  it("a park that gets no slot within waitMs ends TIMED_OUT and holds nothing later", async () => {
    const { worker, holdsEnded } = await warmWorker({ locMs: 100 });
    const running = execute(worker);
    const started = Date.now();
    const p = park(worker, { parkId: "p1", waitMs: 10 });
    expect((await p.reply).status).toBe(P.PARK_STATUS_TIMED_OUT);
    expect(Date.now() - started).toBeLessThan(80); // at waitMs, not when the slot frees
    expect((await running).status).toBe(S.EXECUTE_STATUS_OK);
    await settle();
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    expect(holdsEnded).toEqual([]);
    expect(p.answers).toHaveLength(1);
  });

  it("parks during the model load get held when it finishes; a park on a cold backend is refused cold", async () => {
    const { worker, holdsEnded } = setup();
    worker.onAssignment(assignment(SERVICE, 1, 2, 30));
    expect((await park(worker, { parkId: "cold" }).reply).status).toBe(P.PARK_STATUS_REFUSED_COLD);
    expect((await park(worker, { parkId: "x", service: "other" }).reply).status).toBe(P.PARK_STATUS_REFUSED_NOT_ASSIGNED);
    worker.warmUp({ service: SERVICE });
    const loading = park(worker, { parkId: "loading" });
    await settle();
    expect(loading.answers).toHaveLength(0);
    const held = await loading.reply;
    expect(held.status).toBe(P.PARK_STATUS_HELD);
    expect((await execute(worker, { holdId: held.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_OK);
    expect(holdsEnded).toEqual(["executed"]);
  });

  it("a model load that fails refuses the requests parked for it cold, and a later warm-up loads again", async () => {
    const { worker } = setup();
    worker.onAssignment(assignment(SERVICE, 1, 2, 1));
    // The emulated model never fails by itself: its load fails here once, after a while (as a real load may).
    const load = vi.spyOn(EmulatedModel.prototype, "load").mockImplementationOnce(async () => {
      await sleep(20);
      throw new Error("model store unreachable");
    });
    try {
      worker.warmUp({ service: SERVICE });
      const p = park(worker, { parkId: "p1" });
      await settle();
      expect(p.answers).toHaveLength(0);
      expect((await p.reply).status).toBe(P.PARK_STATUS_REFUSED_COLD);
      expect(worker.report().state).toBe(B.BACKEND_STATE_COLD);
      expect(p.answers).toHaveLength(1);
    } finally {
      load.mockRestore();
    }
    expect(worker.warmUp({ service: SERVICE }).accepted).toBe(true);
    await vi.waitFor(() => expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 1000, interval: 1 });
  });

  it("a model that cannot even be created leaves the backend cold", async () => {
    const { worker } = setup();
    // A negative service time is refused by the emulated model's constructor, inside the load.
    worker.onAssignment(assignment(SERVICE, 1, -1, 0));
    expect(worker.warmUp({ service: SERVICE }).accepted).toBe(true);
    expect(worker.report().state).toBe(B.BACKEND_STATE_COLD);
    expect((await park(worker, { parkId: "p1" }).reply).status).toBe(P.PARK_STATUS_REFUSED_COLD);
  });
});

describe("Worker: reassignment and decommissioning", { timeout: 5_000 }, () => {
  it("a reassignment answers the requests parked for the old service REFUSED_DRAINING; the one in flight finishes", async () => {
    const { worker, holdsEnded } = await warmWorker({ locMs: 30 });
    const running = execute(worker);
    const p = park(worker, { parkId: "p1" });
    await settle();
    worker.onAssignment(assignment("next", 2, 2, 1));
    expect((await p.reply).status).toBe(P.PARK_STATUS_REFUSED_DRAINING);
    expect(worker.report().state).toBe(B.BACKEND_STATE_DRAINING);
    expect((await park(worker, { parkId: "p2" }).reply).status).toBe(P.PARK_STATUS_REFUSED_NOT_ASSIGNED);
    expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_REFUSED_NOT_ASSIGNED);
    const finished = await running;
    expect(finished.status).toBe(S.EXECUTE_STATUS_OK);
    expect(finished.report?.state).toBe(B.BACKEND_STATE_COLD);
    expect(finished.report?.service).toBe("next");
    expect(holdsEnded).toEqual([]);
    expect(p.answers).toHaveLength(1);

    // The new service warms up on the same backend.
    worker.warmUp({ service: "next" });
    await vi.waitFor(() => expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 1000, interval: 1 });
    expect((await execute(worker, { service: "next" })).status).toBe(S.EXECUTE_STATUS_OK);
  });

  // A load for the old service that completes after a reassignment and the new service's warm-up must not turn
  // the backend warm with the old model, nor (failing) cancel the new service's load.
  it("after a reassignment during a model load, the backend turns warm only with the new service's model", async () => {
    const { worker } = setup();
    worker.onAssignment(assignment("old", 1, 1, 20));
    worker.warmUp({ service: "old" });
    // Reassigned while the old model loads (20 ms), and warmed up for the new service at once (150 ms).
    worker.onAssignment(assignment(SERVICE, 2, 7, 150));
    worker.warmUp({ service: SERVICE });
    await vi.waitFor(() => expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 1000, interval: 1 });
    // The old load finishes first (20 ms) and is discarded: the new service runs its own model (7 ms).
    expect((await execute(worker)).computeMs).toBe(7);
  });

  it("a load of the old service that fails after a reassignment does not cancel the new service's load", async () => {
    const { worker } = setup();
    worker.onAssignment(assignment("old", 1, 1, 1));
    const load = vi.spyOn(EmulatedModel.prototype, "load").mockImplementationOnce(async () => {
      await sleep(20);
      throw new Error("model store unreachable");
    });
    try {
      worker.warmUp({ service: "old" });
      worker.onAssignment(assignment(SERVICE, 2, 7, 60));
      worker.warmUp({ service: SERVICE });
      await sleep(30); // the old load has failed by now
      expect(worker.report().state).toBe(B.BACKEND_STATE_PROVISIONING);
    } finally {
      load.mockRestore();
    }
    await vi.waitFor(() => expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 1000, interval: 1 });
    expect((await execute(worker)).computeMs).toBe(7);
  });

  it("a reassignment while a slot is held: the hold's Execute is refused and gives the slot back, which ends the drain", async () => {
    const { worker, holdsEnded } = await warmWorker({ holdMs: 60_000 });
    const held = await park(worker, { parkId: "p1" }).reply;
    worker.onAssignment(assignment("next", 2, 2, 1));
    expect(worker.report().state).toBe(B.BACKEND_STATE_DRAINING);
    expect((await execute(worker, { holdId: held.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_REFUSED_NOT_ASSIGNED);
    expect(holdsEnded).toEqual(["released"]);
    expect(worker.report().state).toBe(B.BACKEND_STATE_COLD);
  });

  it("a reassignment while a slot is held whose Execute never comes: the hold's expiry ends the drain", async () => {
    const { worker, holdsEnded } = await warmWorker({ holdMs: 20 });
    await park(worker, { parkId: "p1" }).reply;
    worker.onAssignment(assignment("next", 2, 2, 1));
    expect(worker.report().state).toBe(B.BACKEND_STATE_DRAINING);
    await vi.waitFor(() => expect(holdsEnded).toEqual(["expired"]), { timeout: 1000, interval: 1 });
    expect(worker.report().state).toBe(B.BACKEND_STATE_COLD);
  });

  it("decommissions itself after idling T (injected clock), then serves no one until assigned again", async () => {
    let clock = 1_000_000;
    const { worker, decommissioned } = await warmWorker({ idleTimeoutMs: 5_000, now: () => clock });
    expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_OK);
    clock += 4_999;
    worker.checkIdle();
    expect(decommissioned).toEqual([]);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    clock += 1;
    worker.checkIdle();
    expect(decommissioned).toEqual([SERVICE]);
    const report = worker.report();
    expect(report.state).toBe(B.BACKEND_STATE_COLD);
    expect(report.service).toBe("");
    expect(report.reportedAtUnixMs).toBe(clock);
    worker.checkIdle();
    expect(decommissioned).toEqual([SERVICE]); // once

    expect((await park(worker, { parkId: "p1" }).reply).status).toBe(P.PARK_STATUS_REFUSED_NOT_ASSIGNED);
    expect((await execute(worker)).status).toBe(S.EXECUTE_STATUS_REFUSED_NOT_ASSIGNED);
    expect(worker.warmUp({ service: SERVICE }).accepted).toBe(false);
    // The same assignment version again changes nothing; a new version brings it back.
    worker.onAssignment(assignment(SERVICE, 1, 2, 1));
    expect(worker.service).toBe("");
    worker.onAssignment(assignment(SERVICE, 2, 2, 1));
    expect(worker.service).toBe(SERVICE);
    expect((await park(worker, { parkId: "p2" }).reply).status).toBe(P.PARK_STATUS_REFUSED_COLD);
    // Backend-seconds stop counting while it is cold.
    const active = worker.activeSeconds();
    clock += 10_000;
    expect(worker.activeSeconds()).toBe(active);
  });

  it("does not decommission while a slot is held for a parked request", async () => {
    let clock = 1_000_000;
    const { worker, decommissioned, holdsEnded } = await warmWorker({ idleTimeoutMs: 5_000, now: () => clock });
    const held = await park(worker, { parkId: "p1" }).reply;
    clock += 10_000;
    worker.checkIdle();
    expect(decommissioned).toEqual([]);
    expect(worker.releaseHold({ holdId: held.holdId ?? "" }).released).toBe(true);
    expect(holdsEnded).toEqual(["released"]);
    worker.checkIdle();
    expect(decommissioned).toEqual([]); // the release restarted the idle clock
    clock += 5_000;
    worker.checkIdle();
    expect(decommissioned).toEqual([SERVICE]);
  });
});

describe("Worker: every Park call ends exactly once", { timeout: 5_000 }, () => {
  it("a mix of parks (held, executed, released, withdrawn, cancelled, timed out) all end once and leave no hold", async () => {
    const { worker, holdsEnded } = await warmWorker({ locMs: 2, holdMs: 200 });
    const calls: { id: string; p: ReturnType<typeof park> }[] = [];
    const executions: Promise<unknown>[] = [];
    const cancels: AbortController[] = [];
    for (let i = 0; i < 24; i++) {
      const abort = new AbortController();
      cancels.push(abort);
      // The last four (withdrawn or cancelled below) are the youngest, so no slot comes to them first.
      const p = park(worker, { parkId: `p${i}`, ageMs: i >= 20 ? 0 : 1 + ((i * 7) % 11), waitMs: i % 6 === 5 ? 3 : 2_000 }, abort.signal);
      calls.push({ id: `p${i}`, p });
      executions.push(
        p.reply.then(async (r) => {
          if (r.status !== P.PARK_STATUS_HELD) return;
          // Every third held slot is given back unused; the others run.
          if (i % 3 === 1) expect(worker.releaseHold({ holdId: r.holdId ?? "" }).released).toBe(true);
          else expect((await execute(worker, { holdId: r.holdId ?? "" })).status).toBe(S.EXECUTE_STATUS_OK);
        }),
      );
    }
    // Some are withdrawn by Release, some cancelled by the frontend, while they wait.
    await sleep(3);
    worker.releaseHold({ parkId: "p20" });
    worker.releaseHold({ parkId: "p21" });
    cancels[22]?.abort();
    cancels[23]?.abort();
    const replies = await Promise.all(calls.map((c) => c.p.reply));
    await Promise.all(executions);

    for (const c of calls) expect(c.p.answers, c.id).toHaveLength(1);
    const statuses = replies.map((r) => P[r.status ?? 0]);
    const held = statuses.filter((s) => s === "PARK_STATUS_HELD").length;
    expect(held).toBeGreaterThan(10);
    expect(statuses.filter((s) => s === "PARK_STATUS_TIMED_OUT").length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === "PARK_STATUS_WITHDRAWN").length).toBeGreaterThan(0);
    expect(held + statuses.filter((s) => s === "PARK_STATUS_TIMED_OUT" || s === "PARK_STATUS_WITHDRAWN").length).toBe(24);
    // Every hold made was used or given back, none expired, and the slot is free.
    expect(holdsEnded).toHaveLength(held);
    expect(holdsEnded).not.toContain("expired");
    await sleep(5);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
    for (const c of cancels) c.abort(); // late aborts change nothing
    expect(holdsEnded).toHaveLength(held);
  });
});

describe("toModelSpec: a typed model runs on this backend's type's profile", () => {
  const model: control.ModelSpec.$Properties = {
    kind: control.ModelKind.MODEL_KIND_EMULATED,
    coldStartMs: 50,
    instanceProfiles: [
      { instanceType: "gpu", points: [{ batch: 100, meanMs: 10, p99Ms: 12 }] },
      { instanceType: "cpu", points: [{ batch: 100, meanMs: 40, p99Ms: 60 }] },
    ],
  };
  it("picks the profile of the backend's own instance type", () => {
    const spec = toModelSpec(model, 1, "cpu");
    expect(spec.kind === "emulated" ? spec.batchProfile : undefined).toEqual({ points: [{ batch: 100, meanMs: 40, p99Ms: 60 }] });
    expect(spec.kind === "emulated" ? spec.coldStartMs : 0).toBe(50);
  });
  it("refuses a type the model has no profile for, naming the types it has", () => {
    expect(() => toModelSpec(model, 1, "tpu")).toThrow(/profiles for instance types gpu, cpu, not for this backend's type "tpu"/);
  });
  it("leaves an untyped model as it was", () => {
    const spec = toModelSpec({ kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.1, locMs: 1, scaleMs: 2 } }, 1, "cpu");
    expect(spec).toEqual({ kind: "emulated", profile: { shape: 0.1, loc: 1, scale: 2 }, coldStartMs: 0 });
  });
});
