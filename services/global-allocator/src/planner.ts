import {
  type AllocationDecision,
  type AllocationInput,
  planStaticAllocation,
  ShareController,
  type ShareControllerOptions,
  type ShareService,
  type ShareSignal,
  withLeftover,
} from "@infergrid/allocation";
import { lognormalMean } from "@infergrid/core";
import type { ServiceForecast } from "@infergrid/faro";
import type { control } from "@infergrid/proto";
import type { Logger } from "@infergrid/runtime";
import { type SignalBook, violationRate } from "./signals.js";

export interface PlannerOptions extends Omit<ShareControllerOptions, "stepMs"> {
  /** The reactive stage's tick (Faro: 10 s); violations are judged over each tick. */
  tickMs: number;
  /** A forecast older than this is not planned from. */
  forecastMaxAgeMs: number;
  /** Service time assumed when neither a profile nor measurements exist, ms. */
  defaultServiceTimeMs: number;
}

/** What the planner needs of a registered service's spec. */
export interface PlannedSpec {
  name: string;
  minBackends: number;
  /** 0 = the cluster's capacity. */
  maxBackends: number;
  initialBackends: number;
  latencyThresholdMs: number;
  percentile: number;
  /** Mean of the spec's service-time profile (emulated models), if it has one. */
  profileMeanMs?: number;
}

export function plannedSpec(spec: control.ServiceSpec.$Properties): PlannedSpec {
  const profile = spec.model?.profile;
  const scale = profile?.scaleMs ?? 0;
  return {
    name: spec.name ?? "",
    minBackends: spec.minBackends ?? 0,
    maxBackends: spec.maxBackends ?? 0,
    initialBackends: spec.initialBackends ?? 0,
    latencyThresholdMs: spec.sla?.latencyThresholdMs ?? 0,
    percentile: spec.sla?.percentile ?? 99,
    ...(scale > 0 ? { profileMeanMs: lognormalMean({ shape: profile?.shape ?? 0, loc: profile?.locMs ?? 0, scale }) } : {}),
  };
}

/** Completions needed before the frontends' measured service time replaces the spec's profile. */
const MEASURED_SERVICE_TIME_MIN = 20;
/** Forecast step assumed before any forecast arrives (Faro's one-minute bins). */
const DEFAULT_STEP_MS = 60_000;

/**
 * The slow loop in the allocator: libs/allocation's ShareController (Faro's hybrid loop, as the
 * simulator runs it) fed from NATS through the signal book: the predictor's forecasts, or the
 * frontends' observed rate while there is no fresh forecast, and their SLO violations. Its shares
 * become each service's list length (plus the leftover pool) and warm floor; the frontends keep
 * scaling inside them.
 */
export class SharePlanner {
  private controller: ShareController;
  private stepMs = DEFAULT_STEP_MS;
  private lastTick = Number.NEGATIVE_INFINITY;
  private lastError = "";

  constructor(
    private readonly signals: SignalBook,
    private readonly options: PlannerOptions,
    private readonly logger: Logger,
  ) {
    this.controller = new ShareController({ ...options, stepMs: this.stepMs });
  }

  /** One tick, if one is due: `services` are the registered specs, `capacity` the backends to share. */
  tick(now: number, services: readonly PlannedSpec[], capacity: number): void {
    if (now - this.lastTick < this.options.tickMs) return;
    const since = Number.isFinite(this.lastTick) ? this.lastTick : now - this.options.tickMs;
    this.lastTick = now;
    const inputs = services.map((s) => this.inputOf(s, now, since));
    const stepMs = inputs.find((i) => i.stepMs > 0)?.stepMs;
    if (stepMs !== undefined && stepMs !== this.stepMs) {
      // The predictor's step is the solver's: a new step length starts a new loop.
      this.stepMs = stepMs;
      this.controller = new ShareController({ ...this.options, stepMs });
    }
    const outcome = this.controller.tick(
      now,
      inputs.map((i) => i.service),
      inputs.map((i) => i.signal),
      capacity,
    );
    if (!outcome.ok) {
      // Say, the services' minimums exceed the capacity: the static split takes over until they fit.
      if (outcome.error !== this.lastError) this.logger.warn({ err: outcome.error }, "slow loop cannot plan; the static split applies");
      this.lastError = outcome.error;
      return;
    }
    this.lastError = "";
    const d = outcome.decision;
    if (d.kind !== "hold") {
      const names = [...outcome.shares.keys()];
      this.logger.info(
        {
          kind: d.kind,
          shares: Object.fromEntries([...outcome.shares].map(([n, s]) => [n, s.share])),
          raised: d.raised.map((j) => names[j]),
          capacity,
        },
        d.kind === "solve" ? "planned the services' shares" : "raised shares of services violating their SLO",
      );
    }
  }

