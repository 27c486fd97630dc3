import { JobStore } from "@infergrid/control-plane";
import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { connectNats, createLogger, unaryCall } from "@infergrid/runtime";
import { eventually } from "@infergrid/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { LoadDriver } from "./load-driver.js";
import { emulatedSpec, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * Harvesting on real processes: NATS with JetStream, the allocator, two backend-workers started with
 * `--harvest`, a frontend and a broker. Inference needs both backends (nothing is left to lend), so a submitted
 * job gets no loan: it runs in the backends' idle time between requests, in their best-effort child processes,
 * stopped whenever a request computes. It must complete with every item recorded exactly once, and every
 * inference request must be answered.
 */
const ITEMS = 150;
const logger = createLogger("test", "harvest-e2e", "silent");

let cluster: TestCluster | undefined;

afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

describe("best-effort jobs in serving backends' idle time (harvesting)", () => {
  it("a job no loan can serve completes in the gaps between requests, every item once, every request answered", async () => {
    const c = await startCluster({ backends: 2, frontends: 1, backendEnv: { INFERGRID_HARVEST: "true" } });
    cluster = c;
    await unaryCall(
      c.adminClient,
      AllocatorAdminDefinition.RegisterService,
      { spec: emulatedSpec("svc", { locMs: 25, scaleMs: 5, shape: 0.2, initialBackends: 2, rtMaxMs: 400 }) },
      { deadline: Date.now() + 5000 },
    );
    await waitUntilServing(c, "svc");
    // About a quarter of each backend's time.
    const driver = new LoadDriver(c.brokerClient, () => ({ service: "svc", inputs: { x: { dims: [1], data: [1] } } }), 20, 5_000).start();
    const submitted = await unaryCall(
      c.adminClient,
      AllocatorAdminDefinition.SubmitJob,
      {
        spec: {
          name: "harvest-job",
          model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.1, locMs: 20, scaleMs: 20 }, coldStartMs: 100 },
          items: ITEMS,
          maxBackends: 4,
          seed: 3,
        },
      },
      { deadline: Date.now() + 5000 },
    );
    expect(submitted.created).toBe(true);
    let mostLoans = 0;
    const harvesters = new Set<string>();
    const t0 = Date.now();
    const done = await eventually(
      "harvest-job to complete",
      async () => {
        const j = await unaryCall(c.adminClient, AllocatorAdminDefinition.GetJob, { name: "harvest-job" }, { deadline: Date.now() + 5000 });
        mostLoans = Math.max(mostLoans, j.backends?.length ?? 0);
        for (const id of j.harvesting ?? []) harvesters.add(id);
        if (j.state !== control.JobState.JOB_STATE_SUCCEEDED) throw new Error(`state ${j.state}, ${j.itemsDone}/${ITEMS} done`);
        return j;
      },
      60_000,
      200,
    );
    const tookMs = Date.now() - t0;
    await driver.stop();
    expect(mostLoans).toBe(0);
    expect(harvesters.size).toBeGreaterThan(0);
    expect(done.itemsDone).toBe(ITEMS);
    const nc = await connectNats({ servers: c.nats.url, name: "harvest-e2e" }, logger);
    try {
      const results = await (await JobStore.open(nc, logger)).results("harvest-job");
      expect(results.map((r) => r.item)).toEqual(Array.from({ length: ITEMS }, (_, i) => i));
      expect(new Set(results.map((r) => r.backendId)).size).toBeGreaterThan(0);
    } finally {
      await nc.close();
    }
    expect(driver.outcomes.length).toBe(driver.sentCount);
    const ok = driver.outcomes.filter((o) => o.ok).length;
    const codes = new Map<string, number>();
    for (const o of driver.outcomes) codes.set(o.code, (codes.get(o.code) ?? 0) + 1);
    expect(ok, JSON.stringify([...codes])).toBe(driver.outcomes.length);
    const latencies = driver.outcomes.map((o) => o.doneAt - o.sentAt).sort((a, b) => a - b);
    console.info(
      `harvest e2e: ${ITEMS} items done in ${tookMs} ms by ${harvesters.size} harvesting backends, no loan; ` +
        `${driver.outcomes.length} requests, ${ok} ok, p50 ${latencies[Math.floor(latencies.length / 2)]} ms, ` +
        `p99 ${latencies[Math.floor(latencies.length * 0.99)]} ms`,
    );
  }, 120_000);
});
