/**
 * Themis's transition rule (section 5, Fig. 4) and the baselines, as pure state machines over ticks. The caller
 * owns time and the backends; each tick it passes what it sees and applies the decision.
 *
 * API:
 * - `TickInput`: `nowMs`, `ratePerS` (current arrival rate), `predictedPeakPerS` (the caller's forecast of the
 *   next window's peak), `warm` (backends serving: id, cores, batch), `starting` (backends not yet warm: id,
 *   cores, readyAtMs), `service` (`profile`, `sloMs`, `maxCores` = the node's limit per backend, `maxBatch`).
 * - `TickDecision`: `mode`, `targets` (cores and batch for every warm backend, unchanged ones included),
 *   `start` (new backends: cores and batch), `remove` (ids, warm or starting), `reason` (for the log).
 * - `ScalingPolicy`: `name`, `initialState()`, `step(state, input)` -> `{ state, decision }`; the state is a plain
 *   object the caller keeps between ticks.
 * - Policies: `themisPolicy(options)` (the rule), `publishedThemisPolicy()` (`THEMIS_PUBLISHED`: the paper's
 *   parameters and reference implementation's choices), `infergridPolicy()` (`INFERGRID_THEMIS`: this
 *   system's default), `horizontalOnlyPolicy()` (Algorithm 2 only, 1-core replicas), `verticalOnlyPolicy()`
 *   (Sponge extended as in the paper: a fixed set of instances, only c and b change), `scalingPolicy(name)`.
 *
 * The rule, per tick (README.md has the reasons). "The peak" is the highest of the last `peakHoldTicks` forecast
 * peaks (max of rate and forecast; 1 tick as published).
 * 1. Surge: the warm backends at their current cores cannot carry the rate within the SLO with any batch ->
 *    vertical at once (Algorithm 1; every warm backend to the same c, never below its current cores), plus new
 *    backends for what the node limit leaves uncarried, plus (if `startHorizontalInSurge` and the forecast says
 *    the load stays) the 1-core replicas the horizontal plan needs, so they warm while vertical absorbs.
 * 2. Stable for K ticks in a row (`stability`: Algorithm 2 gives the same configuration for the current rate and
 *    the forecast, as published; or its configuration for the peak is unchanged) -> horizontal: start the 1-core
 *    replicas this tick's forecast needs minus those running or starting; only once enough are warm to carry
 *    the peak, shrink every warm backend to 1 core (with `shrinkWhenWarmCarries`, as soon as they are, stable or
 *    not). Cores never go down otherwise.
 * 3. Surplus replicas (more than Algorithm 2 needs for the peak) are removed once the surplus has held for
 *    `scaleDownDelayMs` (and, as published, on a stable tick), down to the most needed meanwhile.
 */
import { planHorizontal } from "./horizontal-scaling.js";
import { processingMs, type ThemisProfile, throughputPerS } from "./latency-profile.js";
import { type QueueRate, type ResolvedPlanOptions, resolvePlanOptions, type StageConfig, stageQueueMs, withinSlo } from "./stage-config.js";
import { type NewInstanceCores, planVertical } from "./vertical-scaling.js";

export interface ServiceSpec {
  profile: ThemisProfile;
  sloMs: number;
  /** Most cores one backend may have (its node's limit). */
  maxCores: number;
  maxBatch: number;
}

export interface WarmBackend {
  id: string;
  cores: number;
  batch: number;
}

export interface StartingBackend {
  id: string;
  cores: number;
  readyAtMs: number;
}

export interface TickInput {
  nowMs: number;
  ratePerS: number;
  /** Forecast peak rate of the next window (the paper's LSTM predicts the next 10 s maximum). */
  predictedPeakPerS: number;
  warm: readonly WarmBackend[];
  starting: readonly StartingBackend[];
  service: ServiceSpec;
}

export type ScalingMode = "horizontal" | "vertical";

export interface BackendTarget {
  id: string;
  cores: number;
  batch: number;
}

export interface NewBackend {
  cores: number;
  batch: number;
}

export interface TickDecision {
  mode: ScalingMode;
  targets: BackendTarget[];
  start: NewBackend[];
  remove: string[];
  reason: string;
}

