/**
 * Kairos's configuration choice for one registered service: its model's per-type profiles (from its spec)
 * joined with the cluster's price list, ranked by the upper bound within a budget and picked by Kairos's
 * rule. The allocator runs it at registration (can this service be served at all within the cluster's
 * budget?) and on every slow-loop tick (what mix does its share of the budget buy?).
 */
import { seededRandom } from "@infergrid/core";
import { sampleBatches } from "./batch-sizes.js";
import type { InstanceTypeSpec } from "./catalogue.js";
import { rankConfigurations, selectConfiguration } from "./configuration-search.js";
import type { InstanceType, LatencyProfile } from "./instance-types.js";
import { upperBound } from "./upper-bound.js";

/** What the allocator knows of a service's model: its per-type profiles and its QoS (the SLA's latency threshold). */
export interface ServiceModel {
  profiles: ReadonlyMap<string, LatencyProfile>;
  qosMs: number;
}

export interface ServiceConfiguration {
  /** Instances per type (every profiled type of the price list, 0 included), in the price list's order. */
  counts: Map<string, number>;
  costPerHour: number;
  /** Kairos's throughput upper bound of the configuration, queries per second. */
  bound: number;
  /** The base type: the most cost-effective one that meets QoS for every query. */
  base: string;
}

/** The model's name inside a one-service catalogue. */
const MODEL = "service";
/** Enumerating more configurations than this would stall the allocator's loop: refused with a clear error. */
export const MAX_CONFIGURATIONS = 200_000;

/**
 * Query sizes assumed until a service's own are measured: Kairos's production mix, from a fixed seed so
 * that the same spec always gets the same configuration.
 */
export const ASSUMED_BATCHES: readonly number[] = sampleBatches(seededRandom(15), { kind: "kairos-production" }, 10_000);

/** The price list's types the service has profiles for, in the price list's order. */
function catalogueOf(model: ServiceModel, prices: readonly InstanceTypeSpec[]): InstanceType[] {
  return prices.flatMap((t) => {
    const profile = model.profiles.get(t.name);
    return profile === undefined ? [] : [{ ...t, profiles: new Map([[MODEL, profile]]) }];
  });
}

/**
 * The configuration Kairos picks for `model` within `budgetPerHour` (and each type's remaining `limits`,
 * when other services already hold some). Throws, saying why, when no profiled type is in the price list,
 * when no type meets QoS for every query of the mix (there is no base type), when the budget buys not even
 * one base instance (unless `atLeastOneBase`), when the base type has no instance left under `limits`, or
 * when the space is too large to enumerate.
 */
export function serviceConfiguration(
  model: ServiceModel,
  prices: readonly InstanceTypeSpec[],
  budgetPerHour: number,
  options: {
    limits?: ReadonlyMap<string, number>;
    batches?: readonly number[];
    /** Raise the budget to one base instance's price when it is below it (a service is never left with nothing). */
    atLeastOneBase?: boolean;
  } = {},
): ServiceConfiguration {
  const profiled = catalogueOf(model, prices);
  if (profiled.length === 0) {
    throw new Error(
      `none of the profiled types (${[...model.profiles.keys()].join(", ")}) is in the price list (${prices.map((p) => p.name).join(", ")})`,
    );
  }
  // A type other services hold all of is not there to choose (nor to be the base).
  const types = profiled
    .map((t) => ({ ...t, maxCount: Math.min(t.maxCount, options.limits?.get(t.name) ?? Number.POSITIVE_INFINITY) }))
    .filter((t) => t.maxCount > 0);
  if (types.length === 0) throw new Error(`no instance of its types (${profiled.map((t) => t.name).join(", ")}) is left`);
  const space = types.reduce((n, t) => n * (Math.min(t.maxCount, Math.floor(budgetPerHour / t.pricePerHour)) + 1), 1);
  if (space > MAX_CONFIGURATIONS) {
    throw new Error(
      `${space} configurations within ${budgetPerHour} USD/h: more than the ${MAX_CONFIGURATIONS} the search enumerates; lower the types' maxCount`,
    );
  }
  let bound: ReturnType<typeof upperBound>;
  try {
    bound = upperBound({ types, model: MODEL, qosMs: model.qosMs, batches: options.batches ?? ASSUMED_BATCHES });
  } catch (err) {
    throw new Error(`no configuration can serve it within QoS ${model.qosMs} ms: ${(err as Error).message}`);
  }
  const baseType = types[bound.base] as InstanceType;
  const budget = options.atLeastOneBase ? Math.max(budgetPerHour, baseType.pricePerHour) : budgetPerHour;
  const pick = selectConfiguration(rankConfigurations(types, bound, budget), bound.base);
  return {
    counts: new Map(types.map((t, i) => [t.name, pick.counts[i] ?? 0])),
    costPerHour: pick.costPerHour,
    bound: pick.bound,
    base: baseType.name,
  };
}

/** Why `model` cannot be served within `budgetPerHour` (undefined when it can): what registration refuses. */
export function servingProblem(model: ServiceModel, prices: readonly InstanceTypeSpec[], budgetPerHour: number): string | undefined {
  try {
    serviceConfiguration(model, prices, budgetPerHour);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
