import { type AllocationDecision, type AllocationInput, planStaticAllocation } from "@infergrid/allocation";
import { lognormalMean } from "@infergrid/core";
import {
  type ForecastPlan,
  type HybridConfig,
  type HybridService,
  type HybridState,
  hybridTick,
  initialHybridState,
  type ObjectiveSpec,
  planForecast,
  type ServiceForecast,
} from "@infergrid/faro";
import type { control } from "@infergrid/proto";
import type { Logger } from "@infergrid/runtime";
import { type SignalBook, violationRate } from "./signals.js";

export interface PlannerOptions {
  objective: ObjectiveSpec;
  /** Between predictive solves (Faro: 5 min). */
  solvePeriodMs: number;
  /** The reactive stage's tick (Faro: 10 s); violations are judged over each tick. */
  tickMs: number;
  plan: ForecastPlan;
  /** Consecutive violating ticks before a reactive raise. */
  reactiveTicks: number;
  /** Capacity added now serves only after this. */
  coldStartMs: number;
  /** A forecast older than this is not planned from. */
  forecastMaxAgeMs: number;
  /** Service time assumed when neither a profile nor measurements exist, ms. */
  defaultServiceTimeMs: number;
}

interface Share {
  share: number;
  minWarm: number;
  plannedRatePerS: number;
}

/** Completions needed before the frontends' measured service time replaces the spec's profile. */
const MEASURED_SERVICE_TIME_MIN = 20;

/**
 * The slow loop in the allocator: Faro's hybrid loop (libs/faro) run every tick over the
 * predictor's forecasts and the frontends' load reports; its shares become each service's list
 * length and warm floor, and the frontends keep scaling inside them. A service with neither a
 * forecast nor a report yet keeps its initial share instead of being planned at zero load.
 */
export class SharePlanner {
  private names: string[] = [];
  private config: HybridConfig | undefined;
  private state: HybridState | undefined;
  private shares = new Map<string, Share>();
  private lastTick = Number.NEGATIVE_INFINITY;
  private lastError = "";

  constructor(
    private readonly signals: SignalBook,
    private readonly options: PlannerOptions,
    private readonly logger: Logger,
  ) {}

  /** One tick, if one is due: `services` are the registered specs, `capacity` the backends to share. */
  tick(now: number, services: readonly PlannedSpec[], capacity: number): void {
    if (now - this.lastTick < this.options.tickMs) return;
    const since = this.lastTick;
    this.lastTick = now;
    const specs = [...services].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    if (specs.length === 0) {
      this.shares.clear();
      this.state = undefined;
      return;
    }
    const inputs = specs.map((s) => this.inputOf(s, now, since));
    const hybridServices: HybridService[] = specs.map((s, j) => {
      const input = inputs[j] as ServiceInput;
      const min = Math.max(1, s.minBackends);
      const max = s.maxBackends > 0 ? Math.max(min, s.maxBackends) : capacity;
      // No signal at all yet: held at its initial share (min = max) until one arrives.
      const held = input.forecast === undefined ? Math.min(max, Math.max(min, s.initialBackends, this.shares.get(s.name)?.share ?? 0)) : 0;
      return {
        id: s.name,
        processingTime: input.serviceTimeMs / 1000,
        slo: { latency: s.latencyThresholdMs / 1000, percentile: s.percentile },
        minReplicas: held > 0 ? held : min,
        maxReplicas: held > 0 ? held : max,
      };
    });
    const names = specs.map((s) => s.name);
    const config: HybridConfig = {
      services: hybridServices,
      capacity,
      objective: this.options.objective,
      periodMs: this.options.solvePeriodMs,
      reactiveTicks: this.options.reactiveTicks,
      plan: this.options.plan,
      warm: { kind: "quantile", q: 0.5 },
      stepSeconds: (inputs.find((i) => i.stepMs > 0)?.stepMs ?? 60_000) / 1000,
      coldStartSeconds: this.options.coldStartMs / 1000,
    };
    try {
      const sameSet = this.state !== undefined && names.length === this.names.length && names.every((n, j) => this.names[j] === n);
      const heldChanged = this.config?.services.some((s, j) => s.minReplicas !== hybridServices[j]?.minReplicas) ?? true;
      let state = this.state;
      if (!state || !sameSet || heldChanged) {
        // A new service set (or one leaving its held share) plans at once from the current shares.
        state = initialHybridState(
          config,
          names.map((n) => this.shares.get(n)?.share ?? 0),
        );
      }
      const forecasts = inputs.map((i) => i.forecast ?? flat(0, 1));
      const { state: next, decision } = hybridTick(config, state, {
        now,
        forecasts,
        violating: inputs.map((i) => i.violating),
      });
      this.names = names;
      this.config = config;
      this.state = next;
      this.shares = new Map(
        names.map((n, j) => [
          n,
          {
            share: decision.shares[j] ?? 0,
            minWarm: decision.minWarm[j] ?? 0,
            plannedRatePerS: Math.max(0, ...planForecast(forecasts[j] as ServiceForecast, this.options.plan)),
          },
        ]),
      );
      if (decision.kind !== "hold") {
        this.logger.info(
          {
            kind: decision.kind,
            shares: Object.fromEntries(names.map((n, j) => [n, decision.shares[j]])),
            raised: decision.raised.map((j) => names[j]),
            capacity,
          },
          decision.kind === "solve" ? "planned the services' shares" : "raised shares of services violating their SLO",
        );
      }
      this.lastError = "";
    } catch (err) {
      // Say, the services' minimums exceed the capacity: the static split takes over until they fit.
      const message = err instanceof Error ? err.message : String(err);
      if (message !== this.lastError) this.logger.warn({ err: message }, "slow loop cannot plan; the static split applies");
      this.lastError = message;
      this.shares.clear();
      this.state = undefined;
    }
  }

