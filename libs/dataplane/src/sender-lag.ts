/**
 * How a hop reads the deadline its caller sent, without the two nodes' clocks having to agree.
 *
 * A call between the request path's processes carries its deadline twice: as the gRPC timeout, which the receiver
 * counts from when it read the call (it holds whatever the two clocks read, but not the time the call spent waiting
 * to be read, e.g. in a frozen process's socket), and stamped in the message on the sender's steady clock (which
 * holds that time, but only on the sender's clock). Their difference is the lag of this call: how far this
 * process's clock, when it read the call, was past the sender's when it sent it. That is the two clocks' offset
 * plus the call's transit. The smallest lag a sender's recent calls showed is its offset plus the quickest transit:
 * a call's deadline is its stamp moved by that much. So a call read late loses the time it waited beyond the
 * quickest transit, and a sender whose clock is off by an hour, either way, is read as well as one in step.
 *
 * Limits: the first call of a sender, or the first after it was silent for a window, sets the lag it is judged
 * by; so does a call read after a freeze longer than the window (it then runs as on the gRPC timeout alone). A
 * sender whose stamps jump (a process whose steady clock restarted) is read by its old lag for up to a window: the
 * stamps of the request path's senders are on their steady clocks, which a wall-clock step does not move.
 */
export interface SenderLagOptions {
  /** How long a lag is remembered (default 10 s). */
  windowMs?: number;
  /** Senders remembered at once; beyond it, the one heard from least recently is forgotten (default 1024). */
  maxSenders?: number;
}

/** The smallest lag per second of the window, as a ring: the window's smallest in O(buckets) without a sort. */
const BUCKETS = 10;

interface Sender {
  /** The second (of the receiver's clock) each bucket holds, and its smallest lag. */
  seconds: Float64Array;
  mins: Float64Array;
}

export class SenderLag {
  private readonly bucketMs: number;
  private readonly maxSenders: number;
  private readonly senders = new Map<string, Sender>();

  constructor(options: SenderLagOptions = {}) {
    const windowMs = options.windowMs ?? 10_000;
    if (!(windowMs > 0)) throw new RangeError(`windowMs must be positive, got ${windowMs}`);
    this.bucketMs = windowMs / BUCKETS;
    this.maxSenders = Math.max(1, options.maxSenders ?? 1024);
  }

  /**
   * A call's deadline on this process's clock. `relative`: its gRPC deadline as read when the call arrived, on
   * this clock (Infinity: none). `stamped`: the deadline in its message, on the sender's clock (0: none). `now`:
   * this clock. `wallOffsetMs`: how far this clock is ahead of the wall clock; a stamp without a gRPC deadline to
   * judge it by is read as a wall-clock time, as a client's `deadline_unix_ms` is.
   */
  deadline(sender: string, relative: number, stamped: number, now: number, wallOffsetMs = 0): number {
    if (!(stamped > 0)) return relative;
    if (!Number.isFinite(relative)) return stamped + wallOffsetMs;
    return stamped + this.observe(sender, relative - stamped, now);
  }

  /** Records a call's lag and returns the smallest of the sender's window, this one's included. */
  private observe(id: string, lag: number, now: number): number {
    const second = Math.floor(now / this.bucketMs);
    let s = this.senders.get(id);
    if (s) {
      // Map order is insertion order: moved to the end, the least recently heard sender stays first.
      this.senders.delete(id);
    } else {
      if (this.senders.size >= this.maxSenders) {
        const oldest = this.senders.keys().next().value;
        if (oldest !== undefined) this.senders.delete(oldest);
      }
      s = { seconds: new Float64Array(BUCKETS).fill(Number.NEGATIVE_INFINITY), mins: new Float64Array(BUCKETS) };
    }
    this.senders.set(id, s);
    const slot = ((second % BUCKETS) + BUCKETS) % BUCKETS;
    if (s.seconds[slot] !== second) {
      s.seconds[slot] = second;
      s.mins[slot] = lag;
    } else if (lag < (s.mins[slot] as number)) s.mins[slot] = lag;
    let least = lag;
    for (let i = 0; i < BUCKETS; i++) {
      const at = s.seconds[i] as number;
      if (at > second - BUCKETS && at <= second && (s.mins[i] as number) < least) least = s.mins[i] as number;
    }
    return least;
  }

  /** Senders remembered now (for tests and metrics). */
  get size(): number {
    return this.senders.size;
  }
}
