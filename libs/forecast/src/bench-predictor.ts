/**
 * The predictor benchmark (`npm run bench:predictor`): every forecaster of this package, online
 * over the real traces in ../shared/traces, scored per segment (see ./evaluation.ts for the
 * metrics). Faro's setup (Jeon et al., section 5): one-minute bins, 15 in, 7 out; the allocator
 * plans for the 0.6 quantile (Faro's artifact).
 *
 *  - Faro trace (10 jobs, 360 min): train = minutes 0..239, test = 240..359.
 *  - Azure trace (12 jobs, days 8-12): train = 0..2159, validate = 2160..2879 (every constant was
 *    chosen on these and on the Faro trace), hold-out = 2880..7199 (days 10-12), reported as the
 *    final evaluation and never used to choose anything. `--dev` stops the run at minute 2880.
 *
 * Every forecaster is online: it sees each minute once, in order, and forecasts after each one;
 * a segment scores the forecasts whose target minute falls in it. Targets are per-minute counts.
 *
 * Flags: --traces DIR, --jobs N (first N jobs of each trace), --only faro|azure, --dev,
 * --seed S, and for the N-HiTS model --steps-per-bin K, --batch-size B, --hidden H.
 */

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { jobCounts, readTraceFile, type Trace } from "@infergrid/workload";
import { HoltForecaster, LastValueForecaster, LinearRegressionForecaster, SeasonalForecaster } from "./baselines.js";
import { type Runner, type Score, type Segment, scoreSeries, summarise } from "./evaluation.js";
import { PLANNING_QUANTILE, type ProbabilisticForecaster } from "./forecaster.js";
import { NHitsForecaster } from "./nhits-forecaster.js";

const STEPS = 7;
const PLANNED = [PLANNING_QUANTILE, 0.9];

interface TraceSetup {
  label: string;
  file: string;
  /** Bins in one season for the seasonal baseline. */
  period: number;
  segments: Segment[];
  /** Minutes to run (the hold-out is left out with --dev). */
  end: number;
}

const { values: flags } = parseArgs({
  options: {
    traces: { type: "string" },
    jobs: { type: "string" },
    only: { type: "string" },
    dev: { type: "boolean", default: false },
    seed: { type: "string", default: "1" },
    "steps-per-bin": { type: "string" },
    "batch-size": { type: "string" },
    hidden: { type: "string" },
  },
});

const tracesDir = flags.traces ?? fileURLToPath(new URL("../../../../shared/traces/", import.meta.url));
const maxJobs = flags.jobs === undefined ? Number.POSITIVE_INFINITY : Number(flags.jobs);
const seed = Number(flags.seed);
const numberFlag = (v: string | undefined) => (v === undefined ? undefined : Number(v));
const stepsPerBin = numberFlag(flags["steps-per-bin"]);
const batchSize = numberFlag(flags["batch-size"]);
const hidden = numberFlag(flags.hidden);

const setups: TraceSetup[] = [
  {
    label: "Faro 10 jobs x 6 h",
    file: "faro-10jobs-6h-per-minute.csv",
    // The autocorrelation of the training minutes (0..239) peaks at a 15-minute lag for the jobs
    // with a visible cycle (serve-cluster0, 3, 7).
    period: 15,
    segments: [
      { name: "train 0-239", from: 0, to: 240 },
      { name: "TEST 240-359", from: 240, to: 360 },
    ],
    end: 360,
  },
  {
    label: "Azure 12 functions, days 8-12",
    file: "azure-functions-2019-12fn-days8-12-per-minute.csv",
    period: 1440,
    segments: [
      { name: "train 0-2159", from: 0, to: 2160 },
      { name: "validate 2160-2879", from: 2160, to: 2880 },
      { name: "HOLD-OUT 2880-7199 (days 10-12)", from: 2880, to: 7200 },
    ],
    end: flags.dev ? 2880 : 7200,
  },
].filter((s) => flags.only === undefined || s.file.startsWith(flags.only));

