/**
 * Choosing a heterogeneous configuration under a budget without online trials (Kairos, section 5.2): every
 * in-budget configuration is ranked by its throughput upper bound, and one is picked from the top by
 * Kairos's similarity rule. KAIROS+ (Algorithm 1) spends evaluations instead, walking the ranking and
 * pruning by bound and by sub-configuration; here an evaluation is whatever the caller passes (the system
 * evaluates candidates in its own simulator on the learned profiles, so still without trials on the pool).
 */
import type { InstanceType } from "./instance-types.js";
import type { UpperBound } from "./upper-bound.js";

export interface Configuration {
  /** Instances per type, in the catalogue's order. */
  counts: readonly number[];
  costPerHour: number;
  bound: number;
}

/** 1e-9 USD/h of slack so that a budget equal to a sum of prices admits it despite rounding. */
const BUDGET_EPS = 1e-9;

/**
 * Every configuration with at least one base instance, each type within its limit and the total within the
 * budget, ranked by bound (highest first; cheaper first on ties). Throws when none fits the budget.
 */
export function rankConfigurations(types: readonly InstanceType[], bound: UpperBound, budgetPerHour: number): Configuration[] {
  if (!(budgetPerHour > 0)) throw new Error(`budget must be a positive USD per hour, got ${budgetPerHour}`);
  const out: Configuration[] = [];
  const counts = types.map(() => 0);
  const walk = (i: number, cost: number) => {
    if (i === types.length) {
      if ((counts[bound.base] ?? 0) >= 1) out.push({ counts: [...counts], costPerHour: cost, bound: bound.of(counts) });
      return;
    }
    const t = types[i] as InstanceType;
    for (let n = 0; n <= t.maxCount && cost + n * t.pricePerHour <= budgetPerHour + BUDGET_EPS; n++) {
      counts[i] = n;
      walk(i + 1, cost + n * t.pricePerHour);
    }
    counts[i] = 0;
  };
  walk(0, 0);
  if (out.length === 0) {
    const base = types[bound.base] as InstanceType;
    throw new Error(
      `budget ${budgetPerHour} USD/h buys no configuration: one ${base.name}, the base type, costs ${base.pricePerHour} USD/h`,
    );
  }
  return out.sort((a, b) => b.bound - a.bound || a.costPerHour - b.costPerHour);
}

const sqDistance = (a: readonly number[], b: readonly number[]) => a.reduce((s, x, i) => s + (x - (b[i] ?? 0)) ** 2, 0);

/**
 * Kairos's pick from a ranking: the top configuration when the top three agree on the number of base
 * instances; otherwise, of the top ten, the one with the least sum of squared distances to the other nine
 * (the centroid of the high-bound region).
 */
export function selectConfiguration(ranked: readonly Configuration[], base: number): Configuration {
  const top = ranked[0];
  if (top === undefined) throw new Error("no configuration to select from");
  const three = ranked.slice(0, 3);
  if (three.every((c) => c.counts[base] === top.counts[base])) return top;
  const ten = ranked.slice(0, 10);
  let best = top;
  let bestSum = Number.POSITIVE_INFINITY;
  for (const c of ten) {
    const sum = ten.reduce((s, o) => s + sqDistance(c.counts, o.counts), 0);
    if (sum < bestSum) [best, bestSum] = [c, sum];
  }
  return best;
}

const isSubConfiguration = (sub: readonly number[], of: readonly number[]) => sub.every((n, i) => n <= (of[i] ?? 0));

export interface PrunedSearch {
  best: Configuration;
  throughput: number;
  evaluations: number;
}

/**
 * KAIROS+ (Algorithm 1): evaluate in bound order; after each evaluation drop every configuration whose bound
 * does not beat the best throughput so far and every sub-configuration of the one evaluated. `maxEvaluations`
 * stops early (the best so far is returned).
 */
export function prunedSearch(
  ranked: readonly Configuration[],
  evaluate: (c: Configuration) => number,
  maxEvaluations = Number.POSITIVE_INFINITY,
  start?: { config: Configuration; throughput: number },
): PrunedSearch {
  const alive = new Set(ranked);
  let best: Configuration | undefined = start?.config;
  let throughput = start?.throughput ?? Number.NEGATIVE_INFINITY;
  let evaluations = 0;
  if (start !== undefined) {
    // An already evaluated starting point prunes as an evaluation would.
    for (const o of alive) if (o.bound <= throughput || isSubConfiguration(o.counts, start.config.counts)) alive.delete(o);
  }
  for (const c of ranked) {
    if (!alive.has(c) || evaluations >= maxEvaluations) continue;
    const q = evaluate(c);
    evaluations++;
    if (q > throughput) {
      [best, throughput] = [c, q];
      for (const o of alive) if (o.bound <= throughput) alive.delete(o);
    }
    for (const o of alive) if (isSubConfiguration(o.counts, c.counts)) alive.delete(o);
  }
  if (best === undefined) throw new Error("no configuration to search");
  return { best, throughput, evaluations };
}

export interface ConfigurationChoice extends PrunedSearch {
  /** Kairos's own pick (selectConfiguration) and its evaluated throughput. */
  kairos: Configuration;
  kairosThroughput: number;
}

/**
 * The system's choice: Kairos's pick, evaluated, then KAIROS+'s pruned search from it; another configuration
 * replaces Kairos's pick only when its evaluation beats it by more than `margin` (a share: evaluations are
 * noisy, and a change of configuration costs cold starts). Evaluations are the caller's: the system runs
 * them in its simulator on the learned profiles and query mix, never as trials on the live pool.
 */
export function chooseConfiguration(
  ranked: readonly Configuration[],
  base: number,
  evaluate: (c: Configuration) => number,
  options: { maxEvaluations: number; margin: number },
): ConfigurationChoice {
  const kairos = selectConfiguration(ranked, base);
  const kairosThroughput = evaluate(kairos);
  const r = prunedSearch(ranked, evaluate, options.maxEvaluations - 1, {
    config: kairos,
    throughput: kairosThroughput * (1 + options.margin),
  });
  const switched = r.best !== kairos;
  return {
    kairos,
    kairosThroughput,
    best: switched ? r.best : kairos,
    throughput: switched ? r.throughput : kairosThroughput,
    evaluations: r.evaluations + 1,
  };
}
