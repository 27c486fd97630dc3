import { backend } from "@infergrid/proto";
import { createClient, type grpc } from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  RegistryWriter,
  type ServiceProcess,
  startAll,
  startNatsServer,
  startService,
} from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlWatch } from "./control-watch.js";
import { LoadDriver } from "./load-driver.js";
import { emulatedSpec } from "./process-cluster.js";

/**
 * Swayam's fast loop on real processes: 3 frontends behind a broker, 14 backends (12 for `svc`,
 * 2 for `long`), a real nats-server, the ordered lists written to the registry as the allocator
 * writes them. Time constants are shortened by configuration: t_setup 2 s, rate windows 2 s over
 * 10 s, scale-in cooldown 4 s, idle timeout T 3 s.
 */
const T_SETUP_MS = 2000;
const IDLE_MS = 8000;
const RT_MAX_MS = 300;

let nats: NatsServerHandle;
let writer: RegistryWriter;
let watch: ControlWatch;
let broker: ServiceProcess;
let frontends: ServiceProcess[] = [];
let backends: ServiceProcess[] = [];
let longBackends: ServiceProcess[] = [];
let client: grpc.Client;
let driver: LoadDriver;

const liveFrontendIds = () => frontends.filter((f) => f.isRunning()).map((f) => f.ready.id ?? "");

beforeAll(async () => {
  nats = await startNatsServer();
  const env = {
    INFERGRID_NATS_URL: nats.url,
    INFERGRID_LOG_LEVEL: "info",
    INFERGRID_HEARTBEAT_MS: "250",
    INFERGRID_SHUTDOWN_GRACE_MS: "1000",
  };
  const backendEnv = { ...env, INFERGRID_IDLE_TIMEOUT_MS: String(IDLE_MS), INFERGRID_T_SETUP_MS: String(T_SETUP_MS) };
  const frontendEnv = {
    ...env,
    INFERGRID_T_SETUP_MS: String(T_SETUP_MS),
    INFERGRID_RATE_WINDOW_MS: "2000",
    INFERGRID_RATE_HISTORY_MS: "10000",
    INFERGRID_SCALE_IN_COOLDOWN_MS: "4000",
    INFERGRID_AUTOSCALE_MS: "250",
    INFERGRID_LOAD_REPORT_MS: "500",
    // Swayam's pruning, every late request dropped: the default budget (tail-or-lost) keeps a lone late request,
    // which no minute's 1 % tail covers, and serves it late (libs/swayam pruning.test.ts checks that budget).
    INFERGRID_PRUNE_BUDGET: "always",
  };
  const up = await startAll([
    ...Array.from({ length: 12 }, (_, i) =>
      startService("backend-worker", { name: `b${i}`, env: { ...backendEnv, INFERGRID_ID: `svc-b${String(i).padStart(2, "0")}` } }),
    ),
    ...Array.from({ length: 2 }, (_, i) =>
      startService("backend-worker", {
        name: `long-b${i}`,
        env: { ...backendEnv, INFERGRID_ID: `long-b${i}`, INFERGRID_IDLE_TIMEOUT_MS: "600000" },
      }),
    ),
    ...Array.from({ length: 3 }, (_, i) =>
      startService("frontend", { name: `f${i}`, env: { ...frontendEnv, INFERGRID_ID: `frontend-${i}` } }),
    ),
    startService("broker", { env: { ...env, INFERGRID_FRONTEND_TTL_MS: "2000" } }),
  ]);
  backends = up.slice(0, 12);
  longBackends = up.slice(12, 14);
  frontends = up.slice(14, 17);
  broker = up[17] as ServiceProcess;
  writer = await RegistryWriter.open(nats.url);
  watch = await ControlWatch.open(nats.url);
  await writer.assign(
    emulatedSpec("svc", { locMs: 20, scaleMs: 20, shape: 0.3, coldStartMs: 300, rtMaxMs: RT_MAX_MS, initialBackends: 1 }),
    backends,
    1,
  );
  await writer.assign(emulatedSpec("long", { locMs: 1500, scaleMs: 1, shape: 0.01, coldStartMs: 100, rtMaxMs: 5000 }), longBackends, 2);
  client = createClient(broker.ready.grpcAddress ?? "");
  await eventually("svc to serve", async () => (await watch.warmBackends("svc")).length > 0 || undefined, 20_000);
  driver = new LoadDriver(client, () => ({ service: "svc", inputs: { x: { dims: [1], data: [1] } } }), 10).start();
}, 120_000);

afterAll(async () => {
  await driver?.stop();
  client?.close();
  await watch?.close();
  await writer?.close();
  await Promise.all([broker, ...frontends, ...backends, ...longBackends].filter(Boolean).map((p) => p.stop(3000)));
  await nats?.stop();
});

