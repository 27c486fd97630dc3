/**
 * Request-rate history and prediction (Gujarati et al., Middleware'17, section 4.2 and section 5 "Swayam
 * predicted request rates online over a window of size 100s, using linear regression and request history from
 * the past 500s", forecasting t_setup = 10 s ahead).
 *
 * Only first arrivals are counted: retries and warm-ups are the system's own traffic, not load.
 *
 * Choices where the paper is silent:
 *  - Arrivals are counted in buckets (default 10 s) and the 100 s rate windows slide by one bucket, so a fresh
 *    regression is available every bucket (the autoscaling timer's period), not every 100 s. Setting bucketMs
 *    to windowMs gives the paper's disjoint windows.
 *  - Only completed buckets enter the regression; the newest point is at most one bucket old, and the
 *    regression extrapolates over that gap anyway.
 *  - Each window's rate is placed at its midpoint: the mean rate of a window equals the instantaneous rate at
 *    its midpoint when the rate is linear, so the prediction is the instantaneous rate at now + horizon (not a
 *    trailing average, which lags by half a window on a ramp and would under-provision a rising load).
 *  - A window counts only if it lies wholly after the origin (when counting started); with fewer than
 *    minPoints such windows the prediction falls back to the current local rate.
 *  - Predictions are clamped at 0.
 */
import { SWAYAM_DEFAULTS } from "./parameters.js";

export interface RateHistoryOptions {
  windowMs?: number;
  historyMs?: number;
  /** Window slide and counting granularity; must divide windowMs. */
  bucketMs?: number;
  /** Fewest regression points before the prediction trusts the trend (default 3). */
  minPoints?: number;
  /** When counting started (ms); defaults to the first recorded arrival. */
  origin?: number;
}

export class RateHistory {
  readonly windowMs: number;
  readonly historyMs: number;
  readonly bucketMs: number;
  readonly minPoints: number;
  private origin: number | undefined;
  private readonly windowBuckets: number;
  private readonly historyBuckets: number;
  private readonly ids: Float64Array;
  private readonly counts: Float64Array;

  constructor(options: RateHistoryOptions = {}) {
    this.windowMs = options.windowMs ?? SWAYAM_DEFAULTS.rateWindowMs;
    this.historyMs = options.historyMs ?? SWAYAM_DEFAULTS.rateHistoryMs;
    this.bucketMs = options.bucketMs ?? rateBucketFor(this.windowMs);
    this.minPoints = Math.max(2, options.minPoints ?? 3);
    this.origin = options.origin;
    const ratio = this.windowMs / this.bucketMs;
    if (!(this.bucketMs > 0) || !Number.isInteger(ratio)) {
      throw new RangeError(`bucketMs (${this.bucketMs}) must be positive and divide windowMs (${this.windowMs})`);
    }
    if (this.historyMs < this.windowMs) throw new RangeError("historyMs must be at least windowMs");
    this.windowBuckets = ratio;
    this.historyBuckets = Math.ceil(this.historyMs / this.bucketMs);
    const size = this.historyBuckets + 1;
    this.ids = new Float64Array(size).fill(Number.NEGATIVE_INFINITY);
    this.counts = new Float64Array(size);
  }

  /** Counts first arrivals only (never retries or warm-ups). Arrivals older than the history are dropped. */
  recordArrival(now: number, count = 1): void {
    if (this.origin === undefined) this.origin = now;
    const b = Math.floor(now / this.bucketMs);
    const slot = this.slot(b);
    const id = this.ids[slot] ?? Number.NEGATIVE_INFINITY;
    if (id > b) return;
    if (id < b) {
      this.ids[slot] = b;
      this.counts[slot] = 0;
    }
    this.counts[slot] = (this.counts[slot] ?? 0) + count;
  }

  /** Requests per second over the last window (the current partial bucket included; before the window fills, over the time since the origin). */
  localRate(now: number): number {
    if (this.origin === undefined) return 0;
    const current = Math.floor(now / this.bucketMs);
    let sum = 0;
    for (let b = current - this.windowBuckets + 1; b <= current; b++) sum += this.count(b);
    const start = Math.max((current - this.windowBuckets + 1) * this.bucketMs, this.origin);
    const span = Math.max(now - start, this.bucketMs);
    return (sum * 1000) / span;
  }

