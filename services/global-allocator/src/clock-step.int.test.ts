import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceRegistry } from "@infergrid/control-plane";
import { AllocatorAdminDefinition } from "@infergrid/proto";
import { connectNats, createClient, createLogger, type grpc, type NatsConnection, unaryCall } from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  type ServiceProcess,
  startNatsServer,
  startService,
  WALL_CLOCK_STEPPED,
  wallClockStepArgs,
} from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatedSpec, FakeBackends, fastAllocatorEnv } from "./fake-backends.js";

const TTL_MS = 1500;
const HOUR_MS = 3_600_000;

describe("global-allocator across a step of its node's wall clock (real nats-server, real process)", () => {
  let dir: string;
  let nats: NatsServerHandle;
  let allocator: ServiceProcess;
  let client: grpc.Client;
  let nc: NatsConnection;
  let fakes: FakeBackends;

  const call = <Req, Res>(method: grpc.MethodDefinition<Req, Res>, req: Req) =>
    unaryCall(client, method, req, { deadline: Date.now() + 5000 });
  const listOf = async (name: string) =>
    ((await call(AllocatorAdminDefinition.GetService, { name })).backends ?? []).map((b) => b.backendId);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "ig-clock-step-"));
    nats = await startNatsServer();
    const logger = createLogger("test", "clock-step-test", "warn");
    nc = await connectNats({ servers: nats.url, name: "clock-step-test" }, logger);
    fakes = new FakeBackends(nc, await ServiceRegistry.open(nc, logger));
    allocator = await startService("global-allocator", {
      nodeArgs: wallClockStepArgs(dir, -HOUR_MS),
      env: fastAllocatorEnv(nats.url, TTL_MS),
    });
    client = createClient(allocator.ready.grpcAddress ?? "");
  });

  afterAll(async () => {
    fakes?.stopAll();
    client?.close();
    await allocator?.stop();
    await nc?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a backend that falls silent after the wall clock stepped back an hour still leaves its list within the ttl", async () => {
    await call(AllocatorAdminDefinition.RegisterService, { spec: emulatedSpec("resnet", { maxBackends: 2 }) });
    for (const id of ["be-01", "be-02", "be-03"]) fakes.start(id);
    const before = await eventually("two backends listed, one free", async () => {
      const list = await listOf("resnet");
      const free = (await call(AllocatorAdminDefinition.GetClusterState, {})).freeBackends;
      return list.length === 2 && free === 1 ? list : undefined;
    });
    process.kill(allocator.pid, "SIGUSR2");
    await allocator.waitForLog((l) => l.msg === WALL_CLOCK_STEPPED, 5_000);
    const silent = before[1] as string;
    fakes.silence(silent);
    // On the wall clock the silence measured minus an hour: the backend stayed listed for that hour.
    const after = await eventually(
      `${silent} replaced`,
      async () => {
        const list = await listOf("resnet");
        return list.includes(silent) || list.length < 2 ? undefined : list;
      },
      TTL_MS * 6,
    );
    const free = ["be-01", "be-02", "be-03"].find((id) => !before.includes(id));
    expect(after).toEqual([before[0], free]);
  });
});
