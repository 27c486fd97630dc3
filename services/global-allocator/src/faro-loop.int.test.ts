import { subjects } from "@infergrid/control-plane";
import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { connectNats, createClient, createLogger, type grpc, type NatsConnection, publishMessage, unaryCall } from "@infergrid/runtime";
import { eventually, type NatsServerHandle, type ServiceProcess, startNatsServer, startService } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The slow loop end to end: a real allocator with --policy faro and the local pool actuator (real
 * backend-worker processes), fed forecasts on NATS as the predictor publishes them. The shares
 * follow the forecasts, and the pool follows the shares.
 */
describe("global-allocator --policy faro (real nats-server, real processes)", () => {
  let nats: NatsServerHandle;
  let allocator: ServiceProcess;
  let client: grpc.Client;
  let nc: NatsConnection;
  let timer: NodeJS.Timeout | undefined;
  const rates = new Map<string, number>();

  const call = <Req, Res>(method: grpc.MethodDefinition<Req, Res>, req: Req) =>
    unaryCall(client, method, req, { deadline: Date.now() + 5000 });
  const lengths = async () => {
    const s = await call(AllocatorAdminDefinition.GetClusterState, {});
    const of = (n: string) => (s.services ?? []).find((e) => e.spec?.name === n)?.backends?.length ?? 0;
    return { a: of("svc-a"), b: of("svc-b"), pool: (s.backends ?? []).length };
  };
  const spec = (name: string): control.ServiceSpec.$Properties => ({
    name,
    // Mean 100 ms: one backend serves about 10 req/s.
    model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.01, locMs: 0, scaleMs: 100 }, coldStartMs: 100 },
    sla: { latencyThresholdMs: 400, percentile: 99, burstFactor: 2 },
    initialBackends: 1,
  });
  let source: "forecasts" | "reports" = "forecasts";
  const publishForecasts = () => {
    if (source === "reports") {
      // The frontends' reports alone (the predictor is away): 250 ms windows at the given rate.
      const end = Date.now();
      for (const [service, rate] of rates)
        publishMessage(nc, subjects.load(service), control.LoadReport, {
          frontendId: "fe-test",
          service,
          windowStartUnixMs: end - 250,
          windowEndUnixMs: end,
          arrivals: Math.round(rate / 4),
          completed: Math.round(rate / 4),
          withinSlo: Math.round(rate / 4),
          serviceTimeMeanMs: 100,
        });
      return;
    }
    for (const [service, rate] of rates)
      publishMessage(nc, subjects.forecast(service), control.Forecast, {
        service,
        issuedAtUnixMs: Date.now(),
        stepMs: 1000,
        steps: 3,
        quantiles: [
          { quantile: 0.5, ratePerS: [rate, rate, rate] },
          { quantile: 0.9, ratePerS: [rate, rate, rate] },
        ],
        model: "test",
      });
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connectNats({ servers: nats.url, name: "faro-test" }, createLogger("test", "faro-test", "warn"));
    allocator = await startService("global-allocator", {
      env: {
        INFERGRID_NATS_URL: nats.url,
        INFERGRID_HEARTBEAT_MS: "300",
        INFERGRID_CONTROL_PERIOD_MS: "300",
        INFERGRID_POLICY: "faro",
        INFERGRID_OBJECTIVE: "fair-sum",
        INFERGRID_SOLVE_PERIOD_MS: "1000",
        INFERGRID_REACTIVE_TICK_MS: "500",
        INFERGRID_PLANNED_COLD_START_MS: "0",
        INFERGRID_FORECAST_MAX_AGE_MS: "1500",
        INFERGRID_POOL_ACTUATOR: "local",
        INFERGRID_POOL_MIN_SIZE: "2",
        INFERGRID_POOL_MAX_SIZE: "6",
        INFERGRID_POOL_HEADROOM: "0",
        INFERGRID_POOL_SCALE_DOWN_DELAY_MS: "1000",
      },
    });
    client = createClient(allocator.ready.grpcAddress ?? "");
    await call(AllocatorAdminDefinition.RegisterService, { spec: spec("svc-a") });
    await call(AllocatorAdminDefinition.RegisterService, { spec: spec("svc-b") });
    timer = setInterval(publishForecasts, 250);
  }, 90_000);

  afterAll(async () => {
    if (timer) clearInterval(timer);
    client?.close();
    await nc?.close();
    await allocator?.stop();
    await nats?.stop();
  }, 60_000);

  it("gives the loaded service the larger share and grows the pool to carry it", async () => {
    rates.set("svc-a", 30);
    rates.set("svc-b", 2);
    const l = await eventually(
      "svc-a's list longer than svc-b's, the pool grown",
      async () => {
        const x = await lengths();
        return x.a >= 4 && x.b >= 1 && x.pool >= x.a + x.b ? x : undefined;
      },
      40_000,
    );
    expect(l.a).toBeGreaterThan(l.b);
    expect(l.a + l.b).toBeLessThanOrEqual(6);
    await allocator.waitForLog((line) => line.msg === "planned the services' shares", 1000);
  }, 60_000);

  it("moves the shares when the forecasts swap, within the cluster's 6 backends", async () => {
    rates.set("svc-a", 2);
    rates.set("svc-b", 30);
    const l = await eventually(
      "svc-b's list now the longer",
      async () => {
        const x = await lengths();
        return x.b >= 4 && x.a <= 2 ? x : undefined;
      },
      40_000,
    );
    expect(l.pool).toBeLessThanOrEqual(6);
    const metrics = await fetch(`http://${allocator.ready.metricsAddress}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/infergrid_allocator_service_list_length\{[^}]*service="svc-b"[^}]*\} [4-6]/);
  }, 60_000);

  it("plans from the frontends' observed rates when forecasts stop (predictor away)", async () => {
    source = "reports";
    rates.set("svc-a", 30);
    rates.set("svc-b", 2);
    const l = await eventually(
      "svc-a's list the longer again, from load reports alone",
      async () => {
        const x = await lengths();
        return x.a >= 4 && x.b <= 2 ? x : undefined;
      },
      40_000,
    );
    expect(l.a + l.b).toBeLessThanOrEqual(6);
  }, 60_000);
});