export interface TransitionState {
  mode: ScalingMode;
  /** Consecutive ticks judged stable. */
  stableTicks: number;
  /** Algorithm 2's configuration for the predicted peak at the last stable tick. */
  stableConfig: { instances: number; batch: number } | null;
  /** Since when more replicas run than needed (null: not in surplus). */
  surplusSinceMs: number | null;
  /** The most replicas needed since `surplusSinceMs`. */
  surplusNeed: number;
  /** Vertical-only: since when fewer cores would do, and the most cores needed since then. */
  shrinkSinceMs: number | null;
  shrinkCores: number;
  /** The last forecast peaks (max of rate and forecast), newest last, as many as `peakHoldTicks`. */
  recentPeaks: number[];
}

export type PolicyName = "infergrid" | "themis" | "horizontal-only" | "vertical-only";
export const POLICY_NAMES: readonly PolicyName[] = ["infergrid", "themis", "horizontal-only", "vertical-only"];

export interface ScalingPolicy {
  readonly name: PolicyName;
  initialState(): TransitionState;
  step(state: TransitionState, input: TickInput): { state: TransitionState; decision: TickDecision };
}

export interface ThemisOptions {
  /** K: consecutive stable ticks before moving to horizontal. */
  stableTicks: number;
  /** How long a replica surplus must hold before replicas are removed, ms. */
  scaleDownDelayMs: number;
  /** Capacity counted as n * h * u. */
  maxUtilization: number;
  queueRate: QueueRate;
  /** Cores of the backends started when vertical scaling alone cannot carry the rate. */
  newInstanceCores: NewInstanceCores;
  /** In a surge the forecast says stays, start the horizontal plan's replicas while vertical absorbs. */
  startHorizontalInSurge: boolean;
  /** In horizontal mode, start the replicas the predicted peak needs before it comes. */
  proactiveStart: boolean;
  /**
   * When a tick counts as stable: `"now-equals-peak"` (the paper, section 5.1.3: Algorithm 2 gives the same
   * configuration for the current rate and the predicted peak) or `"peak-unchanged"` (Algorithm 2's
   * configuration for the predicted peak is the one it was the tick before).
   */
  stability: Stability;
  /** Remove surplus replicas only on stable ticks (the paper removes them at the horizontal step). */
  removeOnlyWhenStable: boolean;
  /**
   * Count stable ticks afresh after each horizontal step (the reference adapter resets its stabilization counter
   * whenever it applies Algorithm 2, so it acts at most every K + 1 ticks).
   */
  restartCountAfterStep: boolean;
  /**
   * Plan for the highest forecast peak of the last this-many ticks (1: this tick's only), so that a load that
   * oscillates faster than the forecast follows it still has one horizontal configuration.
   */
  peakHoldTicks: number;
  /**
   * Shrink the resized backends to 1 core as soon as that many 1-core backends carry the held peak, without
   * waiting for K stable ticks: the capacity is warm and covers the recent peaks (starting replicas for the move
   * still waits for K stable ticks).
   */
  shrinkWhenWarmCarries: boolean;
}

export type Stability = "now-equals-peak" | "peak-unchanged";

/**
 * The paper's Themis: K = 10 (the reference adapter's HORIZONTAL_STABILIZATION), q(b) at the stage's whole rate
 * (Eq. 4, a central queue), capacity n * h >= lambda exactly, new instances with the warm ones' cores
 * (Algorithm 1's last line), new instances only for what vertical cannot carry, replicas removed at the
 * horizontal step itself.
 */
export const THEMIS_PUBLISHED: Readonly<ThemisOptions> = Object.freeze({
  stableTicks: 10,
  scaleDownDelayMs: 0,
  maxUtilization: 1,
  queueRate: "stage",
  newInstanceCores: "same",
  startHorizontalInSurge: false,
  proactiveStart: false,
  stability: "now-equals-peak",
  removeOnlyWhenStable: true,
  restartCountAfterStep: true,
  peakHoldTicks: 1,
  shrinkWhenWarmCarries: false,
});