function runners(period: number, jobIndex: number): Runner[] {
  const one = (forecaster: ProbabilisticForecaster): Runner => ({
    forecaster,
    views: [{ name: forecaster.name, read: (f) => f.forecast() }],
  });
  const nhits = new NHitsForecaster({
    steps: STEPS,
    seed: seed + jobIndex,
    stepsPerBin,
    batchSize,
    network: hidden === undefined ? {} : { hidden },
  });
  return [
    one(new LastValueForecaster({ steps: STEPS })),
    one(new LinearRegressionForecaster({ steps: STEPS })),
    one(new SeasonalForecaster({ steps: STEPS, period })),
    one(new HoltForecaster({ steps: STEPS })),
    {
      forecaster: nhits,
      views: [
        { name: "nhits (ladder + guard)", read: (f) => f.forecast() },
        { name: "nhits raw (no guard)", read: () => nhits.rawForecast() },
      ],
    },
  ];
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : "-");
const pad = (s: string, n: number) => s.padEnd(n);
const lpad = (s: string, n: number) => s.padStart(n);

const started = performance.now();
for (const setup of setups) {
  const traceStarted = performance.now();
  const trace: Trace = await readTraceFile(join(tracesDir, setup.file));
  const jobs = trace.jobs.slice(0, maxJobs);
  // view -> segment -> per-job scores
  const all = new Map<string, Map<string, Score[]>>();
  const runnerMillis = new Map<string, number>();
  jobs.forEach((job, j) => {
    const rs = runners(setup.period, j);
    const result = scoreSeries(jobCounts(trace, job), rs, setup.segments, {
      steps: STEPS,
      plannedQuantiles: PLANNED,
      end: setup.end,
      now: () => performance.now(),
    });
    rs.forEach((r, ri) => {
      runnerMillis.set(r.forecaster.name, (runnerMillis.get(r.forecaster.name) ?? 0) + (result.millis[ri] ?? 0));
    });
    for (const [view, bySegment] of result.scores) {
      const v = all.get(view) ?? new Map<string, Score[]>();
      all.set(view, v);
      for (const [segment, score] of bySegment) v.set(segment, [...(v.get(segment) ?? []), score]);
    }
  });
  const bins = jobs.length * setup.end;
  console.log(`\n=== ${setup.label}: ${jobs.length} jobs, minutes 0..${setup.end - 1} (${setup.file}) ===`);
  for (const segment of setup.segments) {
    if (segment.from >= setup.end) continue;
    console.log(`\n-- ${segment.name} --`);
    console.log(
      `${pad("forecaster", 24)}${lpad("pinball/mean", 14)}${lpad("cov q0.6", 10)}${lpad("cov q0.9", 10)}${lpad("peaks<=q0.6", 13)}${lpad("peaks<=q0.9", 13)}`,
    );
    for (const [view, bySegment] of all) {
      const s = summarise(bySegment.get(segment.name) ?? []);
      console.log(
        `${pad(view, 24)}${lpad(s.scaledPinball.toFixed(4), 14)}${lpad(pct(s.coverage[0] ?? Number.NaN), 10)}${lpad(pct(s.coverage[1] ?? Number.NaN), 10)}${lpad(pct(s.peakCoverage[0] ?? Number.NaN), 13)}${lpad(pct(s.peakCoverage[1] ?? Number.NaN), 13)}`,
      );
    }
  }
  console.log("\ncompute per forecaster (observe + forecast, all jobs):");
  for (const [name, ms] of runnerMillis)
    console.log(`  ${pad(name, 20)} ${(ms / 1000).toFixed(2)} s  (${((1000 * ms) / bins).toFixed(1)} us per bin)`);
  console.log(`trace wall time ${((performance.now() - traceStarted) / 1000).toFixed(1)} s`);
}
console.log(`\ntotal wall time ${((performance.now() - started) / 1000).toFixed(1)} s`);
