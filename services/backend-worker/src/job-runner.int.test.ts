/**
 * Real backend-worker processes loaned to a best-effort job (FaPES) over a real nats-server with JetStream:
 * two backends run a job's items, one is reclaimed mid-job (it lets go within the grace period and reports no
 * job), NATS crashes and comes back, one is killed mid-item and a third finishes its items; every item ends
 * with exactly one result.
 */
import { JobStore, ServiceRegistry, subjects } from "@infergrid/control-plane";
import { backend, control, decodeMessage } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection } from "@infergrid/runtime";
import { eventually, type NatsServerHandle, type ServiceProcess, startAll, startNatsServer, startService } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ITEMS = 200;
const ITEM_MS = 40;
const GRACE_MS = 1000;
const ACK_WAIT_MS = 2000;
const JOB: control.BestEffortJobSpec.$Properties = {
  name: "int-job",
  items: ITEMS,
  itemBatch: 2,
  minBackends: 1,
  maxBackends: 3,
  priority: 0,
  seed: 42,
  model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs: ITEM_MS, scaleMs: 0 }, coldStartMs: 50 },
};

describe("backend-worker: loaned to a best-effort job", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let store: JobStore;
  let registry: ServiceRegistry;
  let procs: ServiceProcess[] = [];
  const reports = new Map<string, backend.BackendReport[]>();
  const logger = createLogger("test", "job-int", "warn");

  const lastReport = (p: ServiceProcess) => reports.get(p.ready.id ?? "")?.at(-1);
  const assign = (p: ServiceProcess, job: string, version: number) =>
    registry.putAssignment({
      backendId: p.ready.id,
      service: "",
      version,
      updatedAtUnixMs: Date.now(),
      ...(job ? { job, jobSpec: JOB, graceMs: GRACE_MS } : {}),
    });
  const done = async () => (await store.progress(JOB.name ?? "")).done;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connectNats({ servers: nats.url, name: "job-int-test" }, logger);
    store = await JobStore.open(nc, logger, { ackWaitMs: ACK_WAIT_MS });
    registry = await ServiceRegistry.open(nc, logger);
    const env = { INFERGRID_NATS_URL: nats.url, INFERGRID_HEARTBEAT_MS: "200" };
    procs = await startAll(["a", "b", "c"].map((name) => startService("backend-worker", { name, env })));
    const sub = nc.subscribe(subjects.heartbeatsOf("backend"));
    void (async () => {
      for await (const m of sub) {
        const hb = decodeMessage(control.Heartbeat, m.data);
        if (!hb.ok || !hb.value.backend) continue;
        const r = hb.value.backend as backend.BackendReport;
        const list = reports.get(r.backendId) ?? [];
        list.push(r);
        reports.set(r.backendId, list);
      }
    })();
  }, 60_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill()));
    await nc?.close();
    await nats?.stop();
  }, 30_000);

  it("runs every item once across a reclaim and a crash", async () => {
    const [a, b, c] = procs as [ServiceProcess, ServiceProcess, ServiceProcess];
    const t0 = Date.now();
    await store.ensureItems(JOB);
    await assign(a, "int-job", 1);
    await assign(b, "int-job", 1);

    // Both work: heartbeats name the job and count items.
    await eventually("both backends recording items", () =>
      [a, b].every((p) => (lastReport(p)?.jobItemsDone ?? 0) > 3 && lastReport(p)?.job === "int-job") ? true : undefined,
    );
    expect(lastReport(a)?.state).toBe(backend.BackendState.BACKEND_STATE_BUSY);

    // Reclaim a: it lets go within the grace period and reports no job.
    const reclaimedAt = Date.now();
    await assign(a, "", 2);
    await eventually("a reporting no job", () => (lastReport(a)?.job === "" ? true : undefined), 5_000, 20);
    const letGoMs = Date.now() - reclaimedAt;
    expect(letGoMs).toBeLessThan(GRACE_MS + 400);
    await a.waitForLog((l) => l.msg === "left the job", 2_000);
    expect(lastReport(a)?.state).toBe(backend.BackendState.BACKEND_STATE_COLD);

    // b alone for a while; then c joins and b crashes mid-item.
    const before = await done();
    await eventually("b making progress alone", async () => ((await done()) >= before + 20 ? true : undefined));
    await assign(c, "int-job", 1);
    await eventually("c recording items", () => ((lastReport(c)?.jobItemsDone ?? 0) > 0 ? true : undefined));
    // Up to here, no item was computed after it had been recorded.
    const redone = () => [...reports.values()].reduce((n, list) => n + (list.at(-1)?.jobItemsRedone ?? 0), 0);
    for (const list of reports.values()) for (const r of list) expect(r.jobItemsRedone).toBe(0);
    // NATS crashes (SIGKILL) mid-item and comes back: nothing is acked without its result, and no worker falls
    // over. A crashed server may come back with its consumer's deliveries older than its KV (neither is synced
    // to disk at once), so an item in flight at the crash may be run twice, by b and c: still recorded once.
    await nats.kill();
    await new Promise((r) => setTimeout(r, 300));
    await nats.restart();
    const afterOutage = await eventually("progress after the NATS outage", async () => {
      const n = await done();
      return n > 0 ? n : undefined;
    });
    await eventually("items recorded after the outage", async () => ((await done()) >= afterOutage + 10 ? true : undefined));
    expect(procs.every((p) => p.isRunning())).toBe(true);
    const killedAt = Date.now();
    await b.kill();
    const bDone = (await store.results("int-job")).filter((r) => r.backendId === b.ready.id).length;

    await eventually("every item recorded", async () => ((await done()) === ITEMS ? true : undefined), 25_000, 200);
    const finishedAt = Date.now();
    const p = await store.progress("int-job");
    expect(p).toEqual({ done: ITEMS, pending: 0, inFlight: 0 });

    const results = await store.results("int-job");
    expect(results.map((r) => r.item)).toEqual(Array.from({ length: ITEMS }, (_, i) => i));
    const by = (proc: ServiceProcess) => results.filter((r) => r.backendId === proc.ready.id).length;
    expect(by(a) + by(b) + by(c)).toBe(ITEMS);
    expect(by(b)).toBeGreaterThanOrEqual(bDone);
    for (const r of results) {
      expect(r.digest).toMatch(/^[0-9a-f]{64}$/);
      expect(r.computeMs).toBe(ITEM_MS);
    }

    // At most the items in flight at the NATS crash were computed twice; the reclaim and the worker crash redid none.
    const redoneAfterOutage = redone();
    expect(redoneAfterOutage).toBeLessThanOrEqual(2);
    await eventually("c's heartbeat counting its items", () => (lastReport(c)?.jobItemsDone === by(c) ? true : undefined), 3_000);
    for (const proc of [a, c]) {
      const metrics = await (await fetch(`http://${proc.ready.metricsAddress}/metrics`)).text();
      expect(metrics).toMatch(new RegExp(`infergrid_backend_job_items_total\\{job="int-job",outcome="done"[^}]*\\} ${by(proc)}\\b`));
      expect(metrics).not.toMatch(/outcome="failed"[^}]*\} [1-9]/);
    }

    // b's item in flight when it died came back after the ack wait: c ran on past it.
    expect(finishedAt - killedAt).toBeGreaterThan(ACK_WAIT_MS - 500);
    // Done: the job is removed; c still holds its loan but idles; reclaimed, it lets go at once.
    await store.removeItems("int-job");
    await assign(c, "", 2);
    await eventually("c reporting no job", () => (lastReport(c)?.job === "" ? true : undefined), 3_000, 20);
    logger.warn(
      {
        letGoMs,
        redoneAfterOutage,
        twice: procs.flatMap((p) =>
          p.logs.filter((l) => String(l.msg).includes("computed twice")).map((l) => `${p.name}:${String(l.item)}`),
        ),
        itemsA: by(a),
        itemsB: by(b),
        itemsC: by(c),
        totalMs: finishedAt - t0,
        afterKillMs: finishedAt - killedAt,
      },
      "job run",
    );
  }, 45_000);
});
