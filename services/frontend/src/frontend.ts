import { encodeSealed, type HeartbeatSigner, LOAD_REPORT_PROOF, subjects } from "@infergrid/control-plane";
import { type Random, SteadyClock, systemRandom } from "@infergrid/core";
import { deadlineMs, hopDeadline, routedRequestProblem, SenderLag } from "@infergrid/dataplane";
import { control, encodeRoutedInferResponse, type RoutedInferRequest } from "@infergrid/proto";
import { GrpcStatusError, grpc, type Logger, type NatsConnection, statusOf } from "@infergrid/runtime";
import {
  PRUNE_BUDGET_DEFAULTS,
  PRUNE_SERVICE_QUANTILE,
  PruneBudget,
  type PruneBudgetSettings,
  RecentQuantile,
  SlaWindowTracker,
  SWAYAM_DEFAULTS,
} from "@infergrid/swayam";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { BackendTracker } from "./backend-tracker.js";
import { type Dispatcher, requestBatch } from "./dispatcher.js";
import { LoadWindow } from "./load-window.js";
import type { ServiceScaler } from "./service-scaler.js";
import type { BackendRef, ServiceTable, ServiceView } from "./service-table.js";
import type { Warmer } from "./warmer.js";

/** The client's doing, not the service missing its SLA: bad input, and a caller that went away. */
const CLIENT_ERRORS = new Set([grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND, grpc.status.RESOURCE_EXHAUSTED, grpc.status.CANCELLED]);

interface ServiceState {
  scaler: ServiceScaler;
  sla: SlaWindowTracker;
  window: LoadWindow;
  frontendsEstimate: number;
  globalRate: number;
  /** The backends' recent compute times (their PRUNE_SERVICE_QUANTILE), for pruning. */
  computeTimes: RecentQuantile;
  /** Which late requests pruning may drop in this minute (a service that prunes). */
  prune: PruneBudget;
}

export interface FrontendDeps {
  id: string;
  table: ServiceTable;
  tracker: BackendTracker;
  dispatcher: Dispatcher;
  warmer: Warmer;
  newScaler: () => ServiceScaler;
  requestTimeoutMs: number;
  nc: NatsConnection;
  metrics: Registry;
  logger: Logger;
  /** For the load reports' sample of batch sizes (default: Math.random). */
  random?: Random;
  /** Which late requests a service that prunes may drop (default PRUNE_BUDGET_DEFAULTS). */
  pruneBudget?: PruneBudgetSettings;
  /**
   * The clock of arrivals, rates, deadlines and load windows (default: a SteadyClock of its own; main.ts shares the
   * dispatcher's). A step of the wall clock does not move it: on the wall clock a step back of an hour dropped
   * every arrival from the rate history for that hour, and a load window ended before it started.
   */
  clock?: SteadyClock;
  /**
   * Seals each load report with this frontend's certificate (a reader with --signed-heartbeats counts only reports
   * sealed by the frontend they name). Without one, reports go out unsigned.
   */
  signer?: HeartbeatSigner | undefined;
}

/**
 * The frontend's request path and its two loops (autoscaling and load reports). Requests are
 * answered exactly once: a response, or one status error.
 */
export class Frontend {
  private readonly services = new Map<string, ServiceState>();
  private readonly random: Random;
  private readonly clock: SteadyClock;
  /** The lags of the callers' clocks (brokers', or clients' in direct mode), by connection: how their deadlines are read. */
  private readonly senders = new SenderLag();
  private readonly requests: Counter<"service" | "code">;
  private readonly withinSlo: Counter<"service">;
  private readonly sloLatency: Gauge<"service">;
  private readonly sloObjective: Gauge<"service">;
  private readonly latency: Histogram<"service">;
  private readonly inUse: Gauge<"service">;
  private readonly frontendsGauge: Gauge<"service">;
  private readonly rateGauge: Gauge<"service">;
  private readonly slaGauge: Gauge<"service">;
  private readonly shortfallGauge: Gauge<"service">;

