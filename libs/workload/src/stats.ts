/**
 * Percentiles take p in [0, 100].
 * - "nearest-rank" (default): the smallest sample value with at least p% of the sample at or below it,
 *   i.e. sorted[ceil(p/100 * n) - 1] (p = 0 gives the minimum). Always a value that was observed.
 * - "linear": interpolates between the closest ranks at h = (n - 1) * p/100 (Hyndman-Fan type 7, numpy's default).
 */
export type PercentileMethod = "nearest-rank" | "linear";

export function percentile(values: ArrayLike<number>, p: number, method: PercentileMethod = "nearest-rank"): number {
  return percentileOfSorted(sortedCopy(values), p, method);
}

/** Several percentiles with one sort. */
export function percentiles(values: ArrayLike<number>, ps: readonly number[], method: PercentileMethod = "nearest-rank"): number[] {
  const sorted = sortedCopy(values);
  return ps.map((p) => percentileOfSorted(sorted, p, method));
}

export function percentileOfSorted(sorted: ArrayLike<number>, p: number, method: PercentileMethod = "nearest-rank"): number {
  checkP(p);
  const n = sorted.length;
  if (n === 0) throw new RangeError("percentile of an empty sample");
  if (method === "nearest-rank") {
    const rank = Math.min(n, Math.max(1, Math.ceil((p / 100) * n)));
    return sorted[rank - 1] as number;
  }
  const h = ((n - 1) * p) / 100;
  const lo = Math.floor(h);
  const a = sorted[lo] as number;
  const b = sorted[Math.min(n - 1, lo + 1)] as number;
  return a + (h - lo) * (b - a);
}

function sortedCopy(values: ArrayLike<number>): Float64Array {
  const sorted = Float64Array.from(values);
  for (const v of sorted) if (Number.isNaN(v)) throw new RangeError("percentile of a sample containing NaN");
  return sorted.sort();
}

function checkP(p: number): void {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile p must be in [0, 100], got ${p}`);
}

export interface LatencySummary {
  count: number;
  min: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export interface HistogramOptions {
  /** Bound on the relative error of reported percentiles (default 0.005 = 0.5%). */
  relativeError?: number;
  /** Values below this (including 0) share one bucket and are reported as the recorded minimum (default 1e-3). */
  minValue?: number;
}

/**
 * Streaming latency recorder with logarithmic buckets (DDSketch-style): bucket k holds (γ^(k-1), γ^k] with
 * γ = (1+α)/(1-α), and reports 2γ^k/(γ+1), so every percentile is within relative error α of the exact
 * nearest-rank percentile of the recorded values (for values >= minValue). count, min, max and mean are exact.
 * Memory grows with the log of the value range (about 2,300 buckets per 10 decades at α = 0.5%), not with count.
 * Chosen over hdr-histogram-js, which records integers only and pulls in a WASM loader and zlib.
 */
export class LatencyHistogram {
  readonly relativeError: number;
  readonly minValue: number;
  private readonly logGamma: number;
  private readonly gamma: number;
  private buckets: number[] = [];
  private offset = 0;
  private belowMin = 0;
  private total = 0;
  private sum = 0;
  private low = Number.POSITIVE_INFINITY;
  private high = Number.NEGATIVE_INFINITY;

  constructor(options: HistogramOptions = {}) {
    this.relativeError = options.relativeError ?? 0.005;
    this.minValue = options.minValue ?? 1e-3;
    if (!(this.relativeError > 0 && this.relativeError < 1))
      throw new RangeError(`relativeError must be in (0, 1), got ${this.relativeError}`);
    if (!(this.minValue > 0 && Number.isFinite(this.minValue))) throw new RangeError(`minValue must be > 0, got ${this.minValue}`);
    this.gamma = (1 + this.relativeError) / (1 - this.relativeError);
    this.logGamma = Math.log(this.gamma);
  }

  get count(): number {
    return this.total;
  }

  get min(): number {
    return this.total === 0 ? Number.NaN : this.low;
  }

  get max(): number {
    return this.total === 0 ? Number.NaN : this.high;
  }

  get mean(): number {
    return this.total === 0 ? Number.NaN : this.sum / this.total;
  }

  /** Records `value` (>= 0, finite) `times` times. */
  record(value: number, times = 1): void {
    if (!(value >= 0 && Number.isFinite(value))) throw new RangeError(`latency must be finite and >= 0, got ${value}`);
    if (!(Number.isInteger(times) && times >= 0)) throw new RangeError(`times must be a non-negative integer, got ${times}`);
    if (times === 0) return;
    this.total += times;
    this.sum += value * times;
    if (value < this.low) this.low = value;
    if (value > this.high) this.high = value;
    if (value < this.minValue) {
      this.belowMin += times;
      return;
    }
    this.addToBucket(Math.ceil(Math.log(value) / this.logGamma), times);
  }

  /** Adds another histogram's records (same relativeError and minValue). */
  merge(other: LatencyHistogram): void {
    if (other.relativeError !== this.relativeError || other.minValue !== this.minValue) {
      throw new Error("cannot merge histograms with different relativeError or minValue");
    }
    if (other.total === 0) return;
    this.total += other.total;
    this.sum += other.sum;
    this.low = Math.min(this.low, other.low);
    this.high = Math.max(this.high, other.high);
    this.belowMin += other.belowMin;
    other.buckets.forEach((n, i) => {
      if (n > 0) this.addToBucket(other.offset + i, n);
    });
  }

  reset(): void {
    this.buckets = [];
    this.offset = 0;
    this.belowMin = 0;
    this.total = 0;
    this.sum = 0;
    this.low = Number.POSITIVE_INFINITY;
    this.high = Number.NEGATIVE_INFINITY;
  }

  /** Nearest-rank percentile, p in [0, 100]; NaN when empty. */
  percentile(p: number): number {
    checkP(p);
    if (this.total === 0) return Number.NaN;
    const rank = Math.min(this.total, Math.max(1, Math.ceil((p / 100) * this.total)));
    let seen = this.belowMin;
    if (seen >= rank) return this.low;
    for (let i = 0; i < this.buckets.length; i++) {
      seen += this.buckets[i] as number;
      if (seen >= rank) {
        const estimate = (2 * this.gamma ** (this.offset + i)) / (this.gamma + 1);
        // The exact extremes are known, and clamping to them can only reduce the error.
        return Math.min(this.high, Math.max(this.low, estimate));
      }
    }
    return this.high;
  }

  summary(): LatencySummary {
    return {
      count: this.total,
      min: this.min,
      mean: this.mean,
      p50: this.percentile(50),
      p90: this.percentile(90),
      p99: this.percentile(99),
      p999: this.percentile(99.9),
      max: this.max,
    };
  }

  private addToBucket(key: number, n: number): void {
    if (this.buckets.length === 0) this.offset = key;
    if (key < this.offset) {
      this.buckets = [...new Array<number>(this.offset - key).fill(0), ...this.buckets];
      this.offset = key;
    }
    const index = key - this.offset;
    while (this.buckets.length <= index) this.buckets.push(0);
    this.buckets[index] = (this.buckets[index] as number) + n;
  }
}