/** Late binding's counters summed over backends (parks by status, holds by how they ended), for diagnosis. */
async function backendCounters(processes: ServiceProcess[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const p of processes.filter((b) => b.isRunning())) {
    const text = await (await fetch(`http://${p.ready.metricsAddress}/metrics`)).text();
    for (const line of text.split("\n")) {
      const m = /^infergrid_backend_(parks|holds)_total\{[^}]*(?:status|how)="([^"]+)"[^}]*\} (\S+)/.exec(line);
      if (m) out[`${m[1]}:${m[2]}`] = (out[`${m[1]}:${m[2]}`] ?? 0) + Number(m[3]);
    }
  }
  return out;
}

describe("Swayam's fast loop on real processes", () => {
  it("1. load step up: the frontends agree on n, the warm set grows to it, and SLA compliance recovers", async () => {
    await new Promise((r) => setTimeout(r, 6000));
    const before = Math.max(...watch.frontendReports("svc", liveFrontendIds()).map((r) => r.backendsInUse));
    const stepAt = Date.now();
    driver.setRate(60);
    const agreed = await eventually(
      "every frontend to arrive at the same n (within 1), above the low-load n",
      () => {
        const ns = watch.frontendReports("svc", liveFrontendIds()).map((r) => r.backendsInUse);
        if (ns.length !== 3) return undefined;
        const [lo, hi] = [Math.min(...ns), Math.max(...ns)];
        return hi - lo <= 1 && lo > before ? ns : undefined;
      },
      20_000,
      200,
    );
    const agreedAt = Date.now();
    const n = Math.min(...agreed);
    const warm = await eventually(
      "the warm set to grow to n",
      () => (watch.warmBackends("svc").length >= n ? watch.warmBackends("svc") : undefined),
      15_000,
      200,
    );
    const warmAt = Date.now();
    await new Promise((r) => setTimeout(r, 12_000));
    const recovered = driver.recoveredAt(stepAt, RT_MAX_MS, 0.99, 300);
    const settled = watch.frontendReports("svc", liveFrontendIds()).map((r) => r.backendsInUse);
    console.log(
      `step 10 -> 60 req/s: n ${before} -> ${agreed.join("/")} after ${agreedAt - stepAt} ms, ${warm.length} warm after ${warmAt - stepAt} ms, ` +
        `settled at n ${settled.join("/")} with ${watch.warmBackends("svc").length} warm; ` +
        `SLA (99% of a 300-request window within ${RT_MAX_MS} ms) recovered ${recovered === undefined ? "never" : `${recovered - stepAt} ms`} after the step`,
    );
    const tail = driver.outcomes
      .filter((o) => o.sentAt >= Date.now() - 5000 && o.ok)
      .map((o) => o.doneAt - o.sentAt)
      .sort((a, b) => a - b);
    console.log(
      `last 5 s: p50 ${tail[Math.floor(tail.length * 0.5)]} ms, p99 ${tail[Math.floor(tail.length * 0.99)]} ms over ${tail.length} answers; ` +
        `failures so far by code ${JSON.stringify(driver.failureCodes())}`,
    );
    console.log(`backends' parks and holds so far: ${JSON.stringify(await backendCounters(backends))}`);
    expect(n).toBeGreaterThan(before);
    // After settling each frontend still sizes from its own 2-second rate windows and keeps its own
    // window maximum through the scale-in cooldown, so noise can part them by one more.
    expect(Math.max(...settled) - Math.min(...settled)).toBeLessThanOrEqual(2);
    expect(watch.warmBackends("svc").length).toBeGreaterThanOrEqual(Math.min(...settled));
    expect(recovered).toBeDefined();
    expect((recovered ?? Number.POSITIVE_INFINITY) - stepAt).toBeLessThan(15_000);
  }, 60_000);

  it("2. load step down: the unused tail goes cold by itself after T and says so (cold, no service)", async () => {
    const warm = watch.warmBackends("svc");
    const warmBefore = warm.length;
    const stepAt = Date.now();
    driver.setRate(5);
    // What the allocator returns to the pool on (there is none here): the backend's heartbeat, cold and unassigned.
    const returned = await eventually(
      "tail backends to decommission themselves",
      () => {
        const ids = warm.filter(
          (id) => watch.backends.get(id)?.state === backend.BackendState.BACKEND_STATE_COLD && watch.backends.get(id)?.service === "",
        );
        return ids.length >= warmBefore - 4 ? ids : undefined;
      },
      40_000,
      200,
    );
    const n = Math.max(...watch.frontendReports("svc", liveFrontendIds()).map((r) => r.backendsInUse));
    console.log(
      `step 60 -> 5 req/s: ${warmBefore} warm before; n now ${n}; ${returned.length} returned to the pool within ${Date.now() - stepAt} ms: ${returned.join(", ")}`,
    );
    // They are the tail: none of the first n entries idled out.
    const order = backends.map((b) => b.ready.id);
    for (const id of returned) expect(order.indexOf(id)).toBeGreaterThanOrEqual(n);
    expect(returned.length).toBeGreaterThanOrEqual(warmBefore - 4);
  }, 70_000);

  it("4. a backend killed mid-request: that request is retried elsewhere and succeeds", async () => {
    const longDriver = new LoadDriver(client, () => ({ service: "long" }), 0, 15_000);
    await eventually("long to be warm", () => (watch.warmBackends("long").length === 2 ? true : undefined), 15_000);
    const started = Date.now();
    const call = (async () => {
      const { InferenceServiceDefinition } = await import("@infergrid/proto");
      const { unaryCall } = await import("@infergrid/runtime");
      return unaryCall(client, InferenceServiceDefinition.Infer, { service: "long" }, { deadline: Date.now() + 15_000 });
    })();
    const busy = await eventually(
      "one long backend to be busy",
      () => [...watch.backends.values()].find((b) => b.service === "long" && b.state === 4)?.backendId,
      5000,
      20,
    );
    const victim = longBackends.find((b) => b.ready.id === busy);
    await victim?.kill();
    const res = await call;
    console.log(
      `killed ${busy} mid-request; answered by ${res.backendId} after ${Date.now() - started} ms in ${res.timing?.attempts} attempts`,
    );
    expect(res.backendId).not.toBe(busy);
    expect(res.timing?.attempts).toBeGreaterThanOrEqual(2);
    await longDriver.stop();
  }, 30_000);

  it("pruning (a per-service option): a request that can no longer finish within RT_max is dropped, not retried", async () => {
    const survivor = longBackends.filter((b) => b.isRunning());
    expect(survivor).toHaveLength(1);
    const spec = { ...emulatedSpec("long", { locMs: 1500, scaleMs: 1, shape: 0.01, coldStartMs: 100, rtMaxMs: 1000 }), pruneLate: true };
    await writer.assign(spec, survivor, 1);
    const survivorId = survivor[0]?.ready.id ?? "";
    const fresh = (state: number, after: number) => {
      const r = watch.backends.get(survivorId);
      return r?.state === state && Number(r.reportedAtUnixMs) > after ? true : undefined;
    };
    const assignedAt = Date.now();
    await eventually("the long backend to report idle", () => fresh(3, assignedAt), 5000, 20);
    const { InferenceServiceDefinition } = await import("@infergrid/proto");
    const { unaryCall, isServiceError } = await import("@infergrid/runtime");
    const send = () => unaryCall(client, InferenceServiceDefinition.Infer, { service: "long" }, { deadline: Date.now() + 15_000 });
    const occupying = send();
    await eventually(
      "the long backend to be busy",
      () => (watch.backends.get(survivor[0]?.ready.id ?? "")?.state === 4 ? true : undefined),
      5000,
      20,
    );
    const started = Date.now();
    let code: number | undefined;
    let details = "";
    try {
      await send();
    } catch (err) {
      if (isServiceError(err)) {
        code = err.code;
        details = err.details;
      }
    }
    const tookMs = Date.now() - started;
    console.log(`pruned after ${tookMs} ms: ${details}`);
    await occupying;
    expect(code).toBe(4); // DEADLINE_EXCEEDED
    expect(details).toContain("pruned");
    // Pruned at the first retry when the frontend has seen a compute time (about 1.5 s > RT_max),
    // else once RT_max has passed; without pruning it would wait for the busy backend, about 3 s.
    expect(tookMs).toBeLessThan(1400);
  }, 40_000);

  it("3. a frontend is killed: the others' n_F falls to the new count within about t_setup, and no request is lost", async () => {
    driver.setRate(15);
    await eventually(
      "every frontend to count 3 frontends",
      () => (watch.frontendReports("svc", liveFrontendIds()).every((r) => r.frontendsEstimate === 3) ? true : undefined),
      15_000,
      200,
    );
    const killedAt = Date.now();
    await frontends[2]?.kill();
    const survivors = liveFrontendIds();
    await eventually(
      "the surviving frontends to count 2",
      () => {
        const rs = watch.frontendReports("svc", survivors);
        return rs.length === 2 && rs.every((r) => r.frontendsEstimate === 2 && Number(r.windowEndUnixMs) > killedAt) ? true : undefined;
      },
      4 * T_SETUP_MS + 2000,
      100,
    );
    const tookMs = Date.now() - killedAt;
    await new Promise((r) => setTimeout(r, 2000));
    await driver.stop();
    const c = driver.counts();
    console.log(
      `killed frontend-2: n_F fell to 2 after ${tookMs} ms (t_setup ${T_SETUP_MS} ms); requests over the whole run: ${JSON.stringify(c)}, failures by code ${JSON.stringify(driver.failureCodes())}`,
    );
    expect(tookMs).toBeLessThan(2 * T_SETUP_MS + 1500);
    expect(c.lost).toBe(0);
    expect(c.answered + c.failed).toBe(c.sent);
    expect(c.failed / c.sent).toBeLessThan(0.01);
  }, 60_000);
});
