/**
 * Scenario files: what one simulation experiment is (the trace and its slice, the jobs and each one's rate
 * scale, service-time profile and SLO, the cluster and its timings, the policies and their options, the seeds,
 * the metrics' definitions), written in YAML or JSON and checked against one schema. Every default is applied
 * here, once: what the schema returns (an Experiment) is complete, and run-experiment.ts reads it as is.
 *
 * `npm run sim -- <name>` loads scenarios/<name>.yaml at the repository root; `--scenario <file>` any file.
 * libs/sim/README.md describes the fields with an example.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, extname, join, resolve } from "node:path";
import { OBJECTIVE_NAMES, OBJECTIVES, type ObjectiveName, SLOW_LOOP_DEFAULTS } from "@infergrid/allocation";
import type { Lognormal } from "@infergrid/core";
import { DEFAULT_FORECASTER_SPEC, FORECASTER_MODELS } from "@infergrid/forecast";
import { PARK_DEFAULTS } from "@infergrid/swayam";
import { parseDocument } from "yaml";
import { z } from "zod";
import { type MetricsDefinition, SIM_LIMITS, type SlowLoopSettings, type SwayamSettings } from "./config.js";
import { scenariosDir } from "./paths.js";
import { POLICY_NAMES, type PolicyName } from "./policies.js";
import { DEFAULT_SIM_PREDICTOR } from "./signals.js";

/** Faro's ResNet-34 profile (../shared/traces/README.md), scipy lognormal in ms. */
export const RESNET34: Lognormal = { shape: 0.3602, loc: 72.86, scale: 86.69 };

/** The frontends' time constants a scenario sets (the rest of SwayamSettings comes from its other fields). */
export type SwayamTiming = Pick<
  SwayamSettings,
  "tSetupMs" | "rateWindowMs" | "rateHistoryMs" | "scaleInCooldownMs" | "countingLeadMs" | "modelRttMs"
>;

export const PAPER_SWAYAM_TIMING: SwayamTiming = {
  tSetupMs: 10_000,
  rateWindowMs: 100_000,
  rateHistoryMs: 500_000,
  scaleInCooldownMs: 600_000,
};

/**
 * The global allocator's defaults (services/global-allocator --policy faro, libs/allocation
 * SLOW_LOOP_DEFAULTS) and the predictor's (N-HiTS over one-minute steps, 7 ahead). The cold start planned
 * is the scenario's (policyOptions.slowLoop.coldStartMs, by default the cluster's cold start).
 */
export const DEFAULT_SLOW_LOOP: Omit<SlowLoopSettings, "controller"> & { controller: Omit<SlowLoopSettings["controller"], "coldStartMs"> } =
  {
    controller: {
      objective: OBJECTIVES[SLOW_LOOP_DEFAULTS.objective],
      solvePeriodMs: SLOW_LOOP_DEFAULTS.solvePeriodMs,
      reactiveTicks: SLOW_LOOP_DEFAULTS.reactiveTicks,
      plan: SLOW_LOOP_DEFAULTS.planQuantile >= 1 ? { kind: "max" } : { kind: "quantile", q: SLOW_LOOP_DEFAULTS.planQuantile },
    },
    tickMs: SLOW_LOOP_DEFAULTS.reactiveTickMs,
    predictor: DEFAULT_SIM_PREDICTOR,
  };

/**
 * The metrics' definitions the simulator's metrics module (metrics.ts) implements today. Validation rejects
 * the others with a message saying so; whoever implements one adds it here.
 */
export const IMPLEMENTED_METRICS = {
  p99: ["bucketed", "exact"] as readonly MetricsDefinition["p99"][],
  binBy: ["completion", "arrival"] as readonly MetricsDefinition["binBy"][],
  queueCap: true as boolean,
};

