/**
 * Harvesting on a real Worker (in this process, wired as main.ts wires it), a real nats-server with JetStream
 * and real best-effort child processes: while the backend serves inference, its idle time runs a job's items;
 * every request computes with the best-effort process stopped (state T in /proc); an item stopped too long is
 * given back and done once anyway; when the backend stops serving it lets go of the job at once. Every item
 * ends with exactly one result, and every inference request is answered.
 */
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { JobStore } from "@infergrid/control-plane";
import { backend, control } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection } from "@infergrid/runtime";
import { BackendMachine } from "@infergrid/swayam";
import { type NatsServerHandle, startNatsServer } from "@infergrid/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ChildRuntime } from "./child-runtime.js";
import { Harvester } from "./harvester.js";
import { toModelSpec, Worker } from "./worker.js";

const SERVICE = "svc";
const ITEM_MS = 60;
const ACK_WAIT_MS = 3000;
const logger = createLogger("test", "harvest-int", "warn");
const INPUTS = { x: { dims: [1], data: [1] } };

function jobSpec(name: string, items: number, priority: number, itemMs: number): control.BestEffortJobSpec.$Properties {
  return {
    name,
    items,
    itemBatch: 1,
    minBackends: 1,
    maxBackends: 4,
    priority,
    seed: 7,
    model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs: itemMs, scaleMs: 0 }, coldStartMs: 20 },
  };
}

function stateOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
}

