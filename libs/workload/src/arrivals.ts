import { type Random, sampleExponential } from "@infergrid/core";
import { jobCounts, type Trace } from "./trace.js";

/**
 * How a trace is replayed.
 *
 * - `compression`: trace minutes per wall minute. 1 replays in real time; 60 replays one trace minute in one wall
 *   second, so the arrival rate is 60x the trace's (everything in a minute arrives within a second).
 * - `rateScale`: multiplies every count. With `compression: 60, rateScale: 1 / 60` the replay is 60x shorter
 *   but each second sees the trace's original per-second rate (the daily shape is compressed, the load is not).
 *
 * Wall rate of a job in trace minute m = counts[m] * rateScale * compression / 60 per second.
 */
export interface ReplayOptions {
  compression?: number;
  rateScale?: number;
  /** First trace minute replayed; wall time 0 is its start (default 0). */
  fromMinute?: number;
  /** End of the replay, exclusive (default trace.minutes). */
  toMinute?: number;
}

export interface ArrivalOptions extends ReplayOptions {
  random: Random;
  /**
   * - "poisson" (default, the papers' convention): a Poisson process whose mean count in minute m is
   *   counts[m] * rateScale, so counts vary from the trace's by Poisson noise.
   * - "exact": exactly counts[m] * rateScale arrivals in minute m (stochastically rounded when fractional),
   *   uniformly placed, i.e. a Poisson process conditioned on the trace's count.
   */
  mode?: "poisson" | "exact";
  /** Replay only these jobs (default all). */
  jobs?: readonly string[];
}

export interface Arrival {
  /** Milliseconds of wall time from the start of the replay. */
  atMs: number;
  job: string;
}

interface Resolved {
  from: number;
  to: number;
  msPerMinute: number;
  rateScale: number;
  compression: number;
}

function resolve(trace: Trace, options: ReplayOptions): Resolved {
  const compression = options.compression ?? 1;
  const rateScale = options.rateScale ?? 1;
  const from = options.fromMinute ?? 0;
  const to = options.toMinute ?? trace.minutes;
  if (!(compression > 0 && Number.isFinite(compression))) throw new RangeError(`compression must be > 0, got ${compression}`);
  if (!(rateScale >= 0 && Number.isFinite(rateScale))) throw new RangeError(`rateScale must be >= 0, got ${rateScale}`);
  if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || to > trace.minutes || from > to) {
    throw new RangeError(`replay needs integers 0 <= fromMinute <= toMinute <= ${trace.minutes}, got [${from}, ${to})`);
  }
  return { from, to, msPerMinute: 60_000 / compression, rateScale, compression };
}

/** Wall-clock length of the replay in milliseconds. */
export function replayDurationMs(trace: Trace, options: ReplayOptions = {}): number {
  const r = resolve(trace, options);
  return (r.to - r.from) * r.msPerMinute;
}

/** Expected arrivals per second of wall time for `job` at `atMs` into the replay (0 outside it). */
export function expectedRate(trace: Trace, job: string, atMs: number, options: ReplayOptions = {}): number {
  const r = resolve(trace, options);
  const counts = jobCounts(trace, job);
  if (!(atMs >= 0)) return 0;
  const minute = r.from + Math.floor(atMs / r.msPerMinute);
  if (minute >= r.to) return 0;
  return ((counts[minute] ?? 0) * r.rateScale * r.compression) / 60;
}

/**
 * One job's arrivals in trace-minute time. Poisson mode walks the piecewise-constant rate with exponential gaps
 * (memorylessness lets a gap that crosses a minute boundary be redrawn at the new rate); exact mode draws the
 * minute's sorted uniform positions one at a time. Either way a stream holds O(1) state.
 */
class JobStream {
  /** Trace-minute time of the pending arrival; Infinity when exhausted. */
  next = 0;
  private minute: number;
  private position: number;
  private remaining = 0;

  constructor(
    readonly job: string,
    readonly index: number,
    private readonly counts: Float64Array,
    private readonly r: Resolved,
    private readonly random: Random,
    private readonly exact: boolean,
  ) {
    this.minute = r.from;
    this.position = r.from;
    if (exact) this.enterMinute();
    this.advance();
  }