/** This system's default; README.md says why each differs from the paper. */
export const INFERGRID_THEMIS: Readonly<ThemisOptions> = Object.freeze({
  stableTicks: 10,
  scaleDownDelayMs: 0,
  maxUtilization: 1,
  queueRate: "per-instance",
  newInstanceCores: "one",
  startHorizontalInSurge: true,
  proactiveStart: true,
  stability: "peak-unchanged",
  removeOnlyWhenStable: false,
  restartCountAfterStep: false,
  peakHoldTicks: 10,
  shrinkWhenWarmCarries: true,
});

export function initialTransitionState(): TransitionState {
  return {
    mode: "horizontal",
    stableTicks: 0,
    stableConfig: null,
    surplusSinceMs: null,
    surplusNeed: 0,
    shrinkSinceMs: null,
    shrinkCores: 0,
    recentPeaks: [],
  };
}

function checkInput(input: TickInput): void {
  const s = input.service;
  if (!(Number.isFinite(input.nowMs) && input.nowMs >= 0)) throw new RangeError(`nowMs must be a finite number >= 0, got ${input.nowMs}`);
  if (!(Number.isFinite(input.ratePerS) && input.ratePerS >= 0))
    throw new RangeError(`ratePerS must be a finite number >= 0, got ${input.ratePerS}`);
  if (!(Number.isFinite(input.predictedPeakPerS) && input.predictedPeakPerS >= 0)) {
    throw new RangeError(`predictedPeakPerS must be a finite number >= 0, got ${input.predictedPeakPerS}`);
  }
  if (!(Number.isInteger(s.maxCores) && s.maxCores >= 1))
    throw new RangeError(`service.maxCores must be an integer >= 1, got ${s.maxCores}`);
  for (const w of input.warm) {
    if (!(Number.isInteger(w.cores) && w.cores >= 1 && Number.isInteger(w.batch) && w.batch >= 1)) {
      throw new RangeError(`warm backend ${w.id} needs integer cores and batch >= 1, got cores ${w.cores}, batch ${w.batch}`);
    }
  }
}

function planOptions(input: TickInput, maxUtilization: number, queueRate: QueueRate): ResolvedPlanOptions {
  return resolvePlanOptions({ sloMs: input.service.sloMs, maxBatch: input.service.maxBatch, maxUtilization, queueRate });
}

/**
 * Whether backends of these sizes and batches carry `ratePerS` within the SLO. The dispatch sends each backend a
 * share proportional to its throughput (what least-outstanding-requests converges to), so with equal backends
 * this is exactly the planners' check.
 */
export function allocationCarries(
  backends: readonly { cores: number; batch: number }[],
  ratePerS: number,
  profile: ThemisProfile,
  o: ResolvedPlanOptions,
): boolean {
  if (backends.length === 0) return ratePerS <= 0;
  const h = backends.map((b) => throughputPerS(profile, b.batch, b.cores));
  const total = h.reduce((a, x) => a + x, 0);
  if (total * o.maxUtilization < ratePerS * (1 - 1e-9)) return false;
  return backends.every((b, i) => {
    const q =
      o.queueRate === "per-instance"
        ? stageQueueMs(b.batch, 1, (ratePerS * (h[i] ?? 0)) / total, "per-instance")
        : stageQueueMs(b.batch, backends.length, ratePerS, "stage");
    return withinSlo(processingMs(profile, b.batch, b.cores) + q, o.sloMs);
  });
}

/** Keep the batches if they carry the rate, else the smallest common batch that does at these cores; else undefined. */
function fitBatches(
  targets: readonly BackendTarget[],
  ratePerS: number,
  profile: ThemisProfile,
  o: ResolvedPlanOptions,
): BackendTarget[] | undefined {
  if (allocationCarries(targets, ratePerS, profile, o)) return [...targets];
  for (let b = 1; b <= o.maxBatch; b++) {
    const trial = targets.map((t) => ({ ...t, batch: b }));
    if (allocationCarries(trial, ratePerS, profile, o)) return trial;
  }
  return undefined;
}