  /**
   * The allocation policy: the static planner with each list capped at the service's share plus
   * its part of the pool the shares leave over. Backends already in the pool cost nothing until a
   * frontend warms one, so the leftover goes to the lists as burst room (in proportion to the
   * shares) instead of idling; the shares alone are what the pool is sized for.
   */
  readonly policy = (input: AllocationInput): AllocationDecision => {
    if (this.shares.size === 0) return planStaticAllocation(input);
    const shares = input.services.map((s) => this.shares.get(s.name)?.share ?? 0);
    const caps = input.services.map((s) => (s.maxBackends > 0 ? Math.max(s.maxBackends, s.minBackends) : Number.POSITIVE_INFINITY));
    const lengths = withLeftover(shares, input.poolSize, caps);
    const decision = planStaticAllocation({
      ...input,
      services: input.services.map((s, j) => {
        const p = this.shares.get(s.name);
        const length = lengths[j] ?? 0;
        return p ? { ...s, maxBackends: Math.max(1, length), minBackends: Math.min(s.minBackends, length) } : s;
      }),
    });
    for (const [name, plan] of decision.services) {
      const p = this.shares.get(name);
      if (!p) continue;
      plan.minWarm = Math.min(p.minWarm, plan.list.length);
      plan.demand = p.share;
      decision.minWarm.set(name, plan.minWarm);
    }
    return decision;
  };

  /** What the plan says of a service, for the published AllocationPlan. */
  describe(name: string): { predictedRatePerS: number; share: number } | undefined {
    const p = this.shares.get(name);
    return p && { predictedRatePerS: p.plannedRatePerS, share: p.share };
  }

  private inputOf(spec: PlannedSpec, now: number, since: number): ServiceInput {
    const outcomes = this.signals.outcomes(spec.name, Number.isFinite(since) ? since : now - this.options.tickMs);
    const violating = violationRate(outcomes) > 1 - spec.percentile / 100;
    const serviceTimeMs =
      outcomes.completed >= MEASURED_SERVICE_TIME_MIN && outcomes.serviceTimeMeanMs > 0
        ? outcomes.serviceTimeMeanMs
        : (spec.profileMeanMs ?? this.options.defaultServiceTimeMs);
    const f = this.signals.forecast(spec.name, now, this.options.forecastMaxAgeMs);
    if (f) {
      return {
        serviceTimeMs,
        violating,
        stepMs: f.stepMs,
        forecast: {
          kind: "quantiles",
          levels: f.quantiles.map((q) => q.quantile),
          values: (f.quantiles[0]?.ratePerS ?? []).map((_, k) => f.quantiles.map((q) => q.ratePerS[k] ?? 0)),
        },
      };
    }
    // No forecast (predictor away or too new): the rate the frontends saw over the last tick.
    const seconds = Number.isFinite(since) ? (now - since) / 1000 : this.options.tickMs / 1000;
    const observed = outcomes.arrivals > 0 ? flat(outcomes.arrivals / Math.max(seconds, 1e-3), 1) : undefined;
    return { serviceTimeMs, violating, stepMs: 0, ...(observed ? { forecast: observed } : {}) };
  }
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

interface ServiceInput {
  serviceTimeMs: number;
  violating: boolean;
  stepMs: number;
  forecast?: ServiceForecast;
}

/**
 * Shares plus the pool they leave over, split in proportion to the shares (largest remainders
 * first), each within its cap.
 */
export function withLeftover(shares: readonly number[], pool: number, caps: readonly number[]): number[] {
  const lengths = shares.map((s, j) => Math.min(s, caps[j] ?? Number.POSITIVE_INFINITY));
  let left = pool - lengths.reduce((a, b) => a + b, 0);
  while (left > 0) {
    const open = lengths.map((_, j) => j).filter((j) => (lengths[j] ?? 0) < (caps[j] ?? Number.POSITIVE_INFINITY));
    const weight = open.reduce((a, j) => a + Math.max(shares[j] ?? 0, 1), 0);
    if (open.length === 0 || weight === 0) break;
    const quota = open.map((j) => (left * Math.max(shares[j] ?? 0, 1)) / weight);
    let given = 0;
    open.forEach((j, i) => {
      const add = Math.min(Math.floor(quota[i] ?? 0), (caps[j] ?? Number.POSITIVE_INFINITY) - (lengths[j] ?? 0));
      lengths[j] = (lengths[j] ?? 0) + add;
      given += add;
    });
    if (given === 0) {
      // Less than one each: the largest remainders, then the larger shares.
      const order = open
        .map((j, i) => ({ j, r: (quota[i] ?? 0) - Math.floor(quota[i] ?? 0) }))
        .sort((a, b) => b.r - a.r || (shares[b.j] ?? 0) - (shares[a.j] ?? 0) || a.j - b.j);
      for (const { j } of order.slice(0, left)) lengths[j] = (lengths[j] ?? 0) + 1;
      given = Math.min(left, order.length);
    }
    left -= given;
  }
  return lengths;
}

function flat(rate: number, steps: number): ServiceForecast {
  return { kind: "quantiles", levels: [0.5], values: Array.from({ length: steps }, () => [rate]) };
}
