import { subjects } from "@infergrid/control-plane";
import { rateNeed } from "@infergrid/fapes";
import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { connectNats, createClient, createLogger, type grpc, type NatsConnection, publishMessage, unaryCall } from "@infergrid/runtime";
import { eventually, type NatsServerHandle, type ServiceProcess, startNatsServer, startService } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The loans' floors rule on a real allocator (--policy faro, its default loan rule) with the local pool actuator
 * (six real backend-worker processes) and a best-effort job: the job borrows what the two services' floors and
 * the spare leave; when one service's frontends report a rate its share does not cover (the forecasts, which the
 * plan follows, have not moved), its floor rises at the next control step, a loan comes back and that service's
 * list grows past its share.
 */
describe("global-allocator loan floors (real nats-server, real processes)", () => {
  let nats: NatsServerHandle;
  let allocator: ServiceProcess;
  let client: grpc.Client;
  let nc: NatsConnection;
  let timer: NodeJS.Timeout | undefined;
  let reportedA = 0;

  const call = <Req, Res>(method: grpc.MethodDefinition<Req, Res>, req: Req) =>
    unaryCall(client, method, req, { deadline: Date.now() + 5000 });
  const spec = (name: string): control.ServiceSpec.$Properties => ({
    name,
    // Mean 100 ms: one backend serves about 10 req/s.
    model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.01, locMs: 0, scaleMs: 100 }, coldStartMs: 100 },
    sla: { latencyThresholdMs: 400, percentile: 99, burstFactor: 2 },
    initialBackends: 1,
  });
  const publish = () => {
    for (const service of ["svc-a", "svc-b"])
      publishMessage(nc, subjects.forecast(service), control.Forecast, {
        service,
        issuedAtUnixMs: Date.now(),
        stepMs: 1000,
        steps: 3,
        quantiles: [
          { quantile: 0.5, ratePerS: [2, 2, 2] },
          { quantile: 0.9, ratePerS: [2, 2, 2] },
        ],
        model: "test",
      });
    const end = Date.now();
    const arrivals = Math.round(reportedA / 4);
    publishMessage(nc, subjects.load("svc-a"), control.LoadReport, {
      frontendId: "fe-test",
      service: "svc-a",
      windowStartUnixMs: end - 250,
      windowEndUnixMs: end,
      arrivals,
      completed: arrivals,
      withinSlo: arrivals,
      serviceTimeMeanMs: 100,
    });
  };
  const listOf = async (name: string) => {
    const s = await call(AllocatorAdminDefinition.GetClusterState, {});
    return (s.services ?? []).find((e) => e.spec?.name === name)?.backends?.length ?? 0;
  };
  const job = () => call(AllocatorAdminDefinition.GetJob, { name: "bulk" });

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connectNats({ servers: nats.url, name: "floors-test" }, createLogger("test", "floors-test", "warn"));
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
        // The rate is read over one lead time: grace plus the planned cold start, 1 s here.
        INFERGRID_JOB_GRACE_MS: "1000",
        INFERGRID_LOAN_HOLD_MS: "60000",
        INFERGRID_POOL_ACTUATOR: "local",
        INFERGRID_POOL_MIN_SIZE: "6",
        INFERGRID_POOL_MAX_SIZE: "6",
        INFERGRID_POOL_HEADROOM: "0",
      },
    });
    client = createClient(allocator.ready.grpcAddress ?? "");
    await call(AllocatorAdminDefinition.RegisterService, { spec: spec("svc-a") });
    await call(AllocatorAdminDefinition.RegisterService, { spec: spec("svc-b") });
    timer = setInterval(publish, 250);
  }, 90_000);

  afterAll(async () => {
    if (timer) clearInterval(timer);
    client?.close();
    await nc?.close();
    await allocator?.stop();
    await nats?.stop();
  }, 60_000);

  it("lends past the floors and the spare, and takes a loan back when a service's reported rate rises before its share", async () => {
    const reply = await call(AllocatorAdminDefinition.SubmitJob, {
      spec: {
        name: "bulk",
        // About 200 ms an item: on two backends the job lasts minutes, longer than the test.
        model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.1, locMs: 100, scaleMs: 100 }, coldStartMs: 100 },
        items: 2_000,
        maxBackends: 6,
        seed: 3,
      },
    });
    expect(reply.created).toBe(true);
    // Six backends, two services at a share of 1 each and the spare of 2: 2 lent. Wait for both: with one lent,
    // the rise below would leave room for it (6 - 4 - 1) and nothing would be taken back.
    const lent = await eventually(
      "the job to borrow two backends",
      async () => {
        const j = await job();
        return (j.backends?.length ?? 0) >= 2 ? j : undefined;
      },
      40_000,
      200,
    );
    expect(lent.backends?.length ?? 0).toBe(2);
    expect(lent.preemptions ?? 0).toBe(0);

    // svc-a's frontends now see 30 req/s while the forecasts (and so the plan) still say 2.
    reportedA = 30;
    const floor = rateNeed({ ratePerS: 30, serviceMs: 100, sloMs: 400, percentile: 99 });
    // Its floor (4) plus svc-b's (1) leave at most 6 - 5 = 1 on loan. The loans come back over a step or two (the
    // rate read rises over its window, and a preemption is counted as its backends are asked back).
    const taken = await eventually(
      "loans taken back for svc-a",
      async () => {
        const j = await job();
        return (j.preemptions ?? 0) >= 1 && (j.backends?.length ?? 0) <= 6 - floor - 1 ? j : undefined;
      },
      15_000,
      200,
    );
    expect(taken.preemptions ?? 0).toBeGreaterThanOrEqual(1);
    const a = await eventually(
      "svc-a's list to reach its floor",
      async () => {
        const n = await listOf("svc-a");
        return n >= floor ? n : undefined;
      },
      15_000,
      200,
    );
    expect(a).toBeGreaterThanOrEqual(floor);
  }, 120_000);
});
