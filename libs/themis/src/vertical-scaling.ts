/**
 * Themis's vertical scaling (Algorithm 1, section 4.4.1): the n warm instances of a stage all get the same
 * cores c (section 5.2.2: an even split gives the most throughput) and a batch b, so that n * h(b, c) carries
 * lambda and l(b, c) + q(b) fits the SLO with the fewest cores n * c. When no (b, c) carries lambda, the warm
 * instances carry the most they can and new instances are planned for the rest.
 *
 * API:
 * - `planVertical({ profile, ratePerS, warmInstances, maxCores, sloMs, maxBatch, maxUtilization?, queueRate?,
 *   newInstanceCores? })` -> `VerticalPlan`: `warm` (cores and batch for every warm instance, judged at the
 *   rate they carry; undefined when there are none), `carriedPerS`, `carriesAll`, `restPerS` (lambda minus what
 *   the warm ones carry), `fresh` (the new instances to start for the rest: cores, batch, count; undefined when
 *   none are needed or none can serve).
 * - `maxCarriedRate(...)`: the most the n warm instances carry within the SLO at up to `maxCores`.
 * - `planVerticalPipeline({ profiles, warmInstances[], ... })`: the DP over the SLO budget across stages.
 *
 * Choices where the paper is silent or where this system differs (README.md says why):
 * - The cost is n * c (the IP's objective, Eq. 6); ties go to the lower latency, then the smaller batch.
 * - The most the warm instances carry is computed exactly for one stage: for a fixed (b, c) the rates it
 *   carries form an interval [lower, n * h] (q(b) shrinks as the rate grows), so the most it carries up to
 *   lambda is min(n * h, lambda) when that rate fits. A binary search over the rate (the paper's) assumes
 *   feasibility is monotone in the rate, which Eq. 4 breaks; it stays for pipelines, over the candidate rates.
 * - New instances are 1-core replicas from Algorithm 2 by default (`newInstanceCores: "one"`): per section
 *   5.1.1 they give the most throughput per core, and the transition rule moves to them anyway; `"same"` gives
 *   them the warm instances' (c, b), as Algorithm 1's last line says.
 */
import { type PipelinePlan, planHorizontal, planHorizontalPipeline } from "./horizontal-scaling.js";
import type { ThemisProfile } from "./latency-profile.js";
import { cheapestWithinBudget, type DpOption } from "./pipeline-dp.js";
import {
  budgetMs,
  carries,
  checkCores,
  checkRate,
  neededInstances,
  type PlanOptions,
  type ResolvedPlanOptions,
  resolvePlanOptions,
  type StageConfig,
  stageConfig,
} from "./stage-config.js";

export type NewInstanceCores = "one" | "same";

export interface VerticalInput extends PlanOptions {
  profile: ThemisProfile;
  ratePerS: number;
  /** Warm instances of the stage, >= 0. */
  warmInstances: number;
  /** Most cores one instance may have (its node's limit). */
  maxCores: number;
  newInstanceCores?: NewInstanceCores;
}

export interface VerticalPlan {
  warm: StageConfig | undefined;
  carriedPerS: number;
  carriesAll: boolean;
  restPerS: number;
  fresh: StageConfig | undefined;
}

function checkWarm(n: number): void {
  if (!(Number.isInteger(n) && n >= 0)) throw new RangeError(`warmInstances must be an integer >= 0, got ${n}`);
}

function better(a: StageConfig, b: StageConfig | undefined): boolean {
  if (b === undefined) return true;
  const ca = a.instances * a.cores;
  const cb = b.instances * b.cores;
  if (ca !== cb) return ca < cb;
  if (a.latencyMs !== b.latencyMs) return a.latencyMs < b.latencyMs;
  return a.batch < b.batch;
}

/** Every (c, b) for n instances that carries `ratePerS`, in preference order (fewer cores, then smaller batch). */
function verticalOptions(profile: ThemisProfile, n: number, maxCores: number, ratePerS: number, o: ResolvedPlanOptions): StageConfig[] {
  const out: StageConfig[] = [];
  for (let c = 1; c <= maxCores; c++) {
    for (let b = 1; b <= o.maxBatch; b++) {
      const cfg = stageConfig(profile, b, c, n, ratePerS, o);
      if (carries(cfg, ratePerS, o.sloMs)) out.push(cfg);
    }
  }
  return out;
}

function cheapestVertical(
  profile: ThemisProfile,
  n: number,
  maxCores: number,
  ratePerS: number,
  o: ResolvedPlanOptions,
): StageConfig | undefined {
  let best: StageConfig | undefined;
  for (const cfg of verticalOptions(profile, n, maxCores, ratePerS, o)) if (better(cfg, best)) best = cfg;
  return best;
}

/** The most of `ratePerS` that n instances of up to `maxCores` carry within the SLO (0 when none fits). */
export function maxCarriedRate(input: VerticalInput): number {
  const o = resolvePlanOptions(input);
  checkRate(input.ratePerS);
  checkWarm(input.warmInstances);
  checkCores("maxCores", input.maxCores);
  return carriedUpTo(input.profile, input.warmInstances, input.maxCores, input.ratePerS, o);
}

