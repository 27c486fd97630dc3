/**
 * Faro's hybrid autoscaler (Sec. 4.4) as a pure state machine, the one the global allocator runs and the
 * simulator drives:
 *  - every `periodMs` (default 5 min) a predictive solve: each service's probabilistic forecast is read as a
 *    planning rate per step (a quantile, or the maximum of the samples), turned into a utility table with the
 *    service's SLO, service time and the M/D/c model, and the cluster objective is solved under the capacity
 *    and every service's min/max (the exact solver by default; Faro's published solver can be plugged in), then
 *    shrunk (Sec. 4.3). Replicas added now serve only after the cold start (Sec. 4.1): the tables plan it;
 *  - on every other tick a reactive stage: a service whose violation signal has been up for `reactiveTicks`
 *    consecutive ticks gets `reactiveStep` more, bounded by the free capacity (and its max). It never scales
 *    down: the next predictive solve decides that.
 *
 * Output per service: `shares` (the backends the service may hold: its ordered list length, or its replica
 * count when no frontends scale inside it) and `minWarm` (the floor kept warm inside the share).
 * Everything comes in as plain data and the state goes out explicitly: the caller owns the clock and I/O.
 */

import type { Slo } from "./curves.js";
import { planningRates } from "./curves.js";
import { type LatencyModelKind, replicasForLatency } from "./latency.js";
import type { ObjectiveSpec } from "./objectives.js";
import { type Allocation, type AllocationProblem, solveAllocation } from "./solver.js";

export interface HybridService {
  id: string;
  /** Mean per-request processing time, seconds. */
  processingTime: number;
  slo: Slo;
  /** Default 1. */
  minReplicas?: number;
  /** Default: the capacity. */
  maxReplicas?: number;
  priority?: number;
  /** Default M/D/c. */
  latencyModel?: LatencyModelKind;
}

/**
 * One service's forecast of its arrival rate (requests/s) over the next steps: sample paths
 * (`samples[s][k]`, sample s at step k) or quantiles (`values[k][i]` is the `levels[i]` quantile at step k).
 */
export type ServiceForecast =
  | { kind: "samples"; samples: readonly (readonly number[])[] }
  | { kind: "quantiles"; levels: readonly number[]; values: readonly (readonly number[])[] };

/**
 * Which rate to plan for at each step: the q-quantile (Faro's artifact: 0.6), the largest sample (or the
 * highest quantile given), or the q-quantile's maximum over the whole window applied to every step (the
 * paper's "maximum expected arrival rate over the prediction window").
 */
export type ForecastPlan = { kind: "quantile"; q: number } | { kind: "max" } | { kind: "windowMax"; q: number };

/** How the floor kept warm is chosen at each solve. */
export type WarmRule =
  /** Replicas whose M/D/c latency meets the SLO at the q-quantile of the next step's rate (capped by the share). */
  | { kind: "quantile"; q: number }
  /** A fraction of the share, rounded up. */
  | { kind: "fraction"; f: number }
  /** Each service's minReplicas. */
  | { kind: "min" };

export interface HybridConfig {
  services: readonly HybridService[];
  /** Backends in the pool. */
  capacity: number;
  objective: ObjectiveSpec;
  /** Between predictive solves (default 300 000 ms). */
  periodMs?: number;
  /** Consecutive violating ticks before a reactive raise (default 3: 30 s at Faro's 10 s tick). */
  reactiveTicks?: number;
  /** Backends added by one reactive raise (default 1: additive). */
  reactiveStep?: number;
  /** Default: the 0.6 quantile per step. */
  plan?: ForecastPlan;
  /**
   * Optional second solve at a higher plan that hands out what the first left free: the guaranteed
   * shares stay, the headroom goes where it raises the objective at the higher plan.
   */
  headroom?: ForecastPlan;
  /** Default: the service's minReplicas. */
  warm?: WarmRule;
  /** Forecast step length, seconds (default 60). */
  stepSeconds?: number;
  /** Replicas added now serve only after this many seconds (default 0). */
  coldStartSeconds?: number;
  /** The solver (default: the exact solveAllocation). */
  solve?: (problem: AllocationProblem) => Allocation;
}

export interface HybridState {
  /** When the last predictive solve ran (ms); undefined before the first. */
  lastSolveAt: number | undefined;
  shares: number[];
  minWarm: number[];
  /** Consecutive ticks each service has signalled violations. */
  overloadTicks: number[];
}

export interface HybridInput {
  now: number;
  /** Per service, in config order. Needed for a predictive solve; without it a due solve waits a tick. */
  forecasts?: readonly ServiceForecast[];
  /** Per service: whether it observed SLO violations since the last tick. */
  violating: readonly boolean[];
  /** Per service: replicas warm now (cold-start planning). Default: the current shares. */
  warm?: readonly number[];
}