  constructor(private readonly deps: FrontendDeps) {
    this.random = deps.random ?? systemRandom;
    this.clock = deps.clock ?? new SteadyClock();
    const registers = [deps.metrics];
    this.requests = new Counter({
      name: "infergrid_frontend_requests_total",
      help: "Requests answered, by service and status",
      labelNames: ["service", "code"],
      registers,
    });
    this.withinSlo = new Counter({
      name: "infergrid_frontend_requests_within_slo_total",
      help: "Requests answered OK within the service's RT_max: the hits of the frontend's SLA accounting, which counts every request infergrid_frontend_requests_total counts for a registered service except the clients' own errors (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED)",
      labelNames: ["service"],
      registers,
    });
    this.sloLatency = new Gauge({
      name: "infergrid_frontend_slo_latency_seconds",
      help: "RT_max: the service's registered latency threshold (Sla.latency_threshold_ms), in seconds",
      labelNames: ["service"],
      registers,
    });
    this.sloObjective = new Gauge({
      name: "infergrid_frontend_slo_objective_ratio",
      help: "SL_min: the share of requests the service's SLA wants answered OK within RT_max (Sla.percentile / 100)",
      labelNames: ["service"],
      registers,
    });
    this.latency = new Histogram({
      name: "infergrid_frontend_request_duration_seconds",
      help: "Time from arrival at the frontend to the answer",
      labelNames: ["service"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10],
      registers,
    });
    this.inUse = new Gauge({
      name: "infergrid_frontend_backends_in_use",
      help: "n: the prefix of the ordered list this frontend dispatches into",
      labelNames: ["service"],
      registers,
    });
    this.frontendsGauge = new Gauge({
      name: "infergrid_frontend_frontends_estimate",
      help: "n_F as this frontend estimates it",
      labelNames: ["service"],
      registers,
    });
    this.slaGauge = new Gauge({
      name: "infergrid_frontend_sla_compliance_ratio",
      help: "Swayam SLA compliance: share of windows of 1000 requests (step 10) with at least SL_min within RT_max, as this frontend saw them",
      labelNames: ["service"],
      registers,
    });
    this.shortfallGauge = new Gauge({
      name: "infergrid_frontend_backend_shortfall",
      help: "Backends the sizing model wants beyond the service's ordered list (what the allocator could add)",
      labelNames: ["service"],
      registers,
    });
    this.rateGauge = new Gauge({
      name: "infergrid_frontend_global_rate_estimate",
      help: "Predicted global request rate (req/s) used for sizing",
      labelNames: ["service"],
      registers,
    });
  }

  private state(name: string): ServiceState {
    let s = this.services.get(name);
    if (!s) {
      const sla = this.deps.table.get(name)?.sla;
      s = {
        scaler: this.deps.newScaler(),
        sla: new SlaWindowTracker(sla ?? { rtMaxMs: Number.POSITIVE_INFINITY, slMin: SWAYAM_DEFAULTS.slMin }),
        window: new LoadWindow(this.clock.now(), this.random),
        frontendsEstimate: 1,
        globalRate: 0,
        computeTimes: new RecentQuantile(PRUNE_SERVICE_QUANTILE),
        prune: new PruneBudget(1 - (sla?.slMin ?? SWAYAM_DEFAULTS.slMin), this.deps.pruneBudget ?? PRUNE_BUDGET_DEFAULTS),
      };
      this.services.set(name, s);
    }
    return s;
  }

  onServiceChange(name: string, entry: ServiceView | undefined): void {
    if (!entry) {
      this.services.delete(name);
      this.sloLatency.remove({ service: name });
      this.sloObjective.remove({ service: name });
      return;
    }
    this.sloLatency.set({ service: name }, entry.sla.rtMaxMs / 1000);
    this.sloObjective.set({ service: name }, entry.sla.slMin);
    // Exported from the start, so that a service whose every request fails shows 0 rather than no series.
    this.withinSlo.inc({ service: name }, 0);
    this.rescale(name, entry, this.clock.now());
  }