function carriedUpTo(profile: ThemisProfile, n: number, maxCores: number, ratePerS: number, o: ResolvedPlanOptions): number {
  if (n === 0) return 0;
  let most = 0;
  for (let c = 1; c <= maxCores; c++) {
    for (let b = 1; b <= o.maxBatch; b++) {
      const r = Math.min(stageConfig(profile, b, c, n, ratePerS, o).capacityPerS, ratePerS);
      if (r > most && carries(stageConfig(profile, b, c, n, r, o), r, o.sloMs)) most = r;
    }
  }
  return most;
}

export function planVertical(input: VerticalInput): VerticalPlan {
  const o = resolvePlanOptions(input);
  const lambda = input.ratePerS;
  checkRate(lambda);
  checkWarm(input.warmInstances);
  checkCores("maxCores", input.maxCores);
  const n = input.warmInstances;
  if (n > 0) {
    const all = cheapestVertical(input.profile, n, input.maxCores, lambda, o);
    if (all) return { warm: all, carriedPerS: lambda, carriesAll: true, restPerS: 0, fresh: undefined };
  }
  const carried = carriedUpTo(input.profile, n, input.maxCores, lambda, o);
  // Nothing fits even the smallest share: the warm ones still get every core they may have (section 5.1.2).
  const warm =
    n === 0
      ? undefined
      : carried > 0
        ? cheapestVertical(input.profile, n, input.maxCores, carried, o)
        : stageConfig(input.profile, 1, input.maxCores, n, lambda, o);
  const rest = Math.max(0, lambda - carried);
  return { warm, carriedPerS: carried, carriesAll: false, restPerS: rest, fresh: freshInstances(input, o, warm, rest) };
}

function freshInstances(
  input: VerticalInput,
  o: ResolvedPlanOptions,
  warm: StageConfig | undefined,
  rest: number,
): StageConfig | undefined {
  if (rest <= 0) return undefined;
  if ((input.newInstanceCores ?? "one") === "same" && warm !== undefined) {
    const k = neededInstances(input.profile, warm.batch, warm.cores, rest, o.maxUtilization);
    const cfg = stageConfig(input.profile, warm.batch, warm.cores, k, rest, o);
    if (carries(cfg, rest, o.sloMs)) return cfg;
  }
  return planHorizontal({ ...o, profile: input.profile, ratePerS: rest });
}

export interface VerticalPipelineInput extends PlanOptions {
  profiles: readonly ThemisProfile[];
  warmInstances: readonly number[];
  ratePerS: number;
  maxCores: number;
}

export interface VerticalPipelinePlan {
  /** Per stage; undefined where nothing fits (only when `carriesAll` is false). */
  stages: StageConfig[] | undefined;
  totalCores: number;
  carriedPerS: number;
  carriesAll: boolean;
  restPerS: number;
  /** 1-core replicas for the rest (Algorithm 2 on `restPerS`). */
  fresh: PipelinePlan | undefined;
}

function verticalPipelineAt(input: VerticalPipelineInput, o: ResolvedPlanOptions, ratePerS: number) {
  const stages = input.profiles.map((p, s) => {
    const n = input.warmInstances[s] ?? 0;
    if (n === 0) return [];
    return verticalOptions(p, n, input.maxCores, ratePerS, o).map(
      (cfg): DpOption<StageConfig> => ({ cost: cfg.instances * cfg.cores, budgetMs: budgetMs(cfg.latencyMs), value: cfg }),
    );
  });
  return cheapestWithinBudget(stages, o.sloMs);
}

export function planVerticalPipeline(input: VerticalPipelineInput): VerticalPipelinePlan {
  const o = resolvePlanOptions(input);
  checkRate(input.ratePerS);
  checkCores("maxCores", input.maxCores);
  if (input.warmInstances.length !== input.profiles.length) {
    throw new RangeError(`warmInstances has ${input.warmInstances.length} entries for ${input.profiles.length} stages`);
  }
  for (const n of input.warmInstances) checkWarm(n);
  const lambda = input.ratePerS;
  const all = verticalPipelineAt(input, o, lambda);
  if (all) return { stages: all.picks, totalCores: all.cost, carriedPerS: lambda, carriesAll: true, restPerS: 0, fresh: undefined };
  // The binary search of Algorithm 1 (lines 22-29), over the rates at which some stage's capacity ends.
  const candidates = new Set<number>();
  input.profiles.forEach((p, s) => {
    const n = input.warmInstances[s] ?? 0;
    for (let c = 1; c <= input.maxCores; c++) {
      for (let b = 1; b <= o.maxBatch; b++) {
        const cap = stageConfig(p, b, c, n, lambda, o).capacityPerS;
        if (cap > 0 && cap < lambda) candidates.add(cap);
      }
    }
  });
  const sorted = [...candidates].sort((a, b) => a - b);
  let lo = -1;
  let hi = sorted.length;
  let found: ReturnType<typeof verticalPipelineAt>;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    const r = verticalPipelineAt(input, o, sorted[mid] ?? 0);
    if (r) {
      lo = mid;
      found = r;
    } else hi = mid;
  }
  const carried = lo >= 0 ? (sorted[lo] ?? 0) : 0;
  const rest = lambda - carried;
  return {
    stages: found?.picks,
    totalCores: found?.cost ?? 0,
    carriedPerS: carried,
    carriesAll: false,
    restPerS: rest,
    fresh: planHorizontalPipeline({ ...o, profiles: input.profiles, ratePerS: rest }),
  };
}
