/**
 * A FaPES scenario's runs: for each seed, the same inference arrivals and the same job stream under every loan
 * policy (common random numbers), inference always under `infergrid` (the slow loop and Swayam's frontends, as
 * the services run them), and the Markdown table.
 *
 * `dedicated` needs N_r^max, the most backends inference ever held in use: it is the peak, over the slow loop's
 * ticks, of the `no-loan` run of the same seed (which runs first whenever `dedicated` is asked for), so the fixed
 * partition is sized with hindsight of the very load it then serves, FaPES's definition.
 */
import { seededRandom } from "@infergrid/core";
import type { LoanHook, SimConfig } from "./config.js";
import { type FapesJob, FapesLoans, type FapesRunStats, jobArrivals, type LoanMode } from "./fapes-cluster.js";
import type { FapesJobStream, FapesPolicy, FapesScenario } from "./fapes-scenario.js";
import { defaultProfilesDir, defaultTracesDir } from "./paths.js";
import { configFor, type PreparedExperiment, prepareExperiment } from "./run-experiment.js";
import { type RunResult, simulate, traceArrivals } from "./simulate.js";

export interface FapesRun {
  policy: FapesPolicy;
  seed: number;
  /** Inference's metrics (the cluster scenario's RunResult, series left out). */
  inference: RunResult["cluster"];
  loans: FapesRunStats;
  /** dedicated: the backends inference kept. */
  inferenceBackends?: number;
  /** (inference compute + item time) / (backends x duration). */
  busyUtilisation: number;
  /** (inference compute + the run time of the items done) / (backends x duration): busy, without work thrown away. */
  usefulUtilisation: number;
  /** (inference's backend time in lists, warm or starting + backend time held by jobs) / (backends x duration). */
  allocatedUtilisation: number;
  cpuMs: number;
}

export interface FapesPolicySummary {
  policy: FapesPolicy;
  seeds: number;
  busyUtilisation: Stat;
  usefulUtilisation: Stat;
  allocatedUtilisation: Stat;
  /** Items done in serving backends' idle time (harvesting), and the requests that stopped a running item. */
  harvestItemsDone: Stat;
  harvestStops: Stat;
  jobsSubmitted: Stat;
  jobsStarted: Stat;
  jobsDone: Stat;
  /** Submission to the first backend, s, over jobs that started. */
  waitS: Stat;
  /** Submission to the last item, s, over jobs done. */
  completionS: Stat;
  /** The same over every job, an unfinished one counted until the end of the run (a lower bound). */
  completionCensoredS: Stat;
  preemptions: Stat;
  itemsRedone: Stat;
  itemsAbandoned: Stat;
  violationPct: Stat;
  lostUtility: Stat;
  inferenceBackends: Stat;
  cpuS: Stat;
}

export interface Stat {
  mean: number;
  min: number;
  max: number;
}

export interface FapesScenarioResult {
  scenario: {
    name: string;
    description: string;
    inference: string;
    capacity: number;
    durationMs: number;
    jobs: FapesScenario["jobs"];
  };
  runs: FapesRun[];
  summary: FapesPolicySummary[];
  wallMs: number;
}

function stat(xs: readonly number[]): Stat {
  const ok = xs.filter((x) => Number.isFinite(x));
  if (ok.length === 0) return { mean: Number.NaN, min: Number.NaN, max: Number.NaN };
  return { mean: ok.reduce((a, b) => a + b, 0) / ok.length, min: Math.min(...ok), max: Math.max(...ok) };
}

const mean = (xs: readonly number[]): number => (xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length);

