/**
 * A Themis scenario's runs: every policy on every seed over the same arrivals (the seed draws them; common
 * random numbers across policies), the mean per policy, and its Markdown table.
 */
import { seededRandom } from "@infergrid/core";
import { INFERGRID_THEMIS, type PolicyName, planHorizontal, scalingPolicy } from "@infergrid/themis";
import { arrivalSchedule, jobCounts, makeTrace, readTraceFile, sliceMinutes, type Trace, TraceFormatError } from "@infergrid/workload";
import { ScenarioError } from "./scenario.js";
import { runThemisCluster, type ThemisClusterSetting, type ThemisRunResult } from "./themis-cluster.js";
import { loadDurationMs, resizeMsAt, type ThemisScenario } from "./themis-scenario.js";

/** The load as a trace of one job plus how to replay it. */
export interface ThemisWorkload {
  trace: Trace;
  job: string;
  /** Trace minutes per wall minute (60: each trace "minute" is one second of a steps load). */
  compression: number;
  rateScale: number;
  /** Rate of the first second, requests/s (the initial backends are sized for it). */
  initialRatePerS: number;
  /** Busiest second's expected rate. */
  peakRatePerS: number;
}

/** The steps (whole seconds) as a per-second trace, or the trace slice scaled so its busiest minute is `peakPerS`. */
export async function themisWorkload(s: ThemisScenario): Promise<ThemisWorkload> {
  const load = s.load;
  if (load.kind === "steps") {
    const seconds = Math.ceil(loadDurationMs(load) / 1000);
    const counts = new Float64Array(seconds);
    let i = 0;
    for (const step of load.steps) {
      for (; i < Math.ceil(step.untilMs / 1000); i++) counts[i] = step.ratePerS;
    }
    const trace = makeTrace(["load"], new Map([["load", counts]]), seconds, `${s.name} steps`);
    return {
      trace,
      job: "load",
      compression: 60,
      rateScale: 1,
      initialRatePerS: counts[0] ?? 0,
      peakRatePerS: Math.max(...counts),
    };
  }
  if (s.traceFile === undefined) throw new Error(`scenario ${s.name}: its trace file was not resolved`);
  let full: Trace;
  try {
    full = await readTraceFile(s.traceFile);
  } catch (err) {
    if (err instanceof TraceFormatError) throw new ScenarioError(s.name, [`load.file: ${err.message}`]);
    throw err;
  }
  if (load.fromMinute + load.minutes > full.minutes) {
    throw new ScenarioError(s.name, [
      `load.minutes: minutes ${load.fromMinute}-${load.fromMinute + load.minutes - 1} are past the end of ${load.file} (${full.minutes} minutes)`,
    ]);
  }
  if (!full.counts.has(load.job))
    throw new ScenarioError(s.name, [`load.job: no column ${JSON.stringify(load.job)} in ${load.file}; its jobs: ${full.jobs.join(", ")}`]);
  const trace = sliceMinutes(full, load.fromMinute, load.fromMinute + load.minutes);
  const counts = jobCounts(trace, load.job);
  const peak = Math.max(...counts);
  if (!(peak > 0))
    throw new ScenarioError(s.name, [
      `load.job: ${load.job} has no requests in minutes ${load.fromMinute}-${load.fromMinute + load.minutes - 1}`,
    ]);
  const rateScale = (load.peakPerS * 60) / peak;
  return {
    trace,
    job: load.job,
    compression: 1,
    rateScale,
    initialRatePerS: ((counts[0] ?? 0) * rateScale) / 60,
    peakRatePerS: load.peakPerS,
  };
}

export function* workloadArrivals(w: ThemisWorkload, seed: number): Generator<number, void, undefined> {
  const random = seededRandom(seed * 7919 + 1);
  for (const a of arrivalSchedule(w.trace, { random, compression: w.compression, rateScale: w.rateScale, jobs: [w.job] })) yield a.atMs;
}

/** The simulated cluster of a scenario; its initial backends are the horizontal plan for the first second's rate. */
export function themisSetting(s: ThemisScenario, w: ThemisWorkload): ThemisClusterSetting {
  const plan = planHorizontal({
    profile: s.profile,
    ratePerS: w.initialRatePerS,
    sloMs: s.sloMs,
    maxBatch: s.maxBatch,
    maxUtilization: INFERGRID_THEMIS.maxUtilization,
    queueRate: INFERGRID_THEMIS.queueRate,
  });
  return {
    profile: s.profile,
    sloMs: s.sloMs,
    maxCores: s.maxCores,
    maxBatch: s.maxBatch,
    coldStartMs: s.coldStartMs,
    resizeMs: (cores) => resizeMsAt(s.resizeMs, cores),
    batchTimeout: s.batchTimeout,
    dropAfterMs: s.dropAfterMs,
    tickMs: s.tickMs,
    peakWindowMs: s.peakWindowMs,
    durationMs: loadDurationMs(s.load),
    initial: { count: plan?.instances ?? 1, cores: 1, batch: plan?.batch ?? 1 },
  };
}

export interface ThemisPolicySummary {
  policy: PolicyName;
  seeds: number;
  requests: number;
  violations: number;
  violationRate: number;
  dropped: number;
  p99Ms: number;
  coreSeconds: number;
  resizes: number;
  coldStarts: number;
  peakCores: number;
}

export interface ThemisScenarioResult {
  scenario: {
    name: string;
    description: string;
    model: string;
    profile: ThemisScenario["profile"];
    fitError: number;
    sloMs: number;
    maxCores: number;
    maxBatch: number;
    coldStartMs: number;
    durationMs: number;
    peakRatePerS: number;
    initial: ThemisClusterSetting["initial"];
  };
  runs: (ThemisRunResult & { seed: number })[];
  summary: ThemisPolicySummary[];
  wallMs: number;
}

