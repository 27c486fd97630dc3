/**
 * A Kairos scenario's runs: per seed, each policy's configuration and its measured throughput at QoS, and
 * the ratio to the best homogeneous configuration within the budget. The policies:
 * - infergrid: KAIROS+'s pruned walk down the upper-bound ranking, each candidate evaluated in this simulator
 *   on the monitored query mix and the profiles (a separate seed from the measured runs): the evaluations
 *   cost CPU time, not online trials on the pool; Kairos's matching.
 * - kairos: Kairos as published, its selection rule from the top of the ranking and its matching.
 * - homogeneous: every single-type pool the budget buys (up to the type's limit) with FCFS, the best kept;
 *   its throughput is also scaled up to the whole budget, as Kairos credits it.
 * - kairos-fcfs: Kairos's configuration with FCFS preferring the base type (Ribbon's dispatch): the share
 *   of the gain that is the matching's.
 * - random: Kairos's configuration with each query sent to a free instance drawn uniformly.
 */
import { seededRandom } from "@infergrid/core";
import {
  type Configuration,
  chooseConfiguration,
  heterogeneityCoefficients,
  type InstanceType,
  kairosMatch,
  type MatchingContext,
  type PendingQuery,
  type PoolInstance,
  profileOf,
  rankConfigurations,
  sampleBatches,
  selectConfiguration,
  serviceMs,
  upperBound,
} from "@infergrid/kairos";
import { type PoolDispatch, type PoolResult, type PoolSetting, simulatePool, throughputAtQos } from "./kairos-pool.js";
import type { KairosPolicy, KairosScenario } from "./kairos-scenario.js";

export interface KairosPolicyRun {
  policy: KairosPolicy;
  seed: number;
  counts: number[];
  costPerHour: number;
  bound: number;
  /** Queries per second at QoS, measured. */
  throughput: number;
  /** For homogeneous: the throughput scaled to the whole budget (Kairos's credit for unspent budget). */
  creditedThroughput: number;
  /** Configurations simulated to choose (infergrid only; 0 for the others). */
  evaluations: number;
  /** The run at 90 % of the measured throughput: where each type's queries went. */
  perType: PoolResult["perType"];
}

export interface KairosScenarioResult {
  scenario: KairosScenario;
  base: string;
  coefficients: number[];
  /** In-budget configurations ranked, and the time to compute and rank all their bounds. */
  configurations: number;
  rankingMs: number;
  /** Mean time of one matching decision at 20 pending queries x 20 instances. */
  matchingMsAt20x20: number;
  runs: KairosPolicyRun[];
}

const DISPATCH: Record<KairosPolicy, PoolDispatch> = {
  infergrid: "kairos",
  kairos: "kairos",
  homogeneous: "fcfs",
  "kairos-fcfs": "fcfs",
  random: "random",
};

function matchingTime(setting: PoolSetting): number {
  const random = seededRandom(99);
  const n = 20;
  const ctx: MatchingContext = {
    serviceMs: (t, b) => serviceMs(profileOf(setting.types[t] as InstanceType, setting.model), b),
    coefficients: setting.coefficients,
    qosMs: setting.qosMs,
    safeguard: setting.safeguard,
  };
  const queries: PendingQuery[] = sampleBatches(random, setting.mix, n).map((batch, i) => ({ batch, waitedMs: i }));
  const pool: PoolInstance[] = Array.from({ length: n }, (_, j) => ({ type: j % setting.types.length, busyForMs: j % 3 === 0 ? 2 : 0 }));
  const reps = 2000;
  for (let i = 0; i < 200; i++) kairosMatch(queries, pool, ctx);
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) kairosMatch(queries, pool, ctx);
  return (performance.now() - t0) / reps;
}

