/**
 * Windowed averages of a time integral, the metric aggregation step that sits between collection and the
 * decider (Knative `pkg/autoscaler/aggregation`, Ray Serve's look-back over pushed metrics). The collector
 * keeps a cumulative integral (e.g. request-milliseconds in the system) and pushes a snapshot every tick;
 * the average over the last W ms is (cum(now) - cum(now - W)) / W, found by binary search in a ring, so a
 * 0.1 s control loop over a 30 s look-back costs O(log 300) per call, not O(300).
 *
 * Before W of history exists the average is over what there is (Knative does the same: it divides by the
 * time since the first data point, not by the whole window).
 */
export class CumulativeWindow {
  private readonly times: Float64Array;
  private readonly values: Float64Array;
  private head = 0;
  private size = 0;

  /** capacity: snapshots kept; it must cover the longest window at the tick period (plus one). */
  constructor(readonly capacity: number) {
    if (!(capacity >= 2)) throw new RangeError(`capacity must be >= 2, got ${capacity}`);
    this.times = new Float64Array(capacity);
    this.values = new Float64Array(capacity);
  }

  /** Appends a snapshot; times must not decrease. */
  push(now: number, cumulative: number): void {
    const slot = (this.head + this.size) % this.capacity;
    this.times[slot] = now;
    this.values[slot] = cumulative;
    if (this.size < this.capacity) this.size++;
    else this.head = (this.head + 1) % this.capacity;
  }

  /**
   * Mean rate of the integral over the last windowMs before now, given its value now: per ms of time.
   * (An integral of a count in ms gives the time-average count; a cumulative count gives events per ms.)
   */
  average(now: number, cumulativeNow: number, windowMs: number): number {
    if (this.size === 0) return 0;
    const from = now - windowMs;
    // The oldest snapshot at or after `from` (the window's start, or the first data if younger).
    let lo = 0;
    let hi = this.size - 1;
    if ((this.times[(this.head + hi) % this.capacity] ?? 0) < from) return 0;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.times[(this.head + mid) % this.capacity] ?? 0) >= from) hi = mid;
      else lo = mid + 1;
    }
    const slot = (this.head + lo) % this.capacity;
    const span = now - (this.times[slot] ?? now);
    if (!(span > 0)) return 0;
    return (cumulativeNow - (this.values[slot] ?? 0)) / span;
  }
}