/** A bad scenario (or a bad input it names): the message says what and where; the CLI prints it and exits 2. */
export class ScenarioError extends Error {
  override readonly name = "ScenarioError";
  constructor(
    /** The scenario file (or a name for an inline scenario). */
    readonly source: string,
    /** One line per problem, each `path: what` (e.g. `jobs[2].slo.latencyMs: expected a positive number`). */
    readonly problems: readonly string[],
  ) {
    super(`scenario ${source} is not valid:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The schema. Messages name what was expected; paths are added by formatIssues.

/** A type error's message: "required" when the field is missing, else what was expected. */
const typeError = (expected: string) => (issue: { input?: unknown }) => (issue.input === undefined ? "required" : expected);
const POSITIVE = "expected a positive number";
const NON_NEGATIVE = "expected a number >= 0";
const positive = () => z.number({ error: typeError(POSITIVE) }).positive({ error: POSITIVE });
const nonNegative = () => z.number({ error: typeError(NON_NEGATIVE) }).nonnegative({ error: NON_NEGATIVE });
const integer = (min: number, max?: number) => {
  const error = max === undefined ? `expected an integer >= ${min}` : `expected an integer in [${min}, ${max}]`;
  const n = z
    .number({ error: typeError(error) })
    .int({ error })
    .min(min, { error });
  return max === undefined ? n : n.max(max, { error });
};
const text = () => z.string({ error: typeError("expected a non-empty string") }).min(1, { error: "expected a non-empty string" });
const fraction = (what: string) => {
  const error = `expected ${what} in (0, 1)`;
  return z
    .number({ error: typeError(error) })
    .gt(0, { error })
    .lt(1, { error });
};

/** Messages for the issues the schema gives none of its own: missing fields and wrong types of objects and lists. */
const fallbackError = (issue: z.core.$ZodRawIssue): string | undefined => {
  if (issue.code !== "invalid_type") return undefined;
  if (issue.input === undefined) return "required";
  const got = Array.isArray(issue.input) ? "a list" : issue.input === null ? "null" : typeof issue.input;
  return `expected ${issue.expected === "array" ? "a list" : `${issue.expected === "object" ? "an" : "a"} ${issue.expected}`}, got ${got}`;
};

const PROFILE_KINDS = "lognormal, exponential, deterministic or measured";
const ProfileSchema = z.discriminatedUnion(
  "kind",
  [
    /** scipy's lognormal in ms: shape (sigma), loc (shift), scale (exp(mu)). */
    z.strictObject({ kind: z.literal("lognormal"), shape: positive(), loc: nonNegative(), scale: positive() }),
    z.strictObject({ kind: z.literal("exponential"), meanMs: positive() }),
    z.strictObject({ kind: z.literal("deterministic"), ms: positive() }),
    /**
     * A row of a measured latency table (../shared/profiles): `entry` is a dotted path into a JSON file
     * (models.resnet34.cpu.1c_b1) or the column values that pick one row of a CSV file ({ instance_type:
     * c5n.2xlarge, model: dien, batch: 10 }). fit "lognormal": a lognormal through its p50 and p99 (or p50
     * and mean); "p50": a deterministic service time at its median.
     */
    z.strictObject({
      kind: z.literal("measured"),
      file: text(),
      entry: z.union([text(), z.record(z.string(), z.union([z.string(), z.number()]))], {
        error: typeError("expected a dotted path (JSON) or { column: value, ... } (CSV)"),
      }),
      fit: z.enum(["lognormal", "p50"], { error: 'expected "lognormal" or "p50"' }).default("lognormal"),
    }),
  ],
  { error: typeError(`expected kind: ${PROFILE_KINDS}`) },
);
export type Profile = z.output<typeof ProfileSchema>;

const PERCENT = "expected a percent in [50, 100) (99 for p99)";
const percentile = () => z.number({ error: PERCENT }).min(50, { error: PERCENT }).lt(100, { error: PERCENT });
const BURST = "expected a number >= 1";
const burstFactor = () => z.number({ error: BURST }).min(1, { error: BURST });

const JobOverrideSchema = z.strictObject({
  name: text(),
  rateScale: nonNegative().optional(),
  profile: ProfileSchema.optional(),
  slo: z
    .strictObject({ latencyMs: positive().optional(), percentile: percentile().optional(), burstFactor: burstFactor().optional() })
    .optional(),
});

const JobsSchema = z.union(
  [
    z
      .array(z.union([text(), JobOverrideSchema], { error: typeError("expected a job name or { name, rateScale?, profile?, slo? }") }), {
        error: typeError("expected a list of jobs or { busiest: N }"),
      })
      .min(1, { error: "expected at least one job" }),
    z.strictObject({ busiest: integer(1) }),
  ],
  { error: typeError("expected a list of jobs or { busiest: N }") },
);

const JobDefaultsSchema = z
  .strictObject({
    rateScale: nonNegative().default(1),
    profile: ProfileSchema.optional(),
    slo: z
      .strictObject({ latencyMs: positive().optional(), percentile: percentile().default(99), burstFactor: burstFactor().default(2) })
      .prefault({}),
  })
  .prefault({});

const TraceSchema = z.strictObject({
  /** A per-minute CSV (../shared/traces) or an Azure Functions 2019 day file; beside the scenario or in --traces. */
  file: text(),
  /** Azure Functions 2019 format only: keep the functions with this trigger (e.g. http). */
  trigger: text().optional(),
  fromMinute: integer(0).default(0),
  /** Trace minutes replayed from fromMinute (undefined: to the end). */
  minutes: integer(1).optional(),
  /** Trace minutes per simulated minute (1 = real time). */
  compression: positive().default(1),
  /** Multiplies every job's counts (infra/local --rate-scale); a job's own rateScale multiplies it again. */
  rateScale: nonNegative().default(1),
  /**
   * How a minute's count becomes arrivals (libs/workload ArrivalOptions.mode): "poisson", a Poisson process at the
   * count's rate (the count varies by Poisson noise); "exact", the trace's count spread uniformly over the minute,
   * as Faro's simulator replays it.
   */
  arrivals: z.enum(["poisson", "exact"], { error: typeError('expected "poisson" or "exact"') }).default("poisson"),
});

/** Swayam's evaluation where it gives a value (paper-parameters.md); the other timings are this repository's. */
const ClusterSchema = z
  .strictObject({
    frontends: integer(1, SIM_LIMITS.frontends).default(8),
    autoscaleMs: positive().default(10_000),
    hopMs: nonNegative().default(0.5),
    coldStartMs: nonNegative().default(10_000),
    idleTimeoutMs: positive().default(300_000),
    dropAfterMs: positive().default(10_000),
    retryGapMs: positive().default(5),
    /** Series bin width in simulated ms (default: one trace minute). */
    binMs: positive().optional(),
  })
  .prefault({})
  .superRefine((c, ctx) => {
    if (c.dropAfterMs / c.retryGapMs > SIM_LIMITS.retries)
      ctx.addIssue({
        code: "custom",
        path: ["retryGapMs"],
        message: `dropAfterMs / retryGapMs = ${Math.ceil(c.dropAfterMs / c.retryGapMs)} retries of one request; at most ${SIM_LIMITS.retries}`,
      });
  });

const SwayamSchema = z
  .strictObject({
    listLengths: z
      .union([z.literal("peak-sized"), z.array(integer(0, SIM_LIMITS.backends)).min(1)], {
        error: typeError(`expected "peak-sized" or a list of integers in [0, ${SIM_LIMITS.backends}]`),
      })
      .default("peak-sized"),
    minWarm: integer(1).default(1),
    bootstrap: integer(1).default(1),
    timing: z
      .strictObject({
        tSetupMs: positive().default(PAPER_SWAYAM_TIMING.tSetupMs),
        rateWindowMs: positive().default(PAPER_SWAYAM_TIMING.rateWindowMs),
        rateHistoryMs: positive().default(PAPER_SWAYAM_TIMING.rateHistoryMs),
        scaleInCooldownMs: nonNegative().default(PAPER_SWAYAM_TIMING.scaleInCooldownMs),
        countingLeadMs: nonNegative().optional(),
        modelRttMs: nonNegative().optional(),
      })
      .prefault({}),
  })
  .prefault({});

const policyName = z.enum(POLICY_NAMES, {
  error: (issue) => `unknown policy ${JSON.stringify(issue.input)}; known: ${POLICY_NAMES.join(", ")}`,
});

const SlowLoopSchema = z
  .strictObject({
    objective: z
      .enum(OBJECTIVE_NAMES, { error: typeError(`expected one of ${OBJECTIVE_NAMES.join(", ")}`) })
      .default(SLOW_LOOP_DEFAULTS.objective),
    solvePeriodMs: positive().default(SLOW_LOOP_DEFAULTS.solvePeriodMs),
    reactiveTicks: integer(1).default(SLOW_LOOP_DEFAULTS.reactiveTicks),
    tickMs: positive().default(SLOW_LOOP_DEFAULTS.reactiveTickMs),
    /** The forecast quantile planned for, or "max" (the largest quantile). */
    plan: z
      .union([z.literal("max"), fraction("a quantile")], { error: typeError('expected a quantile in (0, 1) or "max"') })
      .default(SLOW_LOOP_DEFAULTS.planQuantile >= 1 ? "max" : SLOW_LOOP_DEFAULTS.planQuantile),
    /** The cold start the controller plans with (default: cluster.coldStartMs). */
    coldStartMs: nonNegative().optional(),
    predictor: z
      .strictObject({
        stepMs: positive().default(DEFAULT_SIM_PREDICTOR.stepMs),
        quantiles: z
          .array(fraction("a quantile"))
          .min(1)
          .default([...DEFAULT_SIM_PREDICTOR.quantiles]),
        forecaster: z
          .strictObject({
            model: z
              .enum(FORECASTER_MODELS, { error: typeError(`expected one of ${FORECASTER_MODELS.join(", ")}`) })
              .default(DEFAULT_FORECASTER_SPEC.model),
            steps: integer(1).default(DEFAULT_FORECASTER_SPEC.steps),
            warmupWindows: integer(0).default(DEFAULT_FORECASTER_SPEC.warmupWindows),
            alpha: fraction("a smoothing factor").default(DEFAULT_FORECASTER_SPEC.alpha),
            beta: fraction("a smoothing factor").default(DEFAULT_FORECASTER_SPEC.beta),
            minHistory: integer(1).default(DEFAULT_FORECASTER_SPEC.minHistory),
            seasonWindows: integer(1).default(DEFAULT_FORECASTER_SPEC.seasonWindows),
            seed: integer(0).default(DEFAULT_FORECASTER_SPEC.seed),
          })
          .prefault({}),
      })
      .prefault({}),
  })
  .prefault({});

const notImplemented = (value: unknown, implemented: readonly unknown[]) =>
  `${JSON.stringify(value)} is not implemented yet in the simulator's metrics (libs/sim/src/metrics.ts); use ${implemented
    .map((v) => JSON.stringify(v))
    .join(" or ")}`;

const MetricsSchema = z
  .strictObject({
    /** "bucketed": libs/workload LatencyHistogram (0.5 % relative error; per-minute p99 in 12 % buckets); "exact": sorted latencies. */
    p99: z.enum(["bucketed", "exact"], { error: typeError('expected "bucketed" or "exact"') }).default("bucketed"),
    /** Which minute a request's outcome counts in: the minute it completed (or was dropped) or the minute it arrived. */
    binBy: z.enum(["completion", "arrival"], { error: typeError('expected "completion" or "arrival"') }).default("completion"),
    /** Requests a job's router queue holds before new ones are dropped (Faro's simulator: 50), or "none". */
    queueCap: z.union([z.literal("none"), integer(1)], { error: typeError('expected "none" or an integer >= 1') }).default("none"),
  })
  .prefault({})
  .superRefine((m, ctx) => {
    if (!IMPLEMENTED_METRICS.p99.includes(m.p99))
      ctx.addIssue({ code: "custom", path: ["p99"], message: notImplemented(m.p99, IMPLEMENTED_METRICS.p99) });
    if (!IMPLEMENTED_METRICS.binBy.includes(m.binBy))
      ctx.addIssue({ code: "custom", path: ["binBy"], message: notImplemented(m.binBy, IMPLEMENTED_METRICS.binBy) });
    if (m.queueCap !== "none" && !IMPLEMENTED_METRICS.queueCap)
      ctx.addIssue({ code: "custom", path: ["queueCap"], message: notImplemented(m.queueCap, ["none"]) });
  });

const ScenarioSchema = z
  .strictObject({
    description: text(),
    trace: TraceSchema,
    /** The trace's columns replayed, in order, each with optional settings of its own; or the N busiest over the slice; omitted: every column. */
    jobs: JobsSchema.optional(),
    /** Every job's settings unless its entry in `jobs` gives its own. */
    jobDefaults: JobDefaultsSchema,
    /** Backends in the cluster, or { peakSized: f }: f x the sum of every job's peak-sized replicas. */
    capacity: z.union([integer(1, SIM_LIMITS.backends), z.strictObject({ peakSized: positive() })], {
      error: typeError("expected a number of backends or { peakSized: factor }"),
    }),
    startAtOnePerJob: z.boolean({ error: typeError("expected true or false") }).default(false),
    perJobMaxReplicas: z.enum(["share", "cluster"], { error: typeError('expected "share" or "cluster"') }).default("share"),
    cluster: ClusterSchema,
    swayam: SwayamSchema,
    policies: z
      .array(policyName, { error: typeError("expected a list of policy names") })
      .min(1, { error: "expected at least one policy" }),
    policyOptions: z
      .strictObject({
        park: z.strictObject({ windowMs: positive().default(PARK_DEFAULTS.windowMs) }).prefault({}),
        slowLoop: SlowLoopSchema,
      })
      .prefault({}),
    seeds: z.array(integer(0), { error: typeError("expected a list of integers >= 0") }).min(1, { error: "expected at least one seed" }),
    metrics: MetricsSchema,
  })
  .superRefine((s, ctx) => {
    const duplicates = <T>(list: readonly T[], path: string, what: (x: T) => string) => {
      const seen = new Set<string>();
      list.forEach((x, i) => {
        const key = what(x);
        if (seen.has(key)) ctx.addIssue({ code: "custom", path: [path, i], message: `${key} is listed twice` });
        seen.add(key);
      });
    };
    duplicates(s.policies, "policies", (p) => p);
    duplicates(s.seeds, "seeds", String);
    const named = Array.isArray(s.jobs) ? s.jobs : undefined;
    if (named) {
      duplicates(named, "jobs", (j) => (typeof j === "string" ? j : j.name));
      named.forEach((j, i) => {
        const own = typeof j === "string" ? undefined : j;
        if (own?.profile === undefined && s.jobDefaults.profile === undefined)
          ctx.addIssue({
            code: "custom",
            path: ["jobs", i, "profile"],
            message: "required: neither the job nor jobDefaults.profile gives one",
          });
        if (own?.slo?.latencyMs === undefined && s.jobDefaults.slo.latencyMs === undefined)
          ctx.addIssue({
            code: "custom",
            path: ["jobs", i, "slo", "latencyMs"],
            message: "required: neither the job nor jobDefaults.slo.latencyMs gives one",
          });
      });
    } else {
      if (s.jobDefaults.profile === undefined)
        ctx.addIssue({ code: "custom", path: ["jobDefaults", "profile"], message: "required when the jobs are not listed by name" });
      if (s.jobDefaults.slo.latencyMs === undefined)
        ctx.addIssue({
          code: "custom",
          path: ["jobDefaults", "slo", "latencyMs"],
          message: "required when the jobs are not listed by name",
        });
    }
    const lengths = s.swayam.listLengths;
    const jobCount = named?.length ?? (s.jobs && !Array.isArray(s.jobs) ? s.jobs.busiest : undefined);
    if (Array.isArray(lengths) && jobCount !== undefined && lengths.length !== jobCount)
      ctx.addIssue({ code: "custom", path: ["swayam", "listLengths"], message: `${lengths.length} entries for ${jobCount} jobs` });
  })
  .transform((s): Omit<Experiment, "name" | "dir"> => {
    const named = Array.isArray(s.jobs) ? s.jobs : undefined;
    // Object.fromEntries: own properties whatever the names (a job called "__proto__" included).
    const perJob: Record<string, JobSettings> = Object.fromEntries(
      (named ?? []).map((entry) => {
        const own = typeof entry === "string" ? { name: entry } : entry;
        const settings: JobSettings = {
          rateScale: own.rateScale ?? s.jobDefaults.rateScale,
          profile: (own.profile ?? s.jobDefaults.profile) as Profile,
          slo: {
            latencyMs: (own.slo?.latencyMs ?? s.jobDefaults.slo.latencyMs) as number,
            percentile: own.slo?.percentile ?? s.jobDefaults.slo.percentile,
            burstFactor: own.slo?.burstFactor ?? s.jobDefaults.slo.burstFactor,
          },
        };
        return [own.name, settings];
      }),
    );
    const loop = s.policyOptions.slowLoop;
    return {
      description: s.description,
      trace: {
        ...s.trace,
        ...(named ? { jobs: named.map((j) => (typeof j === "string" ? j : j.name)) } : {}),
        ...(s.jobs && !Array.isArray(s.jobs) ? { busiest: s.jobs.busiest } : {}),
      },
      jobDefaults: s.jobDefaults,
      perJob,
      capacity: s.capacity,
      startAtOnePerJob: s.startAtOnePerJob,
      perJobMaxReplicas: s.perJobMaxReplicas,
      cluster: { ...s.cluster, binMs: s.cluster.binMs ?? 60_000 / s.trace.compression },
      swayam: s.swayam,
      policies: s.policies,
      policyOptions: {
        park: s.policyOptions.park,
        slowLoop: {
          objective: loop.objective,
          solvePeriodMs: loop.solvePeriodMs,
          reactiveTicks: loop.reactiveTicks,
          tickMs: loop.tickMs,
          plan: loop.plan,
          coldStartMs: loop.coldStartMs ?? s.cluster.coldStartMs,
          predictor: loop.predictor,
        },
      },
      seeds: s.seeds,
      metrics: { p99: s.metrics.p99, binBy: s.metrics.binBy, ...(s.metrics.queueCap === "none" ? {} : { queueCap: s.metrics.queueCap }) },
    };
  });

/** What a scenario file holds, before defaults (for writing one in code). */
export type ScenarioInput = z.input<typeof ScenarioSchema>;

/** One job's settings, complete. */
export interface JobSettings {
  /** Multiplies the job's counts (after trace.rateScale). */
  rateScale: number;
  profile: Profile;
  slo: {
    /** Latency threshold (Swayam's RT_max, Faro's SLO), ms. */
    latencyMs: number;
    /** Percent of requests within latencyMs (Swayam's SL_min x 100), e.g. 99. */
    percentile: number;
    /** Swayam's burst factor U. */
    burstFactor: number;
  };
}

export interface SlowLoopOptions {
  objective: ObjectiveName;
  solvePeriodMs: number;
  reactiveTicks: number;
  tickMs: number;
  plan: "max" | number;
  coldStartMs: number;
  predictor: {
    stepMs: number;
    quantiles: number[];
    forecaster: z.output<typeof SlowLoopSchema>["predictor"]["forecaster"];
  };
}

/**
 * A scenario with every default applied: what the runner reads. Built by parseScenario / loadScenario from a
 * file; tests may spread one and change a field (the defaults computed from other fields, cluster.binMs and
 * policyOptions.slowLoop.coldStartMs, are not recomputed then).
 */
export interface Experiment {
  /** The scenario file's base name (scenarios/faro-36.yaml: faro-36). */
  name: string;
  description: string;
  /** The folder of the scenario file: relative trace and profile paths are looked up there first. */
  dir?: string;
  trace: {
    file: string;
    trigger?: string;
    fromMinute: number;
    /** Trace minutes replayed (undefined: to the end). */
    minutes?: number;
    /** Jobs replayed, by name, in this order (the scenario's `jobs` list). */
    jobs?: string[];
    /** Otherwise the `busiest` jobs over the slice, busiest first; neither: every column. */
    busiest?: number;
    /** Trace minutes per simulated minute (1 = real time). */
    compression: number;
    rateScale: number;
    /** "poisson" (default) or "exact": the trace's counts spread over each minute. */
    arrivals?: "poisson" | "exact";
  };
  /** The settings of jobs not in perJob (profile and SLO latency present unless every job is in perJob). */
  jobDefaults: Omit<JobSettings, "profile" | "slo"> & {
    profile?: Profile;
    slo: Omit<JobSettings["slo"], "latencyMs"> & { latencyMs?: number };
  };
  /** The settings of each job listed by name. */
  perJob: Record<string, JobSettings>;
  /**
   * Backends in the cluster. { peakSized: f }: f x the sum of every job's peak-sized replicas (fixed.ts).
   * f = 1 is the smallest cluster on which the fixed peak allocation fits; f = U = 2 leaves room for every
   * job's peak at Swayam's burst factor, the headroom its sizing asks for (and which the paper's clairvoyant
   * baselines never lack).
   */
  capacity: number | { peakSized: number };
  /**
   * Every policy starts with one warm backend per job, even those whose allocation is fixed (fixed-peak,
   * FairShare), which then cold-start the rest at time 0 like an autoscaler would (Faro's evaluation: every
   * job starts at 1 replica). Otherwise a fixed allocation starts warm at its size.
   */
  startAtOnePerJob: boolean;
  /**
   * How far a per-job autoscaler (HPA, KPA, Ray Serve, Oneshot, AIAD, MArk) may grow one job: `share`, to the
   * job's peak-sized share of the capacity (the default, as each would be configured with a max replicas in a
   * shared cluster); `cluster`, to the whole capacity, the jobs then competing for it (Faro's simulator).
   */
  perJobMaxReplicas: "share" | "cluster";
  cluster: {
    frontends: number;
    autoscaleMs: number;
    hopMs: number;
    coldStartMs: number;
    idleTimeoutMs: number;
    dropAfterMs: number;
    retryGapMs: number;
    /** Series bin width in simulated ms. */
    binMs: number;
  };
  swayam: {
    /**
     * Each job's list length: "peak-sized" gives each job the capacity in proportion to its peak-sized need
     * (the whole pool is handed out); a number array is taken as is (0 = an equal share).
     */
    listLengths: "peak-sized" | number[];
    minWarm: number;
    bootstrap: number;
    /** The frontends' Swayam clock (t_setup, rate windows, scale-in cooldown). */
    timing: SwayamTiming;
  };
  policies: PolicyName[];
  policyOptions: {
    /** Late binding (infergrid, infergrid-no-prune, swayam-park): a park round's length. */
    park: { windowMs: number };
    /** The slow loop of the infergrid policies. */
    slowLoop: SlowLoopOptions;
  };
  seeds: number[];
  metrics: MetricsDefinition;
}

// ---------------------------------------------------------------------------------------------------------

/** `jobs[2].slo.latencyMs` from ["jobs", 2, "slo", "latencyMs"]. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else {
      const key = String(p);
      out += /^[A-Za-z_$][\w$-]*$/.test(key) ? (out === "" ? key : `.${key}`) : `[${JSON.stringify(key)}]`;
    }
  }
  return out === "" ? "(top level)" : out;
}

/** One line per problem, `path: message`; unknown fields are named one by one. */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  const lines: string[] = [];
  for (const issue of issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) lines.push(`${formatPath([...issue.path, key])}: unknown field`);
      continue;
    }
    lines.push(`${formatPath(issue.path)}: ${issue.message}`);
  }
  return lines;
}

/** Validates a scenario's data (parsed YAML or JSON) and applies the defaults. Throws ScenarioError. */
export function scenarioFromData(data: unknown, context: { name: string; source?: string; dir?: string }): Experiment {
  const parsed = ScenarioSchema.safeParse(data, { error: fallbackError });
  if (!parsed.success) throw new ScenarioError(context.source ?? context.name, formatIssues(parsed.error.issues));
  return { name: context.name, ...(context.dir === undefined ? {} : { dir: context.dir }), ...parsed.data };
}

/** A scenario's text (YAML, which includes JSON) as data. Throws ScenarioError, with line and column for syntax errors. */
function parseScenarioData(text: string, source: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0)
    throw new ScenarioError(
      source,
      doc.errors.map((e) => (e.message.split("\n")[0] ?? e.message).replace(/:$/, "")),
    );
  return doc.toJS();
}

/** A scenario file's data, for the scenario kinds that validate it with their own schema. Throws ScenarioError. */
export function readScenarioData(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(resolve(path), "utf8");
  } catch (err) {
    throw new ScenarioError(path, [`cannot read the file: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  return parseScenarioData(text, path);
}

/** Parses a scenario's text (YAML, which includes JSON). Throws ScenarioError, with line and column for syntax errors. */
export function parseScenario(text: string, context: { name: string; source?: string; dir?: string }): Experiment {
  const source = context.source ?? context.name;
  const data = parseScenarioData(text, source);
  if (data === null || data === undefined) throw new ScenarioError(source, ["(top level): the file is empty"]);
  return scenarioFromData(data, { ...context, source });
}

const EXTENSIONS = [".yaml", ".yml", ".json"];

/** Reads and validates a scenario file; its name is the file's base name. Throws ScenarioError. */
export function loadScenario(path: string): Experiment {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ScenarioError(path, [`cannot read the file: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  return parseScenario(text, { name: basename(file, extname(file)), source: path, dir: dirname(file) });
}

/** The file of the named scenario in `dir` (scenarios/ by default), or undefined. */
export function scenarioFile(name: string, dir: string = scenariosDir()): string | undefined {
  if (!/^[\w.-]+$/.test(name)) return undefined;
  return EXTENSIONS.map((ext) => join(dir, `${name}${ext}`)).find((file) => existsSync(file));
}

/** The scenario files in `dir` (scenarios/ by default), by name. */
export function listScenarioFiles(dir: string = scenariosDir()): { name: string; file: string }[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return [];
  }
  return entries
    .filter((f) => EXTENSIONS.includes(extname(f)))
    .sort()
    .map((f) => ({ name: basename(f, extname(f)), file: join(dir, f) }));
}

/**
 * The scenario on a part of its slice (the CLI's --from-minute and --minutes): fromMinute is a trace minute
 * inside the scenario's slice, minutes a length that stays inside it. A cut never reaches minutes the scenario
 * does not replay (a hold-out past its end, say). Throws ScenarioError.
 */
export function cutSlice(e: Experiment, cut: { fromMinute?: number; minutes?: number }): Experiment {
  if (cut.fromMinute === undefined && cut.minutes === undefined) return e;
  const start = e.trace.fromMinute;
  const end = e.trace.minutes === undefined ? Number.POSITIVE_INFINITY : start + e.trace.minutes;
  const slice = `[${start}, ${Number.isFinite(end) ? end : "end"})`;
  const from = cut.fromMinute ?? start;
  if (from < start || from >= end) throw new ScenarioError(e.name, [`--from-minute ${from}: outside the scenario's slice ${slice}`]);
  const minutes = cut.minutes ?? (Number.isFinite(end) ? end - from : undefined);
  if (minutes !== undefined && from + minutes > end)
    throw new ScenarioError(e.name, [
      `--minutes ${minutes}: minutes ${from}..${from + minutes - 1} reach past the scenario's slice ${slice}`,
    ]);
  const { minutes: _dropped, ...trace } = e.trace;
  return { ...e, trace: { ...trace, fromMinute: from, ...(minutes === undefined ? {} : { minutes }) } };
}
