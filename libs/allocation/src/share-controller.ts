/**
 * The slow loop's shares of the pool, as the global-allocator and the simulator both run them:
 * Faro's hybrid loop (libs/faro hybridTick) over each service's forecast and violation signal,
 * plus what a live system needs around it:
 *  - a service with no signal yet (no forecast, no observed load) is held at its initial share
 *    instead of being planned at zero load, and is planned at once when its first signal arrives;
 *  - a change in the set of services re-plans at once from the current shares;
 *  - list lengths = the shares plus the pool they leave over (withLeftover), since a backend in
 *    the pool costs nothing until a frontend warms it; the pool itself is sized for the shares.
 * Pure apart from its own state: time and inputs come in as arguments.
 */

import {
  type ForecastPlan,
  type HybridConfig,
  type HybridDecision,
  type HybridService,
  type HybridState,
  hybridTick,
  initialHybridState,
  type ObjectiveSpec,
  planForecast,
  type ServiceForecast,
  type WarmRule,
} from "@infergrid/faro";

export interface ShareService {
  name: string;
  /** Mean service time planned with, ms. */
  serviceTimeMs: number;
  sloMs: number;
  /** In (0, 100). */
  percentile: number;
  /** At least 1 (Faro's x >= 1). */
  minShare: number;
  /** 0 = the capacity. */
  maxShare: number;
  /** Held while the service has no signal. */
  initialShare: number;
}

export interface ShareSignal {
  /** The forecast (or the observed rate as a flat one); undefined = no signal at all yet. */
  forecast: ServiceForecast | undefined;
  /** More of its requests than its SLO's tail missed the SLO (or failed) since the last tick. */
  violating: boolean;
  /** Backends warm now, if known (the solve plans the cold start of the rest). */
  warm?: number;
}

export interface ShareControllerOptions {
  objective: ObjectiveSpec;
  /** Between predictive solves (Faro: 5 min). */
  solvePeriodMs: number;
  /** Consecutive violating ticks before a reactive raise. */
  reactiveTicks: number;
  reactiveStep?: number;
  plan: ForecastPlan;
  headroom?: ForecastPlan;
  warm?: WarmRule;
  /** Capacity added now serves only after this. */
  coldStartMs: number;
  /** Length of a forecast step. */
  stepMs: number;
  solve?: HybridConfig["solve"];
}

export interface ServiceShare {
  share: number;
  minWarm: number;
  /** The largest rate planned for over the forecast window (req/s). */
  plannedRatePerS: number;
}

export type ShareOutcome =
  | { ok: true; decision: HybridDecision; shares: Map<string, ServiceShare> }
  /** Cannot plan (say, the minimums exceed the capacity): the caller falls back to another split. */
  | { ok: false; error: string };

const NO_LOAD: ServiceForecast = { kind: "quantiles", levels: [0.5], values: [[0]] };

export class ShareController {
  private names: string[] = [];
  private held: number[] = [];
  private state: HybridState | undefined;
  private current = new Map<string, ServiceShare>();

  constructor(private readonly options: ShareControllerOptions) {}

  /** The shares of the last successful tick (empty before one, or after a failed one). */
  get shares(): ReadonlyMap<string, ServiceShare> {
    return this.current;
  }

  /** One tick of the loop; `services` and `signals` are parallel arrays. */
  tick(now: number, services: readonly ShareService[], signals: readonly ShareSignal[], capacity: number): ShareOutcome {
    if (signals.length !== services.length) throw new RangeError("one signal per service");
    const order = services.map((_, j) => j).sort((a, b) => ((services[a]?.name ?? "") < (services[b]?.name ?? "") ? -1 : 1));
    const specs = order.map((j) => services[j] as ShareService);
    const sigs = order.map((j) => signals[j] as ShareSignal);
    const names = specs.map((s) => s.name);
    const held = specs.map((s, j) => {
      if (sigs[j]?.forecast !== undefined) return 0;
      const { min, max } = bounds(s, capacity);
      return Math.min(max, Math.max(min, s.initialShare, this.current.get(s.name)?.share ?? 0));
    });
    const hybridServices: HybridService[] = specs.map((s, j) => {
      const { min, max } = bounds(s, capacity);
      const h = held[j] ?? 0;
      return {
        id: s.name,
        processingTime: s.serviceTimeMs / 1000,
        slo: { latency: s.sloMs / 1000, percentile: s.percentile },
        minReplicas: h > 0 ? h : min,
        maxReplicas: h > 0 ? h : max,
      };
    });
    const o = this.options;
    const config: HybridConfig = {
      services: hybridServices,
      capacity,
      objective: o.objective,
      periodMs: o.solvePeriodMs,
      reactiveTicks: o.reactiveTicks,
      plan: o.plan,
      warm: o.warm ?? { kind: "quantile", q: 0.5 },
      stepSeconds: o.stepMs / 1000,
      coldStartSeconds: o.coldStartMs / 1000,
      ...(o.reactiveStep !== undefined ? { reactiveStep: o.reactiveStep } : {}),
      ...(o.headroom !== undefined ? { headroom: o.headroom } : {}),
      ...(o.solve !== undefined ? { solve: o.solve } : {}),
    };
    try {
      const sameSet = this.state !== undefined && names.length === this.names.length && names.every((n, j) => this.names[j] === n);
      const heldChanged = !sameSet || held.some((h, j) => h !== this.held[j]);
      const state =
        this.state && sameSet && !heldChanged
          ? this.state
          : initialHybridState(
              config,
              names.map((n) => this.current.get(n)?.share ?? 0),
            );
      const forecasts = sigs.map((s) => s.forecast ?? NO_LOAD);
      const warm = sigs.every((s) => s.warm !== undefined) ? sigs.map((s) => s.warm ?? 0) : undefined;
      // A fresh state has no solve yet, so a re-plan solves on this tick.
      const { state: next, decision } = hybridTick(config, state, {
        now,
        forecasts,
        violating: sigs.map((s) => s.violating),
        ...(warm ? { warm } : {}),
      });
      this.names = names;
      this.held = held;
      this.state = next;
      this.current = new Map(
        names.map((n, j) => [
          n,
          {
            share: decision.shares[j] ?? 0,
            minWarm: decision.minWarm[j] ?? 0,
            plannedRatePerS: Math.max(0, ...planForecast(forecasts[j] ?? NO_LOAD, o.plan)),
          },
        ]),
      );
      return { ok: true, decision, shares: this.current };
    } catch (err) {
      this.state = undefined;
      this.current = new Map();
      return { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
  }
}

function bounds(s: ShareService, capacity: number): { min: number; max: number } {
  const min = Math.max(1, s.minShare);
  return { min, max: s.maxShare > 0 ? Math.max(min, s.maxShare) : Math.max(min, capacity) };
}
