/**
 * One service's heterogeneous pool in virtual time, as Kairos evaluates it: Poisson arrivals of queries with
 * batch sizes from a mix, one queue in front of the pool, one query at a time per instance, and a
 * distribution decision (libs/kairos: Kairos's matching, FCFS preferring the base type, random) taken at
 * every arrival and completion. The decision sees service-time estimates (the profile's mean); the instance
 * takes a time drawn around it (lognormal through the profile's p50 and p99), so estimates err as they do
 * on real machines.
 *
 * Throughput at QoS is Kairos's metric: the highest arrival rate at which 99 % of the queries finish within
 * QoS, found by bisection over the rate with the same queries (sizes, gaps, service draws) at every rate.
 */
import { type Random, seededRandom, standardNormal } from "@infergrid/core";
import {
  type Assignment,
  type BatchMix,
  drawServiceMs,
  fcfsPreferBase,
  type InstanceType,
  kairosMatch,
  type LatencyProfile,
  type MatchingContext,
  type PendingQuery,
  type PoolInstance,
  profileOf,
  randomDispatch,
  sampleBatch,
  serviceMs,
} from "@infergrid/kairos";

export const POOL_DISPATCH = ["kairos", "fcfs", "random"] as const;
export type PoolDispatch = (typeof POOL_DISPATCH)[number];

export interface PoolSetting {
  types: readonly InstanceType[];
  model: string;
  qosMs: number;
  /** Index of the base type (the matching's coefficients are relative to it; FCFS prefers it). */
  base: number;
  coefficients: readonly number[];
  /** Kairos's xi: a pair predicted within (1 - safeguard) x QoS counts as meeting it. */
  safeguard: number;
  mix: BatchMix;
  /** Queries per run (Kairos's artifact: 20,000). */
  queries: number;
  /** Share of queries that must meet QoS (Kairos: 0.99). */
  target: number;
}

export interface PoolResult {
  /** Share of all queries that finished within QoS. */
  meetShare: number;
  /** Queries served per type, and their mean latency (ms). */
  perType: { name: string; queries: number; meanMs: number; meanBatch: number }[];
  /** True when the run stopped early because more than 1 - target of the queries had already missed QoS. */
  stoppedEarly: boolean;
}

interface Query {
  arrivalMs: number;
  batch: number;
  /** Standard normal draw that sets its service time around the profile on whichever type serves it. */
  z: number;
}

/** The run's queries at `ratePerSec`: sizes and normal draws from `seed`, gaps from a separate stream. */
function queriesAt(setting: PoolSetting, ratePerSec: number, seed: number): Query[] {
  const sizes = seededRandom(seed);
  const gaps = seededRandom(seed + 7919);
  let t = 0;
  const out: Query[] = [];
  for (let i = 0; i < setting.queries; i++) {
    t += (-Math.log(1 - gaps.uniform()) / ratePerSec) * 1000;
    out.push({ arrivalMs: t, batch: sampleBatch(sizes, setting.mix), z: standardNormal(sizes) });
  }
  return out;
}

