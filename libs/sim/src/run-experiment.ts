/**
 * Runs a named experiment: reads its trace (by path, never copied), builds one configuration per policy and
 * seed, simulates each and collects the results. Reporting is report.ts's job; the CLI wires both.
 */
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { planStaticAllocation } from "@infergrid/allocation";
import { seededRandom } from "@infergrid/core";
import { PARK_DEFAULTS } from "@infergrid/swayam";
import { jobCounts, readTraceFile, selectJobs, sliceMinutes, type Trace } from "@infergrid/workload";
import type { JobSpec, SimConfig } from "./config.js";
import { DEFAULT_SLOW_LOOP, type Experiment, PAPER_SWAYAM_TIMING } from "./experiments.js";
import { buildPolicy, type PolicyContext, type PolicyName, peakSizes } from "./policies.js";
import { type RunResult, simulate, traceArrivals } from "./simulate.js";

/** The repository root: the nearest ancestor of this module holding pnpm-workspace.yaml. */
export function repoRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = resolve(from);
  for (;;) {
    if (existsSync(join(dir, "pnpm-workspace.yaml"))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no pnpm-workspace.yaml above ${from}`);
    dir = up;
  }
}

/** ../shared/traces beside the repository root. */
export function defaultTracesDir(): string {
  return resolve(repoRoot(), "..", "shared", "traces");
}

export interface PreparedExperiment {
  experiment: Experiment;
  trace: Trace;
  jobs: JobSpec[];
  capacity: number;
  durationMs: number;
  policyContext: PolicyContext;
  listLengths: number[];
  /** Each job's peak-sized replicas (what fixed-peak gets and what "peak-sized" capacity adds up). */
  peakSized: number[];
}

export async function prepareExperiment(experiment: Experiment, tracesDir = defaultTracesDir()): Promise<PreparedExperiment> {
  const path = join(tracesDir, experiment.trace.file);
  if (!existsSync(path)) throw new Error(`trace not found: ${path} (set --traces to the folder holding ${experiment.trace.file})`);
  let trace = await readTraceFile(path);
  if (experiment.trace.jobs) trace = selectJobs(trace, experiment.trace.jobs);
  const from = experiment.trace.fromMinute;
  const to = experiment.trace.minutes === undefined ? trace.minutes : Math.min(trace.minutes, from + experiment.trace.minutes);
  trace = sliceMinutes(trace, from, to);
  const { compression, rateScale } = experiment.trace;
  const jobs: JobSpec[] = trace.jobs.map((name) => ({
    name,
    serviceTime: { kind: "lognormal", dist: experiment.profile },
    sloMs: experiment.sloMs,
    slMin: experiment.slMin,
    burstFactor: experiment.burstFactor,
  }));
  // Simulated req/s of a trace minute's count: count x rateScale x compression / 60 (libs/workload ReplayOptions).
  const peakRatePerSec = trace.jobs.map((job) => (Math.max(0, ...jobCounts(trace, job)) * rateScale * compression) / 60);
  const fixedDelayMs = 4 * experiment.cluster.hopMs;
  const unbounded: PolicyContext = { jobs, peakRatePerSec, capacity: Number.MAX_SAFE_INTEGER, fixedDelayMs };
  const peakSized = peakSizes(unbounded);
  const capacity =
    typeof experiment.capacity === "number"
      ? experiment.capacity
      : Math.ceil(experiment.capacity.peakSized * peakSized.reduce((a, b) => a + b, 0));
  const listLengths = experiment.swayam.listLengths === "peak-sized" ? proportional(peakSized, capacity) : experiment.swayam.listLengths;
  return {
    experiment,
    trace,
    jobs,
    capacity,
    durationMs: (trace.minutes * 60_000) / compression,
    policyContext: {
      ...unbounded,
      capacity,
      ...(experiment.startAtOnePerJob === true ? { startAtOnePerJob: true } : {}),
      maxReplicas: listLengths.map((n) => (n > 0 ? n : Math.floor(capacity / Math.max(1, jobs.length)))),
    },
    listLengths,
    peakSized,
  };
}

/** Splits total in proportion to weights (largest remainder), every share at least 1. */
export function proportional(weights: readonly number[], total: number): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  if (sum <= 0) return weights.map(() => Math.max(1, Math.floor(total / Math.max(1, weights.length))));
  const exact = weights.map((w) => (w * total) / sum);
  const shares = exact.map((x) => Math.max(1, Math.floor(x)));
  let left = total - shares.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, r: x - Math.floor(x) })).sort((a, b) => b.r - a.r || a.i - b.i);
  for (let k = 0; left > 0 && k < order.length; k++, left--) {
    const i = (order[k] as { i: number }).i;
    shares[i] = (shares[i] ?? 0) + 1;
  }
  return shares;
}

export function configFor(p: PreparedExperiment, policy: PolicyName, seed: number): SimConfig {
  const e = p.experiment;
  const c = e.cluster;
  const spec = buildPolicy(policy, p.policyContext);
  const slow = spec.kind === "swayam" && spec.slowLoop === true;
  return {
    jobs: p.jobs,
    capacity: p.capacity,
    durationMs: p.durationMs,
    hopMs: c.hopMs,
    coldStartMs: c.coldStartMs,
    idleTimeoutMs: c.idleTimeoutMs,
    dropAfterMs: c.dropAfterMs,
    binMs: c.binMs ?? 60_000 / e.trace.compression,
    seed,
    policy: spec,
    swayam: {
      frontends: c.frontends,
      autoscaleMs: c.autoscaleMs,
      retryGapMs: c.retryGapMs,
      ...(e.swayam.timing ?? PAPER_SWAYAM_TIMING),
      listLengths: p.listLengths,
      minWarm: p.jobs.map(() => e.swayam.minWarm),
      bootstrap: p.jobs.map(() => e.swayam.bootstrap),
      allocate: planStaticAllocation,
      ...(spec.kind === "swayam" && spec.prune === true ? { prune: true } : {}),
      ...(spec.kind === "swayam" && spec.park === true ? { park: { windowMs: PARK_DEFAULTS.windowMs } } : {}),
      ...(slow
        ? {
            slowLoop: {
              ...DEFAULT_SLOW_LOOP,
              ...e.slowLoop,
              controller: { coldStartMs: c.coldStartMs, ...DEFAULT_SLOW_LOOP.controller, ...e.slowLoop?.controller },
            },
          }
        : {}),
    },
  };
}

export function runOne(p: PreparedExperiment, policy: PolicyName, seed: number, onProgress?: (fraction: number) => void): RunResult {
  const config = configFor(p, policy, seed);
  const arrivals = traceArrivals(p.trace, p.trace.jobs, {
    random: seededRandom(seed * 7919 + 1),
    compression: p.experiment.trace.compression,
    rateScale: p.experiment.trace.rateScale,
  });
  return simulate(config, arrivals, onProgress ? (t) => onProgress(Math.min(1, t / config.durationMs)) : undefined);
}

export interface ExperimentResult {
  experiment: Experiment;
  capacity: number;
  listLengths: number[];
  peakSized: number[];
  jobs: string[];
  runs: RunResult[];
  wallMs: number;
}

export interface ExperimentHooks {
  onRunStart?(policy: PolicyName, seed: number, index: number, total: number): void;
  onProgress?(fraction: number): void;
  onRunEnd?(result: RunResult): void;
}

export async function runExperiment(
  experiment: Experiment,
  options: { tracesDir?: string; policies?: PolicyName[]; seeds?: number[]; hooks?: ExperimentHooks } = {},
): Promise<ExperimentResult> {
  const started = performance.now();
  const p = await prepareExperiment(experiment, options.tracesDir);
  const policies = options.policies ?? experiment.policies;
  const seeds = options.seeds ?? experiment.seeds;
  const runs: RunResult[] = [];
  const total = policies.length * seeds.length;
  for (const policy of policies) {
    for (const seed of seeds) {
      options.hooks?.onRunStart?.(policy, seed, runs.length, total);
      const r = runOne(p, policy, seed, options.hooks?.onProgress);
      runs.push(r);
      options.hooks?.onRunEnd?.(r);
    }
  }
  return {
    experiment,
    capacity: p.capacity,
    listLengths: p.listLengths,
    peakSized: p.peakSized,
    jobs: [...p.trace.jobs],
    runs,
    wallMs: performance.now() - started,
  };
}
