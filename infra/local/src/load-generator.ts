import type { Arrival } from "@infergrid/workload";
import type { ServiceStats } from "./stats.js";

/** An answer names the backend that served it. */
export type Outcome = { ok: true; backendId?: string } | { ok: false; code: string };

/** One request on its way: its outcome (never rejects) and a way to give up on it. */
export interface InFlight {
  result: Promise<Outcome>;
  cancel(): void;
}

/** Sends one request to `service`; with `batch`, a query of that many items. */
export type SendFn = (service: string, batch?: number) => InFlight;

export interface LoadGeneratorOptions {
  arrivals: Iterator<Arrival>;
  /** Arrivals at or after this many ms into the run are not sent. */
  durationMs: number;
  send: SendFn;
  stats: ReadonlyMap<string, ServiceStats>;
  maxInFlight: number;
  /** Milliseconds, monotonic; the stats' per-second buckets use it too. */
  now: () => number;
  /** Each request's batch size (the heterogeneous mode); without it requests carry the service's fixed inputs. */
  batchOf?: (service: string) => number;
  /** Every outcome with its batch size (undefined without `batchOf`) and latency, after the stats have it. */
  onOutcome?: (service: string, batch: number | undefined, outcome: Outcome, latencyMs: number) => void;
}

/**
 * Open-loop load: each arrival is sent at its scheduled time whatever happened to earlier ones,
 * as independent clients would. The only back-pressure is a bound on requests in flight (memory);
 * an arrival beyond it is counted as not sent, never silently dropped.
 */
export class LoadGenerator {
  private readonly inFlight = new Set<InFlight>();
  private timer: NodeJS.Timeout | undefined;
  private next: Arrival | undefined;
  private startedAt = 0;
  private stopped = false;
  private resolveFinished: () => void = () => {};
  /** Resolves when every arrival of the run has been sent (or the run was stopped). */
  readonly finished: Promise<void>;
  maxLagMs = 0;

  constructor(private readonly options: LoadGeneratorOptions) {
    this.finished = new Promise((resolve) => {
      this.resolveFinished = resolve;
    });
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Milliseconds since start. */
  elapsedMs(): number {
    return this.startedAt === 0 ? 0 : this.options.now() - this.startedAt;
  }

  start(): this {
    this.startedAt = this.options.now();
    this.next = this.pull();
    this.tick();
    return this;
  }

  private pull(): Arrival | undefined {
    const r = this.options.arrivals.next();
    return r.done ? undefined : r.value;
  }

  private tick(): void {
    this.timer = undefined;
    if (this.stopped) return;
    const elapsed = this.elapsedMs();
    while (this.next !== undefined && this.next.atMs <= elapsed && this.next.atMs < this.options.durationMs) {
      this.maxLagMs = Math.max(this.maxLagMs, elapsed - this.next.atMs);
      this.fire(this.next.job);
      this.next = this.pull();
    }
    if (this.next === undefined || elapsed >= this.options.durationMs) {
      this.stopSending();
      return;
    }
    const until = Math.min(this.next.atMs, this.options.durationMs);
    // Sleeps until the next arrival is due (or the run's end, so that --duration holds even in a
    // quiet stretch); timers are ms-grained and may fire late under load: maxLagMs says by how much.
    this.timer = setTimeout(() => this.tick(), Math.max(1, until - elapsed));
  }

  private fire(service: string): void {
    const stats = this.options.stats.get(service);
    if (!stats) return;
    if (this.inFlight.size >= this.options.maxInFlight) {
      stats.onNotSent();
      return;
    }
    const batch = this.options.batchOf?.(service);
    const sentAt = this.options.now();
    const seq = stats.onSent(sentAt);
    const call = this.options.send(service, batch);
    this.inFlight.add(call);
    void call.result.then((outcome) => {
      this.inFlight.delete(call);
      const doneAt = this.options.now();
      if (outcome.ok) stats.onAnswered(seq, doneAt - sentAt, doneAt);
      else stats.onFailed(seq, outcome.code, doneAt);
      this.options.onOutcome?.(service, batch, outcome, doneAt - sentAt);
    });
  }

  /** No more requests go out; those in flight go on. */
  stopSending(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.resolveFinished();
  }

  /** Waits for the requests in flight (true), or gives up after `timeoutMs` (false). */
  async drain(timeoutMs: number): Promise<boolean> {
    const end = this.options.now() + timeoutMs;
    while (this.inFlight.size > 0) {
      const left = end - this.options.now();
      if (left <= 0) return false;
      let t: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([...this.inFlight].map((c) => c.result)),
        new Promise<void>((resolve) => {
          t = setTimeout(resolve, Math.min(left, 200));
        }),
      ]);
      clearTimeout(t);
    }
    return true;
  }

  /** Cancels everything in flight: each ends as a failure (CANCELLED), so none is lost. */
  cancelInFlight(): void {
    for (const c of this.inFlight) c.cancel();
  }
}
