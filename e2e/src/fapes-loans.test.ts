import { JobStore } from "@infergrid/control-plane";
import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { connectNats, createClient, createLogger, unaryCall } from "@infergrid/runtime";
import { eventually, type ServiceProcess, startService } from "@infergrid/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { LoadDriver } from "./load-driver.js";
import { emulatedSpec, FAST, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * FaPES on real processes: a NATS server with JetStream, the allocator, five backend-workers, a frontend and a
 * broker. A best-effort job runs on the backends the one inference service does not need; then an inference
 * surge, a loaned backend killed, or the allocator killed and restarted, happen while it runs. Every item must
 * end with exactly one result in the job results bucket, none computed twice, and every inference request must
 * end in one answer.
 */
const ITEMS = 600;
const GRACE_MS = 2_000;
const logger = createLogger("test", "fapes-e2e", "silent");

let cluster: TestCluster | undefined;
let extra: ServiceProcess[] = [];

afterEach(async () => {
  await Promise.all(extra.map((p) => p.kill()));
  extra = [];
  await cluster?.stop();
  cluster = undefined;
});

const allocatorEnv = {
  INFERGRID_JOB_GRACE_MS: String(GRACE_MS),
  // Rises of inference's use are learned over a short memory, so that the test sees loans after a surge.
  INFERGRID_PLANNED_COLD_START_MS: "1000",
  INFERGRID_LOAN_HEADROOM_MEMORY_MS: "20000",
  INFERGRID_LOAN_HOLD_MS: "5000",
};

function jobSpec(name: string): control.BestEffortJobSpec.$Properties {
  return {
    name,
    // 40-60 ms an item: the job takes seconds on three backends.
    model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.1, locMs: 10, scaleMs: 40 }, coldStartMs: 200 },
    items: ITEMS,
    maxBackends: 4,
    seed: 7,
  };
}

async function start(): Promise<TestCluster> {
  cluster = await startCluster({
    backends: 5,
    frontends: 1,
    allocatorEnv,
    backendEnv: { INFERGRID_IDLE_TIMEOUT_MS: "4000" },
  });
  await registerService(cluster, emulatedSpec("svc", { locMs: 30, scaleMs: 5, shape: 0.2, initialBackends: 1, rtMaxMs: 400 }));
  await waitUntilServing(cluster, "svc");
  return cluster;
}

function getJob(c: TestCluster, name: string): Promise<control.BestEffortJob.$Properties> {
  return unaryCall(c.adminClient, AllocatorAdminDefinition.GetJob, { name }, { deadline: Date.now() + 5000 });
}

/** Every item 0..ITEMS-1 recorded exactly once, read from the results bucket itself. */
async function expectEveryItemOnce(c: TestCluster, name: string): Promise<void> {
  const nc = await connectNats({ servers: c.nats.url, name: "fapes-e2e" }, logger);
  try {
    const store = await JobStore.open(nc, logger);
    const results = await store.results(name);
    expect(results.map((r) => r.item)).toEqual(Array.from({ length: ITEMS }, (_, i) => i));
    expect(results.every((r) => /^[0-9a-f]{64}$/.test(r.digest))).toBe(true);
  } finally {
    await nc.close();
  }
}

async function submitAndWaitForLoans(c: TestCluster, name: string, atLeast: number): Promise<void> {
  const reply = await unaryCall(
    c.adminClient,
    AllocatorAdminDefinition.SubmitJob,
    { spec: jobSpec(name) },
    { deadline: Date.now() + 5000 },
  );
  expect(reply.created).toBe(true);
  await eventually(
    `${name} to hold ${atLeast} backends`,
    async () => {
      const j = await getJob(c, name);
      if ((j.backends?.length ?? 0) < atLeast) throw new Error(`holds ${j.backends?.length ?? 0}`);
      return j;
    },
    20_000,
    200,
  );
}

async function waitForCompletion(c: TestCluster, name: string, timeoutMs = 60_000): Promise<control.BestEffortJob.$Properties> {
  return eventually(
    `${name} to complete`,
    async () => {
      const j = await getJob(c, name);
      if (j.state !== control.JobState.JOB_STATE_SUCCEEDED) throw new Error(`state ${j.state}, ${j.itemsDone}/${ITEMS} done`);
      return j;
    },
    timeoutMs,
    250,
  );
}