/** Each policy's lending. */
export function loanMode(policy: FapesPolicy, inferenceBackends: number, stream: FapesJobStream): LoanMode {
  switch (policy) {
    case "no-loan":
      return { kind: "observe" };
    case "dedicated":
      return { kind: "dedicated", inferenceBackends };
    case "one-way-random":
      return { kind: "loan", need: "plan", strategy: "random" };
    case "fapes":
      return { kind: "loan", need: "plan", strategy: "fapes-greedy" };
    case "infergrid":
      // The default: per-service floors (the held larger of the share and the rate's need), lists planned with them.
      return { kind: "loan", need: "floors", strategy: "fewest-preemptions", control: true, holdMs: 300_000 };
    case "infergrid-random":
      return { kind: "loan", need: "floors", strategy: "random", control: true, holdMs: 300_000 };
    case "infergrid-shares":
      return { kind: "loan", need: "floors", strategy: "fewest-preemptions", control: true, holdMs: 300_000, sharesOnly: true };
    case "infergrid-headroom":
      return { kind: "loan", need: "plan-headroom", strategy: "fewest-preemptions", control: true, holdMs: 300_000 };
    case "infergrid-in-use":
      return { kind: "loan", need: "plan-in-use-headroom", strategy: "fewest-preemptions", control: true };
    case "infergrid-harvest": {
      const h = stream.harvest;
      if (h === undefined) throw new Error("fapes: policy infergrid-harvest needs the scenario's jobs.harvest");
      return {
        kind: "loan",
        need: "floors",
        strategy: "fewest-preemptions",
        control: true,
        holdMs: 300_000,
        harvest: { gate: { resumeAfterMs: h.resumeAfterMs, abandonAfterMs: h.abandonAfterMs }, pauseMs: h.pauseMs },
      };
    }
  }
}

/** One run: inference as the cluster scenario's `infergrid` run, with the loan controller of `mode` attached. */
export function runFapesOne(
  p: PreparedExperiment,
  s: FapesScenario,
  jobs: readonly FapesJob[],
  mode: LoanMode | undefined,
  seed: number,
): { result: RunResult; loans: FapesRunStats | undefined } {
  const base = configFor(p, "infergrid", seed);
  let hook: FapesLoans | undefined;
  const config: SimConfig =
    mode === undefined
      ? base
      : {
          ...base,
          swayam: {
            ...base.swayam,
            loans: (sim, cluster): LoanHook => {
              hook = new FapesLoans(sim, cluster, jobs, s.jobs, mode);
              return hook;
            },
          },
        };
  const arrivals = traceArrivals(p.trace, p.trace.jobs, {
    random: seededRandom(seed * 7919 + 1),
    compression: p.experiment.trace.compression,
    rateScale: p.experiment.trace.rateScale,
    mode: p.experiment.trace.arrivals ?? "poisson",
  });
  const result = simulate(config, arrivals);
  return { result, loans: (hook as FapesLoans | undefined)?.stats };
}

