/**
 * How many backends beyond its plan inference keeps when the rest is loaned: learned online from the cluster's
 * own history, not a constant. A loaned backend takes a grace period plus a cold start to serve again (the
 * reclaim lead time), so inference keeps as many spare backends as its use has ever risen beyond its plan within
 * one lead time over the recent past. Rises the plan foresaw (a service registering with its initial backends,
 * a planned scale-out) are not counted: only use beyond the plan is. FaPES loans everything beyond the inference
 * jobs' min_scale; here the fast loop scales inside lists between slow-loop plans, and a burst faster than a
 * reclaim would meet no backend at all.
 */

export interface HeadroomSettings {
  /** Grace period of a preempted job plus the cold start of the backend returned, ms. */
  readonly leadTimeMs: number;
  /** How far back rises are remembered, ms. */
  readonly memoryMs: number;
  /** Headroom before any history (and never less than this). */
  readonly floor: number;
}

/** The defaults: FaPES's 15 s grace plus a cold start, rises remembered for an hour, one spare from the start. */
export const HEADROOM_DEFAULTS: HeadroomSettings = { leadTimeMs: 30_000, memoryMs: 3_600_000, floor: 1 };

/** The largest rise of inference's use within one lead time over the memory. Time comes in as `now`. */
export class HeadroomLearner {
  private readonly at: number[] = [];
  private readonly use: number[] = [];

  constructor(private readonly settings: HeadroomSettings = HEADROOM_DEFAULTS) {
    if (!(settings.leadTimeMs > 0) || !(settings.memoryMs >= settings.leadTimeMs) || !(settings.floor >= 0))
      throw new RangeError("headroom: leadTimeMs > 0, memoryMs >= leadTimeMs and floor >= 0 are required");
  }

  /** One observation: the backends inference uses now (warm or starting in its lists) and what its plan asks. */
  observe(nowMs: number, inUse: number, plan = 0): void {
    const last = this.at.length > 0 ? (this.at[this.at.length - 1] as number) : Number.NEGATIVE_INFINITY;
    if (nowMs < last) return;
    this.at.push(nowMs);
    this.use.push(Math.max(0, inUse - Math.max(0, plan)));
    let drop = 0;
    while (drop < this.at.length && (this.at[drop] as number) < nowMs - this.settings.memoryMs) drop++;
    if (drop > 0) {
      this.at.splice(0, drop);
      this.use.splice(0, drop);
    }
  }

  /** Spare backends to keep: max over remembered t of excess(t) - min excess over [t - lead time, t], excess = use - plan. */
  headroom(): number {
    let rise = 0;
    let lo = 0;
    // A monotone deque of indices with increasing use: the minimum of the trailing window.
    const window: number[] = [];
    for (let i = 0; i < this.at.length; i++) {
      const t = this.at[i] as number;
      const u = this.use[i] as number;
      while (lo < i && (this.at[lo] as number) < t - this.settings.leadTimeMs) lo++;
      while (window.length > 0 && (window[0] as number) < lo) window.shift();
      while (window.length > 0 && (this.use[window[window.length - 1] as number] as number) >= u) window.pop();
      window.push(i);
      rise = Math.max(rise, u - (this.use[window[0] as number] as number));
    }
    return Math.max(this.settings.floor, Math.ceil(rise));
  }
}

/**
 * The largest value seen over a trailing window: inference's need goes through it before anything is lent, so a
 * rise is followed at once (a reclaim) and a fall only once it has held for the window (as Kubernetes' HPA
 * stabilises scale-downs). A backend is then not lent in a dip of the plan only to be taken back, a preemption,
 * when the plan rises again.
 */
export class PeakWindow {
  private readonly at: number[] = [];
  private readonly value: number[] = [];

  constructor(private readonly windowMs: number) {
    if (!(windowMs >= 0)) throw new RangeError("peak window: windowMs >= 0 is required");
  }

  /** Records `value` at `nowMs` and returns the peak over (nowMs - windowMs, nowMs]. */
  observe(nowMs: number, value: number): number {
    // A deque of decreasing values: its front is the peak.
    while (this.value.length > 0 && (this.value[this.value.length - 1] as number) <= value) {
      this.value.pop();
      this.at.pop();
    }
    this.at.push(nowMs);
    this.value.push(value);
    while (this.at.length > 1 && (this.at[0] as number) <= nowMs - this.windowMs) {
      this.at.shift();
      this.value.shift();
    }
    return this.value[0] as number;
  }
}