  /** Recomputes n for a service and warms the entries of its prefix that are not warm. */
  private rescale(name: string, entry: ServiceView, now: number): void {
    const s = this.state(name);
    const usable = (i: number) => this.deps.tracker.usable(entry.backends[i]?.backendId ?? "", now);
    const outcome = s.scaler.decide(now, { service: entry, usable });
    s.frontendsEstimate = outcome.frontendsEstimate;
    s.globalRate = outcome.globalRatePerSec;
    this.inUse.set({ service: name }, outcome.n);
    this.frontendsGauge.set({ service: name }, outcome.frontendsEstimate);
    this.rateGauge.set({ service: name }, outcome.globalRatePerSec);
    this.shortfallGauge.set({ service: name }, outcome.shortfall);
    this.deps.warmer.warm(name, this.prefix(entry, outcome.n, now), now);
  }

  /** The first n usable entries: the backends requests may go to. */
  private prefix(entry: ServiceView, n: number, now: number): BackendRef[] {
    const out: BackendRef[] = [];
    for (const ref of entry.backends) {
      if (out.length >= n) break;
      if (this.deps.tracker.usable(ref.backendId, now)) out.push(ref);
    }
    return out;
  }

  autoscaleTick(now: number): void {
    for (const name of this.deps.table.names()) {
      const entry = this.deps.table.get(name);
      if (entry) this.rescale(name, entry, now);
    }
    const listed = this.deps.table.names().flatMap((n) => this.deps.table.get(n)?.backends.map((b) => b.backendId) ?? []);
    this.deps.tracker.forgetExcept(listed);
    // Every backend ever warmed would stay in the warmer's memory otherwise.
    this.deps.warmer.forgetExcept(listed);
  }

  /** `now` on the frontend's clock; the window goes out on the wall clock as it reads now (its length as it passed). */
  publishLoad(now: number): void {
    const toWall = (ms: number) => this.clock.toWall(ms);
    for (const [name, s] of this.services) {
      const w = s.window;
      const c = s.sla.compliance();
      const report: control.ILoadReport = {
        frontendId: this.deps.id,
        service: name,
        windowStartUnixMs: toWall(w.start),
        windowEndUnixMs: toWall(now),
        arrivals: w.arrivals,
        completed: w.completed,
        failed: w.failed,
        withinSlo: w.withinSlo,
        latencyP50Ms: w.quantile(0.5),
        latencyP99Ms: w.quantile(0.99),
        frontendsEstimate: s.frontendsEstimate,
        backendsInUse: s.scaler.n,
        globalRateEstimate: s.globalRate,
        serviceTimeMeanMs: w.meanComputeMs(),
        batches: w.batches,
        slaWindows: c.windows,
        slaCompliantWindows: c.compliant,
      };
      this.deps.nc.publish(subjects.load(name), encodeSealed(control.LoadReport, report, this.deps.signer, LOAD_REPORT_PROOF));
      s.window = new LoadWindow(now, this.random);
      if (c.windows > 0) this.slaGauge.set({ service: name }, c.frequency);
    }
  }

  snapshot(): Record<string, { n: number; frontendsEstimate: number; globalRate: number }> {
    return Object.fromEntries(
      [...this.services].map(([k, s]) => [k, { n: s.scaler.n, frontendsEstimate: s.frontendsEstimate, globalRate: s.globalRate }]),
    );
  }

