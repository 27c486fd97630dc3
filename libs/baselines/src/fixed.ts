/**
 * A fixed allocation sized for the peak: what an operator provisions without an autoscaler. Each job gets,
 * for the whole run, the replicas its busiest minute needs to meet its latency SLO at its percentile with a
 * central queue, sized with the M/M/c tail of the Faro artifact (paper-parameters.md, "latency model"):
 *
 *   k-th percentile wait of M/M/c = max(0, ln(C / (1 - k/100)) / (c / p - lambda)),  C = Erlang C
 *
 * charged in full (not halved for M/D/c) and added to the service time's own k-th percentile, a deliberately
 * conservative sum, since an operator sizing for the peak wants no violation at the peak.
 */
import type { ScalingContext, ScalingDecision, ScalingPolicy } from "./types.js";

/** Erlang C: P(wait > 0) in M/M/c with offered load a = lambda x p (erlangs); 1 if unstable. */
export function erlangC(c: number, a: number): number {
  if (a <= 0) return 0;
  if (!(a < c)) return 1;
  // Erlang B by its stable recurrence, then C from B.
  let b = 1;
  for (let k = 1; k <= c; k++) b = (a * b) / (k + a * b);
  const rho = a / c;
  return b / (1 - rho + rho * b);
}

/** Mean wait in queue of M/M/c (ms), service mean p (ms), rate lambda (per ms). */
export function mmcMeanWait(c: number, lambdaPerMs: number, meanServiceMs: number): number {
  const a = lambdaPerMs * meanServiceMs;
  if (!(a < c)) return Number.POSITIVE_INFINITY;
  return erlangC(c, a) / (c / meanServiceMs - lambdaPerMs);
}

/** The k-th percentile (k in (0, 100)) of the M/M/c wait (ms). */
export function mmcWaitPercentile(c: number, lambdaPerMs: number, meanServiceMs: number, k: number): number {
  const a = lambdaPerMs * meanServiceMs;
  if (!(a < c)) return Number.POSITIVE_INFINITY;
  const C = erlangC(c, a);
  return Math.max(0, Math.log(C / (1 - k / 100)) / (c / meanServiceMs - lambdaPerMs));
}

export interface PeakSizing {
  peakRatePerSec: number;
  meanServiceMs: number;
  /** The service time's own k-th percentile (ms). */
  servicePercentileMs: number;
  sloMs: number;
  /** e.g. 99. */
  percentile: number;
  /** Fixed delays every request pays (network), ms. */
  fixedDelayMs?: number;
}

/** The smallest c whose wait percentile plus the service percentile fits the SLO (at least 1). */
export function peakSizedReplicas(s: PeakSizing, maxReplicas = 10_000): number {
  const lambda = s.peakRatePerSec / 1000;
  const budget = s.sloMs - (s.fixedDelayMs ?? 0) - s.servicePercentileMs;
  let c = Math.max(1, Math.floor(lambda * s.meanServiceMs) + 1);
  for (; c < maxReplicas; c++) {
    if (mmcWaitPercentile(c, lambda, s.meanServiceMs, s.percentile) <= budget) return c;
  }
  return maxReplicas;
}

export function fixedPolicy(replicas: number): ScalingPolicy<null> {
  if (!(Number.isInteger(replicas) && replicas >= 0)) throw new RangeError(`fixed replicas must be an integer >= 0, got ${replicas}`);
  return {
    name: "fixed",
    // Nothing changes; a slow tick keeps the controller's bookkeeping (and the start-up) uniform.
    periodMs: 60_000,
    windows: { rateMs: 60_000, concurrencyMs: 60_000, concurrencyShortMs: 60_000 },
    initialState: () => null,
    decide: (_ctx: ScalingContext<null>): { decision: ScalingDecision; state: null } => ({
      decision: { replicas, reason: "fixed" },
      state: null,
    }),
  };
}
