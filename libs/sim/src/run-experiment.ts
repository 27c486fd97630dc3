/**
 * Runs a scenario (scenario.ts): reads its trace (by path, never copied), builds one configuration per policy
 * and seed, simulates each and collects the results. Reporting is report.ts's job; the CLI wires both.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { OBJECTIVES, planStaticAllocation } from "@infergrid/allocation";
import { seededRandom } from "@infergrid/core";
import { PRUNE_BUDGET_DEFAULTS } from "@infergrid/swayam";
import {
  jobCounts,
  readTraceFile,
  scaleJob,
  selectJobs,
  sliceMinutes,
  sniffFormat,
  type Trace,
  TraceFormatError,
  topJobs,
  totalRequests,
} from "@infergrid/workload";
import { type JobSpec, SIM_LIMITS, type SimConfig } from "./config.js";
import { defaultProfilesDir, defaultTracesDir, resolveInput } from "./paths.js";
import { buildPolicy, type PolicyContext, type PolicyName, peakSizes } from "./policies.js";
import { type MeasuredProfile, type MeasuredRow, readMeasuredRow, serviceTimeOf } from "./profiles.js";
import { type Experiment, type JobSettings, ScenarioError } from "./scenario.js";
import { type RunResult, simulate, traceArrivals } from "./simulate.js";

export { defaultProfilesDir, defaultTracesDir, repoRoot } from "./paths.js";

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

/** The first line of a file (its header), read without reading the rest. */
function headerLine(path: string): string {
  const fd = openSync(path, "r");
  try {
    const buffer = Buffer.alloc(1 << 16);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    return buffer.subarray(0, n).toString("utf8").split(/\r?\n/, 1)[0] ?? "";
  } finally {
    closeSync(fd);
  }
}

/**
 * The scenario's trace: the file (beside the scenario, else in tracesDir), sliced to [fromMinute, fromMinute +
 * minutes) first, so that nothing outside the slice is looked at (the N busiest are ranked over the slice),
 * then the jobs selected, then each job's own rate scale applied. A raw Azure Functions 2019 day file with
 * `busiest` keeps only the N busiest functions of the whole file while reading it (a day file holds tens of
 * thousands of functions).
 */
async function readScenarioTrace(e: Experiment, tracesDir: string): Promise<Trace> {
  const t = e.trace;
  const source = e.dir === undefined ? e.name : `${e.name} (${e.dir})`;
  const path = resolveInput(t.file, e.dir, tracesDir);
  if (path === undefined)
    throw new ScenarioError(source, [
      `trace.file: trace not found: ${t.file} (looked ${e.dir === undefined ? "" : `beside the scenario and `}in ${tracesDir}; set --traces to the folder holding it)`,
    ]);
  const raw = sniffFormat(headerLine(path)) === "azure-functions-2019";
  if (t.trigger !== undefined && !raw)
    throw new ScenarioError(source, [`trace.trigger: applies to the Azure Functions 2019 format only; ${t.file} is a per-minute file`]);
  let trace: Trace;
  try {
    trace = await readTraceFile(path, {
      ...(t.trigger === undefined ? {} : { trigger: t.trigger }),
      ...(raw && t.busiest !== undefined && t.jobs === undefined ? { topK: t.busiest } : {}),
    });
  } catch (err) {
    if (err instanceof TraceFormatError) throw new ScenarioError(source, [`trace.file: ${err.message}`]);
    throw err;
  }
  const from = t.fromMinute;
  if (from >= trace.minutes)
    throw new ScenarioError(source, [
      `trace.fromMinute: ${from} (or --from-minute) is past the end of ${t.file} (${trace.minutes} minutes)`,
    ]);
  // A slice cut short would be reported as the slice asked for.
  if (t.minutes !== undefined && from + t.minutes > trace.minutes)
    throw new ScenarioError(source, [
      `trace.minutes: ${t.minutes} minutes from minute ${from} (or --minutes) reach past the end of ${t.file} (${trace.minutes} minutes)`,
    ]);
  const to = t.minutes === undefined ? trace.minutes : from + t.minutes;
  trace = sliceMinutes(trace, from, to);
  if (t.jobs !== undefined) {
    const missing = t.jobs.map((name, i) => ({ name, i })).filter(({ name }) => !trace.counts.has(name));
    if (missing.length > 0)
      throw new ScenarioError(
        source,
        missing.map(({ name, i }) => `jobs[${i}]: no column ${JSON.stringify(name)} in ${t.file}; its jobs: ${trace.jobs.join(", ")}`),
      );
    trace = selectJobs(trace, t.jobs);
  } else if (t.busiest !== undefined) {
    if (t.busiest > trace.jobs.length)
      throw new ScenarioError(source, [`jobs.busiest: ${t.busiest}, but ${t.file} has ${trace.jobs.length} jobs`]);
    trace = topJobs(trace, t.busiest);
  }
  for (const job of trace.jobs) {
    const factor = settingsOf(e, job).rateScale;
    if (factor !== 1) trace = scaleJob(trace, job, factor);
  }
  return trace;
}