  /**
   * Answers with an encoded InferResponse around the backend's outputs: the tensors go through this hop as the
   * bytes they came as, in and out. `signal`: the caller went away (the dispatch is cancelled, and the request
   * ends CANCELLED). `caller`: its connection (grpc-js's getPeer), whose clock's lag its deadline is read by.
   */
  async infer(
    request: RoutedInferRequest,
    grpcDeadline: Date | number | undefined,
    signal?: AbortSignal,
    caller = "",
  ): Promise<Uint8Array> {
    const arrived = this.clock.now();
    const service = request.service;
    const label = this.deps.table.get(service) ? service : "_unknown";
    try {
      const checked = routedRequestProblem(request);
      if ("problem" in checked) throw new GrpcStatusError(grpc.status.INVALID_ARGUMENT, checked.problem);
      const entry = this.deps.table.get(service);
      if (!entry) throw new GrpcStatusError(grpc.status.NOT_FOUND, `service ${JSON.stringify(service)} is not registered`);
      const deadline = hopDeadline(
        arrived,
        deadlineMs(grpcDeadline),
        request.deadlineUnixMs,
        this.deps.requestTimeoutMs,
        this.clock.wallOffset(),
        this.senders,
        caller,
      );
      if (deadline <= arrived)
        throw new GrpcStatusError(grpc.status.DEADLINE_EXCEEDED, "deadline passed before the request reached the frontend");
      const s = this.state(service);
      s.scaler.recordArrival(arrived);
      s.prune.recordArrival(arrived);
      const batch = requestBatch(checked.shapes);
      s.window.recordArrival(batch);
      const result = await this.deps.dispatcher.dispatch(
        () => {
          const e = this.deps.table.get(service);
          if (!e) return undefined;
          const st = this.state(service);
          const now = this.clock.now();
          const prune = e.pruneLate && st.prune.allows(now, now - arrived, e.sla.rtMaxMs);
          return { frontendId: this.deps.id, entry: e, n: st.scaler.n, pruneServiceMs: prune ? st.computeTimes.value() : undefined };
        },
        request,
        batch,
        arrived,
        deadline,
        {
          onReply: (backendId, reply, now) => {
            this.deps.tracker.report(backendId, reply.report, now);
            const computeMs = reply.computeMs ? reply.computeMs : undefined;
            // Not this.state(): a reply that comes after the service was removed must not bring its state back
            // (it would report load for a service that is gone, and lend a re-registered one stale accounts).
            const st = this.services.get(service);
            if (!st) return;
            st.scaler.observeReply(backendId, reply.report?.frontendsSeen ?? 0, computeMs, now);
            if (computeMs !== undefined) st.computeTimes.record(computeMs);
          },
          onRefusedCold: (index) => {
            const e = this.deps.table.get(service);
            const ref = e?.backends[index];
            if (ref) this.deps.warmer.warm(service, [ref], this.clock.now());
          },
        },
        signal,
      );
      const totalMs = this.clock.now() - arrived;
      const st = this.services.get(service);
      const withinSlo = totalMs <= entry.sla.rtMaxMs;
      st?.window.recordCompletion(totalMs, withinSlo, result.reply.computeMs || undefined);
      st?.sla.record(totalMs);
      this.requests.inc({ service: label, code: "OK" });
      if (withinSlo) this.withinSlo.inc({ service: label });
      this.latency.observe({ service: label }, totalMs / 1000);
      return encodeRoutedInferResponse({
        requestId: request.requestId,
        service,
        outputs: result.reply.outputs,
        backendId: result.backendId,
        frontendId: this.deps.id,
        timing: { totalMs, computeMs: result.reply.computeMs, attempts: result.attempts },
      });
    } catch (err) {
      const s = this.services.get(service);
      const code = statusOf(err).code;
      // A client's own error (bad input) is not the service missing its SLA.
      if (s && label !== "_unknown" && !CLIENT_ERRORS.has(code)) {
        s.window.failed += 1;
        s.prune.recordDrop(this.clock.now());
        s.sla.record(undefined);
      }
      this.requests.inc({ service: label, code: grpc.status[code] });
      throw err;
    }
  }
}
