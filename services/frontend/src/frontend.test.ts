import { SteadyClock } from "@infergrid/core";
/**
 * The Frontend's SLO metrics: the service's RT_max and SL_min as gauges from its registry entry, and the requests
 * answered OK within RT_max, counted exactly as the frontend's own SLA accounting (its load reports) counts them.
 * The dispatcher is a stand-in that answers after a set time or fails; the clock is faked.
 */
import { control, decodeRoutedInfer, inference } from "@infergrid/proto";
import { createLogger, GrpcStatusError, grpc, type NatsConnection, statusOf } from "@infergrid/runtime";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { BackendTracker } from "./backend-tracker.js";
import type { Dispatcher, DispatchHooks, DispatchResult, DispatchTarget } from "./dispatcher.js";
import { Frontend } from "./frontend.js";
import { StaticScaler } from "./service-scaler.js";
import { type ServiceTable, type ServiceView, toView } from "./service-table.js";
import type { Warmer } from "./warmer.js";

const logger = createLogger("test", "frontend-test", "silent");

function view(name: string, latencyThresholdMs: number, percentile: number, pruneLate = false): ServiceView {
  const v = toView(
    name,
    control.ServiceEntry.create({
      spec: { name, sla: { latencyThresholdMs, percentile }, pruneLate },
      backends: [{ backendId: "b1", address: "127.0.0.1:1" }],
      version: 1,
    }),
  );
  if (typeof v === "string") throw new Error(v);
  return v;
}

function request(service: string, requestId: string) {
  return decodeRoutedInfer(inference.InferRequest.encode({ service, requestId, inputs: { x: { dims: [1], data: [1] } } }).finish());
}

