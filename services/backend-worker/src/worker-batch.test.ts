/**
 * The worker's batching and in-place resize over a real BackendMachine, BatchFormer and EmulatedModel with
 * Themis's profile; only the model's sleep is injected, so a batch's service time is seen exactly and a test
 * decides when it ends.
 */
import { backend, control } from "@infergrid/proto";
import { controlMetadata, createLogger, GrpcStatusError, grpc, loadConfig } from "@infergrid/runtime";
import { BackendMachine } from "@infergrid/swayam";
import { describe, expect, it, vi } from "vitest";
import { backendConfig, sizeProblem } from "./config.js";
import { toModelSpec, Worker } from "./worker.js";

const SERVICE = "svc";
const TOKEN = "t0ken";
const logger = createLogger("test", "worker-batch-test", "silent");
const S = backend.ExecuteStatus;
const B = backend.BackendState;
const THEMIS = { gamma: 20, eps: 10, delta: 2, eta: 3 };
const l = (b: number, c: number) => (20 * b + 10) / c + 2 * b + 3;

/** A sleep the test ends: each call is recorded and waits until released. */
function gatedSleep() {
  const calls: { ms: number; end(): void; fail(err: Error): void }[] = [];
  const sleep = (ms: number) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ ms, end: resolve, fail: reject });
    });
  return { calls, sleep };
}

interface Options {
  maxBatch?: number;
  batchTimeoutMs?: number;
  cores?: number;
  controlToken?: string;
  /** The service's SLO the assignment carries. */
  sloMs?: number;
  /** The worker's clock (Date.now unless given). */
  now?: () => number;
}

async function warmBatchWorker(o: Options = {}) {
  const gate = gatedSleep();
  const machine = new BackendMachine({ idleTimeoutMs: 60_000 });
  const batches: number[] = [];
  const worker = new Worker(
    "b1",
    machine,
    1,
    logger,
    { onHoldEnded: () => {}, onDecommissioned: () => {}, onBatch: (size) => batches.push(size) },
    {
      holdMs: 1_000,
      maxBatch: o.maxBatch ?? 4,
      batchTimeoutMs: o.batchTimeoutMs ?? Number.POSITIVE_INFINITY,
      cores: o.cores ?? 1,
      maxCores: 16,
      ...(o.controlToken === undefined ? {} : { controlToken: o.controlToken }),
      modelDeps: { sleep: gate.sleep },
    },
    o.now,
  );
  worker.onAssignment(
    control.BackendAssignment.create({
      backendId: "b1",
      service: SERVICE,
      version: 1,
      model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs: 1, scaleMs: 0 }, coldStartMs: 0, themis: THEMIS },
      latencySloMs: o.sloMs ?? 0,
    }),
  );
  worker.warmUp({ service: SERVICE });
  await vi.waitFor(() => expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE), { timeout: 1000, interval: 1 });
  return { worker, machine, gate, batches };
}

/** An Execute whose answers are counted: each must end exactly once. */
function execute(w: Worker, inputs: Record<string, { dims: number[]; data: number[] }> = {}) {
  const ends: string[] = [];
  const reply = w.execute({ service: SERVICE, requestId: "r", frontendId: "fe-1", inputs, attempt: 1 }).then(
    (r) => {
      ends.push(backend.ExecuteStatus[r.status ?? 0] ?? "?");
      return r;
    },
    (err: unknown) => {
      ends.push(err instanceof GrpcStatusError ? grpc.status[err.code] : "thrown");
      throw err;
    },
  );
  return { reply, ends };
}

const settle = () => new Promise((r) => setImmediate(r));