export async function runFapesScenario(
  s: FapesScenario,
  options: { tracesDir?: string; profilesDir?: string; onRun?: (done: number) => void } = {},
): Promise<FapesScenarioResult> {
  const t0 = performance.now();
  const p = await prepareExperiment(s.inference, options.tracesDir ?? defaultTracesDir(), options.profilesDir ?? defaultProfilesDir());
  const runs: FapesRun[] = [];
  const wanted = s.policies;
  for (const seed of s.seeds) {
    const jobs = jobArrivals(s.jobs, p.durationMs, seed);
    // no-loan first: dedicated sizes its partition on it.
    const order: FapesPolicy[] = wanted.includes("dedicated") && !wanted.includes("no-loan") ? ["no-loan", ...wanted] : [...wanted];
    order.sort((a, b) => (a === "no-loan" ? -1 : b === "no-loan" ? 1 : 0));
    let peak = p.capacity;
    for (const policy of order) {
      const mode = loanMode(policy, peak, s.jobs);
      const { result, loans } = runFapesOne(p, s, jobs, mode, seed);
      const stats = loans as FapesRunStats;
      if (policy === "no-loan") peak = stats.peakInferenceInUse;
      if (!wanted.includes(policy)) continue;
      const denom = p.capacity * p.durationMs;
      runs.push({
        policy,
        seed,
        inference: result.cluster,
        loans: stats,
        ...(policy === "dedicated" ? { inferenceBackends: peak } : {}),
        busyUtilisation: (stats.inferenceComputeMs + stats.itemBusyMs) / denom,
        usefulUtilisation: (stats.inferenceComputeMs + stats.itemsDone * s.jobs.itemMs) / denom,
        allocatedUtilisation: (result.cluster.backendSeconds * 1000 + stats.heldMs) / denom,
        cpuMs: result.stats.cpuMs,
      });
      options.onRun?.(runs.length);
    }
  }
  const summary: FapesPolicySummary[] = wanted.map((policy) => {
    const rs = runs.filter((r) => r.policy === policy);
    const per = (f: (r: FapesRun) => number) => stat(rs.map(f));
    return {
      policy,
      seeds: rs.length,
      busyUtilisation: per((r) => r.busyUtilisation * 100),
      usefulUtilisation: per((r) => r.usefulUtilisation * 100),
      harvestItemsDone: per((r) => r.loans.harvestItemsDone),
      harvestStops: per((r) => r.loans.harvestStops),
      allocatedUtilisation: per((r) => r.allocatedUtilisation * 100),
      jobsSubmitted: per((r) => r.loans.jobs.length),
      jobsStarted: per((r) => r.loans.jobs.filter((j) => j.startedAtMs !== undefined).length),
      jobsDone: per((r) => r.loans.jobs.filter((j) => j.doneAtMs !== undefined).length),
      waitS: per((r) =>
        mean(r.loans.jobs.filter((j) => j.startedAtMs !== undefined).map((j) => ((j.startedAtMs as number) - j.submittedAtMs) / 1000)),
      ),
      completionS: per((r) =>
        mean(r.loans.jobs.filter((j) => j.doneAtMs !== undefined).map((j) => ((j.doneAtMs as number) - j.submittedAtMs) / 1000)),
      ),
      completionCensoredS: per((r) => mean(r.loans.jobs.map((j) => ((j.doneAtMs ?? p.durationMs) - j.submittedAtMs) / 1000))),
      preemptions: per((r) => r.loans.preemptions),
      itemsRedone: per((r) => r.loans.itemsRedone),
      itemsAbandoned: per((r) => r.loans.itemsAbandoned),
      violationPct: per((r) => r.inference.violationRate * 100),
      lostUtility: per((r) => r.inference.lostUtility),
      inferenceBackends: per((r) => r.inferenceBackends ?? Number.NaN),
      cpuS: per((r) => r.cpuMs / 1000),
    };
  });
  return {
    scenario: {
      name: s.name,
      description: s.description,
      inference: s.inference.name,
      capacity: p.capacity,
      durationMs: p.durationMs,
      jobs: s.jobs,
    },
    runs,
    summary,
    wallMs: performance.now() - t0,
  };
}

function fmt(s: Stat, digits: number): string {
  if (Number.isNaN(s.mean)) return "-";
  const m = s.mean.toFixed(digits);
  if (s.max - s.min < 10 ** -digits) return m;
  return `${m} (${s.min.toFixed(digits)}-${s.max.toFixed(digits)})`;
}

