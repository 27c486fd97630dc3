import { SlaWindowTracker } from "@infergrid/swayam";
import { LatencyHistogram } from "@infergrid/workload";

/** Per-second counts for the live view. */
interface Bucket {
  second: number;
  sent: number;
  completed: number;
  answered: number;
  within: number;
  latency: LatencyHistogram;
}

export interface LiveStats {
  /** Requests sent per second over the window. */
  rateRps: number;
  completed: number;
  p50Ms: number;
  p99Ms: number;
  /** Share of the window's finished requests answered within the SLO latency (NaN if none). */
  attainment: number;
}

export interface ServiceTotals {
  sent: number;
  answered: number;
  failed: number;
  failedByCode: Record<string, number>;
  /** Sent but neither answered nor failed: still in flight, or lost. */
  outstanding: number;
  notSent: number;
  withinSlo: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** withinSlo / (answered + failed); a failure is a miss. */
  attainment: number;
  slaWindows: number;
  slaCompliantWindows: number;
  /** Swayam's SLA compliance frequency: compliant windows / windows (NaN with fewer than 1000 requests). */
  slaCompliance: number;
}

const LIVE_SECONDS = 10;

/**
 * Outcomes of one service's requests. Swayam's SLA windows are over consecutive requests, so
 * outcomes enter the window tracker in send order: a completion that overtakes earlier requests
 * waits in `pending` until they finish (at most the requests in flight).
 */
export class ServiceStats {
  private nextSeq = 0;
  private nextToRecord = 0;
  private readonly pending = new Map<number, number | undefined>();
  private readonly latency = new LatencyHistogram();
  private readonly sla: SlaWindowTracker;
  private readonly buckets: Bucket[] = [];
  private answered = 0;
  private readonly failedByCode = new Map<string, number>();
  private failed = 0;
  private within = 0;
  private notSent = 0;

  constructor(
    readonly name: string,
    readonly rtMaxMs: number,
    readonly slMin: number,
  ) {
    this.sla = new SlaWindowTracker({ rtMaxMs, slMin });
  }

  /** A request went out at `now` (ms); returns its sequence number for the outcome. */
  onSent(now: number): number {
    this.bucket(now).sent++;
    return this.nextSeq++;
  }

  /** The load generator could not send a request (too many in flight). */
  onNotSent(): void {
    this.notSent++;
  }

  onAnswered(seq: number, latencyMs: number, now: number): void {
    this.answered++;
    const hit = latencyMs <= this.rtMaxMs;
    if (hit) this.within++;
    this.latency.record(Math.max(0, latencyMs));
    const b = this.bucket(now);
    b.completed++;
    b.answered++;
    if (hit) b.within++;
    b.latency.record(Math.max(0, latencyMs));
    this.settle(seq, latencyMs);
  }

  onFailed(seq: number, code: string, now: number): void {
    this.failed++;
    this.failedByCode.set(code, (this.failedByCode.get(code) ?? 0) + 1);
    this.bucket(now).completed++;
    this.settle(seq, undefined);
  }

  private settle(seq: number, latencyMs: number | undefined): void {
    if (seq < this.nextToRecord || seq >= this.nextSeq || this.pending.has(seq)) {
      throw new Error(`${this.name}: outcome for request #${seq} reported twice or never sent`);
    }
    this.pending.set(seq, latencyMs);
    while (this.pending.has(this.nextToRecord)) {
      this.sla.record(this.pending.get(this.nextToRecord));
      this.pending.delete(this.nextToRecord);
      this.nextToRecord++;
    }
  }

  private bucket(now: number): Bucket {
    const second = Math.floor(now / 1000);
    const last = this.buckets[this.buckets.length - 1];
    if (last !== undefined && last.second === second) return last;
    const b: Bucket = { second, sent: 0, completed: 0, answered: 0, within: 0, latency: new LatencyHistogram() };
    this.buckets.push(b);
    while (this.buckets.length > LIVE_SECONDS + 2) this.buckets.shift();
    return b;
  }

  /** The last `seconds` whole seconds before `now` (the running second is left out: it is partial). */
  live(now: number, seconds = LIVE_SECONDS): LiveStats {
    const current = Math.floor(now / 1000);
    const latency = new LatencyHistogram();
    let sent = 0;
    let completed = 0;
    let within = 0;
    for (const b of this.buckets) {
      if (b.second >= current || b.second < current - seconds) continue;
      sent += b.sent;
      completed += b.completed;
      within += b.within;
      latency.merge(b.latency);
    }
    return {
      rateRps: sent / seconds,
      completed,
      p50Ms: latency.percentile(50),
      p99Ms: latency.percentile(99),
      attainment: completed === 0 ? Number.NaN : within / completed,
    };
  }

  totals(): ServiceTotals {
    const sent = this.nextSeq;
    const completed = this.answered + this.failed;
    const compliance = this.sla.compliance();
    return {
      sent,
      answered: this.answered,
      failed: this.failed,
      failedByCode: Object.fromEntries([...this.failedByCode].sort((a, b) => b[1] - a[1])),
      outstanding: sent - completed,
      notSent: this.notSent,
      withinSlo: this.within,
      p50Ms: this.latency.percentile(50),
      p99Ms: this.latency.percentile(99),
      meanMs: this.latency.mean,
      attainment: completed === 0 ? Number.NaN : this.within / completed,
      slaWindows: compliance.windows,
      slaCompliantWindows: compliance.compliant,
      slaCompliance: compliance.frequency,
    };
  }
}