export function runKairosScenario(s: KairosScenario, onRun?: (done: number, total: number) => void): KairosScenarioResult {
  const monitored = sampleBatches(seededRandom(50_000), s.mix, s.monitoredQueries);
  const t0 = performance.now();
  const ub = upperBound({ types: s.types, model: s.model, qosMs: s.qosMs, batches: monitored });
  const ranked = rankConfigurations(s.types, ub, s.budgetPerHour);
  const rankingMs = performance.now() - t0;
  const setting: PoolSetting = {
    types: s.types,
    model: s.model,
    qosMs: s.qosMs,
    base: ub.base,
    coefficients: heterogeneityCoefficients(s.types, s.model, ub.base, s.largestBatch),
    safeguard: s.safeguard,
    mix: s.mix,
    queries: s.queries,
    target: s.target,
  };
  const kairosPick = selectConfiguration(ranked, ub.base);
  // infergrid's choice does not depend on the measured seed: it is made once, on its own evaluation runs.
  let infergrid: { pick: Configuration; evaluations: number } | undefined;
  const chooseInfergrid = () => {
    if (infergrid === undefined) {
      // Evaluation runs on their own seeds, never the measured ones: what the system would simulate for itself.
      const evalSetting = { ...setting, queries: s.search.queries };
      const evaluate = (c: Configuration) =>
        s.search.seeds.reduce((sum, seed) => sum + throughputAtQos(evalSetting, c.counts, "kairos", c.bound, seed), 0) /
        s.search.seeds.length;
      const r = chooseConfiguration(ranked, ub.base, evaluate, { maxEvaluations: s.search.maxEvaluations, margin: s.search.margin });
      infergrid = { pick: r.best, evaluations: r.evaluations };
    }
    return infergrid;
  };
  const homogeneous = s.types.flatMap((t, i) => {
    const n = Math.min(t.maxCount, Math.floor(s.budgetPerHour / t.pricePerHour + 1e-9));
    if (n === 0) return [];
    const counts = s.types.map((_, j) => (j === i ? n : 0));
    return [{ counts, costPerHour: n * t.pricePerHour, bound: ub.of(counts) }];
  });
  const runs: KairosPolicyRun[] = [];
  const total = s.policies.length * s.seeds.length;
  for (const seed of s.seeds) {
    for (const policy of s.policies) {
      const measure = (c: Pick<Configuration, "counts" | "bound">) =>
        throughputAtQos(setting, c.counts, DISPATCH[policy], Math.max(1, c.bound), seed);
      let config: Pick<Configuration, "counts" | "bound" | "costPerHour">;
      let throughput: number;
      let evaluations = 0;
      if (policy === "homogeneous") {
        // The best single-type pool, FCFS; a type that cannot meet QoS for its share of queries scores 0.
        const scored = homogeneous.map((c) => ({ c, q: measure({ ...c, bound: Math.max(c.bound, 1) }) }));
        const best = scored.reduce((a, b) =>
          b.q * (s.budgetPerHour / b.c.costPerHour) > a.q * (s.budgetPerHour / a.c.costPerHour) ? b : a,
        );
        config = best.c;
        throughput = best.q;
      } else {
        if (policy === "infergrid") {
          const chosen = chooseInfergrid();
          config = chosen.pick;
          evaluations = chosen.evaluations;
        } else config = kairosPick;
        throughput = measure(config);
      }
      const at = simulatePool(setting, config.counts, DISPATCH[policy], Math.max(throughput * 0.9, 1e-3), seed);
      runs.push({
        policy,
        seed,
        counts: [...config.counts],
        costPerHour: config.costPerHour,
        bound: config.bound,
        throughput,
        creditedThroughput: policy === "homogeneous" ? throughput * (s.budgetPerHour / config.costPerHour) : throughput,
        evaluations,
        perType: at.perType,
      });
      onRun?.(runs.length, total);
    }
  }
  return {
    scenario: s,
    base: (s.types[ub.base] as InstanceType).name,
    coefficients: [...setting.coefficients],
    configurations: ranked.length,
    rankingMs,
    matchingMsAt20x20: matchingTime(setting),
    runs,
  };
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/** The report: per policy, configuration, cost, bound, throughput at QoS (mean, min-max over seeds), ratio. */
export function kairosMarkdown(r: KairosScenarioResult): string {
  const s = r.scenario;
  const typeNames = s.types.map((t) => t.name);
  const homog = mean(r.runs.filter((x) => x.policy === "homogeneous").map((x) => x.creditedThroughput));
  const lines = [
    `# ${s.name}: ${s.model}, QoS p${Math.round(s.target * 100)} <= ${s.qosMs} ms, budget ${s.budgetPerHour} USD/h`,
    "",
    s.description,
    "",
    `Types (counts in this order): ${typeNames.join(", ")}. Base type: ${r.base}. Heterogeneity coefficients: ${r.coefficients.map((c) => c.toFixed(2)).join(", ")}.`,
    `${r.configurations} configurations in budget, bounds computed and ranked in ${r.rankingMs.toFixed(1)} ms; one matching decision at 20 x 20: ${(r.matchingMsAt20x20 * 1000).toFixed(1)} µs.`,
    `Throughput at QoS: the highest Poisson arrival rate at which ${(s.target * 100).toFixed(0)} % of ${s.queries} queries finish within QoS; seeds ${s.seeds.join(", ")}.`,
    "",
    "| policy | configuration | USD/h | upper bound | throughput at QoS (mean, min-max) | vs best homogeneous | configurations simulated |",
    "|---|---|---|---|---|---|---|",
  ];
  for (const policy of s.policies) {
    const rs = r.runs.filter((x) => x.policy === policy);
    if (rs.length === 0) continue;
    const q = rs.map((x) => x.creditedThroughput);
    const configs = [...new Set(rs.map((x) => x.counts.join(", ")))].map((c) => `(${c})`).join(" / ");
    const credited = policy === "homogeneous" ? " (credited to the whole budget)" : "";
    lines.push(
      `| ${policy} | ${configs} | ${mean(rs.map((x) => x.costPerHour)).toFixed(3)} | ${mean(rs.map((x) => x.bound)).toFixed(1)} | ` +
        `${mean(q).toFixed(1)} (${Math.min(...q).toFixed(1)}-${Math.max(...q).toFixed(1)})${credited} | ${(mean(q) / homog).toFixed(2)}x | ${rs[0]?.evaluations ?? 0} |`,
    );
  }
  lines.push("", "Where queries went, at 90 % of each policy's throughput (first seed): queries per type, mean batch, mean latency.", "");
  for (const policy of s.policies) {
    const run = r.runs.find((x) => x.policy === policy);
    if (run === undefined) continue;
    if (run.throughput === 0) {
      lines.push(`- ${policy}: misses QoS for more than ${((1 - s.target) * 100).toFixed(0)} % of queries at any rate`);
      continue;
    }
    const shares = run.perType
      .filter((p) => p.queries > 0)
      .map((p) => `${p.name} ${p.queries} (batch ${p.meanBatch.toFixed(0)}, ${p.meanMs.toFixed(1)} ms)`)
      .join("; ");
    lines.push(`- ${policy}: ${shares}`);
  }
  return `${lines.join("\n")}\n`;
}