/** A Frontend over a table it is told about, a dispatcher that takes `outcomes[requestId]`, and a recording NATS. */
function setUp(outcomes: Record<string, number | "fail">) {
  const entries = new Map<string, ServiceView>();
  const table = { get: (name: string) => entries.get(name), names: () => [...entries.keys()] } as unknown as ServiceTable;
  /** Per dispatch, whether the frontend let the request be pruned when it was dispatched. */
  const prunable: boolean[] = [];
  /** Set by a test: runs while a request is dispatched, and the backend's reply is then reported to the frontend. */
  const during: { run?: () => void } = {};
  const dispatcher = {
    dispatch: async (
      current: () => DispatchTarget | undefined,
      req: { requestId: string },
      _batch: number,
      _arrived: number,
      _deadline: number,
      hooks: DispatchHooks,
    ): Promise<DispatchResult> => {
      prunable.push(current()?.pruneServiceMs !== undefined);
      const outcome = outcomes[req.requestId];
      if (outcome === undefined || outcome === "fail") throw new GrpcStatusError(grpc.status.UNAVAILABLE, "no backend took it");
      if (during.run) {
        during.run();
        hooks.onReply("b1", { report: null, computeMs: 1 }, Date.now());
      }
      vi.setSystemTime(Date.now() + outcome);
      return { reply: { status: 0, report: null, outputs: [], computeMs: 1 }, backendId: "b1", attempts: 1 };
    },
  } as unknown as Dispatcher;
  const published: { subject: string; data: Uint8Array }[] = [];
  /** What the warmer was told to keep, at each autoscale tick. */
  const kept: string[][] = [];
  const nc = { publish: (subject: string, data: Uint8Array) => published.push({ subject, data }) } as unknown as NatsConnection;
  const metrics = new Registry();
  const frontend = new Frontend({
    id: "fe-1",
    table,
    tracker: new BackendTracker(5_000),
    dispatcher,
    warmer: { warm: () => {}, forgetExcept: (ids: string[]) => kept.push([...ids]) } as unknown as Warmer,
    newScaler: () => new StaticScaler(),
    requestTimeoutMs: 10_000,
    nc,
    metrics,
    logger,
    // The faked Date is this test's clock (vi.setSystemTime moves it; a SteadyClock's monotonic clock it does not).
    clock: new SteadyClock(
      () => Date.now(),
      () => Date.now(),
    ),
  });
  const change = (name: string, entry: ServiceView | undefined) => {
    if (entry) entries.set(name, entry);
    else entries.delete(name);
    frontend.onServiceChange(name, entry);
  };
  const value = async (metric: string, labels: Record<string, string>) => {
    const found = (await metrics.getSingleMetric(metric)?.get())?.values.find((v) =>
      Object.entries(labels).every(([k, l]) => v.labels[k] === l),
    );
    return found?.value;
  };
  const reports = () => published.map((p) => control.LoadReport.decode(p.data));
  return { frontend, change, value, reports, prunable, during, kept };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("Frontend SLO metrics", () => {
  it("exports RT_max and SL_min from the service's entry, follows changes, and removes them with the service", async () => {
    const { change, value } = setUp({});
    change("svc", view("svc", 250, 99.5));
    expect(await value("infergrid_frontend_slo_latency_seconds", { service: "svc" })).toBe(0.25);
    expect(await value("infergrid_frontend_slo_objective_ratio", { service: "svc" })).toBe(0.995);
    // No request yet: the counter is there, at 0.
    expect(await value("infergrid_frontend_requests_within_slo_total", { service: "svc" })).toBe(0);
    change("other", view("other", 1_000, 0));
    expect(await value("infergrid_frontend_slo_latency_seconds", { service: "other" })).toBe(1);
    // percentile 0: the Swayam default SL_min.
    expect(await value("infergrid_frontend_slo_objective_ratio", { service: "other" })).toBe(0.99);

    change("svc", view("svc", 2_000, 90));
    expect(await value("infergrid_frontend_slo_latency_seconds", { service: "svc" })).toBe(2);
    expect(await value("infergrid_frontend_slo_objective_ratio", { service: "svc" })).toBe(0.9);

    change("svc", undefined);
    expect(await value("infergrid_frontend_slo_latency_seconds", { service: "svc" })).toBeUndefined();
    expect(await value("infergrid_frontend_slo_objective_ratio", { service: "svc" })).toBeUndefined();
    expect(await value("infergrid_frontend_slo_latency_seconds", { service: "other" })).toBe(1);
  });

  it("counts the requests answered OK within RT_max, as the SLA accounting's load report does", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    // RT_max 100 ms: 40 ms and 100 ms are within it, 150 ms is not; a failure and the clients' errors are not.
    const { frontend, change, value, reports } = setUp({ fast: 40, edge: 100, slow: 150, failed: "fail" });
    change("svc", view("svc", 100, 95));
    for (const id of ["fast", "edge", "slow"]) await frontend.infer(request("svc", id), undefined);
    const codes: string[] = [];
    // A request id over 128 characters is the client's error (INVALID_ARGUMENT), an unregistered service too (NOT_FOUND).
    for (const [service, id] of [
      ["svc", "failed"],
      ["svc", "x".repeat(129)],
      ["nope", "fast"],
    ] as const)
      codes.push(
        await frontend.infer(request(service, id), undefined).then(
          () => "OK",
          (err: unknown) => grpc.status[statusOf(err).code],
        ),
      );
    expect(codes).toEqual(["UNAVAILABLE", "INVALID_ARGUMENT", "NOT_FOUND"]);

    expect(await value("infergrid_frontend_requests_within_slo_total", { service: "svc" })).toBe(2);
    expect(await value("infergrid_frontend_requests_total", { service: "svc", code: "OK" })).toBe(3);
    expect(await value("infergrid_frontend_requests_total", { service: "svc", code: "UNAVAILABLE" })).toBe(1);
    expect(await value("infergrid_frontend_requests_total", { service: "svc", code: "INVALID_ARGUMENT" })).toBe(1);
    expect(await value("infergrid_frontend_requests_total", { service: "_unknown", code: "NOT_FOUND" })).toBe(1);
    expect(await value("infergrid_frontend_requests_within_slo_total", { service: "_unknown" })).toBeUndefined();

    // The load report's SLA accounting: the same hits, out of the requests less the clients' errors.
    frontend.publishLoad(Date.now());
    const [report] = reports();
    expect(report).toMatchObject({ service: "svc", withinSlo: 2, completed: 3, failed: 1 });
  });

  it("each autoscale tick has the warmer forget the backends no list holds any more", () => {
    const { frontend, change, kept } = setUp({});
    change("svc", view("svc", 100, 95));
    frontend.autoscaleTick(Date.now());
    change("svc", undefined);
    frontend.autoscaleTick(Date.now());
    expect(kept).toEqual([["b1"], []]);
  });

  it("a request answered after its service was removed does not bring the service back", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const { frontend, change, reports, during } = setUp({ inflight: 40, after: 10 });
    change("svc", view("svc", 100, 95));
    // The service is deregistered while the request is with a backend, whose reply then comes in.
    during.run = () => change("svc", undefined);
    await frontend.infer(request("svc", "inflight"), undefined);
    frontend.publishLoad(Date.now());
    expect(reports().map((r) => r.service)).toEqual([]);
    // Registered again: its accounts start afresh, with its own RT_max (10 ms is within 100).
    during.run = undefined;
    change("svc", view("svc", 100, 95));
    await frontend.infer(request("svc", "after"), undefined);
    frontend.publishLoad(Date.now());
    expect(reports()).toEqual([expect.objectContaining({ service: "svc", arrivals: 1, completed: 1, withinSlo: 1 })]);
  });

  it("lets a pruning service drop within each minute's tail, then only once the minute's tail is lost", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(0);
    const outcomes: Record<string, number | "fail"> = {};
    for (let i = 0; i < 100; i++) outcomes[`ok${i}`] = 1;
    for (let i = 0; i < 3; i++) outcomes[`late${i}`] = "fail";
    const { frontend, change, prunable } = setUp(outcomes);
    change("svc", view("svc", 100, 99, true));
    change("keep", view("keep", 100, 99, false));
    const send = (service: string, id: string) => frontend.infer(request(service, id), undefined).catch(() => undefined);
    // Minute 0: 100 requests, so minute 1's tail is 1 drop.
    for (let i = 0; i < 100; i++) await send("svc", `ok${i}`);
    vi.setSystemTime(60_000);
    await send("svc", "late0"); // within the tail: prunable; it fails, a drop
    await send("svc", "late1"); // the tail is used: served late rather than dropped; it fails too, so the tail is lost
    await send("svc", "late2"); // the minute is lost already: prunable again
    await send("keep", "ok0"); // a service that does not prune never is
    expect(prunable.slice(100)).toEqual([true, false, true, false]);
  });
});
