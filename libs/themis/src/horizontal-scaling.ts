/**
 * Themis's horizontal scaling (Algorithm 2, section 4.4.2): 1-core replicas; for each stage choose the batch b
 * in 1..maxBatch such that l(b, 1) + q(b) fits the SLO and the replicas n = ceil(lambda / h(b, 1)) are fewest.
 *
 * API:
 * - `planHorizontal({ profile, ratePerS, sloMs, maxBatch, maxUtilization?, queueRate?, minInstances? })` ->
 *   `StageConfig` (cores 1) or undefined when no batch fits the SLO even on idle replicas. Ties in n go to the
 *   lower latency (the smaller batch).
 * - `planHorizontalPipeline({ profiles, ratePerS, sloMs, ... })` -> `PipelinePlan` (one `StageConfig` per stage,
 *   `totalCores`, `budgetMs` the whole ms of the SLO used) or undefined: the paper's DP over an integer-ms SLO
 *   budget split across the stages (`pipeline-dp.ts`).
 *
 * With `queueRate: "per-instance"` q(b) = (b - 1) * n / lambda grows with n, so the fewest replicas that carry
 * lambda with batch b are also the lowest-latency ones for that b: one n per b is enough.
 */
import type { ThemisProfile } from "./latency-profile.js";
import { cheapestWithinBudget, type DpOption } from "./pipeline-dp.js";
import {
  budgetMs,
  carries,
  checkRate,
  neededInstances,
  type PlanOptions,
  type ResolvedPlanOptions,
  resolvePlanOptions,
  type StageConfig,
  stageConfig,
} from "./stage-config.js";

export interface HorizontalInput extends PlanOptions {
  profile: ThemisProfile;
  ratePerS: number;
  /** Fewest replicas to keep, even at rate 0 (default 1). */
  minInstances?: number;
}

export interface PipelinePlan {
  stages: StageConfig[];
  totalCores: number;
  /** Whole ms of the SLO the plan's stage latencies (each rounded up) use. */
  budgetMs: number;
}

/** Every batch's 1-core option for one stage, in preference order (smaller batch first). */
function horizontalOptions(profile: ThemisProfile, ratePerS: number, o: ResolvedPlanOptions, minInstances: number): StageConfig[] {
  const out: StageConfig[] = [];
  for (let b = 1; b <= o.maxBatch; b++) {
    const n = neededInstances(profile, b, 1, ratePerS, o.maxUtilization, minInstances);
    const cfg = stageConfig(profile, b, 1, n, ratePerS, o);
    if (carries(cfg, ratePerS, o.sloMs)) out.push(cfg);
  }
  return out;
}

function checkMin(minInstances: number | undefined): number {
  const m = minInstances ?? 1;
  if (!(Number.isInteger(m) && m >= 0)) throw new RangeError(`minInstances must be an integer >= 0, got ${m}`);
  return m;
}

export function planHorizontal(input: HorizontalInput): StageConfig | undefined {
  const o = resolvePlanOptions(input);
  checkRate(input.ratePerS);
  let best: StageConfig | undefined;
  for (const cfg of horizontalOptions(input.profile, input.ratePerS, o, checkMin(input.minInstances))) {
    if (best === undefined || cfg.instances < best.instances || (cfg.instances === best.instances && cfg.latencyMs < best.latencyMs))
      best = cfg;
  }
  return best;
}

export interface HorizontalPipelineInput extends PlanOptions {
  profiles: readonly ThemisProfile[];
  ratePerS: number;
  minInstances?: number;
}

export function planHorizontalPipeline(input: HorizontalPipelineInput): PipelinePlan | undefined {
  const o = resolvePlanOptions(input);
  checkRate(input.ratePerS);
  const min = checkMin(input.minInstances);
  const stages = input.profiles.map((p) =>
    horizontalOptions(p, input.ratePerS, o, min).map(
      (cfg): DpOption<StageConfig> => ({ cost: cfg.instances, budgetMs: budgetMs(cfg.latencyMs), value: cfg }),
    ),
  );
  const r = cheapestWithinBudget(stages, o.sloMs);
  return r && { stages: r.picks, totalCores: r.cost, budgetMs: r.budgetMs };
}
