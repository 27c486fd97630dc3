/**
 * What a run measures, per job and for the cluster: SLO violations (over the threshold, plus dropped),
 * Swayam's SLA-compliance frequency (libs/swayam SlaWindowTracker: 1000-request windows slid by 10), p50/p99
 * latency (libs/workload LatencyHistogram), backend-seconds (provisioning included) and cold starts; and
 * time series in bins for the plots (arrivals, violations, backends in use, a coarse per-bin p99); and Faro's
 * job utility: each bin's (minute's) p99 latency, a dropped request counting as infinite, through the relaxed
 * utility min(SLO / p99, 1), averaged over the bins with requests (Faro's lost utility is 1 minus it, per job).
 *
 * The definitions where the papers differ (config.ts MetricsDefinition; the defaults first):
 *  - p99 "bucketed": each bin's p99 is the upper edge of its 12 % histogram bucket; "exact": every latency of
 *    the bin is kept (per job and bin) and the p99 is the nearest-rank order statistic, the ceil(0.99 n)-th
 *    smallest of the bin's n outcomes, drops sorted last as infinite latencies. Faro's paper defines the
 *    metric as "each job's 99th percentile latency (measurements taken every minute)", a dropped request
 *    counting as infinite, without naming an order statistic: nearest rank is our choice.
 *  - binBy "completion": an outcome (completion or drop) counts in the bin where it happened; "arrival": in
 *    the bin its request arrived (per-bin violations, completions, drops, p99 and so utility).
 * Whole-run figures (violations, p50/p99Ms, SLA compliance) do not depend on either.
 */
import { relaxedUtility } from "@infergrid/faro";
import { SlaWindowTracker } from "@infergrid/swayam";
import { LatencyHistogram } from "@infergrid/workload";
import type { MetricsDefinition } from "./config.js";

/** Per-bin latency buckets: log-spaced from 1 ms to 100 s, about 12 % wide (plots only). */
const NB = 100;
const LOG_MIN = 0;
const LOG_STEP = Math.log(1e5) / NB;

export interface JobSeries {
  /** Requests arrived per bin. */
  arrivals: Float64Array;
  /** Violations (late or dropped) per bin: the bin of the request's end (binBy "completion") or of its arrival. */
  violations: Float64Array;
  completions: Float64Array;
  /** Mean backends held (provisioning, warm or busy) in each bin. */
  backends: Float64Array;
  /** p99 latency of the requests completed in (or, binBy "arrival", arrived in) each bin (NaN when none), ms:
   * within the bucket width, or exact (nearest rank) under p99 "exact". */
  p99: Float64Array;
}

export interface JobMetrics {
  name: string;
  requests: number;
  completed: number;
  dropped: number;
  violations: number;
  violationRate: number;
  slaCompliance: number;
  slaWindows: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** Mean latency minus mean service time of the completed requests: waiting plus network. */
  meanWaitMs: number;
  backendSeconds: number;
  coldStarts: number;
  /** Faro's job utility: mean over bins with requests of min(SLO / p99, 1), drops as infinite latency; in [0, 1]. */
  utility: number;
}

export class Metrics {
  readonly bins: number;
  private readonly requests: Float64Array;
  private readonly dropped: Float64Array;
  private readonly violations: Float64Array;
  private readonly backendMs: Float64Array;
  private readonly serviceMs: Float64Array;
  readonly coldStarts: Float64Array;
  private readonly sla: SlaWindowTracker[];
  private readonly latency: LatencyHistogram[];
  private readonly binArrivals: Float64Array;
  private readonly binViolations: Float64Array;
  private readonly binDone: Float64Array;
  private readonly binDropped: Float64Array;
  private readonly binBackendMs: Float64Array;
  private readonly binHist: Uint32Array;
  private readonly byArrival: boolean;
  /** p99 "exact": each job's completed latencies and their bins, in completion order (grown by doubling). */
  private readonly exact: { lat: Float64Array; bin: Int32Array; n: number }[] | undefined;
  /** p99 "exact": per job, the latencies sorted by bin then value, and each bin's start (bins + 1 offsets). */
  private sorted: { lat: Float64Array; start: Int32Array }[] | undefined;