  /**
   * The allocation policy: the static planner with each list capped at the service's share plus
   * its part of the leftover pool (withLeftover); the shares alone are the pool's demand.
   */
  readonly policy = (input: AllocationInput): AllocationDecision => {
    const shares = this.controller.shares;
    if (shares.size === 0) return planStaticAllocation(input);
    const lengths = withLeftover(
      input.services.map((s) => shares.get(s.name)?.share ?? 0),
      input.poolSize,
      input.services.map((s) => (s.maxBackends > 0 ? Math.max(s.maxBackends, s.minBackends) : Number.POSITIVE_INFINITY)),
    );
    const decision = planStaticAllocation({
      ...input,
      services: input.services.map((s, j) => {
        const length = lengths[j] ?? 0;
        return shares.has(s.name) ? { ...s, maxBackends: Math.max(1, length), minBackends: Math.min(s.minBackends, length) } : s;
      }),
    });
    for (const [name, plan] of decision.services) {
      const p = shares.get(name);
      if (!p) continue;
      plan.minWarm = Math.min(p.minWarm, plan.list.length);
      plan.demand = p.share;
      decision.minWarm.set(name, plan.minWarm);
    }
    return decision;
  };

  /** What the plan says of a service, for the published AllocationPlan. */
  describe(name: string): { predictedRatePerS: number; share: number } | undefined {
    const p = this.controller.shares.get(name);
    return p && { predictedRatePerS: p.plannedRatePerS, share: p.share };
  }

  private inputOf(spec: PlannedSpec, now: number, since: number): { service: ShareService; signal: ShareSignal; stepMs: number } {
    const outcomes = this.signals.outcomes(spec.name, since);
    const violating = violationRate(outcomes) > 1 - spec.percentile / 100;
    const serviceTimeMs =
      outcomes.completed >= MEASURED_SERVICE_TIME_MIN && outcomes.serviceTimeMeanMs > 0
        ? outcomes.serviceTimeMeanMs
        : (spec.profileMeanMs ?? this.options.defaultServiceTimeMs);
    const service: ShareService = {
      name: spec.name,
      serviceTimeMs,
      sloMs: spec.latencyThresholdMs,
      percentile: spec.percentile,
      minShare: spec.minBackends,
      maxShare: spec.maxBackends,
      initialShare: spec.initialBackends,
    };
    const f = this.signals.forecast(spec.name, now, this.options.forecastMaxAgeMs);
    if (f) {
      const forecast: ServiceForecast = {
        kind: "quantiles",
        levels: f.quantiles.map((q) => q.quantile),
        values: (f.quantiles[0]?.ratePerS ?? []).map((_, k) => f.quantiles.map((q) => q.ratePerS[k] ?? 0)),
      };
      return { service, signal: { forecast, violating }, stepMs: f.stepMs };
    }
    // No fresh forecast (predictor away or the service too new): the rate the frontends saw.
    const seconds = Math.max((now - since) / 1000, 1e-3);
    const forecast: ServiceForecast | undefined =
      outcomes.arrivals > 0 ? { kind: "quantiles", levels: [0.5], values: [[outcomes.arrivals / seconds]] } : undefined;
    return { service, signal: { forecast, violating }, stepMs: 0 };
  }
}
