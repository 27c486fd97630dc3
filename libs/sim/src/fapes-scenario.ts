/**
 * FaPES scenarios (`kind: fapes`): an inference setting taken whole from a cluster scenario file (faro-36.yaml:
 * its trace, services, SLOs, capacity and timings, run under this system's default policy `infergrid`) plus a
 * stream of best-effort jobs that may borrow the backends inference leaves idle (FaPES, Zhao et al., SoCC'24).
 * Validated here once, with the cluster scenarios' error format; every default is applied here.
 */
import { basename, dirname, extname, resolve } from "node:path";
import { FAPES_GRACE_MS, HARVEST_DEFAULTS } from "@infergrid/fapes";
import { z } from "zod";
import { readMeasuredRow } from "./profiles.js";
import { cutSlice, type Experiment, formatIssues, loadScenario, readScenarioData, ScenarioError } from "./scenario.js";

export const FAPES_POLICIES = [
  "no-loan",
  "dedicated",
  "one-way-random",
  "fapes",
  "infergrid",
  "infergrid-random",
  "infergrid-shares",
  "infergrid-headroom",
  "infergrid-in-use",
  "infergrid-harvest",
] as const;
export type FapesPolicy = (typeof FAPES_POLICIES)[number];

/**
 * FaPES Table 2 (its testbed): checkpointing 1580 ms, upload 402 ms, download 140 ms, container creation 3558 ms.
 * A backend newly loaned starts its job's container and downloads the model; a preempted job checkpoints, uploads,
 * and its remaining workers restart from the checkpoint (download and container creation).
 */
export const FAPES_LAUNCH_MS = 140 + 3558;
export const FAPES_RESTART_MS = 1580 + 402 + 140 + 3558;

const itemsSchema = z.discriminatedUnion("kind", [
  /** exp(N(ln median, sigma)), rounded, within [1, max]. */
  z.strictObject({
    kind: z.literal("lognormal"),
    median: z.number().positive(),
    sigma: z.number().nonnegative(),
    max: z.number().int().positive(),
  }),
  /** Uniform over the integers min..max. */
  z.strictObject({ kind: z.literal("uniform"), min: z.number().int().positive(), max: z.number().int().positive() }),
]);

const itemMsSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("deterministic"), ms: z.number().positive() }),
  /** A measured row's median (a JSON table, dotted entry) times `batches`: an item is that many batches in a row. */
  z.strictObject({
    kind: z.literal("measured"),
    file: z.string().min(1),
    entry: z.string().min(1),
    batches: z.number().int().positive().default(1),
  }),
]);

const fapesScenarioSchema = z.strictObject({
  kind: z.literal("fapes"),
  description: z.string().min(1),
  inference: z.strictObject({
    /** A cluster scenario file (beside this one), run as written under `infergrid`: the inference side. */
    scenario: z.string().min(1),
    /** Replay only this many trace minutes of its slice (tests, or a shorter out-of-sample run). */
    minutes: z.number().int().positive().optional(),
    /** Run it on this many backends instead of the scenario's capacity (a tighter cluster on the same load). */
    capacity: z.number().int().positive().optional(),
  }),
  jobs: z.strictObject({
    /** Poisson arrivals, jobs per simulated hour. */
    arrivalsPerHour: z.number().positive(),
    /** Arrivals stop here (simulated minutes from the start; default: the end of the run). */
    untilMinute: z.number().positive().optional(),
    items: itemsSchema,
    itemMs: itemMsSchema,
    minBackends: z.number().int().positive().default(1),
    maxBackends: z.number().int().positive(),
    /** Each job draws one of these, uniformly (higher first). */
    priorities: z.array(z.number().int()).min(1).default([0]),
    /** A newly loaned backend works after this (container creation and model download). */
    launchMs: z.number().nonnegative().default(FAPES_LAUNCH_MS),
    /** A preempted job's remaining backends pause this long (checkpoint, upload, restore). */
    restartMs: z.number().nonnegative().default(FAPES_RESTART_MS),
    graceMs: z.number().nonnegative().default(FAPES_GRACE_MS),
    /**
     * Harvesting (policy `infergrid-harvest`, libs/fapes HarvestGate): a warm inference backend runs items while
     * no request computes on it. `pauseMs` is what stopping a running item adds to the request that stops it
     * (measured by `npm run bench:harvest-pause`); no default, since it is the machine's and the model's.
     */
    harvest: z
      .strictObject({
        pauseMs: z.number().nonnegative(),
        resumeAfterMs: z.number().nonnegative().default(HARVEST_DEFAULTS.resumeAfterMs),
        abandonAfterMs: z.number().positive().default(HARVEST_DEFAULTS.abandonAfterMs),
      })
      .optional(),
  }),
  /** Default: every policy the scenario can run (`infergrid-harvest` only with `jobs.harvest`). */
  policies: z.array(z.enum(FAPES_POLICIES)).min(1).optional(),
  seeds: z.array(z.number().int().nonnegative()).min(1).default([1, 2, 3]),
});

