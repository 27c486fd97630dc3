import { type Random, randomInt } from "@infergrid/core";

/** Batch sizes a load report carries at most (Kairos's allocator keeps the last 10,000 per service). */
export const REPORTED_BATCHES = 256;

/** What one frontend saw of one service during one load-report period. */
export class LoadWindow {
  start: number;
  arrivals = 0;
  /** The first arrivals' batch sizes: all of them, or a uniform sample (reservoir) once there are more. */
  readonly batches: number[] = [];
  completed = 0;
  failed = 0;
  withinSlo = 0;
  private latencies: number[] = [];
  private computeSum = 0;
  private computeCount = 0;

  constructor(
    now: number,
    private readonly random: Random,
  ) {
    this.start = now;
  }

  /** A first arrival of `batch` items. */
  recordArrival(batch: number): void {
    this.arrivals += 1;
    if (this.batches.length < REPORTED_BATCHES) this.batches.push(batch);
    else {
      const slot = randomInt(this.random, this.arrivals);
      if (slot < REPORTED_BATCHES) this.batches[slot] = batch;
    }
  }

  recordCompletion(latencyMs: number, withinSlo: boolean, computeMs: number | undefined): void {
    this.completed += 1;
    if (withinSlo) this.withinSlo += 1;
    if (this.latencies.length < 20_000) this.latencies.push(latencyMs);
    if (computeMs !== undefined) {
      this.computeSum += computeMs;
      this.computeCount += 1;
    }
  }

  quantile(q: number): number {
    if (this.latencies.length === 0) return 0;
    const sorted = [...this.latencies].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;
  }

  meanComputeMs(): number {
    return this.computeCount === 0 ? 0 : this.computeSum / this.computeCount;
  }
}
