/**
 * Kairos scenarios (`kind: kairos`): one service on a heterogeneous pool under a budget, Kairos's setting.
 * The file names the instance-type catalogue (prices, limits, and the profile table by path), the model, its
 * QoS, the budget, the query-size mix, the run length, the policies and the seeds. Validated here once, with
 * the same error format as the cluster scenarios (scenario.ts); every default is applied here.
 */
import { readFileSync } from "node:fs";
import { basename, dirname, extname, resolve } from "node:path";
import { type BatchMix, buildCatalogue, catalogueSpecSchema, type InstanceType } from "@infergrid/kairos";
import { parseDocument } from "yaml";
import { z } from "zod";
import { resolveInput } from "./paths.js";
import { formatIssues, readScenarioData, ScenarioError } from "./scenario.js";

export const KAIROS_POLICIES = ["infergrid", "kairos", "homogeneous", "kairos-fcfs", "random"] as const;
export type KairosPolicy = (typeof KAIROS_POLICIES)[number];

const mixSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("kairos-production") }),
  z.strictObject({ kind: z.literal("lognormal"), mu: z.number(), sigma: z.number().positive(), max: z.number().int().positive() }),
  z.strictObject({ kind: z.literal("gaussian"), mean: z.number().positive(), sd: z.number().positive(), max: z.number().int().positive() }),
]);

const kairosScenarioSchema = z.strictObject({
  kind: z.literal("kairos"),
  description: z.string().default(""),
  catalogue: catalogueSpecSchema,
  model: z.string().min(1),
  qosMs: z.number().positive(),
  budgetPerHour: z.number().positive(),
  mix: mixSchema.default({ kind: "kairos-production" }),
  /** Queries per measured run (Kairos's artifact: 20,000). */
  queries: z.number().int().min(1000).default(20_000),
  /** Share of queries that must meet QoS for a rate to count (Kairos: 99 %). */
  target: z.number().gt(0).lt(1).default(0.99),
  /** Kairos's xi = 1 - safeguard (paper: 0.98). */
  safeguard: z.number().min(0).lt(1).default(0.02),
  /** Recent queries the upper bound's mix is measured on (Kairos: 10,000). */
  monitoredQueries: z.number().int().min(100).default(10_000),
  /** The largest query the heterogeneity coefficients are taken at (Kairos: 1000). */
  largestBatch: z.number().int().positive().default(1000),
  /**
   * infergrid's choice: Kairos's pick, then KAIROS+'s pruned walk, each evaluation the mean throughput at QoS
   * of simulated runs of `queries` queries on `seeds` (kept apart from the measured seeds); another
   * configuration replaces Kairos's pick only when it evaluates more than `margin` better.
   */
  search: z
    .strictObject({
      maxEvaluations: z.number().int().positive().default(16),
      queries: z.number().int().min(1000).default(20_000),
      seeds: z.array(z.number().int().nonnegative()).min(1).default([40_000, 40_001]),
      margin: z.number().min(0).default(0.02),
    })
    .default({ maxEvaluations: 16, queries: 20_000, seeds: [40_000, 40_001], margin: 0.02 }),
  policies: z
    .array(z.enum(KAIROS_POLICIES))
    .min(1)
    .default([...KAIROS_POLICIES]),
  seeds: z.array(z.number().int().nonnegative()).min(1).default([1, 2, 3]),
});

export type KairosScenarioSpec = z.output<typeof kairosScenarioSchema>;

export interface KairosScenario extends Omit<KairosScenarioSpec, "catalogue" | "mix"> {
  name: string;
  types: InstanceType[];
  mix: BatchMix;
  /** The profile table the catalogue's latencies came from (resolved path). */
  profilesFile: string;
}

/** The `kind` a scenario file declares (`kairos`), or undefined for a cluster scenario. */
export function scenarioKind(path: string): string | undefined {
  let data: unknown;
  try {
    data = parseDocument(readFileSync(path, "utf8")).toJS();
  } catch {
    return undefined;
  }
  const kind = typeof data === "object" && data !== null ? (data as Record<string, unknown>).kind : undefined;
  return typeof kind === "string" ? kind : undefined;
}

/** Reads, validates and resolves a Kairos scenario; its profile table is read by path. Throws ScenarioError. */
export function loadKairosScenario(path: string, profilesDir: string): KairosScenario {
  const file = resolve(path);
  const parsed = kairosScenarioSchema.safeParse(readScenarioData(path));
  if (!parsed.success) throw new ScenarioError(path, formatIssues(parsed.error.issues));
  const { catalogue, ...rest } = parsed.data;
  const profilesFile = resolveInput(catalogue.profiles, dirname(file), profilesDir);
  if (profilesFile === undefined) {
    throw new ScenarioError(path, [`catalogue.profiles: no file ${catalogue.profiles} beside the scenario or in ${profilesDir}`]);
  }
  let types: InstanceType[];
  try {
    types = buildCatalogue(catalogue, readFileSync(profilesFile, "utf8"));
    for (const t of types)
      if (!t.profiles.has(rest.model)) throw new Error(`instance type ${t.name} has no profile for model ${rest.model}`);
  } catch (err) {
    throw new ScenarioError(path, [`catalogue: ${err instanceof Error ? err.message : String(err)}`]);
  }
  return { ...rest, name: basename(file, extname(file)), types, profilesFile };
}