/** The batch that lets these cores carry the most within the SLO (used when nothing carries everything). */
function mostCarryingBatch(
  targets: readonly BackendTarget[],
  ratePerS: number,
  profile: ThemisProfile,
  o: ResolvedPlanOptions,
): BackendTarget[] {
  let best = targets.map((t) => ({ ...t, batch: 1 }));
  let bestCap = -1;
  for (let b = 1; b <= o.maxBatch; b++) {
    const trial = targets.map((t) => ({ ...t, batch: b }));
    const cap = trial.reduce((a, t) => a + throughputPerS(profile, t.batch, t.cores), 0);
    const fits = trial.every((t) =>
      withinSlo(processingMs(profile, t.batch, t.cores) + stageQueueMs(t.batch, trial.length, ratePerS, o.queueRate), o.sloMs),
    );
    if (fits && cap > bestCap) {
      best = trial;
      bestCap = cap;
    }
  }
  return best;
}

function sameConfig(a: StageConfig | undefined, b: StageConfig | undefined): boolean {
  return a !== undefined && b !== undefined && a.instances === b.instances && a.batch === b.batch;
}

/** Which backends go first when shrinking the count: starting ones (latest ready first), then warm ones (biggest first). */
function pickRemovals(count: number, warm: readonly BackendTarget[], starting: readonly StartingBackend[]): string[] {
  const s = [...starting].sort((a, b) => b.readyAtMs - a.readyAtMs || (a.id < b.id ? 1 : -1)).map((x) => x.id);
  const w = [...warm].sort((a, b) => b.cores - a.cores || (a.id < b.id ? 1 : -1)).map((x) => x.id);
  return [...s, ...w].slice(0, Math.max(0, count));
}

interface Surplus {
  remove: string[];
  state: Pick<TransitionState, "surplusSinceMs" | "surplusNeed">;
}

/** Hysteresis on removing replicas: the surplus must hold `delayMs`, and it goes down to the most needed meanwhile. */
function surplus(
  state: TransitionState,
  input: TickInput,
  need: number | undefined,
  allowed: boolean,
  delayMs: number,
  warm: readonly BackendTarget[],
): Surplus {
  const have = warm.length + input.starting.length;
  if (need === undefined || have <= need) return { remove: [], state: { surplusSinceMs: null, surplusNeed: 0 } };
  const since = state.surplusSinceMs ?? input.nowMs;
  const most = Math.max(state.surplusNeed, need);
  if (!allowed || input.nowMs - since < delayMs) return { remove: [], state: { surplusSinceMs: since, surplusNeed: most } };
  return { remove: pickRemovals(have - most, warm, input.starting), state: { surplusSinceMs: null, surplusNeed: 0 } };
}

function ones(count: number, batch: number, cores = 1): NewBackend[] {
  return Array.from({ length: Math.max(0, count) }, () => ({ cores, batch }));
}

function clampTargets(input: TickInput): BackendTarget[] {
  const s = input.service;
  return input.warm.map((w) => ({ id: w.id, cores: Math.min(w.cores, s.maxCores), batch: Math.min(w.batch, s.maxBatch) }));
}

/** Keep the kept backends' batches valid after removals. */
function settle(
  targets: BackendTarget[],
  remove: readonly string[],
  ratePerS: number,
  profile: ThemisProfile,
  o: ResolvedPlanOptions,
): BackendTarget[] {
  if (remove.length === 0) return targets;
  const gone = new Set(remove);
  const kept = targets.filter((t) => !gone.has(t.id));
  const fitted = fitBatches(kept, ratePerS, profile, o);
  if (fitted === undefined) return targets;
  const byId = new Map(fitted.map((t) => [t.id, t]));
  return targets.map((t) => byId.get(t.id) ?? t);
}

