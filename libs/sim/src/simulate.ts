/**
 * One run: a configuration and an arrival stream in, per-job and cluster metrics and series out.
 */
import { cpuUsage } from "node:process";
import { sampleExponential, seededRandom } from "@infergrid/core";
import { ArrivalCursor, type ArrivalOptions, type ReplayOptions, type Trace } from "@infergrid/workload";
import { BalancedCluster } from "./balanced-cluster.js";
import { ClairvoyantCluster } from "./clairvoyant-cluster.js";
import type { ArrivalEvent, ArrivalFeed, SimConfig } from "./config.js";
import { type ClusterModel, type RunStats, Simulation } from "./engine.js";
import type { JobMetrics, JobSeries } from "./metrics.js";
import { SwayamCluster } from "./swayam-cluster.js";

export interface ClusterMetrics {
  requests: number;
  violations: number;
  dropped: number;
  /** All violations over all requests. */
  violationRate: number;
  /** Mean over jobs of each job's violation rate (Faro's "averaged over jobs"). */
  meanJobViolationRate: number;
  /** Mean over jobs of Swayam's SLA-compliance frequency (jobs with no full window left out). */
  slaCompliance: number;
  /** The worst job's compliance. */
  minSlaCompliance: number;
  p50Ms: number;
  p99Ms: number;
  backendSeconds: number;
  coldStarts: number;
  /** Faro's lost cluster utility: the jobs' maximum utility (1 each) minus what they achieved. */
  lostUtility: number;
}

export interface RunResult {
  policy: string;
  seed: number;
  jobs: JobMetrics[];
  cluster: ClusterMetrics;
  series: JobSeries[];
  /** p99 of all jobs' requests completed in each bin. */
  clusterP99: Float64Array;
  binMs: number;
  /** wallMs: elapsed; cpuMs: this process's CPU time (user + system) over the run, the fair number on a shared machine. */
  stats: RunStats & { cpuMs: number; requestsPerSec: number; requestsPerCpuSec: number };
}

export function createModel(sim: Simulation): ClusterModel {
  switch (sim.config.policy.kind) {
    case "swayam":
      return new SwayamCluster(sim);
    case "autoscaler":
      return new BalancedCluster(sim);
    case "clairvoyant":
      return new ClairvoyantCluster(sim);
  }
}

export function simulate(
  config: SimConfig,
  arrivals: ArrivalFeed | Iterator<ArrivalEvent>,
  onProgress?: (simMs: number) => void,
): RunResult {
  const cpuBefore = cpuUsage();
  const sim = new Simulation(config, arrivals);
  sim.attach(createModel(sim));
  const stats = sim.run(onProgress);
  const cpu = cpuUsage(cpuBefore);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const jobs = config.jobs.map((_, j) => sim.metrics.job(j));
  const series = config.jobs.map((_, j) => sim.metrics.series(j));
  const sum = (f: (m: JobMetrics) => number) => jobs.reduce((s, m) => s + f(m), 0);
  const requests = sum((m) => m.requests);
  const violations = sum((m) => m.violations);
  const slas = jobs.map((m) => m.slaCompliance).filter((x) => !Number.isNaN(x));
  const latency = sim.metrics.clusterLatency();
  return {
    policy: config.policy.name,
    seed: config.seed,
    jobs,
    series,
    clusterP99: sim.metrics.clusterP99(),
    binMs: config.binMs,
    cluster: {
      requests,
      violations,
      dropped: sum((m) => m.dropped),
      violationRate: requests > 0 ? violations / requests : 0,
      meanJobViolationRate: jobs.length > 0 ? sum((m) => m.violationRate) / jobs.length : 0,
      slaCompliance: slas.length > 0 ? slas.reduce((a, b) => a + b, 0) / slas.length : Number.NaN,
      minSlaCompliance: slas.length > 0 ? Math.min(...slas) : Number.NaN,
      p50Ms: latency.p50Ms,
      p99Ms: latency.p99Ms,
      backendSeconds: sum((m) => m.backendSeconds),
      coldStarts: sum((m) => m.coldStarts),
      lostUtility: sum((m) => 1 - m.utility),
    },
    stats: {
      ...stats,
      cpuMs,
      requestsPerSec: stats.wallMs > 0 ? (stats.requests * 1000) / stats.wallMs : 0,
      requestsPerCpuSec: cpuMs > 0 ? (stats.requests * 1000) / cpuMs : 0,
    },
  };
}

/** A trace's arrivals (libs/workload ArrivalCursor: Poisson inside each minute, or its exact count), each job by its index in `jobs`. */
export function traceArrivals(
  trace: Trace,
  jobs: readonly string[],
  options: ReplayOptions & Pick<ArrivalOptions, "random" | "mode">,
): ArrivalFeed {
  return new ArrivalCursor(trace, { ...options, jobs });
}

/** Stationary Poisson arrivals per job (rates per second) until durationMs: for tests against theory. */
export function* poissonArrivals(
  ratesPerSec: readonly number[],
  durationMs: number,
  seed: number,
): Generator<ArrivalEvent, void, undefined> {
  const random = seededRandom(seed * 7919 + 1);
  const next = ratesPerSec.map((r) => (r > 0 ? sampleExponential(random, r / 1000) : Number.POSITIVE_INFINITY));
  for (;;) {
    let job = -1;
    let at = Number.POSITIVE_INFINITY;
    for (let j = 0; j < next.length; j++) {
      if ((next[j] as number) < at) {
        at = next[j] as number;
        job = j;
      }
    }
    if (job < 0 || at >= durationMs) return;
    next[job] = at + sampleExponential(random, (ratesPerSec[job] as number) / 1000);
    yield { atMs: at, job };
  }
}
