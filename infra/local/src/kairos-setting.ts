/**
 * The heterogeneous mode's setting (`--kairos <model> --types <type>=<n>,...`): the Kairos artifact's
 * per-type latency profiles of the model (../shared/profiles/kairos-aws-4types.csv, read by path), its QoS
 * and the instance types' hourly prices from the paper as the repository's scenario file holds them
 * (scenarios/kairos-<model>.yaml), and what "large" means for the summary, from libs/kairos. Nothing here
 * decides anything: it reads, validates and hands the numbers on.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { seededRandom } from "@infergrid/core";
import {
  type BatchMix,
  buildCatalogue,
  catalogueSpecSchema,
  type InstanceType,
  type InstanceTypeSpec,
  profileOf,
  sampleBatch,
  sampleBatches,
  upperBound,
} from "@infergrid/kairos";
import { control } from "@infergrid/proto";
import { repoRoot } from "@infergrid/testkit";
import { parse } from "yaml";
import type { DemoService } from "./catalogue.js";
import { type InstanceCount, OptionsError } from "./options.js";

/** The query sizes the load draws from: Kairos's production mix (libs/kairos). */
export const KAIROS_MIX: BatchMix = { kind: "kairos-production" };
/** Kairos's QoS is a p99 target. */
const PERCENTILE = 99;
/** Query sizes the upper bound's standings are computed on (Kairos monitors its last 10,000). */
const MIX_SAMPLE = 10_000;
/** The batch sizes' random stream is the run's seed mixed with this, apart from the arrival times' stream. */
const BATCH_STREAM = 0x6b6169;

export interface KairosSetting {
  model: string;
  qosMs: number;
  scenarioFile: string;
  profilesFile: string;
  /** The --types, in their order, with the paper's prices, their profiles, and as maxCount the backends asked for. */
  types: InstanceType[];
  /** The type that serves every query of the mix within QoS at the best price (libs/kairos upperBound's base). */
  base: string;
  /**
   * A query of more items than this is large: no type but the base one serves it within QoS (the largest
   * profiled batch within QoS of the best other type, libs/kairos's `largestSmallBatch`). Infinity when
   * another type serves every query (or there is no other type): then no query is large.
   */
  largeAbove: number;
  /** The other type whose QoS region sets `largeAbove`; undefined when there is none. */
  cheapest: string | undefined;
  service: DemoService;
}

/** The default profile table: ../shared/profiles beside the repository, read where it is. */
export function defaultProfilesFile(): string {
  return resolve(repoRoot, "..", "shared", "profiles", "kairos-aws-4types.csv");
}

export function scenariosDir(): string {
  return join(repoRoot, "scenarios");
}

/** The models with a Kairos scenario file (scenarios/kairos-<model>.yaml). */
export function kairosModels(dir = scenariosDir()): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((f) => /^kairos-(.+)\.yaml$/.exec(f)?.[1])
    .filter((m): m is string => m !== undefined)
    .sort();
}