  constructor(
    readonly jobs: readonly { name: string; sloMs: number; slMin: number }[],
    readonly durationMs: number,
    readonly binMs: number,
    readonly definition: MetricsDefinition = { p99: "bucketed", binBy: "completion" },
  ) {
    const J = jobs.length;
    this.bins = Math.max(1, Math.ceil(durationMs / binMs));
    this.requests = new Float64Array(J);
    this.dropped = new Float64Array(J);
    this.violations = new Float64Array(J);
    this.backendMs = new Float64Array(J);
    this.serviceMs = new Float64Array(J);
    this.coldStarts = new Float64Array(J);
    this.sla = jobs.map((j) => new SlaWindowTracker({ rtMaxMs: j.sloMs, slMin: j.slMin }));
    this.latency = jobs.map(() => new LatencyHistogram());
    this.binArrivals = new Float64Array(J * this.bins);
    this.binViolations = new Float64Array(J * this.bins);
    this.binDone = new Float64Array(J * this.bins);
    this.binDropped = new Float64Array(J * this.bins);
    this.binBackendMs = new Float64Array(J * this.bins);
    this.binHist = new Uint32Array(J * this.bins * NB);
    this.byArrival = definition.binBy === "arrival";
    this.exact =
      definition.p99 === "exact" ? jobs.map(() => ({ lat: new Float64Array(1024), bin: new Int32Array(1024), n: 0 })) : undefined;
  }

  private bin(t: number): number {
    const b = Math.floor(t / this.binMs);
    return b < 0 ? 0 : b >= this.bins ? this.bins - 1 : b;
  }

  arrival(job: number, now: number): void {
    this.requests[job] = (this.requests[job] ?? 0) + 1;
    const i = job * this.bins + this.bin(now);
    this.binArrivals[i] = (this.binArrivals[i] ?? 0) + 1;
  }

  /** A request of `job` that arrived at `arrivedMs` completed at `now`, seen `latencyMs` after it arrived. */
  /** Compute time of a job's completed requests, ms: the busy part of its backend time. */
  computeMs(job: number): number {
    return this.serviceMs[job] ?? 0;
  }

  completed(job: number, now: number, latencyMs: number, serviceMs: number, arrivedMs = now): void {
    this.serviceMs[job] = (this.serviceMs[job] ?? 0) + serviceMs;
    const bin = this.bin(this.byArrival ? arrivedMs : now);
    const b = job * this.bins + bin;
    this.binDone[b] = (this.binDone[b] ?? 0) + 1;
    const slo = (this.jobs[job] as { sloMs: number }).sloMs;
    if (latencyMs > slo) {
      this.violations[job] = (this.violations[job] ?? 0) + 1;
      this.binViolations[b] = (this.binViolations[b] ?? 0) + 1;
    }
    (this.sla[job] as SlaWindowTracker).record(latencyMs);
    (this.latency[job] as LatencyHistogram).record(latencyMs);
    let k = Math.floor((Math.log(Math.max(1, latencyMs)) - LOG_MIN) / LOG_STEP);
    if (k >= NB) k = NB - 1;
    const h = b * NB + k;
    this.binHist[h] = (this.binHist[h] ?? 0) + 1;
    const x = this.exact?.[job];
    if (x !== undefined) {
      if (x.n === x.lat.length) {
        const lat = new Float64Array(x.n * 2);
        lat.set(x.lat);
        x.lat = lat;
        const bins = new Int32Array(x.n * 2);
        bins.set(x.bin);
        x.bin = bins;
      }
      x.lat[x.n] = latencyMs;
      x.bin[x.n] = bin;
      x.n++;
      this.sorted = undefined;
    }
  }