export interface HybridDecision {
  kind: "solve" | "reactive" | "hold";
  shares: number[];
  minWarm: number[];
  /** Services raised by the reactive stage this tick. */
  raised: number[];
  /** The predictive solve's result (kind "solve" only). */
  allocation?: Allocation;
}

function check(config: HybridConfig): void {
  const n = config.services.length;
  if (!Number.isInteger(config.capacity) || config.capacity < 0)
    throw new RangeError(`capacity must be an integer >= 0, got ${config.capacity}`);
  let mins = 0;
  for (const s of config.services) mins += s.minReplicas ?? 1;
  if (mins > config.capacity) throw new RangeError(`the services' minimum replicas (${mins}) exceed the capacity ${config.capacity}`);
  const t = config.reactiveTicks ?? 3;
  if (!Number.isInteger(t) || t < 1) throw new RangeError(`reactiveTicks must be an integer >= 1, got ${t}`);
  const step = config.reactiveStep ?? 1;
  if (!Number.isInteger(step) || step < 0) throw new RangeError(`reactiveStep must be an integer >= 0, got ${step}`);
  if (n === 0) return;
  for (const s of config.services)
    if (s.maxReplicas !== undefined && s.maxReplicas < (s.minReplicas ?? 1))
      throw new RangeError(`service ${JSON.stringify(s.id)}: maxReplicas below minReplicas`);
}

/** Every service at its minimum (or `initial`, cut to the bounds) before the first solve. */
export function initialHybridState(config: HybridConfig, initial?: readonly number[]): HybridState {
  check(config);
  const shares = config.services.map((s, j) =>
    Math.max(s.minReplicas ?? 1, Math.min(maxOf(config, s), initial?.[j] ?? s.minReplicas ?? 1)),
  );
  // Initial shares beyond the capacity are cut from the largest down: the first solve fixes the rest.
  let over = shares.reduce((a, b) => a + b, 0) - config.capacity;
  while (over > 0) {
    let big = -1;
    for (let j = 0; j < shares.length; j++)
      if (shares[j]! > (config.services[j]!.minReplicas ?? 1) && (big < 0 || shares[j]! > shares[big]!)) big = j;
    if (big < 0) break;
    shares[big]!--;
    over--;
  }
  return {
    lastSolveAt: undefined,
    shares,
    minWarm: config.services.map((s, j) => Math.min(shares[j]!, s.minReplicas ?? 1)),
    overloadTicks: config.services.map(() => 0),
  };
}

function maxOf(config: HybridConfig, s: HybridService): number {
  return Math.min(config.capacity, s.maxReplicas ?? config.capacity);
}

/** The planning rate per step of one forecast. */
export function planForecast(forecast: ServiceForecast, plan: ForecastPlan): number[] {
  let perStep: number[];
  if (forecast.kind === "samples") {
    perStep = planningRates(forecast.samples, plan.kind === "max" ? { kind: "max" } : { kind: "quantile", q: plan.q });
  } else {
    const { levels, values } = forecast;
    if (levels.length === 0 || values.length === 0) throw new RangeError("a quantile forecast needs levels and steps");
    perStep = values.map((row) => {
      if (row.length !== levels.length) throw new RangeError("each step needs one value per quantile level");
      if (plan.kind === "max") return Math.max(...row);
      return interpolateQuantile(levels, row, plan.q);
    });
  }
  const clean = perStep.map((r) => (Number.isFinite(r) && r > 0 ? r : 0));
  if (plan.kind === "windowMax") {
    const m = Math.max(...clean);
    return clean.map(() => m);
  }
  return clean;
}

