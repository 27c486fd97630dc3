import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { createClient, type grpc, unaryCall } from "@infergrid/runtime";
import { eventually, type NatsServerHandle, type ServiceProcess, startNatsServer, startService } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The allocator driving the local-process pool actuator: real backend-worker processes started and
 * stopped by the allocator as the lists' demand changes (the Kubernetes actuator sits behind the
 * same interface and is tested against a stand-in API server in libs/pool-actuator).
 */
describe("global-allocator resizing a pool of real backend processes", () => {
  let nats: NatsServerHandle;
  let allocator: ServiceProcess;
  let client: grpc.Client;

  const call = <Req, Res>(method: grpc.MethodDefinition<Req, Res>, req: Req) =>
    unaryCall(client, method, req, { deadline: Date.now() + 5000 });
  const state = () => call(AllocatorAdminDefinition.GetClusterState, {});
  const spec = (name: string, maxBackends: number): control.ServiceSpec.$Properties => ({
    name,
    model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.36, locMs: 5, scaleMs: 5 }, coldStartMs: 100 },
    sla: { latencyThresholdMs: 500, percentile: 99, burstFactor: 2 },
    maxBackends,
    initialBackends: 1,
  });

  beforeAll(async () => {
    nats = await startNatsServer();
    allocator = await startService("global-allocator", {
      env: {
        INFERGRID_NATS_URL: nats.url,
        INFERGRID_HEARTBEAT_MS: "300",
        INFERGRID_CONTROL_PERIOD_MS: "300",
        INFERGRID_POOL_ACTUATOR: "local",
        INFERGRID_POOL_MIN_SIZE: "2",
        INFERGRID_POOL_MAX_SIZE: "5",
        INFERGRID_POOL_HEADROOM: "1",
        INFERGRID_POOL_SCALE_DOWN_DELAY_MS: "1500",
      },
    });
    client = createClient(allocator.ready.grpcAddress ?? "");
  }, 90_000);

  afterAll(async () => {
    client?.close();
    // A graceful stop: the allocator stops its backends before it exits.
    await allocator?.stop();
    await nats?.stop();
  }, 60_000);

  it("starts the minimum plus headroom with no service, grows to the lists' demand, caps at the cluster size", async () => {
    const idle = await eventually(
      "two idle backends heartbeating",
      async () => {
        const s = await state();
        return (s.backends ?? []).length === 2 ? s : undefined;
      },
      30_000,
    );
    expect(idle.freeBackends).toBe(2);

    await call(AllocatorAdminDefinition.RegisterService, { spec: spec("resnet", 3) });
    const grown = await eventually(
      "resnet's list filled by new backends",
      async () => {
        const s = await state();
        const list = (s.services ?? []).find((e) => e.spec?.name === "resnet")?.backends ?? [];
        return list.length === 3 && (s.backends ?? []).length === 4 ? s : undefined;
      },
      30_000,
    );
    expect(grown.freeBackends).toBe(1);

    // 3 + 4 + 1 headroom = 8 wanted, 5 allowed.
    await call(AllocatorAdminDefinition.RegisterService, { spec: spec("bert", 4) });
    await eventually("the pool at its maximum of 5", async () => ((await state()).backends ?? []).length === 5 || undefined, 30_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(((await state()).backends ?? []).length).toBe(5);
    const metrics = await fetch(`http://${allocator.ready.metricsAddress}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/infergrid_allocator_pool_target_backends\{[^}]*\} 5/);
    expect(metrics).toMatch(/infergrid_allocator_pool_resizes_total\{[^}]*direction="up"[^}]*\} [2-9]/);
  }, 90_000);

  it("shrinks back after the services leave, removing only backends free for the delay", async () => {
    await call(AllocatorAdminDefinition.DeregisterService, { name: "resnet" });
    await call(AllocatorAdminDefinition.DeregisterService, { name: "bert" });
    const shrunk = await eventually(
      "the pool back to min + headroom",
      async () => {
        const s = await state();
        return (s.backends ?? []).length === 2 && s.freeBackends === 2 ? s : undefined;
      },
      30_000,
    );
    expect(shrunk.services ?? []).toHaveLength(0);
    await allocator.waitForLog((l) => l.msg === "resizing the backend pool" && l.to === 2, 1000);
  }, 60_000);
});
