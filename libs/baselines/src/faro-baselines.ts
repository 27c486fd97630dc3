/**
 * The baselines of Faro's evaluation (Faro, section 6 "Baselines", Table 6; paper-parameters.md "baselines"),
 * each deciding one job alone:
 *  - FairShare: no autoscaling, floor(capacity / jobs) replicas each (fixedPolicy with fairShareReplicas);
 *  - Oneshot: reactive; after 30 s of overload (p99 of each tick over the SLO) the job goes to
 *    ceil(current x p99 / SLO) replicas, after 5 min of underload (p99 under the SLO) down the same way;
 *  - AIAD: reactive; +1 replica after 30 s of overload, -1 after 5 min of underload;
 *  - MArk/Cocktail/Barista: proactive; every 10 s, ceil(max planned rate over the forecast window x p / SLO).
 * The 30 s / 5 min triggers are the paper's ("aggressive scale-up and conservative scale-down"), the same as
 * Faro's reactive stage; with the 10 s tick they are 3 and 30 consecutive ticks.
 *
 * The latency signal is each tick's p99 over the requests that ended in it, a dropped request counting as
 * infinite latency (Faro's metric).
 */

import { type ForecastPlan, planForecast } from "@infergrid/faro";
import { fixedPolicy } from "./fixed.js";
import { clamp, type ReplicaBounds, type ScalingContext, type ScalingDecision, type ScalingPolicy, type TickWindow } from "./types.js";

/** Faro's reactive tick (its short-term autoscaler's period, also the baselines'). */
export const FARO_TICK_MS = 10_000;
export const FARO_OVERLOAD_MS = 30_000;
export const FARO_UNDERLOAD_MS = 300_000;

/** FairShare's replicas per job: floor(capacity / jobs), as the paper writes it (0 if jobs outnumber replicas). */
export function fairShareReplicas(capacity: number, jobs: number): number {
  if (!(jobs > 0)) throw new RangeError(`jobs must be > 0, got ${jobs}`);
  return Math.max(0, Math.floor(capacity / jobs));
}

/** FairShare: no autoscaling, the equal share for the whole run. */
export function fairSharePolicy(capacity: number, jobs: number): ScalingPolicy<null> {
  return { ...fixedPolicy(fairShareReplicas(capacity, jobs)), name: "fairshare" };
}

export interface ReactiveOptions extends Partial<ReplicaBounds> {
  /** Latency target of the job's SLO (its p99), ms. */
  sloMs: number;
  tickMs?: number;
  /** Overload this long (in whole ticks, rounded up) before a scale-up. */
  overloadMs?: number;
  /** Underload this long before a scale-down. */
  underloadMs?: number;
}

export interface ReactiveState {
  /** Consecutive ticks over the SLO. */
  readonly overTicks: number;
  /** Consecutive ticks under the SLO. */
  readonly underTicks: number;
}

/**
 * How one tick reads: over (p99 > SLO), under (p99 < SLO, or idle: nothing arrived and nothing ended), or
 * unknown (nothing ended though requests arrived, or no tick window given): unknown breaks both runs, so a
 * trigger needs an unbroken run of evidence.
 */
export type TickLoad = "over" | "under" | "unknown";

export function tickLoad(tick: TickWindow | undefined, sloMs: number): TickLoad {
  if (tick === undefined) return "unknown";
  if (tick.ended === 0) return tick.arrivals === 0 ? "under" : "unknown";
  if (tick.p99Ms > sloMs) return "over";
  if (tick.p99Ms < sloMs) return "under";
  return "unknown";
}

/**
 * Oneshot's new count: ceil(current x p99 / SLO), at least 1, within the bounds. An infinite p99 (more than
 * 1 % of the tick's requests dropped) gives no finite ratio; it is read as the largest: the job goes to its
 * max replicas (doubles if it has no max). An idle tick (nothing ended) reads as ratio 0: the minimum.
 */