/** Linear interpolation between the given quantile levels (clamped at the ends). */
function interpolateQuantile(levels: readonly number[], values: readonly number[], q: number): number {
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile must be in [0, 1], got ${q}`);
  // Levels arrive in order (the predictor publishes them so): sorting them anyway cost a sort and an object per
  // level for every step of every forecast at every slow-loop tick. The sort is stable, so in-order levels are
  // read exactly as sorted ones.
  let ordered = true;
  for (let i = 1; i < levels.length && ordered; i++) ordered = levels[i - 1]! <= levels[i]!;
  if (!ordered) {
    const order = levels.map((l, i) => ({ l, v: values[i]! })).sort((a, b) => a.l - b.l);
    return interpolateOrdered(
      order.map((o) => o.l),
      order.map((o) => o.v),
      q,
    );
  }
  return interpolateOrdered(levels, values, q);
}

function interpolateOrdered(levels: readonly number[], values: readonly number[], q: number): number {
  if (q <= levels[0]!) return values[0]!;
  for (let i = 1; i < levels.length; i++) {
    const al = levels[i - 1]!;
    const bl = levels[i]!;
    if (q <= bl) return bl === al ? values[i]! : values[i - 1]! + ((values[i]! - values[i - 1]!) * (q - al)) / (bl - al);
  }
  return values[levels.length - 1]!;
}

function problemFor(
  config: HybridConfig,
  rates: readonly (readonly number[])[],
  warm: readonly number[],
  mins: readonly number[],
): AllocationProblem {
  return {
    jobs: config.services.map((s, j) => ({
      id: s.id,
      processingTime: s.processingTime,
      slo: s.slo,
      rates: rates[j]!,
      minReplicas: mins[j]!,
      maxReplicas: maxOf(config, s),
      currentReplicas: warm[j]!,
      ...(s.priority !== undefined ? { priority: s.priority } : {}),
      ...(s.latencyModel !== undefined ? { latencyModel: s.latencyModel } : {}),
    })),
    capacity: { backends: config.capacity },
    objective: config.objective,
    stepSeconds: config.stepSeconds ?? 60,
    coldStartSeconds: config.coldStartSeconds ?? 0,
  };
}

function warmFloor(config: HybridConfig, forecasts: readonly ServiceForecast[], shares: readonly number[]): number[] {
  const rule = config.warm ?? { kind: "min" };
  return config.services.map((s, j) => {
    const lo = Math.min(shares[j]!, s.minReplicas ?? 1);
    if (rule.kind === "min") return lo;
    if (rule.kind === "fraction") return Math.max(lo, Math.min(shares[j]!, Math.ceil(rule.f * shares[j]!)));
    const next = planForecast(forecasts[j]!, { kind: "quantile", q: rule.q })[0] ?? 0;
    const need =
      replicasForLatency(s.latencyModel ?? "mdc", s.slo.percentile, s.processingTime, next, s.slo.latency, Math.max(1, shares[j]!)) ??
      shares[j]!;
    return Math.max(lo, Math.min(shares[j]!, need));
  });
}

/** One tick of the hybrid loop (call it at the reactive period, e.g. every 10 s). */
export function hybridTick(config: HybridConfig, state: HybridState, input: HybridInput): { state: HybridState; decision: HybridDecision } {
  check(config);
  const n = config.services.length;
  if (input.violating.length !== n) throw new RangeError(`violating needs one entry per service (${n}), got ${input.violating.length}`);
  const period = config.periodMs ?? 300_000;
  const due = state.lastSolveAt === undefined || input.now - state.lastSolveAt >= period;
  if (due && input.forecasts !== undefined) {
    if (input.forecasts.length !== n) throw new RangeError(`forecasts needs one entry per service (${n}), got ${input.forecasts.length}`);
    const forecasts = input.forecasts;
    const warm = input.warm ?? state.shares;
    const solve = config.solve ?? ((p: AllocationProblem) => solveAllocation(p));
    const plan = config.plan ?? { kind: "quantile", q: 0.6 };
    const mins = config.services.map((s) => s.minReplicas ?? 1);
    const allocation = solve(
      problemFor(
        config,
        forecasts.map((f) => planForecast(f, plan)),
        warm,
        mins,
      ),
    );
    let shares = allocation.replicas.slice();
    if (config.headroom !== undefined && shares.reduce((a, b) => a + b, 0) < config.capacity) {
      const head = config.headroom;
      const second = solve(
        problemFor(
          config,
          forecasts.map((f) => planForecast(f, head)),
          warm,
          shares,
        ),
      );
      shares = second.replicas.slice();
    }
    const minWarm = warmFloor(config, forecasts, shares);
    return {
      state: { lastSolveAt: input.now, shares, minWarm, overloadTicks: config.services.map(() => 0) },
      decision: { kind: "solve", shares, minWarm, raised: [], allocation },
    };
  }

  // Reactive stage: additive, only up, only into free capacity.
  const shares = state.shares.slice();
  const overloadTicks = state.overloadTicks.map((t, j) => (input.violating[j] ? t + 1 : 0));
  let free = config.capacity - shares.reduce((a, b) => a + b, 0);
  const need = config.reactiveTicks ?? 3;
  const step = config.reactiveStep ?? 1;
  // Longest-violating first, so a capacity too small for all raises the services hurt the longest.
  const order = [...overloadTicks.keys()]
    .filter((j) => overloadTicks[j]! >= need)
    .sort((a, b) => overloadTicks[b]! - overloadTicks[a]! || a - b);
  const raised: number[] = [];
  for (const j of order) {
    const add = Math.min(step, free, maxOf(config, config.services[j]!) - shares[j]!);
    if (add <= 0) continue;
    shares[j]! += add;
    free -= add;
    overloadTicks[j] = 0;
    raised.push(j);
  }
  return {
    state: { ...state, shares, overloadTicks },
    decision: { kind: raised.length > 0 ? "reactive" : "hold", shares, minWarm: state.minWarm.slice(), raised },
  };
}
