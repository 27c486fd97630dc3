/**
 * How the slow loop's signals and shares meet the rest of the allocator, the same in the
 * global-allocator service and in the simulator: a service's measured outcomes become its
 * ShareController input, and the shares become ordered lists through the static planner.
 */
import type { ServiceForecast } from "@infergrid/faro";
import type { ServiceShare, ShareService, ShareSignal } from "./share-controller.js";
import { type AllocationDecision, type AllocationInput, type AllocationPolicy, planStaticAllocation } from "./static.js";

/** Completions needed before the frontends' measured service time replaces the spec's profile. */
export const MEASURED_SERVICE_TIME_MIN = 20;

/** What the slow loop needs of a registered service's spec. */
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

/** A service's outcomes over the last tick, as the frontends report them. */
export interface TickOutcomes {
  arrivals: number;
  completed: number;
  /** Completed within the SLO. */
  withinSlo: number;
  /** Ended without an answer (dropped, refused, timed out). */
  failed: number;
  /** Mean service time of the completed ones, ms (0 if unknown). */
  serviceTimeMeanMs: number;
}

/** Share of the finished requests that missed the SLO or failed. */
export function violationRate(t: Pick<TickOutcomes, "completed" | "withinSlo" | "failed">): number {
  const finished = t.completed + t.failed;
  return finished > 0 ? (t.completed - t.withinSlo + t.failed) / finished : 0;
}

/**
 * One service's ShareController input: its spec (service time measured once enough requests
 * completed, else the profile's mean, else the default), whether it violated its SLO's tail over
 * the tick, and its forecast: the predictor's if fresh, else the rate the frontends saw as a flat
 * one (the predictor away or the service too new), else none (the service is held at its share).
 */
export function shareInput(
  spec: PlannedSpec,
  outcomes: TickOutcomes,
  tickSeconds: number,
  forecast: ServiceForecast | undefined,
  defaultServiceTimeMs: number,
): { service: ShareService; signal: ShareSignal } {
  const violating = violationRate(outcomes) > 1 - spec.percentile / 100;
  const serviceTimeMs =
    outcomes.completed >= MEASURED_SERVICE_TIME_MIN && outcomes.serviceTimeMeanMs > 0
      ? outcomes.serviceTimeMeanMs
      : (spec.profileMeanMs ?? defaultServiceTimeMs);
  const service: ShareService = {
    name: spec.name,
    serviceTimeMs,
    sloMs: spec.latencyThresholdMs,
    percentile: spec.percentile,
    minShare: spec.minBackends,
    maxShare: spec.maxBackends,
    initialShare: spec.initialBackends,
  };
  const observed: ServiceForecast | undefined =
    outcomes.arrivals > 0 ? { kind: "quantiles", levels: [0.5], values: [[outcomes.arrivals / Math.max(tickSeconds, 1e-3)]] } : undefined;
  return { service, signal: { forecast: forecast ?? observed, violating } };
}

/**
 * The allocation policy of the slow loop: the static planner with each list capped at the
 * service's share plus its part of the leftover pool (withLeftover: a backend in the pool costs
 * nothing until a frontend warms it), the warm floor from the plan; the shares alone are the
 * pool's demand. With no shares yet, the static split.
 */
export function shareAllocationPolicy(shares: ReadonlyMap<string, ServiceShare>): AllocationPolicy {
  return (input: AllocationInput): AllocationDecision => {
    if (shares.size === 0) return planStaticAllocation(input);
    const guaranteed = input.services.map((s) => shares.get(s.name)?.share ?? 0);
    const caps = input.services.map((s) => (s.maxBackends > 0 ? Math.max(s.maxBackends, s.minBackends) : Number.POSITIVE_INFINITY));
    const lengths = stickyLengths(
      guaranteed,
      withLeftover(guaranteed, input.poolSize, caps),
      input.services.map((s, j) => Math.min(s.currentList.length, caps[j] ?? Number.POSITIVE_INFINITY)),
      input.poolSize,
    );
    const decision = planStaticAllocation({
      ...input,
      services: input.services.map((s, j) => {
        const length = lengths[j] ?? 0;
        // A service with per-type counts was sized by its Kairos configuration of its share of the budget.
        return shares.has(s.name) && s.typeCounts === undefined
          ? { ...s, maxBackends: Math.max(1, length), minBackends: Math.min(s.minBackends, length) }
          : s;
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
}

/**
 * List lengths that move as few backends as the shares allow: each list keeps what it holds (a backend
 * warm for one service is worth more there than cold for another) unless a service below its share needs
 * it, and the free rest goes towards the leftover split (`target`). Without this, every change of one share
 * re-split the leftover and moved warm backends between services that both had enough.
 */
export function stickyLengths(shares: readonly number[], target: readonly number[], current: readonly number[], pool: number): number[] {
  const lengths = current.map((c, j) => Math.max(c, shares[j] ?? 0));
  let over = lengths.reduce((a, b) => a + b, 0) - pool;
  // Give back from the lists furthest above their leftover split (then above their share), one at a time.
  while (over > 0) {
    let pick = -1;
    for (let j = 0; j < lengths.length; j++) {
      const l = lengths[j] ?? 0;
      if (l <= (shares[j] ?? 0)) continue;
      if (pick < 0) {
        pick = j;
        continue;
      }
      const a = l - (target[j] ?? 0);
      const b = (lengths[pick] ?? 0) - (target[pick] ?? 0);
      if (a > b || (a === b && l - (shares[j] ?? 0) > (lengths[pick] ?? 0) - (shares[pick] ?? 0))) pick = j;
    }
    if (pick < 0) break;
    lengths[pick] = (lengths[pick] ?? 0) - 1;
    over--;
  }
  // What is still free goes to the lists below their leftover split, the furthest below first.
  let free = pool - lengths.reduce((a, b) => a + b, 0);
  while (free > 0) {
    let pick = -1;
    for (let j = 0; j < lengths.length; j++) {
      const gap = (target[j] ?? 0) - (lengths[j] ?? 0);
      if (gap > 0 && (pick < 0 || gap > (target[pick] ?? 0) - (lengths[pick] ?? 0))) pick = j;
    }
    if (pick < 0) break;
    lengths[pick] = (lengths[pick] ?? 0) + 1;
    free--;
  }
  return lengths;
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
      const byRemainder = open
        .map((j, i) => ({ j, r: (quota[i] ?? 0) - Math.floor(quota[i] ?? 0) }))
        .sort((a, b) => b.r - a.r || (shares[b.j] ?? 0) - (shares[a.j] ?? 0) || a.j - b.j);
      for (const { j } of byRemainder.slice(0, left)) lengths[j] = (lengths[j] ?? 0) + 1;
      given = Math.min(left, byRemainder.length);
    }
    left -= given;
  }
  return lengths;
}
