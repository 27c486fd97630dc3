/**
 * One stage's configuration under Themis's model (section 4.2-4.3): n instances of c cores each serving
 * batches of b. Its latency is l(b, c) + q(b) (Eq. 5) and its capacity n * h(b, c) (Eq. 6), both here so that
 * the planners (horizontal-scaling.ts, vertical-scaling.ts) and the transition rule's check of the current
 * allocation (transition.ts) judge a configuration by the one same arithmetic.
 *
 * API:
 * - `QueueRate`: which arrival rate q(b) = (b - 1) / rate uses: `"per-instance"` (rate / n, each backend forms
 *   its own batches from its share; the default here) or `"stage"` (the stage's whole rate, Eq. 4 as written,
 *   for a central queue that forms every batch).
 * - `PlanOptions`: `sloMs`, `maxBatch`, `maxUtilization` (capacity counted as n * h * u, default 1),
 *   `queueRate` (default per-instance).
 * - `stageConfig(profile, batch, cores, instances, ratePerS, options)` -> `StageConfig`.
 * - `carries(config, ratePerS, sloMs)`: the configuration serves `ratePerS` within the SLO.
 * - `stageQueueMs`, `neededInstances`, `resolvePlanOptions`.
 */
import { processingMs, type ThemisProfile, throughputPerS } from "./latency-profile.js";

export type QueueRate = "per-instance" | "stage";

export interface PlanOptions {
  /** Latency SLO of the stage (or the whole pipeline), ms. */
  sloMs: number;
  /** Largest batch, >= 1. */
  maxBatch: number;
  /** Fraction of n * h(b, c) counted as capacity, in (0, 1]; 1 is the paper's n * h >= lambda. */
  maxUtilization?: number;
  /** Which arrival rate the batch wait q(b) uses; see `QueueRate`. */
  queueRate?: QueueRate;
}

export interface ResolvedPlanOptions {
  sloMs: number;
  maxBatch: number;
  maxUtilization: number;
  queueRate: QueueRate;
}

export interface StageConfig {
  batch: number;
  cores: number;
  instances: number;
  /** l(b, c), ms. */
  processingMs: number;
  /** q(b) at the rate this configuration was judged at, ms. */
  queueMs: number;
  /** l(b, c) + q(b), ms. */
  latencyMs: number;
  /** n * h(b, c) * maxUtilization, requests per second. */
  capacityPerS: number;
}

/** Slack for floating-point ties: a configuration planned at a rate must be judged to carry that rate. */
const EPS = 1e-9;

export function resolvePlanOptions(o: PlanOptions): ResolvedPlanOptions {
  if (!(Number.isFinite(o.sloMs) && o.sloMs > 0)) throw new RangeError(`sloMs must be a positive number, got ${o.sloMs}`);
  if (!(Number.isInteger(o.maxBatch) && o.maxBatch >= 1)) throw new RangeError(`maxBatch must be an integer >= 1, got ${o.maxBatch}`);
  const maxUtilization = o.maxUtilization ?? 1;
  if (!(maxUtilization > 0 && maxUtilization <= 1)) throw new RangeError(`maxUtilization must be in (0, 1], got ${maxUtilization}`);
  return { sloMs: o.sloMs, maxBatch: o.maxBatch, maxUtilization, queueRate: o.queueRate ?? "per-instance" };
}

export function checkRate(ratePerS: number): void {
  if (!(Number.isFinite(ratePerS) && ratePerS >= 0)) throw new RangeError(`ratePerS must be a finite number >= 0, got ${ratePerS}`);
}

export function checkCores(name: string, cores: number): void {
  if (!(Number.isInteger(cores) && cores >= 1)) throw new RangeError(`${name} must be an integer >= 1, got ${cores}`);
}

/** q(b) for n instances sharing `ratePerS`, ms. */
export function stageQueueMs(batch: number, instances: number, ratePerS: number, queueRate: QueueRate): number {
  if (batch <= 1) return 0;
  const rate = queueRate === "per-instance" ? ratePerS / Math.max(1, instances) : ratePerS;
  return rate > 0 ? ((batch - 1) * 1000) / rate : Number.POSITIVE_INFINITY;
}

export function stageConfig(
  profile: ThemisProfile,
  batch: number,
  cores: number,
  instances: number,
  ratePerS: number,
  o: ResolvedPlanOptions,
): StageConfig {
  const l = processingMs(profile, batch, cores);
  const q = stageQueueMs(batch, instances, ratePerS, o.queueRate);
  return {
    batch,
    cores,
    instances,
    processingMs: l,
    queueMs: q,
    latencyMs: l + q,
    capacityPerS: instances * throughputPerS(profile, batch, cores) * o.maxUtilization,
  };
}

export function withinSlo(latencyMs: number, sloMs: number): boolean {
  return latencyMs <= sloMs * (1 + EPS);
}

export function carries(config: StageConfig, ratePerS: number, sloMs: number): boolean {
  return config.capacityPerS >= ratePerS * (1 - EPS) && withinSlo(config.latencyMs, sloMs);
}

/** The fewest instances of (b, c) whose capacity reaches `ratePerS`, at least `min`. */
export function neededInstances(
  profile: ThemisProfile,
  batch: number,
  cores: number,
  ratePerS: number,
  maxUtilization: number,
  min = 1,
): number {
  const perInstance = throughputPerS(profile, batch, cores) * maxUtilization;
  return Math.max(min, Math.ceil(ratePerS / perInstance - EPS));
}

/** A stage latency in whole ms for the pipeline DP's budget, rounded up so that a plan never exceeds its SLO. */
export function budgetMs(latencyMs: number): number {
  return Math.max(0, Math.ceil(latencyMs - EPS));
}