describe("best-effort jobs on loaned backends (FaPES)", () => {
  it("an inference surge reclaims loaned backends mid-job; the job still completes with every item once", async () => {
    const c = await start();
    await submitAndWaitForLoans(c, "surge-job", 2);
    const surgeAt = Date.now();
    const driver = new LoadDriver(c.brokerClient, () => ({ service: "svc", inputs: { x: { dims: [1], data: [1] } } }), 40, 5_000).start();
    const reclaimed = await eventually(
      "a reclaim",
      async () => {
        const j = await getJob(c, "surge-job");
        if ((j.preemptions ?? 0) < 1) throw new Error("no preemption yet");
        return j;
      },
      30_000,
      200,
    );
    const reclaimMs = Date.now() - surgeAt;
    expect(reclaimed.state).toBe(control.JobState.JOB_STATE_RUNNING);
    // The reclaimed backends serve the surge: the service's list grows past what inference held before.
    const grown = await eventually(
      "svc's list to grow",
      async () => {
        const entry = await unaryCall(c.adminClient, AllocatorAdminDefinition.GetService, { name: "svc" }, { deadline: Date.now() + 5000 });
        if ((entry.backends?.length ?? 0) < 3) throw new Error(`list of ${entry.backends?.length ?? 0}`);
        return entry.backends?.length ?? 0;
      },
      20_000,
      200,
    );
    const grownAt = Date.now();
    await new Promise((r) => setTimeout(r, 4_000));
    driver.setRate(5);
    const done = await waitForCompletion(c, "surge-job");
    await driver.stop();
    expect(done.itemsDone).toBe(ITEMS);
    expect(done.itemsRedone).toBe(0);
    await expectEveryItemOnce(c, "surge-job");
    // Every request ended in exactly one outcome. Until the reclaimed backends have joined svc's list the surge
    // outruns one backend (nothing had taught inference a headroom yet), so requests sent before then may time
    // out; once the list has grown (and a second for the backlog to drain), the surge must be served.
    expect(driver.outcomes.length).toBe(driver.sentCount);
    const ok = driver.outcomes.filter((o) => o.ok).length;
    const codes = new Map<string, number>();
    for (const o of driver.outcomes) codes.set(o.code, (codes.get(o.code) ?? 0) + 1);
    const served = driver.outcomes.filter((o) => o.sentAt >= grownAt + 1_000);
    const servedOk = served.filter((o) => o.ok).length;
    expect(served.length).toBeGreaterThan(50);
    // On failure: each second's outcomes from the surge on (ok/failed), and when the list grew.
    const bySecond = new Map<number, [number, number]>();
    for (const o of driver.outcomes) {
      const k = Math.floor((o.sentAt - surgeAt) / 1000);
      const v = bySecond.get(k) ?? [0, 0];
      v[o.ok ? 0 : 1]++;
      bySecond.set(k, v);
    }
    const timeline = `reclaim at ${reclaimMs} ms, list of ${grown} at ${grownAt - surgeAt} ms; per second ok/failed: ${[...bySecond].map(([k, [a, b]]) => `${k}:${a}/${b}`).join(" ")}`;
    expect(servedOk / served.length, `${JSON.stringify([...codes])}; ${timeline}`).toBeGreaterThan(0.95);
    console.info(
      `fapes e2e surge: first reclaim ${reclaimMs} ms after the surge began; svc's list grew to ${grown}; job done in ` +
        `${Number(done.finishedAtUnixMs) - Number(done.submittedAtUnixMs)} ms with ${done.preemptions} preemptions, ` +
        `${done.itemsRedone} redone; requests ${driver.outcomes.length}, ok ${ok}, codes ${JSON.stringify([...codes])}; ` +
        `after the list grew ${servedOk}/${served.length} ok`,
    );
  }, 150_000);

  it("drill: a loaned backend killed mid-job, then the allocator killed and restarted; the job completes with every item once", async () => {
    const c = await start();
    await submitAndWaitForLoans(c, "drill-job", 3);
    const held = (await getJob(c, "drill-job")).backends ?? [];
    const victim = c.backends.find((b) => b.ready.id === held[0]);
    expect(victim).toBeDefined();
    await victim?.kill();
    await eventually(
      "progress after the kill",
      async () => {
        const j = await getJob(c, "drill-job");
        if ((j.itemsDone ?? 0) < ITEMS / 3) throw new Error(`${j.itemsDone} done`);
        return j;
      },
      30_000,
      200,
    );
    await c.allocator.kill();
    await new Promise((r) => setTimeout(r, 1_000));
    const again = await startService("global-allocator", {
      env: {
        ...FAST,
        INFERGRID_NATS_URL: c.nats.url,
        INFERGRID_BACKEND_TTL_MS: "1500",
        INFERGRID_CONTROL_PERIOD_MS: "250",
        ...allocatorEnv,
      },
    });
    extra.push(again);
    const restartedAt = Date.now();
    const admin = createClient(again.ready.grpcAddress ?? "");
    try {
      const done = await eventually(
        "drill-job to complete after the restart",
        async () => {
          const j = await unaryCall(admin, AllocatorAdminDefinition.GetJob, { name: "drill-job" }, { deadline: Date.now() + 5000 });
          if (j.state !== control.JobState.JOB_STATE_SUCCEEDED) throw new Error(`state ${j.state}, ${j.itemsDone}/${ITEMS}`);
          return j;
        },
        60_000,
        250,
      );
      expect(done.itemsDone).toBe(ITEMS);
      expect(done.itemsRedone).toBe(0);
      console.info(
        `fapes e2e drill: a loaned backend killed, then the allocator; job done in ${Number(done.finishedAtUnixMs) - Number(done.submittedAtUnixMs)} ms ` +
          `(${Number(done.finishedAtUnixMs) - restartedAt} ms after the new allocator started) with ${done.preemptions} preemptions, ${done.itemsRedone} redone`,
      );
    } finally {
      admin.close();
    }
    await expectEveryItemOnce(c, "drill-job");
  }, 150_000);
});