export function oneshotReplicas(current: number, p99Ms: number, sloMs: number, bounds: ReplicaBounds): number {
  const base = Math.max(1, current);
  if (p99Ms === Number.POSITIVE_INFINITY) return clamp(Number.isFinite(bounds.maxReplicas) ? bounds.maxReplicas : 2 * base, bounds);
  const ratio = Number.isFinite(p99Ms) && p99Ms > 0 ? p99Ms / sloMs : 0;
  // Tolerance: 3 x (720/720) must stay 3, not become 4 on a rounding error.
  return clamp(Math.max(1, Math.ceil(base * ratio - 1e-9)), bounds);
}

interface Reactive {
  bounds: ReplicaBounds;
  sloMs: number;
  periodMs: number;
  upTicks: number;
  downTicks: number;
}

function reactive(options: ReactiveOptions): Reactive {
  const periodMs = options.tickMs ?? FARO_TICK_MS;
  if (!(periodMs > 0)) throw new RangeError(`tickMs must be > 0, got ${periodMs}`);
  if (!(options.sloMs > 0)) throw new RangeError(`sloMs must be > 0, got ${options.sloMs}`);
  return {
    bounds: { minReplicas: options.minReplicas ?? 1, maxReplicas: options.maxReplicas ?? Number.POSITIVE_INFINITY },
    sloMs: options.sloMs,
    periodMs,
    upTicks: Math.max(1, Math.ceil((options.overloadMs ?? FARO_OVERLOAD_MS) / periodMs - 1e-9)),
    downTicks: Math.max(1, Math.ceil((options.underloadMs ?? FARO_UNDERLOAD_MS) / periodMs - 1e-9)),
  };
}

/**
 * The triggers both reactive baselines share: count the runs of over / under ticks; at a trigger `scale`
 * gives the new count and both runs restart (the next move needs a new run, so a scale-up is not repeated
 * every tick while its replicas start).
 */
function reactivePolicy(
  name: string,
  options: ReactiveOptions,
  scale: (dir: "up" | "down", current: number, tick: TickWindow | undefined, r: Reactive) => number,
): ScalingPolicy<ReactiveState> {
  const r = reactive(options);
  // The metric windows are unused (the tick window is the signal); they only size the controller's rings.
  const w = r.periodMs;
  return {
    name,
    periodMs: r.periodMs,
    windows: { rateMs: w, concurrencyMs: w, concurrencyShortMs: w },
    observes: { tick: true },
    initialState: () => ({ overTicks: 0, underTicks: 0 }),
    decide(ctx: ScalingContext<ReactiveState>): { decision: ScalingDecision; state: ReactiveState } {
      const { observed } = ctx;
      const load = tickLoad(observed.tick, r.sloMs);
      const overTicks = load === "over" ? ctx.state.overTicks + 1 : 0;
      const underTicks = load === "under" ? ctx.state.underTicks + 1 : 0;
      const current = observed.target;
      if (overTicks >= r.upTicks) {
        const replicas = scale("up", current, observed.tick, r);
        return { decision: { replicas, reason: "overload" }, state: { overTicks: 0, underTicks: 0 } };
      }
      if (underTicks >= r.downTicks) {
        const replicas = scale("down", current, observed.tick, r);
        return { decision: { replicas, reason: "underload" }, state: { overTicks: 0, underTicks: 0 } };
      }
      return {
        decision: { replicas: clamp(current, r.bounds), reason: load === "unknown" ? "no-signal" : `${load}-wait` },
        state: { overTicks, underTicks },
      };
    },
  };
}

/** Oneshot: a replica count proportional to latency / SLO, at the 30 s / 5 min triggers. */
export function oneshotPolicy(options: ReactiveOptions): ScalingPolicy<ReactiveState> {
  return reactivePolicy("oneshot", options, (_dir, current, tick, r) =>
    // An idle tick (nothing ended) scales down to the minimum.
    oneshotReplicas(current, tick !== undefined && tick.ended > 0 ? tick.p99Ms : 0, r.sloMs, r.bounds),
  );
}

