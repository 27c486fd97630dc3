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
 * NATS killed for longer than the broker keeps a silent frontend (10 ttls), under steady load through a real
 * broker, real frontends and real backends. Requests go on over gRPC: the broker reads a silence from every
 * frontend as NATS being away, and keeps the frontends live when it began. Before, it dropped every frontend
 * 10 ttls after the last heartbeat, and answered every request UNAVAILABLE until heartbeats came back (the
 * containers' "kill NATS" drill failed so once, when the members took 4.9 s to reconnect).
 */
const TTL_MS = 500;
const OUTAGE_MS = 8_000;
const RATE = 20;

describe("the broker through a NATS outage longer than it keeps a silent frontend (real processes)", () => {
  let nats: NatsServerHandle;
  let writer: RegistryWriter;
  let watch: ControlWatch;
  let processes: ServiceProcess[] = [];
  let broker: ServiceProcess;
  let client: grpc.Client;
  let driver: LoadDriver;

  beforeAll(async () => {
    nats = await startNatsServer();
    const env = { INFERGRID_NATS_URL: nats.url, INFERGRID_HEARTBEAT_MS: "250", INFERGRID_SHUTDOWN_GRACE_MS: "1000" };
    processes = await startAll([
      ...Array.from({ length: 2 }, (_, i) =>
        startService("backend-worker", { name: `b${i}`, env: { ...env, INFERGRID_ID: `b${i}`, INFERGRID_IDLE_TIMEOUT_MS: "600000" } }),
      ),
      ...Array.from({ length: 2 }, (_, i) => startService("frontend", { name: `f${i}`, env: { ...env, INFERGRID_ID: `f${i}` } })),
      startService("broker", { env: { ...env, INFERGRID_FRONTEND_TTL_MS: String(TTL_MS) } }),
    ]);
    broker = processes[4] as ServiceProcess;
    writer = await RegistryWriter.open(nats.url);
    watch = await ControlWatch.open(nats.url);
    await writer.assign(
      emulatedSpec("svc", { locMs: 5, scaleMs: 1, shape: 0.3, coldStartMs: 50, rtMaxMs: 500, initialBackends: 2 }),
      processes.slice(0, 2),
      2,
    );
    await eventually("svc warm", () => (watch.warmBackends("svc").length === 2 ? true : undefined), 20_000);
    // The test's own connections to NATS are closed before the outage: they have nothing to do in it.
    await watch.close();
    await writer.close();
    client = createClient(broker.ready.grpcAddress ?? "");
    driver = new LoadDriver(client, () => ({ service: "svc", inputs: { x: { dims: [1], data: [1] } } }), RATE, 5_000).start();
  }, 120_000);

  afterAll(async () => {
    await driver?.stop();
    client?.close();
    await Promise.all(processes.map((p) => p.stop(3000)));
    await nats?.stop();
  }, 30_000);

  it("answers every request sent during the outage and after it", async () => {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const killedAt = Date.now();
    await nats.kill();
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    await nats.restart();
    const restartedAt = Date.now();
    // Members reconnect within a few seconds (1.7-4.9 s in the containers' drill).
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    await driver.stop();
    const sent = driver.outcomes.filter((o) => o.sentAt >= killedAt);
    const failed = sent.filter((o) => !o.ok);
    const during = sent.filter((o) => o.sentAt < restartedAt);
    console.log(
      `NATS down ${OUTAGE_MS} ms (10 ttls: ${10 * TTL_MS} ms); ` +
        `${sent.length} requests since the kill (${during.length} during it), ${failed.length} failed ${JSON.stringify(driver.failureCodes())}`,
    );
    expect(during.length).toBeGreaterThan((RATE * OUTAGE_MS) / 1000 / 2);
    expect(failed).toEqual([]);
    const said = broker.logs.map((l) => l.msg);
    expect(said).toContain("no frontend heartbeat (NATS away?): the rotation is kept as it was");
    expect(said).toContain("frontends' heartbeats are back");
  }, 60_000);
});
