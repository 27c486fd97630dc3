/**
 * Batch forming on a backend (Themis, Momeni et al., section 4: each model serves batches of b; the first
 * request of a batch waits for the last, q(b) = (b - 1) / lambda, Eq. 4). Requests the backend accepted join the
 * forming batch; it closes when it holds maxBatch requests, or timeoutMs after its first request joined, and runs
 * when the model is free. One batch runs at a time; the next one forms while it runs.
 *
 * Pure and over injected time: the backend-worker and the simulator drive the same class. Each step returns
 * what to run now and, while a partial batch waits on an idle model, the time at which to call timer(); a
 * timer that fires late or for a batch that has since run is harmless (timer() checks).
 *
 * Choices where the paper is silent:
 *  - timeoutMs = 0 runs whatever has formed as soon as the model is idle (no waiting: with maxBatch 1 this is
 *    exactly a backend without batching). timeoutMs = Infinity is Themis's policy: wait until b requests
 *    arrived; its SLO already counts the wait (q(b)). A finite timeout bounds the wait at low load.
 *  - A batch waits only while the model is idle; requests that arrived while a batch ran start as soon as it
 *    finishes if they are b or their first waited its timeout by then.
 *  - resize(maxBatch) applies to the next batch to close; the running one is unaffected. Requests already
 *    forming are never dropped: beyond the new size they wait for the following batch.
 *  - The former does not bound how many wait: the backend admits at most admittedRequests(maxBatch) at once
 *    (BackendMachine's concurrency), and refuses the rest as busy.
 */

/** A backend whose size a batching-aware policy plans (Themis): its batch time now and its service's SLO. */
export interface Pipelining {
  /** l(b, c): how long one batch of b takes on its current cores, ms. */
  batchMs: number;
  sloMs: number;
}

/** The most batches a pipelining backend admits (a bound on the memory a tiny l(b, c) would otherwise ask). */
export const MAX_ADMITTED_BATCHES = 64;

/**
 * Requests a backend with batch size b admits at once (its BackendMachine's concurrency). Without batching, one
 * (Swayam: a backend never queues); with batching, a full batch running and the next forming (2b): admitting
 * only b, the running batch included, leaves the next batch whatever room the running one left, and a backlog
 * runs as alternating batches of k and b - k below the throughput b / l(b, c) the policy planned for.
 * `pipelining`: a backend sized by Themis also admits the batches it can finish within half its SLO (at least
 * 2): its policy counts its throughput as b / l(b, c) back to back, which a backend that waits a frontend's round
 * trip between batches does not reach once resized (l of a few ms at 8 cores, measured on the local cluster:
 * a 60 req/s step on one 8-core ResNet-18 backend was 100 % late at 2 admitted, none late at 8).
 */
export function admittedRequests(maxBatch: number, pipelining?: Pipelining): number {
  if (pipelining === undefined) return maxBatch > 1 ? 2 * maxBatch : 1;
  const { batchMs, sloMs } = pipelining;
  const batches = batchMs > 0 && sloMs > 0 ? Math.floor(sloMs / (2 * batchMs)) : 2;
  return maxBatch * Math.min(MAX_ADMITTED_BATCHES, Math.max(2, batches));
}

export interface BatchFormerOptions {
  /** The batch size b (>= 1). */
  maxBatch: number;
  /** How long a partial batch waits on an idle model for more requests (ms; 0: none; Infinity: until b). */
  timeoutMs: number;
}

/** What the caller does after a step: run these requests as one batch now; arm a timer for timer(). */
export interface BatchStep<T> {
  readonly run?: readonly T[];
  /** Set while a partial batch waits on an idle model: call timer() at this time (it replaces any earlier one). */
  readonly timerAt?: number;
}

interface Forming<T> {
  readonly item: T;
  readonly at: number;
}

const NOTHING: BatchStep<never> = Object.freeze({});

export class BatchFormer<T> {
  private batchLimit: number;
  private waitMs: number;
  private readonly forming: Forming<T>[] = [];
  private runningSize = 0;

  constructor(options: BatchFormerOptions) {
    this.batchLimit = BatchFormer.checkBatch(options.maxBatch);
    this.waitMs = BatchFormer.checkTimeout(options.timeoutMs);
  }

  get maxBatch(): number {
    return this.batchLimit;
  }

  get timeoutMs(): number {
    return this.waitMs;
  }

  /** Requests waiting for a batch to run. */
  get waiting(): number {
    return this.forming.length;
  }

  /** Requests in the running batch (0: the model is idle). */
  get running(): number {
    return this.runningSize;
  }

  /** An accepted request joins the forming batch (now: its arrival). */
  add(now: number, item: T): BatchStep<T> {
    this.forming.push({ item, at: now });
    return this.step(now);
  }

  /** A timer armed at a step's timerAt fired. */
  timer(now: number): BatchStep<T> {
    return this.step(now);
  }

  /** The running batch finished (answered or failed): the next one may run. */
  finished(now: number): BatchStep<T> {
    this.runningSize = 0;
    return this.step(now);
  }

  /**
   * A waiting request left before its batch ran (its caller went away). Returns whether it was waiting, and
   * the step that follows (the batch may now run or wait for a later deadline).
   */
  withdraw(now: number, item: T): { readonly removed: boolean; readonly step: BatchStep<T> } {
    const i = this.forming.findIndex((f) => f.item === item);
    if (i < 0) return { removed: false, step: this.step(now) };
    this.forming.splice(i, 1);
    return { removed: true, step: this.step(now) };
  }

  /** A new batch size (and optionally timeout) for the next batch to close. */
  resize(now: number, maxBatch: number, timeoutMs: number = this.waitMs): BatchStep<T> {
    this.batchLimit = BatchFormer.checkBatch(maxBatch);
    this.waitMs = BatchFormer.checkTimeout(timeoutMs);
    return this.step(now);
  }

  /** When the waiting batch closes for its timeout if nothing else happens; undefined if it is not waiting on one. */
  deadline(): number | undefined {
    const first = this.forming[0];
    if (first === undefined || this.runningSize > 0 || this.forming.length >= this.batchLimit) return undefined;
    if (this.waitMs === 0 || !Number.isFinite(this.waitMs)) return undefined;
    return first.at + this.waitMs;
  }

  private step(now: number): BatchStep<T> {
    const first = this.forming[0];
    if (first === undefined || this.runningSize > 0) return NOTHING;
    // The same sum deadline() returns, so a timer armed at it always closes the batch.
    if (this.forming.length >= this.batchLimit || this.waitMs === 0 || now >= first.at + this.waitMs) {
      const run = this.forming.splice(0, this.batchLimit).map((f) => f.item);
      this.runningSize = run.length;
      return { run };
    }
    const timerAt = this.deadline();
    return timerAt === undefined ? NOTHING : { timerAt };
  }

  private static checkBatch(maxBatch: number): number {
    if (!Number.isInteger(maxBatch) || maxBatch < 1) throw new RangeError(`maxBatch must be an integer >= 1, got ${maxBatch}`);
    return maxBatch;
  }

  private static checkTimeout(timeoutMs: number): number {
    if (Number.isNaN(timeoutMs) || timeoutMs < 0) throw new RangeError(`timeoutMs must be >= 0, got ${timeoutMs}`);
    return timeoutMs;
  }
}