  /** A request of `job` that arrived at `arrivedMs` was dropped at `now`: a violation, an infinite latency. */
  recordDrop(job: number, now: number, arrivedMs = now): void {
    this.dropped[job] = (this.dropped[job] ?? 0) + 1;
    this.violations[job] = (this.violations[job] ?? 0) + 1;
    const b = job * this.bins + this.bin(this.byArrival ? arrivedMs : now);
    this.binViolations[b] = (this.binViolations[b] ?? 0) + 1;
    this.binDropped[b] = (this.binDropped[b] ?? 0) + 1;
    (this.sla[job] as SlaWindowTracker).record(undefined);
  }

  coldStart(job: number): void {
    this.coldStarts[job] = (this.coldStarts[job] ?? 0) + 1;
  }

  /** One backend held by `job` over [from, to): clipped to the run, spread over the bins. */
  occupancy(job: number, from: number, to: number): void {
    const a = Math.max(0, from);
    const z = Math.min(this.durationMs, to);
    if (!(z > a)) return;
    this.backendMs[job] = (this.backendMs[job] ?? 0) + (z - a);
    let t = a;
    const base = job * this.bins;
    while (t < z) {
      const b = this.bin(t);
      const end = Math.min(z, (b + 1) * this.binMs);
      const i = base + b;
      this.binBackendMs[i] = (this.binBackendMs[i] ?? 0) + (end - t);
      if (end <= t) break;
      t = end;
    }
  }

  job(j: number): JobMetrics {
    const lat = this.latency[j] as LatencyHistogram;
    const sla = (this.sla[j] as SlaWindowTracker).compliance();
    const requests = this.requests[j] ?? 0;
    const violations = this.violations[j] ?? 0;
    return {
      name: (this.jobs[j] as { name: string }).name,
      requests,
      completed: lat.count,
      dropped: this.dropped[j] ?? 0,
      violations,
      violationRate: requests > 0 ? violations / requests : 0,
      slaCompliance: sla.frequency,
      slaWindows: sla.windows,
      p50Ms: lat.count > 0 ? lat.percentile(50) : Number.NaN,
      p99Ms: lat.count > 0 ? lat.percentile(99) : Number.NaN,
      meanMs: lat.mean,
      meanWaitMs: lat.count > 0 ? lat.mean - (this.serviceMs[j] ?? 0) / lat.count : Number.NaN,
      backendSeconds: (this.backendMs[j] ?? 0) / 1000,
      coldStarts: this.coldStarts[j] ?? 0,
      utility: this.utility(j),
    };
  }

  /** p99 "exact": job j's latencies sorted by bin (a counting sort), then each bin's run by value. */
  private sortedLatencies(j: number): { lat: Float64Array; start: Int32Array } {
    if (this.sorted === undefined) {
      this.sorted = (this.exact ?? []).map((x) => {
        const start = new Int32Array(this.bins + 1);
        for (let k = 0; k < x.n; k++) start[(x.bin[k] as number) + 1] = (start[(x.bin[k] as number) + 1] ?? 0) + 1;
        for (let b = 0; b < this.bins; b++) start[b + 1] = (start[b + 1] ?? 0) + (start[b] ?? 0);
        const fill = start.slice(0, this.bins);
        const lat = new Float64Array(x.n);
        for (let k = 0; k < x.n; k++) {
          const b = x.bin[k] as number;
          lat[fill[b] as number] = x.lat[k] as number;
          fill[b] = (fill[b] as number) + 1;
        }
        for (let b = 0; b < this.bins; b++) lat.subarray(start[b] as number, start[b + 1] as number).sort();
        return { lat, start };
      });
    }
    return this.sorted[j] as { lat: Float64Array; start: Int32Array };
  }

