/**
 * Swayam's optional pruning: a request that has been refused at least once and can no longer finish within
 * RT_max, even if a backend took it now, is dropped instead of retried. Under overload this is what keeps
 * the requests that can still make it inside the SLA: a late request served anyway takes a backend from one
 * that was not late yet.
 */
/**
 * The service time the rule assumes: this quantile of the recent compute times, not their mean. With parking a
 * backend serves the oldest request first, so under overload every request served has waited almost as long
 * as the rule allows; judged against the mean, about half of those then ran past RT_max anyway. Measured in the
 * simulator (seed 1, `infergrid`): faro-16 35.7 -> 32.4 % violations, faro-32 0.94 -> 0.84 %, faro-48 0.031 ->
 * 0.029 %; the 0.99 quantile dropped more for little gain (31.8, 0.91, 0.030 %).
 */
export const PRUNE_SERVICE_QUANTILE = 0.9;

export function isPastSaving(nowMs: number, arrivedAtMs: number, expectedServiceMs: number, rtMaxMs: number, attempts: number): boolean {
  return attempts > 0 && nowMs - arrivedAtMs + expectedServiceMs > rtMaxMs;
}

/**
 * A quantile of the last `capacity` samples (a frontend's recent compute times, for isPastSaving). Re-sorted
 * only every `capacity / 8` new samples, so recording stays O(1) on the request path.
 */
export class RecentQuantile {
  private readonly samples: number[] = [];
  private cursor = 0;
  private sinceSort = 0;
  private cached: number | undefined;

  constructor(
    private readonly q: number,
    private readonly capacity = 512,
  ) {}

  record(value: number): void {
    if (!Number.isFinite(value) || value < 0) return;
    if (this.samples.length < this.capacity) this.samples.push(value);
    else {
      this.samples[this.cursor] = value;
      this.cursor = (this.cursor + 1) % this.capacity;
    }
    this.sinceSort += 1;
  }

  /** The quantile of the recent samples; 0 before the first. */
  value(): number {
    if (this.samples.length === 0) return 0;
    if (this.cached === undefined || this.sinceSort >= Math.max(1, this.capacity / 8)) {
      const sorted = [...this.samples].sort((a, b) => a - b);
      this.cached = sorted[Math.min(sorted.length - 1, Math.ceil(this.q * sorted.length) - 1)] ?? 0;
      this.sinceSort = 0;
    }
    return this.cached;
  }
}