export function themisPolicy(options: Partial<ThemisOptions> = {}, name: PolicyName = "infergrid"): ScalingPolicy {
  const opts: ThemisOptions = { ...INFERGRID_THEMIS, ...options };
  if (!(Number.isInteger(opts.stableTicks) && opts.stableTicks >= 1))
    throw new RangeError(`stableTicks must be an integer >= 1, got ${opts.stableTicks}`);
  if (!(opts.scaleDownDelayMs >= 0)) throw new RangeError(`scaleDownDelayMs must be >= 0, got ${opts.scaleDownDelayMs}`);
  if (!(Number.isInteger(opts.peakHoldTicks) && opts.peakHoldTicks >= 1))
    throw new RangeError(`peakHoldTicks must be an integer >= 1, got ${opts.peakHoldTicks}`);
  return {
    name,
    initialState: initialTransitionState,
    step(state, input) {
      checkInput(input);
      const spec = input.service;
      const o = planOptions(input, opts.maxUtilization, opts.queueRate);
      const lambda = input.ratePerS;
      const recentPeaks = [...state.recentPeaks, Math.max(lambda, input.predictedPeakPerS)].slice(-opts.peakHoldTicks);
      const peak = Math.max(...recentPeaks);
      const n = input.warm.length;
      const s = input.starting.length;
      const hNow = planHorizontal({ ...o, profile: spec.profile, ratePerS: lambda });
      const hPeak = planHorizontal({ ...o, profile: spec.profile, ratePerS: peak });
      // Replicas are started for this tick's forecast only; the held peak decides what may shrink or go, since
      // while it passes the resized backends already hold it for less than new replicas would cost.
      const tickPeak = recentPeaks.at(-1) ?? peak;
      const hTick = tickPeak === peak ? hPeak : planHorizontal({ ...o, profile: spec.profile, ratePerS: tickPeak });
      const current = clampTargets(input);

      if (n === 0) {
        const need = hPeak?.instances ?? 1;
        const decision: TickDecision = {
          mode: "horizontal",
          targets: [],
          start: ones(need - s, hPeak?.batch ?? 1, hPeak ? 1 : spec.maxCores),
          remove: [],
          reason: `no warm backend: ${s} starting, ${need} needed for ${peak.toFixed(1)}/s`,
        };
        return { state: { ...state, recentPeaks, mode: "horizontal", stableTicks: 0, stableConfig: null }, decision };
      }

      const fitted = fitBatches(current, lambda, spec.profile, o);
      if (fitted === undefined) {
        // Surge (section 5.2): the allocation cannot carry the rate; vertical at once.
        const v = planVertical({
          ...o,
          profile: spec.profile,
          ratePerS: lambda,
          warmInstances: n,
          maxCores: spec.maxCores,
          newInstanceCores: opts.newInstanceCores,
        });
        const c = v.warm?.cores ?? spec.maxCores;
        const grown = current.map((t) => ({ ...t, cores: Math.max(t.cores, c), batch: v.warm?.batch ?? t.batch }));
        const targets = fitBatches(grown, lambda, spec.profile, o) ?? mostCarryingBatch(grown, lambda, spec.profile, o);
        const fresh = v.fresh;
        const forFresh = fresh ? Math.max(0, fresh.instances - s) : 0;
        const start = fresh ? ones(forFresh, fresh.batch, fresh.cores) : [];
        let why = v.carriesAll
          ? `surge: vertical to ${c} cores`
          : `surge beyond the node limit: ${c} cores carry ${v.carriedPerS.toFixed(1)}/s`;
        if (opts.startHorizontalInSurge && input.predictedPeakPerS >= lambda && hPeak) {
          const more = hPeak.instances - n - s - start.length;
          if (more > 0) {
            start.push(...ones(more, hPeak.batch));
            why += `; ${more} 1-core replicas started for the ${peak.toFixed(1)}/s expected`;
          }
        }
        if (fresh && forFresh > 0) why += `; ${forFresh} new backends of ${fresh.cores} cores for ${v.restPerS.toFixed(1)}/s`;
        return {
          state: { ...state, recentPeaks, mode: "vertical", stableTicks: 0, stableConfig: null, surplusSinceMs: null, surplusNeed: 0 },
          decision: { mode: "vertical", targets, start, remove: [], reason: why },
        };
      }

      const prev = state.stableConfig;
      const peakUnchanged = hPeak !== undefined && prev !== null && hPeak.instances === prev.instances && hPeak.batch === prev.batch;
      const stableTicks =
        opts.stability === "now-equals-peak"
          ? sameConfig(hNow, hPeak)
            ? state.stableTicks + 1
            : 0
          : peakUnchanged
            ? state.stableTicks + 1
            : hPeak
              ? 1
              : 0;
      const stableConfig = hPeak ? { instances: hPeak.instances, batch: hPeak.batch } : null;
      const stable = stableTicks >= opts.stableTicks && hPeak !== undefined;
      let targets = fitted;
      const start: NewBackend[] = [];
      let mode: ScalingMode = targets.some((t) => t.cores > 1) ? "vertical" : "horizontal";
      let reason = "steady";

      const warmEnough = hPeak !== undefined && n >= hPeak.instances;
      if (mode === "vertical" && hPeak && (stable || (opts.shrinkWhenWarmCarries && warmEnough))) {
        // Vertical -> horizontal (section 5.1.2): bring up the 1-core replicas first, shrink once they are warm.
        const missing = (hTick?.instances ?? hPeak.instances) - n - s;
        if (warmEnough) {
          const shrunk = fitBatches(
            targets.map((t) => ({ ...t, cores: 1, batch: hPeak.batch })),
            lambda,
            spec.profile,
            o,
          );
          if (shrunk) {
            targets = shrunk;
            mode = "horizontal";
            reason = stable
              ? `stable for ${stableTicks} ticks: ${n} warm backends shrink to 1 core`
              : `${n} warm backends at 1 core carry the recent peak ${peak.toFixed(1)}/s: they shrink`;
          } else reason = `stable, but ${n} 1-core backends would not carry ${lambda.toFixed(1)}/s`;
        } else if (missing > 0) {
          start.push(...ones(missing, hTick?.batch ?? hPeak.batch));
          reason = `stable for ${stableTicks} ticks: ${missing} 1-core replicas started; no shrink before they are warm`;
        } else if (s > 0) reason = `stable: waiting for ${s} starting replicas before shrinking`;
        else reason = `stable: the resized backends hold the recent peak of ${peak.toFixed(1)}/s`;
      } else if (mode === "horizontal" && opts.proactiveStart && hTick && hTick.instances > n + s) {
        const more = hTick.instances - n - s;
        start.push(...ones(more, hTick.batch));
        reason = `forecast ${tickPeak.toFixed(1)}/s needs ${hTick.instances} replicas: ${more} started`;
      }

      const onlySmall = mode === "horizontal";
      const sur = surplus(
        state,
        input,
        onlySmall ? hPeak?.instances : undefined,
        stable || !opts.removeOnlyWhenStable,
        opts.scaleDownDelayMs,
        targets,
      );
      if (sur.remove.length > 0) {
        targets = settle(targets, sur.remove, lambda, spec.profile, o);
        reason = `${sur.remove.length} surplus replicas removed (need ${hPeak?.instances})`;
      }
      return {
        state: {
          ...state,
          recentPeaks,
          mode,
          stableTicks: stable && opts.restartCountAfterStep ? 0 : stableTicks,
          stableConfig,
          ...sur.state,
        },
        decision: { mode, targets, start, remove: sur.remove, reason },
      };
    },
  };
}

