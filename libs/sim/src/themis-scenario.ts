/**
 * Themis scenarios (`kind: themis`): one service on sized, batching backends (Themis, Razavi et al.), its
 * latency profile l(b, c) fitted to a measured table (read by path from ../shared/profiles), its SLO, the
 * node's core limit, the cold start and the resize time (the measured session-create time at the target
 * thread count), and its load: Poisson arrivals over rate steps (Themis's Fig. 1 surge) or over a slice of
 * a shared per-minute trace scaled to a peak rate. Validated here once; every default is applied here.
 */
import { readFileSync } from "node:fs";
import { basename, dirname, extname, resolve } from "node:path";
import { fitThemisProfile, measuredSamples, POLICY_NAMES, type PolicyName, type ThemisProfile } from "@infergrid/themis";
import { z } from "zod";
import { SIM_LIMITS } from "./config.js";
import { resolveInput } from "./paths.js";
import { formatIssues, readScenarioData, ScenarioError } from "./scenario.js";

/** The Azure file's days 10-12 (minutes 2880-7199) are the evaluation hold-out: no scenario of this kind reads them. */
export const AZURE_TRACE = "azure-functions-2019-12fn-days8-12-per-minute.csv";
export const AZURE_HOLDOUT_FROM_MINUTE = 2880;

const stepsLoad = z.strictObject({
  kind: z.literal("steps"),
  /** Each step holds its rate until `untilMs`; the last one's `untilMs` is the run's length. */
  steps: z.array(z.strictObject({ untilMs: z.number().positive(), ratePerS: z.number().nonnegative() })).min(1),
});

const traceLoad = z.strictObject({
  kind: z.literal("trace"),
  file: z.string().min(1),
  job: z.string().min(1),
  fromMinute: z.number().int().nonnegative().default(0),
  minutes: z.number().int().positive(),
  /** The slice's busiest minute is scaled to this many requests per second (the others in proportion). */
  peakPerS: z.number().positive(),
});

const themisScenarioSchema = z.strictObject({
  kind: z.literal("themis"),
  description: z.string().default(""),
  profile: z.strictObject({ file: z.string().min(1), model: z.string().min(1), section: z.string().optional() }),
  sloMs: z.number().positive(),
  /** Most cores one backend may have (its node's limit). */
  maxCores: z.number().int().positive().max(1024).default(16),
  maxBatch: z.number().int().positive().max(4096).default(16),
  /** t_setup: a new backend serves this long after it was asked for. */
  coldStartMs: z.number().nonnegative().default(10_000),
  /**
   * How long a partial batch waits for more requests on an idle model, ms: 0 (the backend-worker's default
   * --batch-timeout-ms) runs what has formed as soon as the model is free, so batches grow only with a queue; or
   * `slack` = what the SLO leaves after the batch's processing, SLO - l(b, c).
   */
  batchTimeout: z.union([z.literal("slack"), z.number().nonnegative()]).default(0),
  /** A request not started this long after it arrived is dropped (a violation). */
  dropAfterMs: z.number().positive().default(10_000),
  tickMs: z.number().positive().default(1000),
  /** The predicted peak is the largest per-tick rate observed over this window (the paper forecasts 10 s). */
  peakWindowMs: z.number().positive().default(10_000),
  load: z.discriminatedUnion("kind", [stepsLoad, traceLoad]),
  policies: z
    .array(z.enum(POLICY_NAMES as unknown as [PolicyName, ...PolicyName[]]))
    .min(1)
    .default([...POLICY_NAMES]),
  seeds: z.array(z.number().int().nonnegative()).min(1).default([1, 2, 3]),
});

export type ThemisScenarioSpec = z.output<typeof themisScenarioSchema>;
export type ThemisLoad = ThemisScenarioSpec["load"];

export interface ThemisScenario extends Omit<ThemisScenarioSpec, "profile"> {
  name: string;
  profile: ThemisProfile;
  model: string;
  /** The fit's mean absolute error over the measured points, as a fraction. */
  fitError: number;
  profilesFile: string;
  /** Measured session-create time (ms) per thread count, ascending by cores: the cost of an in-place resize. */
  resizeMs: { cores: number; ms: number }[];
  /** The trace file (resolved path) of a trace load. */
  traceFile?: string;
}

const SESSION_CREATE = /^session_create_ms_(\d+)c$/;

/** Session-create times of one model of a measured profile file. */
export function sessionCreateTimes(json: unknown, model: string): { cores: number; ms: number }[] {
  const models = z.object({ models: z.record(z.string(), z.record(z.string(), z.unknown())) }).safeParse(json);
  const entry = models.success ? models.data.models[model] : undefined;
  if (entry === undefined) return [];
  const out: { cores: number; ms: number }[] = [];
  for (const [key, value] of Object.entries(entry)) {
    const m = SESSION_CREATE.exec(key);
    if (m && typeof value === "number" && value > 0) out.push({ cores: Number(m[1]), ms: value });
  }
  return out.sort((a, b) => a.cores - b.cores);
}