export function simulatePool(
  setting: PoolSetting,
  counts: readonly number[],
  dispatch: PoolDispatch,
  ratePerSec: number,
  seed: number,
): PoolResult {
  const { types, model, qosMs } = setting;
  const profiles = types.map((t) => profileOf(t, model));
  const instType: number[] = counts.flatMap((n, t) => Array.from({ length: n }, () => t));
  const n = instType.length;
  if (n === 0) throw new Error("a pool needs at least one instance");
  const estEnd = new Float64Array(n); // when the dispatcher believes each instance frees
  const realEnd = new Float64Array(n).fill(Number.NEGATIVE_INFINITY); // when it does; -Inf when idle
  const ctx: MatchingContext = {
    serviceMs: (type, batch) => serviceMs(profiles[type] as LatencyProfile, batch),
    coefficients: setting.coefficients,
    qosMs,
    safeguard: setting.safeguard,
  };
  const random: Random = seededRandom(seed + 104729);
  const queries = queriesAt(setting, ratePerSec, seed);
  const pending: Query[] = [];
  const served = types.map(() => ({ queries: 0, latency: 0, batch: 0 }));
  const allowedMisses = Math.floor((1 - setting.target) * queries.length);
  let misses = 0;
  let next = 0;
  let done = 0;
  const finish = (q: Query, type: number, endMs: number) => {
    const lat = endMs - q.arrivalMs;
    if (lat > qosMs) misses++;
    const s = served[type] as { queries: number; latency: number; batch: number };
    s.queries++;
    s.latency += lat;
    s.batch += q.batch;
    done++;
  };
  // What each instance is running: its query's end is recorded when it starts, counted when time passes it.
  const running: (Query | undefined)[] = new Array(n).fill(undefined);
  while (done < queries.length && misses <= allowedMisses) {
    // The next event: an arrival or the earliest completion.
    let nextEnd = Number.POSITIVE_INFINITY;
    let who = -1;
    for (let j = 0; j < n; j++) {
      if (running[j] !== undefined && (realEnd[j] as number) < nextEnd) [nextEnd, who] = [realEnd[j] as number, j];
    }
    const arrival = next < queries.length ? (queries[next] as Query).arrivalMs : Number.POSITIVE_INFINITY;
    let now: number;
    if (who >= 0 && nextEnd <= arrival) {
      now = nextEnd;
      finish(running[who] as Query, instType[who] as number, now);
      running[who] = undefined;
    } else {
      now = arrival;
      pending.push(queries[next++] as Query);
    }
    if (pending.length === 0) continue;
    const view: PendingQuery[] = pending.map((q) => ({ batch: q.batch, waitedMs: now - q.arrivalMs }));
    const pool: PoolInstance[] = instType.map((type, j) => ({
      type,
      busyForMs: running[j] === undefined ? 0 : Math.max(1e-6, (estEnd[j] as number) - now),
    }));
    let chosen: Assignment[];
    if (dispatch === "kairos") chosen = kairosMatch(view, pool, ctx);
    else if (dispatch === "fcfs") chosen = fcfsPreferBase(view, pool, setting.base);
    else chosen = randomDispatch(view, pool, random);
    const taken = new Set<number>();
    for (const [qi, j] of chosen) {
      const q = pending[qi] as Query;
      const type = instType[j] as number;
      running[j] = q;
      estEnd[j] = now + ctx.serviceMs(type, q.batch);
      realEnd[j] = now + drawServiceMs(profiles[type] as LatencyProfile, q.batch, q.z);
      taken.add(qi);
    }
    if (taken.size > 0) {
      let w = 0;
      for (let i = 0; i < pending.length; i++) if (!taken.has(i)) pending[w++] = pending[i] as Query;
      pending.length = w;
    }
    // A queue this long cannot drain within QoS: every query in it beyond what the pool serves meanwhile misses.
    if (pending.length > 50 * n + 1000) misses = allowedMisses + 1;
  }
  return {
    meetShare: 1 - misses / queries.length,
    perType: served.map((s, t) => ({
      name: (types[t] as InstanceType).name,
      queries: s.queries,
      meanMs: s.queries === 0 ? 0 : s.latency / s.queries,
      meanBatch: s.queries === 0 ? 0 : s.batch / s.queries,
    })),
    stoppedEarly: misses > allowedMisses,
  };
}

/**
 * The highest arrival rate (queries/s) at which at least `target` of the queries meet QoS: bisection between
 * 0 and `ceiling` (the configuration's upper bound is a natural one) to within 0.5 %.
 */
export function throughputAtQos(
  setting: PoolSetting,
  counts: readonly number[],
  dispatch: PoolDispatch,
  ceiling: number,
  seed: number,
): number {
  const meets = (rate: number) => simulatePool(setting, counts, dispatch, rate, seed).meetShare >= setting.target;
  let lo = 0;
  let hi = ceiling;
  while (meets(hi)) {
    lo = hi;
    hi *= 2;
  }
  // A pool that misses QoS even when nearly idle (a type too slow for the mix's large queries) serves 0.
  const floor = ceiling * 1e-3;
  while (hi - lo > 0.005 * hi && hi > floor) {
    const mid = (lo + hi) / 2;
    if (meets(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}
