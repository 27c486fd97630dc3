import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type LatencyProfile, parseProfileCsv, serviceConfiguration } from "@infergrid/kairos";
import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { createClient, grpc, unaryCall } from "@infergrid/runtime";
import { eventually, type NatsServerHandle, type ServiceProcess, startNatsServer, startService } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * Kairos's configuration choice in the allocator, on real processes: the allocator with a price list, a
 * cost budget and one local pool per instance type (real backend-worker processes started with their
 * type) is given a service profiled per type (DIEN, the Kairos artifact's measured profiles, read by path).
 * Its share of the budget (the whole of it: it is the only service) buys the configuration Kairos picks;
 * each type's pool is sized to it and the service's list holds that many of each type. A spec nothing in
 * the budget can serve is refused at registration and leaves nothing behind.
 */
const PRICES = [
  { name: "g4dn.xlarge", pricePerHour: 0.526, maxCount: 2 },
  { name: "t3.xlarge", pricePerHour: 0.1664, maxCount: 4 },
];
const BUDGET = 1.2;
const QOS_MS = 35;

describe("global-allocator sizing per-type pools by the services' Kairos configurations", () => {
  let nats: NatsServerHandle;
  let allocator: ServiceProcess;
  let client: grpc.Client;
  const profiles = new Map<string, LatencyProfile>();

  const call = <Req, Res>(method: grpc.MethodDefinition<Req, Res>, req: Req) =>
    unaryCall(client, method, req, { deadline: Date.now() + 5000 });
  const spec = (name: string, qosMs: number): control.ServiceSpec.$Properties => ({
    name,
    model: {
      kind: control.ModelKind.MODEL_KIND_EMULATED,
      profile: { shape: 0.36, locMs: 5, scaleMs: 5 },
      coldStartMs: 100,
      instanceProfiles: [...profiles].map(([instanceType, p]) => ({ instanceType, points: p.points.map((pt) => ({ ...pt })) })),
    },
    sla: { latencyThresholdMs: qosMs, percentile: 99, burstFactor: 2 },
    initialBackends: 1,
  });

  beforeAll(async () => {
    const table = parseProfileCsv(readFileSync(join(import.meta.dirname, "../../../../shared/profiles/kairos-aws-4types.csv"), "utf8"));
    for (const t of PRICES) {
      const p = table.get(t.name)?.get("dien");
      if (!p) throw new Error(`no dien profile for ${t.name} in the shared table`);
      profiles.set(t.name, p);
    }
    nats = await startNatsServer();
    allocator = await startService("global-allocator", {
      env: {
        INFERGRID_NATS_URL: nats.url,
        INFERGRID_HEARTBEAT_MS: "300",
        INFERGRID_CONTROL_PERIOD_MS: "300",
        INFERGRID_POOL_ACTUATOR: "local",
        INFERGRID_POOL_TYPES: PRICES.map((p) => p.name).join(","),
        INFERGRID_INSTANCE_TYPES: JSON.stringify(PRICES),
        INFERGRID_BUDGET_PER_HOUR: String(BUDGET),
        INFERGRID_POOL_MIN_SIZE: "0",
        INFERGRID_POOL_HEADROOM: "0",
        INFERGRID_POOL_SCALE_DOWN_DELAY_MS: "1000",
      },
    });
    client = createClient(allocator.ready.grpcAddress ?? "");
  }, 90_000);

  afterAll(async () => {
    client?.close();
    await allocator?.stop();
    await nats?.stop();
  }, 60_000);

  it("refuses a spec no configuration within the budget serves, writing nothing", async () => {
    const err = await call(AllocatorAdminDefinition.RegisterService, { spec: spec("dien-strict", 5) }).then(
      () => undefined,
      (e: { code: number; details: string }) => e,
    );
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).toMatch(
      /spec.model.instance_profiles: within the cluster's budget of 1.2 USD\/h, no configuration can serve it within QoS 5 ms: no instance type meets/,
    );
    const missing = await call(AllocatorAdminDefinition.GetService, { name: "dien-strict" }).then(
      () => undefined,
      (e: { code: number }) => e.code,
    );
    expect(missing).toBe(grpc.status.NOT_FOUND);
  });

  it("starts the configuration's backends of each type and gives the service that many of each", async () => {
    const expected = serviceConfiguration({ profiles, qosMs: QOS_MS }, PRICES, BUDGET);
    // The choice itself is Kairos's (tested in libs/kairos); here it must be a real mix within the budget.
    expect(expected.counts.get("g4dn.xlarge")).toBeGreaterThanOrEqual(1);
    expect(expected.counts.get("t3.xlarge")).toBeGreaterThanOrEqual(1);
    expect(expected.costPerHour).toBeLessThanOrEqual(BUDGET);

    await call(AllocatorAdminDefinition.RegisterService, { spec: spec("dien", QOS_MS) });
    const planned = await allocator.waitForLog((l) => l.msg === "planned the services' instance-type configurations", 10_000);
    expect(planned.pool).toEqual(Object.fromEntries(expected.counts));

    const state = await eventually(
      "the per-type pools and the list at the configuration",
      async () => {
        const s = await call(AllocatorAdminDefinition.GetClusterState, {});
        const list = (s.services ?? []).find((e) => e.spec?.name === "dien")?.backends ?? [];
        const perType = new Map<string, number>();
        for (const b of list) perType.set(b.instanceType ?? "", (perType.get(b.instanceType ?? "") ?? 0) + 1);
        const ok = [...expected.counts].every(([t, n]) => perType.get(t) === n) && (s.backends ?? []).length === list.length;
        return ok ? s : undefined;
      },
      45_000,
    );
    const rows = (state.instanceTypes ?? []).map((t) => [t.instanceType, t.backends ?? 0, t.assigned ?? 0]);
    expect(rows).toEqual(PRICES.map((p) => [p.name, expected.counts.get(p.name), expected.counts.get(p.name)]));
    expect(state.costPerHour).toBeCloseTo(expected.costPerHour, 9);
    // Steady: the next control steps neither resize nor reshuffle.
    await new Promise((r) => setTimeout(r, 1500));
    const again = await call(AllocatorAdminDefinition.GetClusterState, {});
    expect((again.backends ?? []).map((b) => b.backendId).sort()).toEqual((state.backends ?? []).map((b) => b.backendId).sort());
  }, 90_000);
});