/** A job's settings: its own if the scenario lists it by name, else the scenario's jobDefaults. */
export function settingsOf(e: Experiment, job: string): JobSettings {
  const own = Object.hasOwn(e.perJob, job) ? e.perJob[job] : undefined;
  if (own !== undefined) return own;
  const d = e.jobDefaults;
  if (d.profile === undefined || d.slo.latencyMs === undefined)
    throw new ScenarioError(e.name, [
      `jobDefaults: job ${job} takes its settings from jobDefaults, which has no ${d.profile === undefined ? "profile" : "slo.latencyMs"}`,
    ]);
  return { rateScale: d.rateScale, profile: d.profile, slo: { ...d.slo, latencyMs: d.slo.latencyMs } };
}

/** Swayam's SL_min from a percent: 99 -> 0.99 (rounded so that 99.9 gives 0.999, not 0.9990000000000001). */
export function slMinOf(percentile: number): number {
  return Number((percentile / 100).toPrecision(12));
}

export async function prepareExperiment(
  experiment: Experiment,
  tracesDir = defaultTracesDir(),
  profilesDir = defaultProfilesDir(),
): Promise<PreparedExperiment> {
  const trace = await readScenarioTrace(experiment, tracesDir);
  const { compression, rateScale } = experiment.trace;
  const measured = (p: MeasuredProfile): MeasuredRow => {
    try {
      return readMeasuredRow(p, experiment.dir, profilesDir);
    } catch (err) {
      throw new ScenarioError(experiment.name, [`profile: ${err instanceof Error ? err.message : String(err)}`]);
    }
  };
  const jobs: JobSpec[] = trace.jobs.map((name) => {
    const s = settingsOf(experiment, name);
    let serviceTime: JobSpec["serviceTime"];
    try {
      serviceTime = serviceTimeOf(s.profile, measured);
    } catch (err) {
      if (err instanceof ScenarioError) throw err;
      throw new ScenarioError(experiment.name, [`profile of job ${name}: ${err instanceof Error ? err.message : String(err)}`]);
    }
    return { name, serviceTime, sloMs: s.slo.latencyMs, slMin: slMinOf(s.slo.percentile), burstFactor: s.slo.burstFactor };
  });
  // Simulated req/s of a trace minute's count: count x rateScale x compression / 60 (libs/workload ReplayOptions).
  const peakRatePerSec = trace.jobs.map((job) => (Math.max(0, ...jobCounts(trace, job)) * rateScale * compression) / 60);
  const fixedDelayMs = 4 * experiment.cluster.hopMs;
  const unbounded: PolicyContext = { jobs, peakRatePerSec, capacity: Number.MAX_SAFE_INTEGER, fixedDelayMs };
  const peakSized = peakSizes(unbounded);
  const capacity =
    typeof experiment.capacity === "number"
      ? experiment.capacity
      : Math.ceil(experiment.capacity.peakSized * peakSized.reduce((a, b) => a + b, 0));
  const durationMs = (trace.minutes * 60_000) / compression;
  checkSize(experiment, trace, capacity, peakSized, durationMs);
  const given = experiment.swayam.listLengths;
  if (given !== "peak-sized" && given.length !== jobs.length)
    throw new ScenarioError(experiment.name, [`swayam.listLengths: ${given.length} entries for ${jobs.length} jobs`]);
  const listLengths = given === "peak-sized" ? proportional(peakSized, capacity) : given;
  return {
    experiment,
    trace,
    jobs,
    capacity,
    durationMs,
    policyContext: {
      ...unbounded,
      capacity,
      ...(experiment.startAtOnePerJob === true ? { startAtOnePerJob: true } : {}),
      maxReplicas: listLengths.map((n) =>
        experiment.perJobMaxReplicas === "cluster" ? capacity : n > 0 ? n : Math.floor(capacity / Math.max(1, jobs.length)),
      ),
    },
    listLengths,
    peakSized,
  };
}