/** The resize time to `cores`: linear between the measured thread counts, the nearest one outside them. */
export function resizeMsAt(table: readonly { cores: number; ms: number }[], cores: number): number {
  const first = table[0];
  if (first === undefined) return 0;
  if (cores <= first.cores) return first.ms;
  for (let i = 1; i < table.length; i++) {
    const hi = table[i] as { cores: number; ms: number };
    const lo = table[i - 1] as { cores: number; ms: number };
    if (cores <= hi.cores) return lo.ms + ((hi.ms - lo.ms) * (cores - lo.cores)) / (hi.cores - lo.cores);
  }
  return (table[table.length - 1] as { cores: number; ms: number }).ms;
}

/** The run's length: the last step's end, or the trace slice's minutes. */
export function loadDurationMs(load: ThemisLoad): number {
  return load.kind === "steps" ? (load.steps[load.steps.length - 1]?.untilMs ?? 0) : load.minutes * 60_000;
}

/** Reads, validates and resolves a Themis scenario. Throws ScenarioError naming the bad field. */
export function loadThemisScenario(path: string, profilesDir: string, tracesDir: string): ThemisScenario {
  const file = resolve(path);
  const parsed = themisScenarioSchema.safeParse(readScenarioData(path));
  if (!parsed.success) throw new ScenarioError(path, formatIssues(parsed.error.issues));
  const { profile: profileSpec, ...rest } = parsed.data;
  const problems: string[] = [];
  if (rest.load.kind === "steps") {
    rest.load.steps.forEach((s, i) => {
      const prev = i > 0 ? (rest.load.kind === "steps" ? rest.load.steps[i - 1]?.untilMs : 0) : 0;
      if (prev !== undefined && s.untilMs <= prev) problems.push(`load.steps.${i}.untilMs: must be after the step before (${prev})`);
      if (s.untilMs % 1000 !== 0)
        problems.push(`load.steps.${i}.untilMs: must be a whole second (the load is replayed per second), got ${s.untilMs}`);
    });
  }
  // Past the simulator's limits a run runs out of memory or for hours.
  const durationMs = loadDurationMs(rest.load);
  const requests =
    rest.load.kind === "steps"
      ? rest.load.steps.reduce((sum, st, i, all) => sum + (st.ratePerS * (st.untilMs - (all[i - 1]?.untilMs ?? 0))) / 1000, 0)
      : (rest.load.peakPerS * durationMs) / 1000;
  if (!(requests <= SIM_LIMITS.requests))
    problems.push(
      `load: about ${Math.round(requests).toLocaleString("en-US")} requests${rest.load.kind === "trace" ? " at most (peakPerS over every minute)" : ""}; the simulator replays at most ${SIM_LIMITS.requests.toLocaleString("en-US")}`,
    );
  if (!(durationMs / rest.tickMs <= SIM_LIMITS.ticks))
    problems.push(
      `tickMs: ${rest.tickMs} ms gives ${Math.round(durationMs / rest.tickMs)} ticks over the run; at most ${SIM_LIMITS.ticks}`,
    );
  let traceFile: string | undefined;
  if (rest.load.kind === "trace") {
    const l = rest.load;
    if (basename(l.file) === AZURE_TRACE && l.fromMinute + l.minutes > AZURE_HOLDOUT_FROM_MINUTE) {
      problems.push(
        `load: minutes ${l.fromMinute}-${l.fromMinute + l.minutes - 1} reach the Azure trace's hold-out (days 10-12, from minute ${AZURE_HOLDOUT_FROM_MINUTE})`,
      );
    }
    traceFile = resolveInput(l.file, dirname(file), tracesDir);
    if (traceFile === undefined) problems.push(`load.file: no file ${l.file} beside the scenario or in ${tracesDir}`);
  }
  const profilesFile = resolveInput(profileSpec.file, dirname(file), profilesDir);
  if (profilesFile === undefined) problems.push(`profile.file: no file ${profileSpec.file} beside the scenario or in ${profilesDir}`);
  if (problems.length > 0 || profilesFile === undefined) throw new ScenarioError(path, problems);
  let json: unknown;
  let fit: ReturnType<typeof fitThemisProfile>;
  try {
    json = JSON.parse(readFileSync(profilesFile, "utf8"));
    fit = fitThemisProfile(measuredSamples(json, profileSpec.model, profileSpec.section));
  } catch (err) {
    throw new ScenarioError(path, [`profile: ${err instanceof Error ? err.message : String(err)}`]);
  }
  return {
    ...rest,
    name: basename(file, extname(file)),
    profile: fit.profile,
    model: profileSpec.model,
    fitError: fit.meanAbsPctError,
    profilesFile,
    resizeMs: sessionCreateTimes(json, profileSpec.model),
    ...(traceFile === undefined ? {} : { traceFile }),
  };
}