const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, x) => a + x, 0) / xs.length);

export function summarize(policy: PolicyName, runs: readonly ThemisRunResult[]): ThemisPolicySummary {
  return {
    policy,
    seeds: runs.length,
    requests: mean(runs.map((r) => r.requests)),
    violations: mean(runs.map((r) => r.violations)),
    violationRate: mean(runs.map((r) => r.violationRate)),
    dropped: mean(runs.map((r) => r.dropped)),
    p99Ms: mean(runs.map((r) => r.p99Ms)),
    coreSeconds: mean(runs.map((r) => r.coreSeconds)),
    resizes: mean(runs.map((r) => r.resizes)),
    coldStarts: mean(runs.map((r) => r.coldStarts)),
    peakCores: mean(runs.map((r) => r.peakCores)),
  };
}

export async function runThemisScenario(
  s: ThemisScenario,
  options: { timeline?: boolean; onRun?: (done: number, total: number) => void } = {},
): Promise<ThemisScenarioResult> {
  const t0 = performance.now();
  const w = await themisWorkload(s);
  const setting = { ...themisSetting(s, w), timeline: options.timeline === true };
  const runs: (ThemisRunResult & { seed: number })[] = [];
  const total = s.policies.length * s.seeds.length;
  for (const policy of s.policies) {
    for (const seed of s.seeds) {
      runs.push({ ...runThemisCluster(setting, scalingPolicy(policy), workloadArrivals(w, seed)), seed });
      options.onRun?.(runs.length, total);
    }
  }
  const summary = s.policies.map((p) =>
    summarize(
      p,
      runs.filter((r) => r.policy === p),
    ),
  );
  return {
    scenario: {
      name: s.name,
      description: s.description,
      model: s.model,
      profile: s.profile,
      fitError: s.fitError,
      sloMs: s.sloMs,
      maxCores: s.maxCores,
      maxBatch: s.maxBatch,
      coldStartMs: s.coldStartMs,
      durationMs: setting.durationMs,
      peakRatePerS: w.peakRatePerS,
      initial: setting.initial,
    },
    runs,
    summary,
    wallMs: performance.now() - t0,
  };
}

/** The table every policy gets a row of, and how each compares with horizontal-only. */
export function themisMarkdown(r: ThemisScenarioResult): string {
  const s = r.scenario;
  const p = s.profile;
  const h = r.summary.find((x) => x.policy === "horizontal-only");
  const lines = [
    `# ${s.name}`,
    "",
    s.description,
    "",
    `${s.model}: l(b, c) = ${p.gamma.toFixed(2)} b/c + ${p.eps.toFixed(2)}/c + ${p.delta.toFixed(2)} b + ${p.eta.toFixed(2)} ms ` +
      `(fit mean error ${(s.fitError * 100).toFixed(1)} %); SLO ${s.sloMs} ms; node limit ${s.maxCores} cores; batch <= ${s.maxBatch}; ` +
      `cold start ${(s.coldStartMs / 1000).toFixed(1)} s; ${(s.durationMs / 1000).toFixed(0)} s, peak ${s.peakRatePerS.toFixed(1)} req/s; ` +
      `start: ${s.initial.count} x ${s.initial.cores} core, batch ${s.initial.batch}. Means over ${r.summary[0]?.seeds ?? 0} seeds.`,
    "",
    "| policy | requests | violations | violation % | dropped | p99 ms | core-s | resizes | cold starts | peak cores | violations vs horizontal-only | core-s vs horizontal-only |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const x of r.summary) {
    const vs =
      h === undefined || x.policy === "horizontal-only"
        ? "-"
        : x.violations === 0
          ? h.violations === 0
            ? "0 / 0"
            : "none"
          : `${(h.violations / x.violations).toFixed(1)}x fewer`;
    const cost = h === undefined || x.policy === "horizontal-only" ? "-" : `${((x.coreSeconds / h.coreSeconds) * 100).toFixed(0)} %`;
    lines.push(
      `| ${x.policy} | ${x.requests.toFixed(0)} | ${x.violations.toFixed(1)} | ${(x.violationRate * 100).toFixed(3)} | ${x.dropped.toFixed(1)} | ` +
        `${x.p99Ms.toFixed(0)} | ${x.coreSeconds.toFixed(0)} | ${x.resizes.toFixed(1)} | ${x.coldStarts.toFixed(1)} | ${x.peakCores.toFixed(1)} | ${vs} | ${cost} |`,
    );
  }
  const first = r.runs[0]?.seed;
  const traced = r.runs.filter((x) => x.seed === first && x.timeline !== undefined);
  if (traced.length > 0) {
    lines.push("", `## What each policy did (seed ${first}; ticks that changed something)`);
    for (const run of traced) {
      lines.push(
        "",
        `### ${run.policy}`,
        "",
        "| s | rate/s | peak/s | late | mode | warm backends' cores | starting | decision |",
        "|---:|---:|---:|---:|---|---|---:|---|",
      );
      let last = "";
      for (const t of run.timeline ?? []) {
        const shape = `${t.mode} ${t.warmCores.join(",")} ${t.starting}`;
        if (shape === last && t.reason === "steady" && t.late === 0) continue;
        last = shape;
        lines.push(
          `| ${(t.tMs / 1000).toFixed(0)} | ${t.ratePerS.toFixed(0)} | ${t.predictedPeakPerS.toFixed(0)} | ${t.late} | ${t.mode} | ${t.warmCores.join(", ")} | ${t.starting} | ${t.reason} |`,
        );
      }
    }
  }
  return `${lines.join("\n")}\n`;
}