  advance(): void {
    this.next = this.exact ? this.advanceExact() : this.advancePoisson();
  }

  private advancePoisson(): number {
    while (this.minute < this.r.to) {
      const rate = (this.counts[this.minute] ?? 0) * this.r.rateScale;
      if (rate > 0) {
        const at = this.position + sampleExponential(this.random, rate);
        if (at < this.minute + 1) {
          this.position = at;
          return at;
        }
      }
      this.minute++;
      this.position = this.minute;
    }
    return Number.POSITIVE_INFINITY;
  }

  private advanceExact(): number {
    while (this.minute < this.r.to) {
      if (this.remaining > 0) {
        // The minimum of `remaining` uniforms on [position, 1): the next order statistic, without sorting.
        const u = this.position - this.minute;
        const next = 1 - (1 - u) * (1 - this.random.uniform()) ** (1 / this.remaining);
        this.remaining--;
        this.position = this.minute + Math.min(next, 1 - Number.EPSILON);
        return this.position;
      }
      this.minute++;
      this.position = this.minute;
      if (this.minute < this.r.to) this.enterMinute();
    }
    return Number.POSITIVE_INFINITY;
  }

  private enterMinute(): void {
    const mean = Math.max(0, (this.counts[this.minute] ?? 0) * this.r.rateScale);
    const floor = Math.floor(mean);
    this.remaining = this.random.uniform() < mean - floor ? floor + 1 : floor;
  }
}

function earlier(a: JobStream, b: JobStream): boolean {
  return a.next < b.next || (a.next === b.next && a.index < b.index);
}

/**
 * Arrivals of all jobs in time order, lazily: a binary heap merges one O(1)-state stream per job, so a
 * 6-hour 10-job replay (millions of arrivals) never materialises. Deterministic for a seeded `random`.
 */
export function* arrivalSchedule(trace: Trace, options: ArrivalOptions): Generator<Arrival, void, undefined> {
  const cursor = new ArrivalCursor(trace, options);
  while (cursor.advance()) yield { atMs: cursor.atMs, job: cursor.job };
}

/**
 * arrivalSchedule's arrivals one at a time, read from the cursor's fields: the same arrivals from the same draws,
 * without an object (and two generator steps) per arrival, which the simulator paid for millions of times a run.
 */
export class ArrivalCursor {
  /** The current arrival (after advance() returned true): its time and its job, by name and by index in the jobs. */
  atMs = Number.NaN;
  job = "";
  jobIndex = -1;
  private readonly r: Resolved;
  private readonly heap: JobStream[];
  private started = false;

  constructor(trace: Trace, options: ArrivalOptions) {
    this.r = resolve(trace, options);
    const names = options.jobs ?? trace.jobs;
    const r = this.r;
    this.heap = names.map((job, i) => new JobStream(job, i, jobCounts(trace, job), r, options.random, options.mode === "exact"));
    for (let i = (this.heap.length >> 1) - 1; i >= 0; i--) siftDown(this.heap, i);
  }

  /** Moves to the next arrival; false once there is none. */
  advance(): boolean {
    const heap = this.heap;
    const top = heap[0];
    if (top === undefined) return false;
    if (this.started) {
      if (top.next === Number.POSITIVE_INFINITY) return false;
      top.advance();
      siftDown(heap, 0);
    }
    this.started = true;
    const first = heap[0] as JobStream;
    if (first.next === Number.POSITIVE_INFINITY) return false;
    this.atMs = (first.next - this.r.from) * this.r.msPerMinute;
    this.job = first.job;
    this.jobIndex = first.index;
    return true;
  }
}

function siftDown(heap: JobStream[], start: number): void {
  let i = start;
  for (;;) {
    const l = 2 * i + 1;
    const rr = l + 1;
    let least = i;
    if (l < heap.length && earlier(heap[l] as JobStream, heap[least] as JobStream)) least = l;
    if (rr < heap.length && earlier(heap[rr] as JobStream, heap[least] as JobStream)) least = rr;
    if (least === i) return;
    [heap[least], heap[i]] = [heap[i] as JobStream, heap[least] as JobStream];
    i = least;
  }
}
