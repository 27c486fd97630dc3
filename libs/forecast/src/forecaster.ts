/**
 * The common interface of the probabilistic forecasters (Faro, Jeon et al., section 3.5.2: "a
 * probabilistic prediction technique predicts the probability distributions of future arrival
 * rates"; "we generate 100 prediction samples"), and how the allocator reads one forecast: a
 * quantile per step (Faro's artifact plans for the 0.6 quantile) or the maximum of the samples
 * (the paper's "maximum expected arrival rate over the prediction window").
 *
 * Every forecaster here is Gaussian per step, so a forecast is a mean and a standard deviation per
 * step; quantiles have a closed form and samples are drawn with injected randomness. Arrivals are
 * never negative, so every value read out of a forecast is the quantile (or sample) of max(0, X).
 */

import { normalQuantile, type Random, standardNormal } from "@infergrid/core";

export interface ProbabilisticForecast {
  /** Which forecaster, or which rung of a fallback ladder, produced it. */
  model: string;
  /** Mean per step (step 1 = the bin right after the last observed one), never negative. */
  mean: number[];
  /** Standard deviation per step, never negative. */
  std: number[];
}

/** A per-service forecaster fed one closed bin at a time (oldest first). */
export interface ProbabilisticForecaster {
  readonly name: string;
  /** One closed bin's arrival count (or rate: the forecast is in the same unit). */
  observe(value: number): void;
  /** The distribution of the next `steps` bins. */
  forecast(): ProbabilisticForecast;
  /** Bins observed so far. */
  readonly observed: number;
}

/** Faro's planning quantile (artifact) and the quantile list the predictor publishes by default. */
export const PLANNING_QUANTILE = 0.6;

/** Reads a negative, NaN or infinite observation as 0: a bin nobody reported in had no arrivals. */
export function cleanCount(value: number): number {
  return Number.isFinite(value) && value > 0 ? value : 0;
}

/** The q-quantile per step of max(0, X), X ~ N(mean, std). */
export function forecastQuantile(forecast: ProbabilisticForecast, q: number): number[] {
  const z = normalQuantile(q);
  return forecast.mean.map((m, i) => Math.max(0, m + z * (forecast.std[i] ?? 0)));
}

/** Quantiles per step: `[step][k]` for `quantiles[k]` (the "steps" view of the interface). */
export function forecastSteps(forecast: ProbabilisticForecast, quantiles: readonly number[]): number[][] {
  const columns = quantiles.map((q) => forecastQuantile(forecast, q));
  return forecast.mean.map((_, i) => columns.map((c) => c[i] ?? 0));
}

/** `n` sample paths as `[step][sample]`, each step drawn independently (a Gaussian head per step). */
export function sampleForecast(forecast: ProbabilisticForecast, n: number, random: Random): number[][] {
  return forecast.mean.map((m, i) => {
    const sd = forecast.std[i] ?? 0;
    return Array.from({ length: n }, () => Math.max(0, m + sd * standardNormal(random)));
  });
}

export type PlanningRule =
  | { quantile: number }
  /** The maximum of `samples` (default 100, as Faro) draws per step; the randomness is injected. */
  | { maxOfSamples: true; samples?: number; random: Random };

/**
 * The rate per step the allocator plans for. Faro's objective averages the utility over the steps
 * of the window, so it takes one value per step; a planner that wants one number for the whole
 * window (MArk-style "max forecast rate") takes the maximum of the result.
 */
export function planningRate(forecast: ProbabilisticForecast, rule: PlanningRule): number[] {
  if ("quantile" in rule) return forecastQuantile(forecast, rule.quantile);
  const n = rule.samples ?? 100;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`samples must be a positive integer, got ${n}`);
  return sampleForecast(forecast, n, rule.random).map((s) => Math.max(...s));
}

/** Pinball (quantile) loss of the q-quantile forecast `predicted` for the outcome `actual`. */
export function pinball(q: number, predicted: number, actual: number): number {
  const d = actual - predicted;
  return d >= 0 ? q * d : (q - 1) * d;
}

/** Mean pinball loss over `quantiles` of one step of a forecast. */
export function meanPinball(forecast: ProbabilisticForecast, step: number, actual: number, quantiles: readonly number[]): number {
  const m = forecast.mean[step] ?? 0;
  const sd = forecast.std[step] ?? 0;
  let sum = 0;
  for (const q of quantiles) sum += pinball(q, Math.max(0, m + normalQuantile(q) * sd), actual);
  return sum / quantiles.length;
}
