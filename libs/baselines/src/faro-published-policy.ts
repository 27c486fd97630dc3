/**
 * Faro as published, the controller policy (the simulator's `faro-published`): one central loop scales every
 * job of the cluster together (Faro's autoscaler pod), where the other baselines decide each job alone. It is
 * libs/faro's hybrid loop (hybridTick) with Faro's published settings (paper-parameters.md "hybrid loop",
 * "solver", "predictor"); the solve itself is libs/faro's published solver (published-solver.ts):
 *  - every 300 s a predictive solve of Faro-FairSum (gamma = the number of jobs) by the published solver
 *    (solveFaroPublished: the continuous derivative-free search from the current replicas, ceil, greedy
 *    removal within the capacity, shrink at utility 1), planning each forecast step at the 0.6 quantile, with
 *    replicas added now serving only after the cluster's cold start;
 *  - every 10 s the reactive stage: +1 replica into free capacity for a job that violated its SLO on 3
 *    consecutive ticks; it never scales down.
 * A job's shares are its replica counts (no frontends scale inside them).
 *
 * Inputs per job, as the global allocator reads them (libs/allocation shareInput): violating = more of the
 * tick's ended requests missed the SLO (or were dropped) than the SLO's tail allows (1 - percentile); the
 * forecast is the predictor's, or before its first closed step the tick's observed rate as a flat forecast;
 * processing time = the job's mean service time; warm = its ready replicas.
 */

import { seededRandom } from "@infergrid/core";
import {
  type AllocationProblem,
  type HybridConfig,
  type HybridState,
  hybridTick,
  initialHybridState,
  type ObjectiveSpec,
  type ServiceForecast,
  solveFaroPublished,
} from "@infergrid/faro";
import { FARO_PLAN, FARO_TICK_MS } from "./faro-baselines.js";
import type { ClusterFacts, ClusterScalingContext, ClusterScalingPolicy, Observation, ScalingDecision } from "./types.js";

export interface FaroJob {
  name: string;
  /** Mean service time, ms (Faro's processing time p). */
  meanServiceMs: number;
  sloMs: number;
  /** SLO percentile in (0, 100), e.g. 99. */
  percentile: number;
  /** Default 1 (Faro's x >= 1). */
  minReplicas?: number;
  /** Default: the capacity. */
  maxReplicas?: number;
}

export interface FaroPublishedPolicyOptions {
  jobs: readonly FaroJob[];
  /** Default Faro-FairSum (the paper's choice at 36 and 32 replicas). */
  objective?: ObjectiveSpec;
  /** Reactive tick (default 10 s). */
  tickMs?: number;
  /** Between predictive solves (default 300 s). */
  solvePeriodMs?: number;
  /** Consecutive violating ticks before a reactive +1 (default 3). */
  reactiveTicks?: number;
  /** Forecast step, seconds (default 60: the predictor's one-minute bins). */
  stepSeconds?: number;
  /** Seeds the solver's random grouping (used only with more than 10 jobs). */
  seed?: number;
}

/** The tick's violation signal (libs/allocation shareInput's rule): violations / ended > 1 - percentile. */
export function violatingTick(o: Observation, percentile: number): boolean {
  const t = o.tick;
  if (t === undefined || t.ended === 0) return false;
  return t.violations / t.ended > 1 - percentile / 100;
}

const NO_LOAD: ServiceForecast = { kind: "quantiles", levels: [0.5], values: [[0]] };

/** The predictor's forecast, else the tick's arrival rate held flat (what the allocator plans with before one). */
export function forecastOrObserved(o: Observation): ServiceForecast {
  if (o.forecast !== undefined) return o.forecast;
  const t = o.tick;
  if (t === undefined || t.arrivals === 0 || !(t.spanMs > 0)) return NO_LOAD;
  return { kind: "quantiles", levels: [0.5], values: [[t.arrivals / (t.spanMs / 1000)]] };
}

export function faroPublishedPolicy(options: FaroPublishedPolicyOptions): ClusterScalingPolicy<HybridState> {
  const tickMs = options.tickMs ?? FARO_TICK_MS;
  const seed = options.seed ?? 1;
  const configFor = (cluster: ClusterFacts, now: number): HybridConfig => ({
    services: options.jobs.map((j) => ({
      id: j.name,
      processingTime: j.meanServiceMs / 1000,
      slo: { latency: j.sloMs / 1000, percentile: j.percentile },
      minReplicas: j.minReplicas ?? 1,
      ...(j.maxReplicas !== undefined ? { maxReplicas: j.maxReplicas } : {}),
    })),
    capacity: cluster.capacity,
    objective: options.objective ?? { kind: "fairSum" },
    periodMs: options.solvePeriodMs ?? 300_000,
    reactiveTicks: options.reactiveTicks ?? 3,
    reactiveStep: 1,
    plan: FARO_PLAN,
    stepSeconds: options.stepSeconds ?? 60,
    coldStartSeconds: cluster.coldStartMs / 1000,
    // A generator seeded from the time of the solve keeps decide a pure function of its arguments.
    solve: (problem: AllocationProblem) => solveFaroPublished(problem, { random: seededRandom(seed * 1_000_003 + Math.floor(now / 1000)) }),
  });
  return {
    name: "faro-published",
    periodMs: tickMs,
    windows: { rateMs: tickMs, concurrencyMs: tickMs, concurrencyShortMs: tickMs },
    observes: { tick: true, forecast: true },
    initialState: (now: number, replicas: readonly number[], cluster: ClusterFacts) =>
      initialHybridState(configFor(cluster, now), replicas),
    decide(ctx: ClusterScalingContext<HybridState>): { decisions: ScalingDecision[]; state: HybridState } {
      const { observed } = ctx;
      if (observed.length !== options.jobs.length)
        throw new RangeError(`one observation per job (${options.jobs.length}), got ${observed.length}`);
      const { state, decision } = hybridTick(configFor(ctx.cluster, ctx.now), ctx.state, {
        now: ctx.now,
        forecasts: observed.map(forecastOrObserved),
        violating: observed.map((o, j) => violatingTick(o, options.jobs[j]?.percentile ?? 99)),
        warm: observed.map((o) => o.ready),
      });
      return { decisions: decision.shares.map((replicas) => ({ replicas, reason: decision.kind })), state };
    },
  };
}
