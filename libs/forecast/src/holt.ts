/**
 * A simple probabilistic rate forecaster: Holt's linear smoothing (an EWMA level plus an EWMA
 * trend) for the mean, and a normal approximation around it whose spread is the recent one-step
 * residual spread, widened with the horizon. Pure: a series in, numbers out.
 */

import { normalQuantile } from "@infergrid/core";

export interface ForecastOptions {
  /** Steps to forecast. */
  steps: number;
  /** Length of one forecast step in units of the series' window (1 = one window per step). */
  stepWindows?: number;
  /** Quantiles in (0, 1). */
  quantiles: readonly number[];
  /** Level smoothing in (0, 1]: higher follows the last value more closely. */
  alpha?: number;
  /** Trend smoothing in [0, 1]: 0 turns the trend off. */
  beta?: number;
  /** Fewer points than this and the forecast is the latest rate with a wide spread. */
  minHistory?: number;
  /** The spread is estimated from at most this many recent residuals. */
  residualWindow?: number;
  /** The wide spread used with too little history, as a fraction of the latest rate. */
  coldSpread?: number;
  /**
   * Seconds one series point counts arrivals over: the Poisson noise of a counted rate,
   * sqrt(rate / seconds), is the least spread a forecast gets (a flat series is not certain).
   */
  windowSeconds?: number;
}

export interface QuantileSeries {
  quantile: number;
  rates: number[];
}

export interface RateForecast {
  /** "holt" or, with too little history, "last-value". */
  model: string;
  /** The last point of the series (the last window's rate). */
  observed: number;
  mean: number[];
  /** Standard deviation per step. */
  spread: number[];
  quantiles: QuantileSeries[];
  level: number;
  trend: number;
}

const DEFAULTS = { alpha: 0.5, beta: 0.3, minHistory: 3, residualWindow: 30, coldSpread: 0.5, stepWindows: 1 };

function check(options: ForecastOptions): void {
  if (!Number.isInteger(options.steps) || options.steps < 1) throw new RangeError(`steps must be a positive integer, got ${options.steps}`);
  for (const q of options.quantiles) normalQuantile(q);
}

/**
 * Forecasts the rate `steps` steps ahead from a series of per-window rates (oldest first).
 * Negative or non-finite points are read as 0; no forecast value is ever negative.
 */
export function forecastRates(series: readonly number[], options: ForecastOptions): RateForecast {
  check(options);
  const alpha = options.alpha ?? DEFAULTS.alpha;
  const beta = options.beta ?? DEFAULTS.beta;
  const minHistory = Math.max(2, options.minHistory ?? DEFAULTS.minHistory);
  const residualWindow = Math.max(2, options.residualWindow ?? DEFAULTS.residualWindow);
  const coldSpread = options.coldSpread ?? DEFAULTS.coldSpread;
  const stepWindows = options.stepWindows ?? DEFAULTS.stepWindows;
  const ys = series.map((y) => (Number.isFinite(y) && y > 0 ? y : 0));
  const observed = ys.at(-1) ?? 0;
  const poissonSd = (rate: number) => (options.windowSeconds && options.windowSeconds > 0 ? Math.sqrt(rate / options.windowSeconds) : 0);

  let model = "holt";
  let level = observed;
  let trend = 0;
  let residualSd: number;
  if (ys.length < minHistory) {
    model = "last-value";
    residualSd = coldSpread * observed;
  } else {
    level = ys[0] ?? 0;
    trend = (ys[1] ?? level) - level;
    const residuals: number[] = [];
    for (let t = 1; t < ys.length; t++) {
      const y = ys[t] ?? 0;
      residuals.push(y - (level + trend));
      const previous = level;
      level = alpha * y + (1 - alpha) * (level + trend);
      trend = beta * (level - previous) + (1 - beta) * trend;
    }
    // The first residual is zero by construction of the initial trend: it says nothing.
    const recent = residuals.slice(1).slice(-residualWindow);
    residualSd = recent.length > 0 ? Math.sqrt(recent.reduce((s, e) => s + e * e, 0) / recent.length) : coldSpread * observed;
  }

  const mean: number[] = [];
  const spread: number[] = [];
  for (let i = 1; i <= options.steps; i++) {
    const h = i * stepWindows;
    const m = Math.max(0, level + trend * h);
    mean.push(m);
    // Errors of a smoothed forecast compound roughly like a random walk: sd grows with sqrt(h).
    spread.push(Math.max(residualSd, poissonSd(m)) * Math.sqrt(Math.max(1, h)));
  }
  const quantiles = [...options.quantiles]
    .sort((x, y) => x - y)
    .map((q) => {
      const z = normalQuantile(q);
      return { quantile: q, rates: mean.map((m, i) => Math.max(0, m + z * (spread[i] ?? 0))) };
    });
  return { model, observed, mean, spread, quantiles, level, trend };
}
