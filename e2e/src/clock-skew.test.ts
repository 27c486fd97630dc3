import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type grpc } from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  RegistryWriter,
  type ServiceProcess,
  startAll,
  startNatsServer,
  startService,
  WALL_CLOCK_STEPPED,
  wallClockStepArgs,
} from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlWatch } from "./control-watch.js";
import { LoadDriver } from "./load-driver.js";
import { emulatedSpec } from "./process-cluster.js";

/**
 * One node's wall clock an hour off the others' (a node whose NTP stopped, a VM resumed with a stale clock), under
 * steady load on real processes: the frontend's node alone, or the node of two of the four backends alone. A hop's
 * deadline goes to the next hop twice: as the gRPC timeout (relative, read from when the call arrives) and stamped
 * in the message on the sender's clock, which lets a receiver that was frozen tell a call its caller has given up
 * on (frozen-backend.test.ts). A receiver reads the stamp against the lag it has learned of that sender, so a node
 * whose clock is off serves as the others do.
 */
const RATE = 40;
const RT_MAX_MS = 300;
const HOUR = 3_600_000;

describe.each([
  ["the frontend's node", ["frontend"]],
  ["two backends' node", ["b0", "b1"]],
])("%s an hour ahead of the others' (real processes)", (_which, stepped) => {
  const dir = mkdtempSync(join(tmpdir(), "ig-clock-skew-"));
  let nats: NatsServerHandle;
  let writer: RegistryWriter;
  let watch: ControlWatch;
  let processes: ServiceProcess[] = [];
  let client: grpc.Client;
  let driver: LoadDriver;

  beforeAll(async () => {
    nats = await startNatsServer();
    const step = wallClockStepArgs(dir, HOUR);
    const env = { INFERGRID_NATS_URL: nats.url, INFERGRID_HEARTBEAT_MS: "250", INFERGRID_SHUTDOWN_GRACE_MS: "1000" };
    const args = (name: string) => (stepped.includes(name) ? { nodeArgs: step } : {});
    processes = await startAll([
      startService("frontend", { ...args("frontend"), env: { ...env, INFERGRID_ID: "frontend-0", INFERGRID_AUTOSCALE_MS: "250" } }),
      ...Array.from({ length: 4 }, (_, i) =>
        startService("backend-worker", {
          name: `b${i}`,
          ...args(`b${i}`),
          env: { ...env, INFERGRID_ID: `b${i}`, INFERGRID_IDLE_TIMEOUT_MS: "600000" },
        }),
      ),
      startService("broker", { env: { ...env, INFERGRID_FRONTEND_TTL_MS: "2000" } }),
    ]);
    writer = await RegistryWriter.open(nats.url);
    watch = await ControlWatch.open(nats.url);
    // Four backends, all warm and in the prefix, so that every one of them takes its share of the requests.
    await writer.assign(
      emulatedSpec("svc", { locMs: 20, scaleMs: 5, shape: 0.3, coldStartMs: 100, rtMaxMs: RT_MAX_MS, initialBackends: 4 }),
      processes.slice(1, 5),
      4,
    );
    client = createClient(processes[5]?.ready.grpcAddress ?? "");
    await eventually("svc to serve on four backends", () => (watch.warmBackends("svc").length >= 4 ? true : undefined), 20_000);
    driver = new LoadDriver(client, () => ({ service: "svc", inputs: { x: { dims: [1], data: [1] } } }), RATE).start();
  }, 120_000);

  afterAll(async () => {
    await driver?.stop();
    client?.close();
    await watch?.close();
    await writer?.close();
    await Promise.all(processes.map((p) => p.stop(3000)));
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it("serves every request within the SLO, on every backend, after the step as before it", async () => {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const targets = processes.filter((p) => stepped.includes(p.name));
    for (const p of targets) process.kill(p.pid, "SIGUSR2");
    await Promise.all(targets.map((p) => p.waitForLog((l) => l.msg === WALL_CLOCK_STEPPED, 5_000)));
    const steppedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    // Answered or failed by now: the driver's requests time out after 10 s (those sent in the last 5 s are left).
    const after = driver.outcomes.filter((o) => o.sentAt >= steppedAt && o.sentAt < steppedAt + 5_000);
    const ok = after.filter((o) => o.ok && o.doneAt - o.sentAt <= RT_MAX_MS);
    const served = new Map<string, number>();
    for (const o of ok) served.set(o.backendId, (served.get(o.backendId) ?? 0) + 1);
    console.log(
      `${stepped.join(", ")} an hour ahead: ${ok.length}/${after.length} requests within ${RT_MAX_MS} ms, ` +
        `failures ${JSON.stringify(driver.failureCodes())}, served by ${JSON.stringify(Object.fromEntries(served))}`,
    );
    expect(after.length).toBeGreaterThan(RATE * 4);
    expect(driver.failureCodes()).toEqual({});
    expect(ok.length).toBe(after.length);
    // The backends whose clocks are off serve too (before, each refused every call as read after its deadline).
    for (const id of ["b0", "b1", "b2", "b3"]) expect(served.get(id) ?? 0).toBeGreaterThan(0);
  }, 60_000);
});