export function publishedThemisPolicy(): ScalingPolicy {
  return themisPolicy(THEMIS_PUBLISHED, "themis");
}

export function infergridPolicy(options: Partial<ThemisOptions> = {}): ScalingPolicy {
  return themisPolicy({ ...INFERGRID_THEMIS, ...options }, "infergrid");
}

export interface HorizontalOnlyOptions {
  maxUtilization: number;
  queueRate: QueueRate;
  scaleDownDelayMs: number;
  /** Plan the replicas for max(rate, predicted peak) instead of the current rate. */
  planOnPredictedPeak: boolean;
}

/** This system without vertical scaling: the same forecast and queue model as `INFERGRID_THEMIS`. */
export const HORIZONTAL_ONLY: Readonly<HorizontalOnlyOptions> = Object.freeze({
  // Without vertical scaling, headroom is its only guard against queueing near saturation (README.md).
  maxUtilization: 0.9,
  queueRate: INFERGRID_THEMIS.queueRate,
  // Without vertical scaling a replica removed too early costs a cold start in violations, so it waits longer.
  scaleDownDelayMs: 30_000,
  planOnPredictedPeak: true,
});

export function horizontalOnlyPolicy(options: Partial<HorizontalOnlyOptions> = {}): ScalingPolicy {
  const opts: HorizontalOnlyOptions = { ...HORIZONTAL_ONLY, ...options };
  return {
    name: "horizontal-only",
    initialState: initialTransitionState,
    step(state, input) {
      checkInput(input);
      const spec = input.service;
      const o = planOptions(input, opts.maxUtilization, opts.queueRate);
      const lambda = input.ratePerS;
      const planRate = opts.planOnPredictedPeak ? Math.max(lambda, input.predictedPeakPerS) : lambda;
      const h = planHorizontal({ ...o, profile: spec.profile, ratePerS: planRate });
      const need = h?.instances ?? 1;
      const n = input.warm.length;
      const s = input.starting.length;
      const small = clampTargets(input).map((t) => ({ ...t, cores: 1 }));
      let targets = fitBatches(small, lambda, spec.profile, o) ?? mostCarryingBatch(small, lambda, spec.profile, o);
      const start = ones(need - n - s, h?.batch ?? 1);
      const sur = surplus(state, input, need, true, opts.scaleDownDelayMs, targets);
      if (sur.remove.length > 0) targets = settle(targets, sur.remove, lambda, spec.profile, o);
      const reason =
        start.length > 0
          ? `${need} replicas needed for ${planRate.toFixed(1)}/s: ${start.length} started`
          : sur.remove.length > 0
            ? `${sur.remove.length} surplus replicas removed`
            : "steady";
      return {
        state: { ...state, mode: "horizontal", ...sur.state },
        decision: { mode: "horizontal", targets, start, remove: sur.remove, reason },
      };
    },
  };
}

