/**
 * Swayam's clairvoyant baselines (Gujarati et al., Middleware'17, section 5, "ClairA1" and "ClairA2"), the
 * resource lower bounds the paper compares against. Both know every request's service time c in advance and
 * start a request arriving at t at t + RT_max - c, the latest start that still meets RT_max, so that work is
 * packed onto as few backends as possible:
 *  - ClairA1: zero set-up time and instant scale-in; a backend exists exactly while it serves, so its
 *    backend-seconds are the sum of service times (the absolute lower bound).
 *  - ClairA2: the same schedule with real set-up times and lazy collection; a new backend is started
 *    (clairvoyantly) t_setup before it is first needed and collected after idling T, like Swayam's backends.
 *    The lowest-index free backend is reused first, so the tail idles out.
 *
 * Choice: a request whose own service time exceeds its budget starts on arrival (it misses RT_max whatever
 * happens). Per job, one pool; the cluster capacity is the caller's business (evictIdle frees room).
 */

export type ClairvoyantVariant = "A1" | "A2";

/**
 * The latest start meeting RT_max, never before the arrival. fixedDelayMs: network time the request also pays.
 * One microsecond is kept in hand so that floating-point rounding cannot push a response to RT_max + 1 ulp.
 */
export function clairvoyantStart(arrivalMs: number, serviceMs: number, rtMaxMs: number, fixedDelayMs = 0): number {
  return Math.max(arrivalMs, arrivalMs + rtMaxMs - fixedDelayMs - serviceMs - CLAIRVOYANT_MARGIN_MS);
}

export const CLAIRVOYANT_MARGIN_MS = 0.001;

export interface ClairvoyantOptions {
  variant: ClairvoyantVariant;
  /** A2: time to set a backend up (charged before its first use). */
  setupMs: number;
  /** A2: idle time after which a backend is collected (T). */
  idleTimeoutMs: number;
}

/** A finished occupancy interval of one backend (for backend-seconds). */
export interface Occupancy {
  from: number;
  to: number;
}

export interface Acquired {
  index: number;
  /** A backend was set up for this request (a cold start; never for A1). */
  coldStart: boolean;
}

export class ClairvoyantPool {
  private readonly busyUntil: number[] = [];
  private readonly idleSince: number[] = [];
  private readonly since: number[] = [];
  private readonly alive: boolean[] = [];
  private aliveCount = 0;

  constructor(readonly options: ClairvoyantOptions) {}

  /** Backends holding resources now (A1: those serving). */
  get size(): number {
    return this.aliveCount;
  }

  /**
   * Collects (A2) the backends idle for T by now, returning their occupancy intervals. Call before acquire
   * with the same now; times must not decrease across calls.
   */
  collect(now: number): Occupancy[] {
    const out: Occupancy[] = [];
    if (this.options.variant === "A1") return out;
    for (let i = 0; i < this.alive.length; i++) {
      if (!this.alive[i]) continue;
      const idle = this.idleSince[i] ?? 0;
      if ((this.busyUntil[i] ?? 0) <= now && idle >= 0 && idle + this.options.idleTimeoutMs <= now) {
        out.push(this.retire(i, idle + this.options.idleTimeoutMs));
      }
    }
    return out;
  }

  /** Is there a backend free at now (so acquire does not grow the pool)? */
  hasFree(now: number): boolean {
    return this.options.variant === "A2" && this.freeIndex(now) >= 0;
  }

  /** A backend for a request starting now and serving serviceMs. */
  acquire(now: number, serviceMs: number): Acquired {
    let index = this.options.variant === "A2" ? this.freeIndex(now) : -1;
    let coldStart = false;
    if (index < 0) {
      index = this.alive.indexOf(false);
      if (index < 0) index = this.alive.length;
      this.alive[index] = true;
      this.aliveCount++;
      coldStart = this.options.variant === "A2";
      this.since[index] = coldStart ? now - this.options.setupMs : now;
    }
    this.busyUntil[index] = now + serviceMs;
    this.idleSince[index] = -1;
    return { index, coldStart };
  }

  /** The request on `index` finished at now. A1 releases the backend at once and returns its interval. */
  release(index: number, now: number): Occupancy | undefined {
    if (!this.alive[index]) return undefined;
    if (this.options.variant === "A1") return this.retire(index, now);
    this.idleSince[index] = now;
    return undefined;
  }

  /** Frees the longest-idle backend (A2) to make room elsewhere in the cluster; undefined if none idles. */
  evictIdle(now: number): Occupancy | undefined {
    let best = -1;
    for (let i = 0; i < this.alive.length; i++) {
      const idle = this.idleSince[i] ?? -1;
      if (this.alive[i] && idle >= 0 && (this.busyUntil[i] ?? 0) <= now && (best < 0 || idle < (this.idleSince[best] ?? 0))) best = i;
    }
    return best < 0 ? undefined : this.retire(best, now);
  }

  /** Closes every interval at end (idle ones at the earlier of their collection and end). */
  finish(end: number): Occupancy[] {
    const out: Occupancy[] = [];
    for (let i = 0; i < this.alive.length; i++) {
      if (!this.alive[i]) continue;
      const idle = this.idleSince[i] ?? -1;
      const to = idle >= 0 ? Math.min(end, idle + this.options.idleTimeoutMs) : Math.max(end, this.busyUntil[i] ?? end);
      out.push(this.retire(i, to));
    }
    return out;
  }

  private freeIndex(now: number): number {
    for (let i = 0; i < this.alive.length; i++) {
      if (this.alive[i] && (this.idleSince[i] ?? -1) >= 0 && (this.busyUntil[i] ?? 0) <= now) return i;
    }
    return -1;
  }

  private retire(index: number, to: number): Occupancy {
    this.alive[index] = false;
    this.aliveCount--;
    this.idleSince[index] = -1;
    return { from: this.since[index] ?? to, to };
  }
}
