/**
 * What a controller inside a simulated cluster can observe while the run goes on, as its production
 * counterpart observes it over the network: each job's request outcomes since the controller last looked
 * (the frontends' load reports to the allocator; a metrics scrape for the baselines' controllers), and
 * each job's arrivals per forecast step (what the predictor sums from the load reports).
 */

import type { ServiceForecast } from "@infergrid/faro";
import {
  createForecaster,
  DEFAULT_FORECASTER_SPEC,
  type ForecasterSpec,
  forecastQuantile,
  type ProbabilisticForecaster,
} from "@infergrid/forecast";
import type { JobSpec } from "./config.js";
import { kthSmallest } from "./order-statistic.js";

/** One job's outcomes over a window. Dropped requests count as violations and as infinite latency. */
export interface WindowOutcome {
  /** Requests that ended in the window (completed or dropped). */
  ended: number;
  completed: number;
  dropped: number;
  /** Ended over the SLO, or dropped. */
  violations: number;
  /** Mean latency of the completed ones (NaN if none). */
  meanMs: number;
  /** 99th percentile over all that ended, a dropped one counted as infinite (NaN if none ended). */
  p99Ms: number;
  /** Mean service time of the completed ones (NaN if none). */
  serviceMeanMs: number;
  /** Arrivals in the window. */
  arrivals: number;
  /** Window length, ms. */
  spanMs: number;
}

class JobWindow {
  latencies = new Float64Array(256);
  n = 0;
  dropped = 0;
  violations = 0;
  serviceSum = 0;
  arrivals = 0;
  since = 0;
}

export class LiveSignals {
  private readonly windows: JobWindow[];
  private readonly slo: Float64Array;

  constructor(jobs: readonly JobSpec[]) {
    this.windows = jobs.map(() => new JobWindow());
    this.slo = Float64Array.from(jobs, (j) => j.sloMs);
  }

  arrival(job: number): void {
    (this.windows[job] as JobWindow).arrivals++;
  }

  completed(job: number, latencyMs: number, serviceMs: number): void {
    const w = this.windows[job] as JobWindow;
    if (w.n === w.latencies.length) {
      const grown = new Float64Array(w.n * 2);
      grown.set(w.latencies);
      w.latencies = grown;
    }
    w.latencies[w.n++] = latencyMs;
    w.serviceSum += serviceMs;
    if (latencyMs > (this.slo[job] as number)) w.violations++;
  }

  dropped(job: number): void {
    const w = this.windows[job] as JobWindow;
    w.dropped++;
    w.violations++;
  }

  /** Job j's outcomes since the last take (or the start), and a new window from `now`. */
  take(job: number, now: number): WindowOutcome {
    const w = this.windows[job] as JobWindow;
    const lat = w.latencies;
    let sum = 0;
    for (let i = 0; i < w.n; i++) sum += lat[i] as number;
    const ended = w.n + w.dropped;
    let p99 = Number.NaN;
    if (ended > 0) {
      // Rank of the 99th percentile among all that ended; drops sort last.
      const rank = Math.ceil(0.99 * ended) - 1;
      if (rank >= w.n) p99 = Number.POSITIVE_INFINITY;
      else {
        // The rank-th smallest, as the sorted window holds it; selecting it in place (the window is cleared
        // below) spared a copy and a sort per job per slow-loop tick.
        p99 = kthSmallest(w.latencies, w.n, rank);
      }
    }
    const out: WindowOutcome = {
      ended,
      completed: w.n,
      dropped: w.dropped,
      violations: w.violations,
      meanMs: w.n > 0 ? sum / w.n : Number.NaN,
      p99Ms: p99,
      serviceMeanMs: w.n > 0 ? w.serviceSum / w.n : Number.NaN,
      arrivals: w.arrivals,
      spanMs: now - w.since,
    };
    w.n = 0;
    w.dropped = 0;
    w.violations = 0;
    w.serviceSum = 0;
    w.arrivals = 0;
    w.since = now;
    return out;
  }
}

export interface SimPredictorOptions {
  /** One forecast step (Faro: one minute). */
  stepMs: number;
  /** Quantiles each forecast carries (the predictor service publishes 0.5, 0.6, 0.9, 0.99). */
  quantiles: readonly number[];
  forecaster: ForecasterSpec;
}

export const DEFAULT_SIM_PREDICTOR: SimPredictorOptions = {
  stepMs: 60_000,
  quantiles: [0.5, 0.6, 0.9, 0.99],
  forecaster: DEFAULT_FORECASTER_SPEC,
};

/**
 * The predictor service's work in virtual time: each job's arrivals summed per step, each closed step fed
 * once to the job's forecaster (libs/forecast, built as the service builds it), the forecast read back as
 * quantiles of the rate per second.
 */
export class SimPredictor {
  private readonly counts: Float64Array;
  private readonly forecasters: ProbabilisticForecaster[];
  private readonly latest: (ServiceForecast | undefined)[];
  private step = 0;

  constructor(
    jobs: readonly JobSpec[],
    private readonly options: SimPredictorOptions = DEFAULT_SIM_PREDICTOR,
  ) {
    this.counts = new Float64Array(jobs.length);
    this.forecasters = jobs.map((j) => createForecaster(options.forecaster, j.name));
    this.latest = jobs.map(() => undefined);
  }

  arrival(job: number, now: number): void {
    this.advance(now);
    this.counts[job] = (this.counts[job] ?? 0) + 1;
  }

  /** Each job's newest forecast (undefined before its first closed step). */
  forecasts(now: number): readonly (ServiceForecast | undefined)[] {
    this.advance(now);
    return this.latest;
  }

  /** Closes every step that ended by `now`. */
  private advance(now: number): void {
    const o = this.options;
    const current = Math.floor(now / o.stepMs);
    while (this.step < current) {
      const seconds = o.stepMs / 1000;
      this.forecasters.forEach((f, j) => {
        f.observe(this.counts[j] ?? 0);
        this.counts[j] = 0;
        const fc = f.forecast();
        const columns = o.quantiles.map((q) => forecastQuantile(fc, q).map((c) => c / seconds));
        this.latest[j] = {
          kind: "quantiles",
          levels: [...o.quantiles],
          values: fc.mean.map((_, k) => columns.map((c) => c[k] ?? 0)),
        };
      });
      this.step++;
    }
  }
}