/** The table (means over seeds, min-max in parentheses) and how the loaning policies compare with the baselines. */
export function fapesMarkdown(r: FapesScenarioResult): string {
  const s = r.scenario;
  const j = s.jobs;
  const items =
    j.items.kind === "uniform"
      ? `uniform ${j.items.min}-${j.items.max}`
      : `lognormal median ${j.items.median}, sigma ${j.items.sigma}, max ${j.items.max}`;
  const lines = [
    `# ${s.name}`,
    "",
    s.description,
    "",
    `Inference: ${s.inference} (${s.capacity} backends, ${(s.durationMs / 3_600_000).toFixed(2)} h) under infergrid. ` +
      `Best-effort jobs: Poisson ${j.arrivalsPerHour}/h${j.untilMinute === undefined ? "" : ` until minute ${j.untilMinute}`}, items ${items}, ` +
      `item ${(j.itemMs / 1000).toFixed(2)} s (${j.itemSource}), ${j.minBackends}-${j.maxBackends} backends, priorities ${j.priorities.join(", ")}, ` +
      `launch ${(j.launchMs / 1000).toFixed(2)} s, restart after a preemption ${(j.restartMs / 1000).toFixed(2)} s, grace ${(j.graceMs / 1000).toFixed(0)} s. ` +
      `Means over ${r.summary[0]?.seeds ?? 0} seeds (min-max in parentheses when they differ).`,
    "",
    "Busy utilisation: (inference compute + item run time, given-up items included) / (backends x duration); useful: the same with only " +
      "the items done. Allocated: (inference's backends warm or starting, " +
      "in lists or draining, + backends held by a job, its launch, restarts and grace period included) / (backends x duration). " +
      "Wait: submission to the first backend (jobs that started). JCT: submission to the last item (jobs done); censored: every job, " +
      "an unfinished one counted until the end.",
    "",
    "| policy | busy util % | useful util % | allocated util % | jobs done / started / submitted | wait s | JCT s | JCT censored s | preemptions | items redone | items abandoned | inference violations % | lost utility | inference backends |",
    "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const x of r.summary) {
    lines.push(
      `| ${x.policy} | ${fmt(x.busyUtilisation, 1)} | ${fmt(x.usefulUtilisation, 1)} | ${fmt(x.allocatedUtilisation, 1)} | ${x.jobsDone.mean.toFixed(1)} / ${x.jobsStarted.mean.toFixed(1)} / ${x.jobsSubmitted.mean.toFixed(1)} | ` +
        `${fmt(x.waitS, 0)} | ${fmt(x.completionS, 0)} | ${fmt(x.completionCensoredS, 0)} | ${fmt(x.preemptions, 1)} | ${fmt(x.itemsRedone, 0)} | ${fmt(x.itemsAbandoned, 1)} | ` +
        `${fmt(x.violationPct, 3)} | ${fmt(x.lostUtility, 3)} | ${x.policy === "dedicated" ? fmt(x.inferenceBackends, 0) : x.policy === "no-loan" ? "all" : "loans"} |`,
    );
  }
  const by = new Map(r.summary.map((x) => [x.policy, x]));
  const ded = by.get("dedicated");
  const none = by.get("no-loan");
  const rnd = by.get("one-way-random");
  const vs: string[] = [];
  for (const x of r.summary) {
    if (x.policy === "no-loan" || x.policy === "dedicated") continue;
    const parts: string[] = [];
    if (ded !== undefined) {
      parts.push(`busy utilisation ${(x.busyUtilisation.mean - ded.busyUtilisation.mean).toFixed(1)} points over dedicated`);
      parts.push(`allocated ${(x.allocatedUtilisation.mean - ded.allocatedUtilisation.mean).toFixed(1)} points`);
      parts.push(`JCT ${((1 - x.completionCensoredS.mean / ded.completionCensoredS.mean) * 100).toFixed(1)} % lower (censored)`);
    }
    if (none !== undefined) {
      parts.push(
        `over no-loan: busy utilisation +${(x.busyUtilisation.mean - none.busyUtilisation.mean).toFixed(1)} points (useful +${(x.usefulUtilisation.mean - none.usefulUtilisation.mean).toFixed(1)}), ` +
          `JCT ${((1 - x.completionCensoredS.mean / none.completionCensoredS.mean) * 100).toFixed(1)} % lower (censored)`,
      );
      parts.push(`inference violations ${(x.violationPct.mean - none.violationPct.mean).toFixed(3)} points over no-loan`);
    }
    if (x.harvestItemsDone.mean > 0)
      parts.push(
        `harvesting: ${x.harvestItemsDone.mean.toFixed(0)} items done in serving backends' idle time, ${x.harvestStops.mean.toFixed(0)} requests stopped a running item`,
      );
    if (rnd !== undefined && x.policy !== "one-way-random")
      parts.push(`preemptions ${x.preemptions.mean.toFixed(1)} vs random reclaim's ${rnd.preemptions.mean.toFixed(1)}`);
    vs.push(`- ${x.policy}: ${parts.join("; ")}`);
  }
  if (vs.length > 0) lines.push("", ...vs);
  lines.push("", `CPU seconds per run: ${r.summary.map((x) => `${x.policy} ${fmt(x.cpuS, 1)}`).join(", ")}.`);
  return `${lines.join("\n")}\n`;
}
