/** What one frontend saw of one service during one load-report period. */
export class LoadWindow {
  start: number;
  arrivals = 0;
  completed = 0;
  failed = 0;
  withinSlo = 0;
  private latencies: number[] = [];
  private computeSum = 0;
  private computeCount = 0;

  constructor(now: number) {
    this.start = now;
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