export interface VerticalOnlyOptions {
  maxUtilization: number;
  queueRate: QueueRate;
  /** How long fewer cores must do before the backends shrink, ms. */
  scaleDownDelayMs: number;
}

export const VERTICAL_ONLY: Readonly<VerticalOnlyOptions> = Object.freeze({
  maxUtilization: INFERGRID_THEMIS.maxUtilization,
  queueRate: INFERGRID_THEMIS.queueRate,
  scaleDownDelayMs: 10_000,
});

/** Sponge extended as the paper's baseline: the instances the caller started stay; only cores and batch change. */
export function verticalOnlyPolicy(options: Partial<VerticalOnlyOptions> = {}): ScalingPolicy {
  const opts: VerticalOnlyOptions = { ...VERTICAL_ONLY, ...options };
  return {
    name: "vertical-only",
    initialState: () => ({ ...initialTransitionState(), mode: "vertical" }),
    step(state, input) {
      checkInput(input);
      const spec = input.service;
      const o = planOptions(input, opts.maxUtilization, opts.queueRate);
      const current = clampTargets(input);
      const n = current.length;
      if (n === 0) {
        return { state, decision: { mode: "vertical", targets: [], start: [], remove: [], reason: "no warm backend" } };
      }
      const v = planVertical({ ...o, profile: spec.profile, ratePerS: input.ratePerS, warmInstances: n, maxCores: spec.maxCores });
      const want = v.warm?.cores ?? spec.maxCores;
      const have = Math.max(...current.map((t) => t.cores));
      let cores = want;
      let shrink: Pick<TransitionState, "shrinkSinceMs" | "shrinkCores"> = { shrinkSinceMs: null, shrinkCores: 0 };
      let reason = want > have ? `vertical to ${want} cores` : "steady";
      if (want < have) {
        const since = state.shrinkSinceMs ?? input.nowMs;
        const most = Math.max(state.shrinkCores, want);
        if (input.nowMs - since >= opts.scaleDownDelayMs) {
          cores = most;
          reason = `vertical down to ${most} cores`;
        } else {
          cores = have;
          shrink = { shrinkSinceMs: since, shrinkCores: most };
        }
      }
      const sized = current.map((t) => ({ ...t, cores: Math.max(cores, 1), batch: cores === want ? (v.warm?.batch ?? t.batch) : t.batch }));
      const targets = fitBatches(sized, input.ratePerS, spec.profile, o) ?? mostCarryingBatch(sized, input.ratePerS, spec.profile, o);
      return {
        state: { ...state, mode: "vertical", ...shrink },
        decision: { mode: "vertical", targets, start: [], remove: [], reason },
      };
    },
  };
}

export function scalingPolicy(name: PolicyName): ScalingPolicy {
  switch (name) {
    case "infergrid":
      return infergridPolicy();
    case "themis":
      return publishedThemisPolicy();
    case "horizontal-only":
      return horizontalOnlyPolicy();
    case "vertical-only":
      return verticalOnlyPolicy();
  }
}