  /**
   * The rank-th smallest (1-based, rank <= the bin's completions) latency of job j's completions in bin b: exact
   * under p99 "exact", else the upper edge of its histogram bucket.
   */
  private atRank(j: number, b: number, rank: number): number {
    const i = j * this.bins + b;
    if (this.exact === undefined) return bucketAtRank(this.binHist.subarray(i * NB, (i + 1) * NB), rank);
    const s = this.sortedLatencies(j);
    return s.lat[(s.start[b] as number) + rank - 1] as number;
  }

  private utility(j: number): number {
    const slo = (this.jobs[j] as { sloMs: number }).sloMs;
    let sum = 0;
    let bins = 0;
    for (let b = 0; b < this.bins; b++) {
      const i = j * this.bins + b;
      const done = this.binDone[i] ?? 0;
      const total = done + (this.binDropped[i] ?? 0);
      if (total === 0) continue;
      const rank = Math.ceil(0.99 * total);
      const p99 = rank > done ? Number.POSITIVE_INFINITY : this.atRank(j, b, rank);
      sum += relaxedUtility(p99, slo);
      bins++;
    }
    return bins > 0 ? sum / bins : 1;
  }

  /** Cluster-wide latency percentiles: merged from the per-job histograms. */
  clusterLatency(): { p50Ms: number; p99Ms: number } {
    const merged = new LatencyHistogram();
    for (const h of this.latency) merged.merge(h);
    return merged.count > 0 ? { p50Ms: merged.percentile(50), p99Ms: merged.percentile(99) } : { p50Ms: Number.NaN, p99Ms: Number.NaN };
  }

  /** p99 per bin over all jobs' completions (the bins' histograms merged). */
  clusterP99(): Float64Array {
    const out = new Float64Array(this.bins);
    const J = this.jobs.length;
    const merged = new Float64Array(NB);
    for (let b = 0; b < this.bins; b++) {
      merged.fill(0);
      let total = 0;
      for (let j = 0; j < J; j++) {
        const h = (j * this.bins + b) * NB;
        for (let k = 0; k < NB; k++) {
          const c = this.binHist[h + k] ?? 0;
          merged[k] = (merged[k] ?? 0) + c;
          total += c;
        }
      }
      out[b] = total === 0 ? Number.NaN : bucketPercentile(merged, total, 0.99);
    }
    return out;
  }

  series(j: number): JobSeries {
    const base = j * this.bins;
    const slice = (a: Float64Array) => a.slice(base, base + this.bins);
    const backends = slice(this.binBackendMs);
    for (let b = 0; b < this.bins; b++) {
      const width = Math.min(this.binMs, this.durationMs - b * this.binMs);
      backends[b] = width > 0 ? (backends[b] ?? 0) / width : 0;
    }
    const p99 = new Float64Array(this.bins);
    for (let b = 0; b < this.bins; b++) {
      const h = (base + b) * NB;
      let total = 0;
      for (let k = 0; k < NB; k++) total += this.binHist[h + k] ?? 0;
      if (total === 0) {
        p99[b] = Number.NaN;
        continue;
      }
      p99[b] = this.atRank(j, b, Math.ceil(0.99 * total));
    }
    return {
      arrivals: slice(this.binArrivals),
      violations: slice(this.binViolations),
      completions: slice(this.binDone),
      backends,
      p99,
    };
  }
}

/** The upper edge of the bucket holding the q-quantile (nearest rank) of `total` counts. */
function bucketPercentile(counts: ArrayLike<number>, total: number, q: number): number {
  return bucketAtRank(counts, Math.ceil(q * total));
}

/** The upper edge of the bucket holding the rank-th smallest count (1-based). */
function bucketAtRank(counts: ArrayLike<number>, rank: number): number {
  let seen = 0;
  let k = 0;
  for (; k < NB - 1; k++) {
    seen += counts[k] ?? 0;
    if (seen >= rank) break;
  }
  return Math.exp(LOG_MIN + (k + 1) * LOG_STEP);
}