describe("Worker batching (Themis)", { timeout: 5_000 }, () => {
  it("shutting down runs a partial batch at once, and every request after it, under an infinite batch timeout", async () => {
    const { worker, gate, batches } = await warmBatchWorker({ maxBatch: 4 });
    const waiting = [execute(worker), execute(worker)];
    await settle();
    expect(gate.calls).toHaveLength(0); // b = 4 and no timeout: it would wait for good
    worker.drainForShutdown();
    await settle();
    expect(gate.calls.map((c) => c.ms)).toEqual([l(2, 1)]);
    gate.calls[0]?.end();
    for (const r of await Promise.all(waiting.map((w) => w.reply))) expect(r.status).toBe(S.EXECUTE_STATUS_OK);
    const late = execute(worker);
    await vi.waitFor(() => expect(gate.calls).toHaveLength(2), { timeout: 1000, interval: 1 });
    gate.calls[1]?.end();
    expect((await late.reply).status).toBe(S.EXECUTE_STATUS_OK);
    expect(batches).toEqual([2, 1]);
  });

  it("a caller leaving after its batch ended does not take the next forming batch's turn with it", async () => {
    let clock = Date.now();
    const { worker, gate } = await warmBatchWorker({ maxBatch: 2, batchTimeoutMs: 50, now: () => clock });
    let leaveFirst: (() => void) | undefined;
    const first = worker.execute({ service: SERVICE, requestId: "x1", frontendId: "fe-1", inputs: {} }, (leave) => {
      leaveFirst = leave;
    });
    const second = execute(worker);
    await settle();
    expect(gate.calls).toHaveLength(1); // a full batch of 2
    const third = execute(worker); // forms the next batch, due 50 ms on
    await settle();
    gate.calls[0]?.end();
    await first;
    await second.reply;
    // Past the forming batch's deadline, before its timer has fired, the first caller's cancel comes in (grpc-js
    // says "cancelled" once an answered call's stream closes): its request is gone from every batch.
    clock += 60;
    leaveFirst?.();
    await vi.waitFor(() => expect(gate.calls).toHaveLength(2), { timeout: 1000, interval: 1 });
    gate.calls[1]?.end();
    expect((await third.reply).status).toBe(S.EXECUTE_STATUS_OK);
    expect(third.ends).toEqual(["EXECUTE_STATUS_OK"]);
  });

  it("runs k accepted requests as one model call of l(k, c) and answers each once", async () => {
    const { worker, gate, batches } = await warmBatchWorker({ maxBatch: 4, cores: 2 });
    const calls = [execute(worker), execute(worker), execute(worker)];
    await settle();
    expect(gate.calls).toHaveLength(0); // b = 4 and no timeout: the batch waits for its fourth request
    const fifth = execute(worker);
    calls.push(fifth);
    await settle();
    expect(gate.calls.map((c) => c.ms)).toEqual([l(4, 2)]);
    expect(worker.report().state).toBe(B.BACKEND_STATE_BUSY);
    // The backend holds 2b requests: four more form the next batch while this one runs; a ninth is refused busy.
    const next = [execute(worker), execute(worker), execute(worker), execute(worker)];
    await settle();
    expect((await worker.execute({ service: SERVICE, frontendId: "fe-2" })).status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);
    gate.calls[0]?.end();
    const replies = await Promise.all(calls.map((c) => c.reply));
    for (const r of replies) {
      expect(r.status).toBe(S.EXECUTE_STATUS_OK);
      expect(r.computeMs).toBe(l(4, 2));
      expect(r.outputs?.y?.data).toEqual([l(4, 2)]);
    }
    await vi.waitFor(() => expect(gate.calls).toHaveLength(2), { timeout: 1000, interval: 1 });
    expect(gate.calls[1]?.ms).toBe(l(4, 2));
    gate.calls[1]?.end();
    for (const r of await Promise.all(next.map((c) => c.reply))) expect(r.computeMs).toBe(l(4, 2));
    await settle();
    expect([...calls, ...next].map((c) => c.ends)).toEqual(Array(8).fill(["EXECUTE_STATUS_OK"]));
    expect(batches).toEqual([4, 4]);
    expect(worker.report()).toMatchObject({
      state: B.BACKEND_STATE_WARM_IDLE,
      cores: 2,
      maxBatch: 4,
      batchTimeoutMs: Number.POSITIVE_INFINITY,
    });
  });

  it("a service sized by Themis admits the batches its backend finishes within half the SLO, again after each resize", async () => {
    const { worker, machine } = await warmBatchWorker({ maxBatch: 1, batchTimeoutMs: 0, cores: 4, sloMs: 1000, controlToken: TOKEN });
    // l(1, 4) = 12.5 ms: 40 batches of 1 within 500 ms.
    expect(machine.concurrency).toBe(40);
    await worker.resize({ cores: 1, maxBatch: 2 }, controlMetadata(TOKEN));
    // l(2, 1) = 57 ms: 8 batches of 2.
    expect(machine.concurrency).toBe(16);
  });

  it("at batch 1 with no SLO in its assignment, a service sized by Themis keeps the next request waiting (2 admitted)", async () => {
    const { worker, gate, machine } = await warmBatchWorker({ maxBatch: 1, batchTimeoutMs: 0, cores: 4 });
    expect(machine.concurrency).toBe(2);
    const first = execute(worker);
    const second = execute(worker);
    await settle();
    expect(gate.calls.map((c) => c.ms)).toEqual([l(1, 4)]);
    expect((await worker.execute({ service: SERVICE, frontendId: "fe-2" })).status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);
    gate.calls[0]?.end();
    // The waiting one starts as soon as the model frees, with no new call needed.
    await vi.waitFor(() => expect(gate.calls).toHaveLength(2), { timeout: 1000, interval: 1 });
    gate.calls[1]?.end();
    for (const r of [first, second]) expect((await r.reply).computeMs).toBe(l(1, 4));
  });

  it("closes a partial batch at the timeout after its first request", async () => {
    const { worker, gate } = await warmBatchWorker({ maxBatch: 4, batchTimeoutMs: 30 });
    const started = Date.now();
    const a = execute(worker);
    const b = execute(worker);
    await vi.waitFor(() => expect(gate.calls).toHaveLength(1), { timeout: 1000, interval: 2 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(29);
    expect(gate.calls[0]?.ms).toBe(l(2, 1));
    gate.calls[0]?.end();
    expect((await a.reply).computeMs).toBe(l(2, 1));
    expect((await b.reply).status).toBe(S.EXECUTE_STATUS_OK);
  });

  it("resizes cores and batch size mid-stream: the running batch is unaffected, the next one uses the new size", async () => {
    const { worker, gate, machine } = await warmBatchWorker({ maxBatch: 2, batchTimeoutMs: 0, controlToken: TOKEN });
    // No timeout: the first request runs at once, alone; the second forms the next batch while it runs.
    const a = execute(worker);
    const b = execute(worker);
    await settle();
    expect(gate.calls.map((c) => c.ms)).toEqual([l(1, 1)]);
    expect(machine.concurrency).toBe(4); // 2b: a batch running and the next forming
    const reply = await worker.resize({ cores: 4, maxBatch: 3 }, controlMetadata(TOKEN));
    expect(reply).toMatchObject({ cores: 4, maxBatch: 3 });
    expect(reply.resizeMs).toBeGreaterThanOrEqual(0);
    expect(reply.resizeMs).toBeLessThan(50);
    expect(machine.concurrency).toBe(6);
    // The request joins the forming batch, which now closes at 3 or when the model frees.
    const c = execute(worker);
    await settle();
    expect(gate.calls).toHaveLength(1);
    gate.calls[0]?.end();
    expect((await a.reply).computeMs).toBe(l(1, 1));
    await vi.waitFor(() => expect(gate.calls).toHaveLength(2), { timeout: 1000, interval: 1 });
    expect(gate.calls[1]?.ms).toBe(l(2, 4));
    gate.calls[1]?.end();
    for (const r of [b, c]) {
      expect((await r.reply).computeMs).toBe(l(2, 4));
      expect(r.ends).toEqual(["EXECUTE_STATUS_OK"]);
    }
    // Shrinking drops nothing: three in flight, b = 1 from the next batch on.
    const more = [execute(worker), execute(worker), execute(worker)];
    await settle();
    expect(gate.calls.slice(2).map((x) => x.ms)).toEqual([l(1, 4)]);
    await worker.resize({ maxBatch: 1 }, controlMetadata(TOKEN));
    gate.calls[2]?.end();
    await vi.waitFor(() => expect(gate.calls).toHaveLength(4), { timeout: 1000, interval: 1 });
    expect(gate.calls[3]?.ms).toBe(l(1, 4));
    gate.calls[3]?.end();
    await vi.waitFor(() => expect(gate.calls).toHaveLength(5), { timeout: 1000, interval: 1 });
    gate.calls[4]?.end();
    for (const r of more) expect((await r.reply).status).toBe(S.EXECUTE_STATUS_OK);
    expect(more.map((r) => r.ends)).toEqual(Array(3).fill(["EXECUTE_STATUS_OK"]));
    expect(worker.report()).toMatchObject({ state: B.BACKEND_STATE_WARM_IDLE, cores: 4, maxBatch: 1 });
  });

  it("a failed batch fails each request once with a status; a malformed request fails alone", async () => {
    const { worker, gate } = await warmBatchWorker({ maxBatch: 2 });
    const a = execute(worker);
    const b = execute(worker);
    await settle();
    gate.calls[0]?.fail(new Error("model crashed"));
    await expect(a.reply).rejects.toThrow(/model crashed/);
    await expect(b.reply).rejects.toThrow(/model crashed/);
    expect([a.ends, b.ends]).toEqual([["thrown"], ["thrown"]]);
    // Well formed for admission (no dims: any number of values) but not for the model, which wants one value.
    const bad = execute(worker, { x: { dims: [], data: [1, 2] } });
    const good = execute(worker);
    await settle();
    expect(gate.calls[1]?.ms).toBe(l(1, 1));
    gate.calls[1]?.end();
    await expect(bad.reply).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect((await good.reply).status).toBe(S.EXECUTE_STATUS_OK);
    expect(worker.report().state).toBe(B.BACKEND_STATE_WARM_IDLE);
  });
});

describe("Worker batching: what cannot end before its caller's deadline", { timeout: 5_000 }, () => {
  /** An Execute with `rows` rows whose caller gives it `budgetMs` from now (on the worker's clock). */
  function timed(w: Worker, clock: number, rows: number, budgetMs: number, extra: { holdId?: string } = {}) {
    const inputs = { x: { dims: [rows, 1], data: Array.from({ length: rows }, () => 1) } };
    return w.execute({
      service: SERVICE,
      requestId: "r",
      frontendId: "fe-1",
      inputs,
      attempt: 1,
      callDeadline: clock + budgetMs,
      ...extra,
    });
  }

  it("refuses unrun a request whose rows alone outlast its deadline, and busy one that would end late behind a batch", async () => {
    const clock = Date.now();
    let tooLong = 0;
    const { worker, gate, machine } = await warmBatchWorker({ maxBatch: 2, batchTimeoutMs: 0, now: () => clock });
    (worker as unknown as { events: { onTooLong(): void } }).events.onTooLong = () => {
      tooLong++;
    };
    // 100 rows on one core: l(100, 1) = 2213 ms against 1000 ms: never run, no slot taken.
    const err = await timed(worker, clock, 100, 1000).catch((e: unknown) => e);
    expect([(err as GrpcStatusError).code, (err as GrpcStatusError).details]).toEqual([
      grpc.status.DEADLINE_EXCEEDED,
      "its 100 rows take about 2213 ms on this backend (1 core), more than the 1000 ms its caller gave it; not run",
    ]);
    expect(tooLong).toBe(1);
    expect(machine.requestsInFlight).toBe(0);
    expect(gate.calls).toHaveLength(0);
    // 44 rows in time (l = 981 ms of 1000) runs; a 1-row request behind it (981 + l(1, 1) = 1016 ms) is refused
    // busy, one with time enough to wait is admitted.
    const long = timed(worker, clock, 44, 1000);
    await settle();
    expect(gate.calls.map((c) => c.ms)).toEqual([l(44, 1)]);
    expect((await timed(worker, clock, 1, 1000)).status).toBe(S.EXECUTE_STATUS_REFUSED_BUSY);
    const waits = timed(worker, clock, 1, 2000);
    await settle();
    expect(machine.requestsInFlight).toBe(2);
    gate.calls[0]?.end();
    expect((await long).status).toBe(S.EXECUTE_STATUS_OK);
    await vi.waitFor(() => expect(gate.calls).toHaveLength(2), { timeout: 1000, interval: 1 });
    gate.calls[1]?.end();
    expect((await waits).status).toBe(S.EXECUTE_STATUS_OK);
    // Idle again: the same 1-row request with 1000 ms is admitted.
    const again = timed(worker, clock, 1, 1000);
    await vi.waitFor(() => expect(gate.calls).toHaveLength(3), { timeout: 1000, interval: 1 });
    gate.calls[2]?.end();
    expect((await again).status).toBe(S.EXECUTE_STATUS_OK);
  });
});

describe("Worker batching: callers that leave, and drains", { timeout: 5_000 }, () => {
  it("a request whose caller went away leaves its forming batch and gives its slot back", async () => {
    const { worker, gate, machine } = await warmBatchWorker({ maxBatch: 3 });
    const gone = new AbortController();
    const left = worker.execute({ service: SERVICE, frontendId: "fe-1", inputs: {} }, (leave) =>
      gone.signal.addEventListener("abort", leave),
    );
    const stays = execute(worker);
    await settle();
    expect(machine.requestsInFlight).toBe(2);
    gone.abort();
    await expect(left).rejects.toMatchObject({ code: grpc.status.CANCELLED });
    expect(machine.requestsInFlight).toBe(1);
    const [x, y] = [execute(worker), execute(worker)];
    await settle();
    expect(gate.calls.map((c) => c.ms)).toEqual([l(3, 1)]);
    gate.calls[0]?.end();
    for (const r of [stays, x, y]) expect((await r.reply).status).toBe(S.EXECUTE_STATUS_OK);
  });

  it("a reassigned backend runs its partial batch instead of waiting for a b-th request that cannot come", async () => {
    const { worker, gate } = await warmBatchWorker({ maxBatch: 4 });
    const a = execute(worker);
    await settle();
    expect(gate.calls).toHaveLength(0);
    worker.onAssignment(undefined);
    await settle();
    expect(worker.report().state).toBe(B.BACKEND_STATE_DRAINING);
    expect(gate.calls.map((c) => c.ms)).toEqual([l(1, 1)]);
    gate.calls[0]?.end();
    expect((await a.reply).status).toBe(S.EXECUTE_STATUS_OK);
    expect(worker.report().state).toBe(B.BACKEND_STATE_COLD);
  });
});

describe("Worker.resize: authenticated and validated", () => {
  const code = async (p: Promise<unknown>) => {
    try {
      await p;
      return "OK";
    } catch (err) {
      return err instanceof GrpcStatusError ? `${grpc.status[err.code]}: ${err.details}` : String(err);
    }
  };

  it("is disabled without a configured token, and refuses a missing or wrong one", async () => {
    const off = (await warmBatchWorker()).worker;
    expect(await code(off.resize({ cores: 2 }, controlMetadata(TOKEN)))).toMatch(/^UNAUTHENTICATED: Resize is disabled/);
    const { worker } = await warmBatchWorker({ controlToken: TOKEN });
    expect(await code(worker.resize({ cores: 2 }, new grpc.Metadata()))).toMatch(/^UNAUTHENTICATED: Resize needs the control token/);
    expect(await code(worker.resize({ cores: 2 }, controlMetadata("wrong")))).toMatch(/^UNAUTHENTICATED/);
    expect(worker.report().cores).toBe(1);
  });

  it("names the field out of range and changes nothing", async () => {
    const { worker } = await warmBatchWorker({ controlToken: TOKEN });
    const md = controlMetadata(TOKEN);
    expect(await code(worker.resize({ cores: 17 }, md))).toMatch(/^INVALID_ARGUMENT: cores: 17 is outside 1\.\.16/);
    expect(await code(worker.resize({ cores: 2, maxBatch: 65 }, md))).toMatch(/^INVALID_ARGUMENT: max_batch: 65 is outside 1\.\.64/);
    expect(worker.report()).toMatchObject({ cores: 1, maxBatch: 4 });
    expect(await worker.resize({}, md)).toMatchObject({ cores: 1, maxBatch: 4, resizeMs: 0 });
  });
});

describe("the size in the spec and the config", () => {
  it("toModelSpec passes a Themis profile and the backend's cores to the emulated model", () => {
    const spec = toModelSpec(
      { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs: 1, scaleMs: 0 }, themis: { ...THEMIS, spread: 0.2 } },
      1,
      "cpu-1",
      3,
    );
    expect(spec).toMatchObject({ kind: "emulated", themis: { ...THEMIS, spread: 0.2 }, cores: 3 });
  });

  it("sizeProblem refuses cores above --max-cores and batching with --concurrency above 1", () => {
    expect(sizeProblem({ cores: 1, maxCores: 16, concurrency: 1, maxBatch: 1 })).toBeUndefined();
    expect(sizeProblem({ cores: 17, maxCores: 16, concurrency: 1, maxBatch: 1 })).toMatch(
      /--cores \(17\) must not exceed --max-cores \(16\)/,
    );
    expect(sizeProblem({ cores: 1, maxCores: 16, concurrency: 2, maxBatch: 4 })).toMatch(/--max-batch 4 needs --concurrency 1/);
  });
});

describe("backendConfig", () => {
  it("defaults to one core, batches of one, no waiting; takes Infinity as the batch timeout", () => {
    expect(loadConfig(backendConfig, { argv: [], env: {} })).toMatchObject({ cores: 1, maxBatch: 1, batchTimeoutMs: 0, maxCores: 16 });
    expect(loadConfig(backendConfig, { argv: ["--batch-timeout-ms", "Infinity"], env: {} }).batchTimeoutMs).toBe(Number.POSITIVE_INFINITY);
    expect(() => loadConfig(backendConfig, { argv: ["--max-batch", "65"], env: {} })).toThrow(/--max-batch/);
  });
});
