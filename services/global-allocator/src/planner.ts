import {
  type AllocationPolicy,
  type PlannedSpec,
  ShareController,
  type ShareControllerOptions,
  type ShareService,
  type ShareSignal,
  shareAllocationPolicy,
  shareInput,
} from "@infergrid/allocation";
import { lognormalMean } from "@infergrid/core";
import { withFloors } from "@infergrid/fapes";
import type { ForecastPlan, ServiceForecast } from "@infergrid/faro";
import type { control } from "@infergrid/proto";
import type { Logger } from "@infergrid/runtime";
import type { SignalBook } from "./signals.js";

export type { PlannedSpec };

export interface PlannerOptions extends Omit<ShareControllerOptions, "stepMs"> {
  /** The reactive stage's tick (Faro: 10 s); violations are judged over each tick. */
  tickMs: number;
  /** A forecast older than this is not planned from. */
  forecastMaxAgeMs: number;
  /** Service time assumed when neither a profile nor measurements exist, ms. */
  defaultServiceTimeMs: number;
  /**
   * A second plan, fed the same signals at this forecast plan, whose shares the loans' floors read
   * (libs/fapes LOAN_FLOOR_PLAN; `floorShare`); undefined: none (no best-effort jobs to lend to).
   */
  floorPlan?: ForecastPlan;
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

/** The last predictive solve, as the published plan reports it. */
export interface LastSolve {
  objective: number;
  upperBound: number;
  /** The slow loop's tick that solved, wall-clock ms. */
  solveMs: number;
  at: number;
  /** Planned utility per service. */
  utilities: ReadonlyMap<string, number>;
}

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
  private floorController: ShareController | undefined;
  private stepMs = DEFAULT_STEP_MS;
  private lastTick = Number.NEGATIVE_INFINITY;
  private lastError = "";
  private solved: LastSolve | undefined;

  constructor(
    private readonly signals: SignalBook,
    private readonly options: PlannerOptions,
    private readonly logger: Logger,
  ) {
    this.controller = new ShareController({ ...options, stepMs: this.stepMs });
    this.floorController = this.floorControllerFor(this.stepMs);
  }

  private floorControllerFor(stepMs: number): ShareController | undefined {
    const plan = this.options.floorPlan;
    return plan === undefined ? undefined : new ShareController({ ...this.options, plan, stepMs });
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
      this.floorController = this.floorControllerFor(stepMs);
    }
    const started = performance.now();
    const shareServices = inputs.map((i) => i.service);
    const signals = inputs.map((i) => i.signal);
    const outcome = this.controller.tick(now, shareServices, signals, capacity);
    const tickMs = performance.now() - started;
    this.floorController?.tick(now, shareServices, signals, capacity);
    if (!outcome.ok) {
      // Say, the services' minimums exceed the capacity: the static split takes over until they fit.
      if (outcome.error !== this.lastError) this.logger.warn({ err: outcome.error }, "slow loop cannot plan; the static split applies");
      this.lastError = outcome.error;
      return;
    }
    this.lastError = "";
    const d = outcome.decision;
    if (d.kind === "solve" && d.allocation) {
      const names = [...outcome.shares.keys()];
      const a = d.allocation;
      this.solved = {
        objective: a.objective,
        upperBound: a.upperBound,
        solveMs: tickMs,
        at: now,
        utilities: new Map(names.map((n, j) => [n, a.utilities[j] ?? 0])),
      };
    }
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

  /** The allocation policy: libs/allocation's, over the last successful tick's shares. */
  readonly policy: AllocationPolicy = (input) => shareAllocationPolicy(this.controller.shares)(input);

  /** The same with each share raised to a floor (the loans' per-service floors, libs/fapes withFloors). */
  policyWithFloors(floors: ReadonlyMap<string, number>): AllocationPolicy {
    return (input) => shareAllocationPolicy(withFloors(this.controller.shares, floors, input.poolSize))(input);
  }

  /** A service's share of the loans' floor plan (undefined: no such plan, or not planned yet). */
  floorShare(name: string): number | undefined {
    return this.floorController?.shares.get(name)?.share;
  }

  /** What the plan says of a service, for the published AllocationPlan. */
  describe(name: string): { predictedRatePerS: number; share: number; utility: number } | undefined {
    const p = this.controller.shares.get(name);
    return p && { predictedRatePerS: p.plannedRatePerS, share: p.share, utility: this.solved?.utilities.get(name) ?? 0 };
  }

  /** The last predictive solve (undefined before one). */
  get lastSolve(): LastSolve | undefined {
    return this.solved;
  }

  private inputOf(spec: PlannedSpec, now: number, since: number): { service: ShareService; signal: ShareSignal; stepMs: number } {
    const outcomes = this.signals.outcomes(spec.name, since);
    const tickSeconds = Math.max((now - since) / 1000, 1e-3);
    const f = this.signals.forecast(spec.name, now, this.options.forecastMaxAgeMs);
    const forecast: ServiceForecast | undefined = f && {
      kind: "quantiles",
      levels: f.quantiles.map((q) => q.quantile),
      values: (f.quantiles[0]?.ratePerS ?? []).map((_, k) => f.quantiles.map((q) => q.ratePerS[k] ?? 0)),
    };
    const { service, signal } = shareInput(spec, outcomes, tickSeconds, forecast, this.options.defaultServiceTimeMs);
    return { service, signal, stepMs: f ? f.stepMs : 0 };
  }
}
