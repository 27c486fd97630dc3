/**
 * A real backend-worker process whose node's wall clock steps forward an hour while it is warm and idle: its idle
 * time T is measured on a clock the step does not move, so it stays warm (on the wall clock it decommissioned
 * itself at once, as if idle for an hour).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BackendServiceDefinition, backend, control } from "@infergrid/proto";
import { createClient, type grpc, unaryCall } from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  RegistryWriter,
  type ServiceProcess,
  startNatsServer,
  startService,
  WALL_CLOCK_STEPPED,
  wallClockStepArgs,
} from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const SERVICE = "clock-step";
const IDLE_TIMEOUT_MS = 20_000;

describe("backend-worker across a step of its node's wall clock (real nats-server, real process)", () => {
  const dir = mkdtempSync(join(tmpdir(), "ig-backend-clock-"));
  let nats: NatsServerHandle;
  let writer: RegistryWriter;
  let worker: ServiceProcess;
  let client: grpc.Client;

  const warmUp = () =>
    unaryCall(client, BackendServiceDefinition.WarmUp, { service: SERVICE, frontendId: "fe" }, { deadline: Date.now() + 5_000 });

  beforeAll(async () => {
    nats = await startNatsServer();
    worker = await startService("backend-worker", {
      nodeArgs: wallClockStepArgs(dir, 3_600_000),
      env: { INFERGRID_NATS_URL: nats.url, INFERGRID_HEARTBEAT_MS: "200", INFERGRID_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS) },
    });
    client = createClient(worker.ready.grpcAddress ?? "");
    writer = await RegistryWriter.open(nats.url);
    await writer.assign(
      {
        name: SERVICE,
        model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs: 5, scaleMs: 0 }, coldStartMs: 0 },
        sla: { latencyThresholdMs: 1000, percentile: 99, burstFactor: 2 },
      },
      [worker],
    );
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await writer?.close();
    await worker?.stop();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it("a warm idle backend stays warm when the wall clock steps forward an hour (it decommissioned itself at once)", async () => {
    await eventually("the backend warm", async () => {
      const r = await warmUp();
      return r.accepted && r.report?.state === backend.BackendState.BACKEND_STATE_WARM_IDLE ? r : undefined;
    });
    process.kill(worker.pid, "SIGUSR2");
    await worker.waitForLog((l) => l.msg === WALL_CLOCK_STEPPED, 5_000);
    // The idle check runs every second (T / 10, at most 1 s): give it three.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(worker.logs.filter((l) => l.msg === "idle for T: decommissioned, back to the pool")).toEqual([]);
    const r = await warmUp();
    expect(r.report?.state).toBe(backend.BackendState.BACKEND_STATE_WARM_IDLE);
  });
});