export type FapesScenarioSpec = z.output<typeof fapesScenarioSchema>;
export type JobItems = z.output<typeof itemsSchema>;

export interface FapesJobStream extends Omit<FapesScenarioSpec["jobs"], "itemMs"> {
  /** One item's run time on one backend, ms. */
  itemMs: number;
  /** Where it came from, for the report. */
  itemSource: string;
}

export interface FapesScenario {
  name: string;
  description: string;
  /** The inference side: the cluster scenario, cut to `inference.minutes`. */
  inference: Experiment;
  jobs: FapesJobStream;
  policies: FapesPolicy[];
  seeds: number[];
}

/** Reads, validates and resolves a FaPES scenario. Throws ScenarioError naming the bad field. */
export function loadFapesScenario(path: string, profilesDir: string): FapesScenario {
  const file = resolve(path);
  const parsed = fapesScenarioSchema.safeParse(readScenarioData(path));
  if (!parsed.success) throw new ScenarioError(path, formatIssues(parsed.error.issues));
  const d = parsed.data;
  const problems: string[] = [];
  if (d.jobs.minBackends > d.jobs.maxBackends)
    problems.push(`jobs.minBackends: ${d.jobs.minBackends} is above jobs.maxBackends ${d.jobs.maxBackends}`);
  const policies = d.policies ?? FAPES_POLICIES.filter((p) => p !== "infergrid-harvest" || d.jobs.harvest !== undefined);
  if (policies.includes("infergrid-harvest") && d.jobs.harvest === undefined)
    problems.push("jobs.harvest: required by policy infergrid-harvest (at least its pauseMs)");
  if (d.jobs.items.kind === "uniform" && d.jobs.items.min > d.jobs.items.max)
    problems.push(`jobs.items.min: ${d.jobs.items.min} is above jobs.items.max ${d.jobs.items.max}`);
  let inference: Experiment | undefined;
  try {
    inference = loadScenario(resolve(dirname(file), d.inference.scenario));
    if (d.inference.minutes !== undefined) inference = cutSlice(inference, { minutes: d.inference.minutes });
    if (d.inference.capacity !== undefined) inference = { ...inference, capacity: d.inference.capacity };
  } catch (err) {
    problems.push(`inference.scenario: ${err instanceof ScenarioError ? err.problems.join("; ") : String(err)}`);
  }
  let itemMs = 0;
  let itemSource = "";
  const spec = d.jobs.itemMs;
  if (spec.kind === "deterministic") {
    itemMs = spec.ms;
    itemSource = `${spec.ms} ms`;
  } else {
    try {
      const row = readMeasuredRow({ kind: "measured", file: spec.file, entry: spec.entry, fit: "p50" }, dirname(file), profilesDir);
      itemMs = row.p50 * spec.batches;
      itemSource = `${spec.batches} x ${spec.entry} p50 ${row.p50.toFixed(1)} ms (${spec.file})`;
    } catch (err) {
      problems.push(`jobs.itemMs: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (problems.length > 0 || inference === undefined) throw new ScenarioError(path, problems);
  return {
    name: basename(file, extname(file)),
    description: d.description,
    inference,
    jobs: { ...d.jobs, itemMs, itemSource },
    policies,
    seeds: d.seeds,
  };
}
