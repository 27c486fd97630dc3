/**
 * Scores probabilistic forecasters on a per-minute count series the way the predictor uses them:
 * online, one bin at a time; after each bin every forecaster forecasts the next `steps` bins and
 * each step is scored against the count that then arrives. Pure: series in, sums out.
 *
 * Metrics (all on per-minute counts):
 *  - pinball loss averaged over BENCH_QUANTILES, divided by the mean count (so jobs at 30 and at
 *    5000 requests a minute weigh alike when averaged over jobs);
 *  - coverage: the share of actual counts at or under the planned quantile;
 *  - peak coverage: the same over the peak minutes only (above the job's own 95th percentile in
 *    the segment), which is what an allocator planning for a quantile must not miss.
 */

import { normalQuantile } from "@infergrid/core";
import { percentile } from "@infergrid/workload";
import { type ProbabilisticForecast, type ProbabilisticForecaster, pinball } from "./forecaster.js";

export const BENCH_QUANTILES = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99];

/** Target minutes [from, to) scored together. */
export interface Segment {
  name: string;
  from: number;
  to: number;
}

/** One forecaster run over the series, read in one or more ways (e.g. with and without a guard). */
export interface Runner {
  forecaster: ProbabilisticForecaster;
  views: { name: string; read: (f: ProbabilisticForecaster) => ProbabilisticForecast }[];
}

export interface Score {
  /** Sum over scored (issue, step) pairs of the mean pinball loss over BENCH_QUANTILES. */
  pinballSum: number;
  actualSum: number;
  pairs: number;
  /** Per planned quantile, pairs whose actual was at or under it. */
  under: number[];
  peakPairs: number;
  peaksUnder: number[];
}

export interface SeriesResult {
  /** view name -> segment name -> score */
  scores: Map<string, Map<string, Score>>;
  /** runner index -> milliseconds spent observing and forecasting */
  millis: number[];
}

const emptyScore = (planned: number): Score => ({
  pinballSum: 0,
  actualSum: 0,
  pairs: 0,
  under: new Array<number>(planned).fill(0),
  peakPairs: 0,
  peaksUnder: new Array<number>(planned).fill(0),
});

export function scoreSeries(
  series: ArrayLike<number>,
  runners: readonly Runner[],
  segments: readonly Segment[],
  options: { steps: number; plannedQuantiles: readonly number[]; end?: number; now?: () => number },
): SeriesResult {
  const end = Math.min(series.length, options.end ?? series.length);
  const { steps, plannedQuantiles } = options;
  const clock = options.now ?? (() => 0);
  const zBench = BENCH_QUANTILES.map(normalQuantile);
  const zPlan = plannedQuantiles.map(normalQuantile);
  const peakAbove = segments.map((s) => {
    const values = Array.from({ length: Math.max(0, Math.min(end, s.to) - s.from) }, (_, i) => series[s.from + i] ?? 0);
    return values.length > 0 ? percentile(values, 95) : Number.POSITIVE_INFINITY;
  });
  const scores = new Map<string, Map<string, Score>>();
  for (const r of runners)
    for (const v of r.views) scores.set(v.name, new Map(segments.map((s) => [s.name, emptyScore(plannedQuantiles.length)])));
  const millis = new Array<number>(runners.length).fill(0);

  for (let t = 0; t < end; t++) {
    const y = series[t] ?? 0;
    runners.forEach((r, ri) => {
      const started = clock();
      r.forecaster.observe(y);
      const forecasts = r.views.map((v) => ({ name: v.name, f: v.read(r.forecaster) }));
      millis[ri] = (millis[ri] ?? 0) + clock() - started;
      for (let h = 1; h <= steps; h++) {
        const target = t + h;
        if (target >= end) break;
        const si = segments.findIndex((s) => target >= s.from && target < s.to);
        const segment = segments[si];
        if (!segment) continue;
        const actual = series[target] ?? 0;
        const isPeak = actual > (peakAbove[si] ?? Number.POSITIVE_INFINITY);
        for (const { name, f } of forecasts) {
          const score = scores.get(name)?.get(segment.name);
          if (!score) continue;
          const m = f.mean[h - 1] ?? 0;
          const sd = f.std[h - 1] ?? 0;
          let loss = 0;
          BENCH_QUANTILES.forEach((q, k) => {
            loss += pinball(q, Math.max(0, m + (zBench[k] ?? 0) * sd), actual);
          });
          score.pinballSum += loss / BENCH_QUANTILES.length;
          score.actualSum += actual;
          score.pairs++;
          if (isPeak) score.peakPairs++;
          zPlan.forEach((z, k) => {
            if (actual <= Math.max(0, m + z * sd)) {
              score.under[k] = (score.under[k] ?? 0) + 1;
              if (isPeak) score.peaksUnder[k] = (score.peaksUnder[k] ?? 0) + 1;
            }
          });
        }
      }
    });
  }
  return { scores, millis };
}

export interface Summary {
  /** Mean over jobs of pinball / mean count. */
  scaledPinball: number;
  /** Pooled over jobs, per planned quantile. */
  coverage: number[];
  peakCoverage: number[];
  jobs: number;
  pairs: number;
}

/** Aggregates one view's scores of one segment over jobs. */
export function summarise(perJob: readonly Score[]): Summary {
  const scaled = perJob.filter((s) => s.actualSum > 0).map((s) => s.pinballSum / s.actualSum);
  const planned = perJob[0]?.under.length ?? 0;
  const pairs = perJob.reduce((a, s) => a + s.pairs, 0);
  const peakPairs = perJob.reduce((a, s) => a + s.peakPairs, 0);
  const share = (k: number, pick: (s: Score) => number[], total: number) =>
    total > 0 ? perJob.reduce((a, s) => a + (pick(s)[k] ?? 0), 0) / total : Number.NaN;
  return {
    scaledPinball: scaled.length > 0 ? scaled.reduce((a, b) => a + b, 0) / scaled.length : Number.NaN,
    coverage: Array.from({ length: planned }, (_, k) => share(k, (s) => s.under, pairs)),
    peakCoverage: Array.from({ length: planned }, (_, k) => share(k, (s) => s.peaksUnder, peakPairs)),
    jobs: perJob.length,
    pairs,
  };
}