/** AIAD: one replica more after 30 s of overload, one fewer after 5 min of underload. */
export function aiadPolicy(options: ReactiveOptions): ScalingPolicy<ReactiveState> {
  return reactivePolicy("aiad", options, (dir, current, _tick, r) => clamp(current + (dir === "up" ? 1 : -1), r.bounds));
}

export interface MarkOptions extends Partial<ReplicaBounds> {
  sloMs: number;
  /** The job's mean service time (p), ms. */
  meanServiceMs: number;
  /** Default 10 s. */
  periodMs?: number;
  /** The rate planned per forecast step (default: Faro's 0.6 quantile). */
  plan?: ForecastPlan;
  /** Forecast steps the maximum is taken over (default: all the forecast has; the predictor gives 7). */
  horizonSteps?: number;
}

/** Faro's planning quantile. */
export const FARO_PLAN: ForecastPlan = { kind: "quantile", q: 0.6 };

/**
 * MArk/Cocktail/Barista's count as paper-parameters.md writes the rule: ceil(rate x p / SLO) with the rate in
 * req/s and p and the SLO in seconds, at least 1. Read as a capacity rule, it gives each replica SLO / p
 * requests per second (SLO taken as a number of seconds): at Faro's 720 ms SLO and 180 ms p that is 4 req/s,
 * 72 % of the 1/p a replica can serve. The rule is not unit-free (an SLO over 1 s would load a replica past
 * 1/p); it is kept exactly as documented.
 */
export function markReplicas(ratePerS: number, meanServiceMs: number, sloMs: number): number {
  const rate = Number.isFinite(ratePerS) && ratePerS > 0 ? ratePerS : 0;
  // Tolerance: 10 x 0.18 / 0.72 = 2.5 must not drift; an exact integer must not round up on an error.
  return Math.max(1, Math.ceil((rate * (meanServiceMs / 1000)) / (sloMs / 1000) - 1e-9));
}

/** The planned rate MArk sizes for: the maximum over the window of the planned rate per step (req/s). */
export function markPlannedRate(forecast: Parameters<typeof planForecast>[0], plan: ForecastPlan, horizonSteps?: number): number {
  const perStep = planForecast(forecast, plan);
  const window = horizonSteps === undefined ? perStep : perStep.slice(0, horizonSteps);
  return window.length > 0 ? Math.max(...window) : 0;
}

/**
 * MArk/Cocktail/Barista, proactive and per job: each period, the count for the maximum planned rate of the
 * forecast window. Before the predictor's first forecast (its first closed step) the job keeps its count.
 */
export function markPolicy(options: MarkOptions): ScalingPolicy<null> {
  const periodMs = options.periodMs ?? FARO_TICK_MS;
  const bounds: ReplicaBounds = { minReplicas: options.minReplicas ?? 1, maxReplicas: options.maxReplicas ?? Number.POSITIVE_INFINITY };
  const plan = options.plan ?? FARO_PLAN;
  if (!(options.sloMs > 0)) throw new RangeError(`sloMs must be > 0, got ${options.sloMs}`);
  if (!(options.meanServiceMs > 0)) throw new RangeError(`meanServiceMs must be > 0, got ${options.meanServiceMs}`);
  return {
    name: "mark",
    periodMs,
    windows: { rateMs: periodMs, concurrencyMs: periodMs, concurrencyShortMs: periodMs },
    observes: { forecast: true },
    initialState: () => null,
    decide(ctx: ScalingContext<null>): { decision: ScalingDecision; state: null } {
      const f = ctx.observed.forecast;
      if (f === undefined) return { decision: { replicas: clamp(ctx.observed.target, bounds), reason: "no-forecast" }, state: null };
      const rate = markPlannedRate(f, plan, options.horizonSteps);
      return {
        decision: { replicas: clamp(markReplicas(rate, options.meanServiceMs, options.sloMs), bounds), reason: "forecast" },
        state: null,
      };
    },
  };
}