/** Refuses a run past SIM_LIMITS (it would run out of memory or run for hours), naming the field that asks for it. */
function checkSize(e: Experiment, trace: Trace, capacity: number, peakSized: readonly number[], durationMs: number): void {
  const problems: string[] = [];
  const n = (x: number) => Math.round(x).toLocaleString("en-US");
  if (capacity > SIM_LIMITS.backends && typeof e.capacity !== "number")
    problems.push(
      `capacity.peakSized: ${e.capacity.peakSized} x ${peakSized.reduce((a, b) => a + b, 0)} peak-sized replicas = ${n(capacity)} backends; at most ${SIM_LIMITS.backends}`,
    );
  const requests = trace.jobs.reduce((sum, job) => sum + totalRequests(trace, job), 0) * e.trace.rateScale;
  if (!(requests <= SIM_LIMITS.requests))
    problems.push(
      `trace.rateScale: the slice holds about ${n(requests)} requests after the rate scales (trace.rateScale x each job's rateScale); at most ${n(SIM_LIMITS.requests)}`,
    );
  if (!(durationMs / e.cluster.binMs <= SIM_LIMITS.bins))
    problems.push(
      `cluster.binMs: ${e.cluster.binMs} ms gives ${n(durationMs / e.cluster.binMs)} bins over the run; at most ${n(SIM_LIMITS.bins)}`,
    );
  const loop = e.policyOptions.slowLoop;
  const periods: [string, number][] = [
    ["cluster.autoscaleMs", e.cluster.autoscaleMs],
    ["policyOptions.slowLoop.tickMs", loop.tickMs],
    ["policyOptions.slowLoop.solvePeriodMs", loop.solvePeriodMs],
    ["policyOptions.slowLoop.predictor.stepMs", loop.predictor.stepMs],
    ["policyOptions.park.windowMs", e.policyOptions.park.windowMs],
  ];
  for (const [field, ms] of periods)
    if (!(durationMs / ms <= SIM_LIMITS.ticks))
      problems.push(`${field}: ${ms} ms gives ${n(durationMs / ms)} ticks over the run; at most ${n(SIM_LIMITS.ticks)}`);
  if (problems.length > 0) throw new ScenarioError(e.dir === undefined ? e.name : `${e.name} (${e.dir})`, problems);
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
  const loop = e.policyOptions.slowLoop;
  return {
    jobs: p.jobs,
    capacity: p.capacity,
    durationMs: p.durationMs,
    hopMs: c.hopMs,
    coldStartMs: c.coldStartMs,
    idleTimeoutMs: c.idleTimeoutMs,
    dropAfterMs: c.dropAfterMs,
    binMs: c.binMs,
    seed,
    policy: spec,
    swayam: {
      frontends: c.frontends,
      autoscaleMs: c.autoscaleMs,
      retryGapMs: c.retryGapMs,
      ...e.swayam.timing,
      listLengths: p.listLengths,
      minWarm: p.jobs.map(() => e.swayam.minWarm),
      bootstrap: p.jobs.map(() => e.swayam.bootstrap),
      allocate: planStaticAllocation,
      ...(spec.kind === "swayam" && spec.prune !== undefined
        ? { prune: true, ...(spec.prune === "budget" ? { pruneBudget: PRUNE_BUDGET_DEFAULTS } : {}) }
        : {}),
      ...(spec.kind === "swayam" && spec.learnedHeadroom === true ? { learnedHeadroom: true } : {}),
      ...(spec.kind === "swayam" && spec.park === true ? { park: { windowMs: e.policyOptions.park.windowMs } } : {}),
      ...(slow
        ? {
            slowLoop: {
              controller: {
                coldStartMs: loop.coldStartMs,
                objective: OBJECTIVES[loop.objective],
                solvePeriodMs: loop.solvePeriodMs,
                reactiveTicks: loop.reactiveTicks,
                plan: loop.plan === "max" ? { kind: "max" } : { kind: "quantile", q: loop.plan },
              },
              tickMs: loop.tickMs,
              predictor: { stepMs: loop.predictor.stepMs, quantiles: loop.predictor.quantiles, forecaster: loop.predictor.forecaster },
            },
          }
        : {}),
    },
    metrics: e.metrics,
  };
}

export function runOne(p: PreparedExperiment, policy: PolicyName, seed: number, onProgress?: (fraction: number) => void): RunResult {
  const config = configFor(p, policy, seed);
  const arrivals = traceArrivals(p.trace, p.trace.jobs, {
    random: seededRandom(seed * 7919 + 1),
    compression: p.experiment.trace.compression,
    rateScale: p.experiment.trace.rateScale,
    mode: p.experiment.trace.arrivals ?? "poisson",
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
  options: { tracesDir?: string; profilesDir?: string; policies?: PolicyName[]; seeds?: number[]; hooks?: ExperimentHooks } = {},
): Promise<ExperimentResult> {
  const started = performance.now();
  const p = await prepareExperiment(experiment, options.tracesDir, options.profilesDir);
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