describe("harvesting a serving backend's idle time", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let store: JobStore;
  const cleanups: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connectNats({ servers: nats.url, name: "harvest-int-test" }, logger);
    store = await JobStore.open(nc, logger, { ackWaitMs: ACK_WAIT_MS });
  }, 30_000);

  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  }, 30_000);

  async function submit(name: string, items: number, priority = 0, itemMs = ITEM_MS): Promise<void> {
    const spec = jobSpec(name, items, priority, itemMs);
    await store.putJob(control.BestEffortJob.create({ spec, state: control.JobState.JOB_STATE_RUNNING, submittedAtUnixMs: Date.now() }), 0);
    await store.ensureItems(spec);
  }

  /** A warm Worker serving SERVICE (model of `computeMs`), with a Harvester wired to it as main.ts does. */
  async function servingBackend(
    id: string,
    computeMs: number,
    abandonAfterMs = 15_000,
    startsStopped = false,
    hungAfterMs?: (expectedMs: number) => number,
  ) {
    let serving = true;
    const runtimes: ChildRuntime[] = [];
    /** The best-effort process's state, sampled inside each request's compute. */
    const statesWhileComputing: string[] = [];
    const outcomes: string[] = [];
    let computing = false;
    const harvester: Harvester = new Harvester({
      backendId: id,
      store,
      logger,
      createRuntime: (model, random) => {
        const r = new ChildRuntime(toModelSpec(model, 1), random);
        runtimes.push(r);
        // As the harvester makes it while a request computes: the process starts stopped.
        if (startsStopped) r.pause();
        return r;
      },
      nominalItemMs: () => ITEM_MS,
      serving: () => serving,
      gate: { resumeAfterMs: 20, abandonAfterMs },
      pollMs: 200,
      claimWaitMs: 200,
      onItem: (_job, outcome) => outcomes.push(outcome),
      ...(hungAfterMs ? { hungAfterMs } : {}),
    });
    const worker = new Worker(
      id,
      new BackendMachine({ concurrency: 1, idleTimeoutMs: 60_000 }),
      1,
      logger,
      {
        onHoldEnded: () => {},
        onDecommissioned: () => {},
        onCompute: (phase) => {
          computing = phase === "start";
          if (phase === "start") {
            harvester.computeStarts();
            // Sampled while the request still computes, once the stop has landed: the kernel stops a process
            // when it next runs, and on a loaded machine a runnable one (R, using no CPU meanwhile) may wait
            // more than 10 ms for that. The state kept is the first T, or what it still is after 30 ms.
            const sample = (triesLeft: number) =>
              setTimeout(() => {
                const pid = runtimes.at(-1)?.pid;
                if (!computing || pid === undefined) return;
                const state = stateOf(pid);
                if (state === "T" || triesLeft === 0) statesWhileComputing.push(state);
                else sample(triesLeft - 1);
              }, 3);
            sample(10);
          } else harvester.computeEnds();
        },
      },
      { holdMs: 1000 },
    );
    worker.onAssignment(
      control.BackendAssignment.create({
        backendId: id,
        service: SERVICE,
        version: 1,
        model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs: computeMs, scaleMs: 0 }, coldStartMs: 1 },
      }),
    );
    worker.warmUp({ service: SERVICE });
    await vi.waitFor(() => expect(worker.report().state).toBe(backend.BackendState.BACKEND_STATE_WARM_IDLE), {
      timeout: 2000,
      interval: 20,
    });
    harvester.start();
    cleanups.push(async () => {
      await harvester.stop();
      for (const r of runtimes) r.discard();
    });
    return {
      worker,
      harvester,
      runtimes,
      statesWhileComputing,
      outcomes,
      stopServing: () => {
        serving = false;
      },
    };
  }

  async function resultsOf(name: string): Promise<number[]> {
    return (await store.results(name)).map((r) => r.item).sort((a, b) => a - b);
  }

  it("runs a job's items in the gaps between requests, stopped while each request computes, each item once", async () => {
    await submit("hv-a", 40);
    const b = await servingBackend("hv-1", 40);
    const answers: string[] = [];
    const load = (async () => {
      // About 10 requests a second for as long as the job runs: the backend is a third busy.
      for (let i = 0; i < 200 && (await store.progress("hv-a")).done < 40; i++) {
        const reply = await b.worker.execute({ service: SERVICE, requestId: `r${i}`, frontendId: "fe", inputs: INPUTS });
        answers.push(backend.ExecuteStatus[reply.status ?? 0] ?? "?");
        await sleep(70);
      }
    })();
    await vi.waitFor(async () => expect((await store.progress("hv-a")).done).toBe(40), { timeout: 30_000, interval: 20 });
    await load;
    expect(await resultsOf("hv-a")).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(answers.length).toBeGreaterThan(5);
    expect(new Set(answers)).toEqual(new Set(["EXECUTE_STATUS_OK"]));
    // Requests met a live best-effort process, and it was stopped while each of them computed.
    expect(b.harvester.report().harvestStops).toBeGreaterThan(0);
    expect(b.statesWhileComputing.length).toBeGreaterThan(0);
    expect(new Set(b.statesWhileComputing)).toEqual(new Set(["T"]));
    expect(b.outcomes.filter((o) => o === "redone")).toEqual([]);
    expect(b.harvester.report().harvestItemsDone).toBe(40);
  }, 60_000);

  it("gives back an item stopped too long, and lets go at once when the backend stops serving", async () => {
    await submit("hv-b", 400, 0, 400);
    // Requests of 500 ms against a 150-ms limit on a stopped item; items of 400 ms.
    const b = await servingBackend("hv-2", 500, 150);
    await vi.waitFor(() => expect(b.harvester.job).toBe("hv-b"), { timeout: 5000, interval: 20 });
    await vi.waitFor(async () => expect((await store.progress("hv-b")).done).toBeGreaterThan(0), { timeout: 10_000, interval: 20 });
    // An item seen in flight may still finish before the request's stop lands (its result already on the way
    // from the child on a loaded machine): then nothing was stopped too long, and the next request tries again.
    for (let attempt = 0; attempt < 5 && !b.outcomes.includes("abandoned"); attempt++) {
      await vi.waitFor(() => expect(b.harvester.itemInFlight).toBe(true), { timeout: 5000, interval: 5 });
      await b.worker.execute({ service: SERVICE, requestId: `long-${attempt}`, frontendId: "fe", inputs: INPUTS });
    }
    expect(b.outcomes).toContain("abandoned");
    b.stopServing();
    await vi.waitFor(() => expect(b.harvester.job).toBe(""), { timeout: 3000, interval: 20 });
    const done = (await store.progress("hv-b")).done;
    await sleep(500);
    // Nothing more is computed here, and what was recorded was recorded once.
    expect((await store.progress("hv-b")).done).toBe(done);
    const items = await resultsOf("hv-b");
    expect(new Set(items).size).toBe(items.length);
    expect(done).toBeLessThan(400);
  }, 60_000);

  it("passes over a job with as many items in flight as its maximum of backends", async () => {
    // hv-c comes first by priority, but 4 of its items are held elsewhere (its maximum is 4): hv-b, still
    // running from the test before, is next.
    await submit("hv-c", 6, 5);
    const claims = await Promise.all([0, 1, 2, 3].map(() => store.claim("hv-c", { maxWaitMs: 2000 })));
    cleanups.push(async () => {
      for (const c of claims) await c?.abandon();
    });
    expect(claims.every((c) => c !== undefined)).toBe(true);
    const b = await servingBackend("hv-3", 30);
    await vi.waitFor(() => expect(b.harvester.job).toBe("hv-b"), { timeout: 3000, interval: 20 });
  }, 30_000);

  it("stops at once while its best-effort process is stopped before it has loaded (a shutdown during a request's compute)", async () => {
    await submit("hv-d", 10, 9);
    const b = await servingBackend("hv-4", 30, 15_000, true);
    await vi.waitFor(() => expect(b.harvester.job).not.toBe(""), { timeout: 5000, interval: 20 });
    await vi.waitFor(() => expect(b.runtimes.at(-1)?.pid).toBeDefined(), { timeout: 5000, interval: 5 });
    const started = Date.now();
    const stopped = await Promise.race([b.harvester.stop().then(() => "stopped"), sleep(5_000).then(() => "still waiting")]);
    expect(stopped).toBe("stopped");
    expect(Date.now() - started).toBeLessThan(2_000);
  }, 30_000);

  it("gives back an item whose computation hangs, and kills the process it hung in", async () => {
    // Items of 20 s against a limit of 300 ms of running time: to the runner, each one hangs.
    await submit("hv-e", 3, 50, 20_000);
    const b = await servingBackend("hv-5", 30, 15_000, false, () => 300);
    await vi.waitFor(() => expect(b.harvester.itemInFlight).toBe(true), { timeout: 5000, interval: 5 });
    const pid = b.runtimes[0]?.pid;
    expect(pid).toBeDefined();
    await vi.waitFor(() => expect(b.outcomes).toContain("failed"), { timeout: 5000, interval: 10 });
    // Killed, not left computing beside the inference model.
    await vi.waitFor(() => expect(() => process.kill(pid as number, 0)).toThrow(/ESRCH/), { timeout: 2000, interval: 10 });
    expect(await resultsOf("hv-e")).toEqual([]);
    expect((await store.progress("hv-e")).done).toBe(0);
    // The backend still serves.
    const reply = await b.worker.execute({ service: SERVICE, requestId: "after-hang", frontendId: "fe", inputs: INPUTS });
    expect(backend.ExecuteStatus[reply.status ?? 0]).toBe("EXECUTE_STATUS_OK");
  }, 30_000);
});