  /**
   * Requests per second over the last `spanMs` or so: the buckets from the one holding now - spanMs to the current
   * (partial) one, over the time they cover up to now (at least one bucket, and never before the origin). A
   * burst shows here within a bucket, where the window's rate takes a whole window to follow it.
   */
  recentRate(now: number, spanMs: number, noiseSigmas = 0): number {
    if (this.origin === undefined) return 0;
    const current = Math.floor(now / this.bucketMs);
    const first = Math.max(current - this.historyBuckets + 1, Math.floor((now - Math.max(0, spanMs)) / this.bucketMs));
    let sum = 0;
    for (let b = first; b <= current; b++) sum += this.count(b);
    const start = Math.max(first * this.bucketMs, this.origin);
    const kept = Math.max(0, sum - noiseSigmas * Math.sqrt(sum));
    return (kept * 1000) / Math.max(now - start, this.bucketMs);
  }

  /** Least-squares linear prediction of the rate (req/s) at now + horizonMs, never negative. */
  predictRate(now: number, horizonMs: number = SWAYAM_DEFAULTS.tSetupMs): number {
    if (this.origin === undefined) return 0;
    const current = Math.floor(now / this.bucketMs);
    // Window j covers buckets [end - windowBuckets, end) with end = current - j (completed buckets only).
    let sx = 0;
    let sy = 0;
    let sxx = 0;
    let sxy = 0;
    let points = 0;
    let windowSum = 0;
    const oldest = current - this.historyBuckets;
    // Slide from the oldest admissible window to the newest, keeping a running window sum.
    let end = Math.max(oldest + this.windowBuckets, Math.ceil(this.origin / this.bucketMs) + this.windowBuckets);
    if (end > current) return this.localRate(now);
    for (let b = end - this.windowBuckets; b < end; b++) windowSum += this.count(b);
    // The slots of buckets `end` and `end - windowBuckets` step along the ring with them: one modulo per
    // prediction instead of two per bucket read (the simulator's frontends predict 172,800 times a run).
    const size = this.ids.length;
    let inSlot = this.slot(end);
    let outSlot = this.slot(end - this.windowBuckets);
    for (;;) {
      const x = end * this.bucketMs - this.windowMs / 2 - now;
      const y = (windowSum * 1000) / this.windowMs;
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
      points++;
      if (end === current) break;
      windowSum += this.countAt(inSlot, end) - this.countAt(outSlot, end - this.windowBuckets);
      end++;
      if (++inSlot === size) inSlot = 0;
      if (++outSlot === size) outSlot = 0;
    }
    if (points < this.minPoints) return this.localRate(now);
    const meanX = sx / points;
    const meanY = sy / points;
    const varX = sxx - points * meanX * meanX;
    const slope = varX > 0 ? (sxy - points * meanX * meanY) / varX : 0;
    return Math.max(0, meanY + slope * (horizonMs - meanX));
  }

  private slot(bucket: number): number {
    // One % (a division) where ((b % size) + size) % size took two: the same slot for every integer bucket.
    const size = this.ids.length;
    const s = bucket % size;
    return s < 0 ? s + size : s;
  }

  private count(bucket: number): number {
    return this.countAt(this.slot(bucket), bucket);
  }

  /** count(bucket), `slot` being slot(bucket). */
  private countAt(slot: number, bucket: number): number {
    return this.ids[slot] === bucket ? (this.counts[slot] ?? 0) : 0;
  }
}

/**
 * The default sub-bucket of a rate window: a tenth of it (Swayam's 100 s window gives one regression point
 * every 10 s, SWAYAM_DEFAULTS.rateBucketMs), at least 1 s, at most the window.
 */
export function rateBucketFor(windowMs: number): number {
  return Math.min(windowMs, Math.max(1000, windowMs / 10));
}