/** QoS and price list of one model as its scenario file states them (the paper's numbers). */
function readScenario(file: string, model: string): { qosMs: number; prices: InstanceTypeSpec[] } {
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new OptionsError(`--kairos: cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const fields = typeof doc === "object" && doc !== null ? (doc as Record<string, unknown>) : {};
  if (fields.kind !== "kairos" || fields.model !== model)
    throw new OptionsError(`--kairos: ${file} is not the kind: kairos scenario of model ${model}`);
  const qosMs = fields.qosMs;
  if (typeof qosMs !== "number" || !(qosMs > 0)) throw new OptionsError(`--kairos: ${file} has no positive qosMs`);
  const catalogue = catalogueSpecSchema.safeParse(fields.catalogue);
  if (!catalogue.success)
    throw new OptionsError(`--kairos: ${file}: catalogue: ${catalogue.error.issues.map((i) => i.message).join("; ")}`);
  return { qosMs, prices: catalogue.data.types };
}

/** Reads and checks the setting; every problem is an OptionsError naming the option (exit 2). */
export function loadKairosSetting(
  model: string,
  counts: readonly InstanceCount[],
  profiles: string | undefined,
  seed: number,
): KairosSetting {
  const known = kairosModels();
  if (!known.includes(model)) {
    throw new OptionsError(
      `--kairos: no Kairos scenario for model "${model}" (scenarios/kairos-<model>.yaml; known: ${known.join(", ") || "none"})`,
    );
  }
  const scenarioFile = join(scenariosDir(), `kairos-${model}.yaml`);
  const { qosMs, prices } = readScenario(scenarioFile, model);
  const chosen: InstanceTypeSpec[] = counts.map(({ type, count }) => {
    const price = prices.find((p) => p.name === type);
    if (price === undefined)
      throw new OptionsError(
        `--types: instance type ${type} is not in Kairos's catalogue (${scenarioFile}: ${prices.map((p) => p.name).join(", ")})`,
      );
    if (count > price.maxCount)
      throw new OptionsError(`--types: ${type}=${count} is more than Kairos's limit of ${price.maxCount} for that type`);
    return { ...price, maxCount: count };
  });
  const profilesFile = resolve(profiles ?? defaultProfilesFile());
  if (!existsSync(profilesFile)) throw new OptionsError(`--profiles: no such file: ${profilesFile}`);
  let types: InstanceType[];
  try {
    types = buildCatalogue({ profiles: profilesFile, types: chosen }, readFileSync(profilesFile, "utf8"));
    for (const t of types) profileOf(t, model);
  } catch (err) {
    throw new OptionsError(`--profiles: ${err instanceof Error ? err.message : String(err)}`);
  }
  let bound: ReturnType<typeof upperBound>;
  try {
    bound = upperBound({ types, model, qosMs, batches: sampleBatches(seededRandom(seed), KAIROS_MIX, MIX_SAMPLE) });
  } catch (err) {
    throw new OptionsError(`--types: ${err instanceof Error ? err.message : String(err)}`);
  }
  const standings = bound.standings;
  const base = standings[bound.base];
  if (base === undefined) throw new Error("upper bound without a base type");
  let largeAbove = Number.POSITIVE_INFINITY;
  let cheapest: string | undefined;
  for (const [i, s] of standings.entries()) {
    if (i === bound.base) continue;
    if (cheapest === undefined || s.largestSmallBatch > largeAbove) {
      largeAbove = s.largestSmallBatch;
      cheapest = s.name;
    }
  }
  return {
    model,
    qosMs,
    scenarioFile,
    profilesFile,
    types,
    base: base.name,
    largeAbove,
    cheapest,
    service: kairosService(model, qosMs, types, 1000 / base.qpsAll),
  };
}

/**
 * The one service: the model's per-type profiles, its QoS as the latency threshold at p99, every backend in
 * its list at all times (the pool is the --types; placement, not list length, is what the mode shows). The
 * lognormal profile is only the frontends' service-time prior: the base type's mean over the mix.
 */
function kairosService(model: string, qosMs: number, types: readonly InstanceType[], baseMeanMs: number): DemoService {
  const total = types.reduce((a, t) => a + t.maxCount, 0);
  const spec: control.ServiceSpec.$Properties = {
    name: model,
    model: {
      kind: control.ModelKind.MODEL_KIND_EMULATED,
      profile: { shape: 0, locMs: baseMeanMs, scaleMs: 0 },
      // The local cluster's cold start for emulated models (catalogue.ts's default).
      coldStartMs: 1000,
      instanceProfiles: types.map((t) => ({
        instanceType: t.name,
        points: profileOf(t, model).points.map((p) => ({ batch: p.batch, meanMs: p.meanMs, p99Ms: p.p99Ms })),
      })),
    },
    sla: { latencyThresholdMs: qosMs, percentile: PERCENTILE, burstFactor: 2 },
    minBackends: total,
    maxBackends: total,
    initialBackends: total,
  };
  return { name: model, job: model, spec, meanServiceMs: baseMeanMs, rtMaxMs: qosMs, slMin: PERCENTILE / 100, input: "tiny" };
}

/** The load's batch sizes: Kairos's production mix from the run's seed (a stream apart from the arrivals'). */
export function batchSampler(seed: number): () => number {
  const random = seededRandom(seed ^ BATCH_STREAM);
  return () => sampleBatch(random, KAIROS_MIX);
}

/** Whether a query of `batch` items is large in this setting. */
export function isLarge(setting: Pick<KairosSetting, "largeAbove">, batch: number): boolean {
  return batch > setting.largeAbove;
}
