/**
 * Knative Pod Autoscaler (knative/serving pkg/autoscaler/scaling/autoscaler.go, Scale(); defaults from
 * config-autoscaler): concurrency metric, 60 s stable window, 6 s panic window (10 % of stable), panic
 * threshold 200 %, tick 2 s, target = container-concurrency x container-concurrency-target-percentage (70 %),
 * max scale-up rate 1000, max scale-down rate 2.
 *
 *   maxScaleUp   = ceil(1000 x readyPods)        maxScaleDown = floor(readyPods / 2)
 *   desiredStable = ceil(stableConcurrency / target), desiredPanic = ceil(panicConcurrency / target),
 *   each clamped to [maxScaleDown, maxScaleUp];
 *   panic when desiredPanic / readyPods >= 2 (readyPods at least 1); panic is extended while that holds and
 *   ends one stable window after it last held; in panic the count never goes down (the max panic count seen).
 *
 * The concurrency is the total across pods (activator plus queue-proxies: requests queued or in service),
 * averaged over each window by the metric collector.
 */
import { clamp, type ReplicaBounds, type ScalingContext, type ScalingDecision, type ScalingPolicy } from "./types.js";

export interface KpaOptions extends Partial<ReplicaBounds> {
  containerConcurrency: number;
  targetUtilisation?: number;
  stableWindowMs?: number;
  panicWindowMs?: number;
  panicThreshold?: number;
  tickMs?: number;
  maxScaleUpRate?: number;
  maxScaleDownRate?: number;
}

export interface KpaState {
  /** When panic mode last started or was extended; undefined when not panicking. */
  readonly panicSince: number | undefined;
  /** Highest panic-mode count since panic started (Knative's maxPanicPods). */
  readonly maxPanicPods: number;
}

export const KPA_DEFAULTS = {
  targetUtilisation: 0.7,
  stableWindowMs: 60_000,
  panicWindowMs: 6_000,
  panicThreshold: 2,
  tickMs: 2_000,
  maxScaleUpRate: 1000,
  maxScaleDownRate: 2,
} as const;

export function kpaPolicy(options: KpaOptions): ScalingPolicy<KpaState> {
  const target = options.containerConcurrency * (options.targetUtilisation ?? KPA_DEFAULTS.targetUtilisation);
  const stableWindow = options.stableWindowMs ?? KPA_DEFAULTS.stableWindowMs;
  const panicWindow = options.panicWindowMs ?? KPA_DEFAULTS.panicWindowMs;
  const threshold = options.panicThreshold ?? KPA_DEFAULTS.panicThreshold;
  const upRate = options.maxScaleUpRate ?? KPA_DEFAULTS.maxScaleUpRate;
  const downRate = options.maxScaleDownRate ?? KPA_DEFAULTS.maxScaleDownRate;
  const bounds: ReplicaBounds = { minReplicas: options.minReplicas ?? 1, maxReplicas: options.maxReplicas ?? Number.POSITIVE_INFINITY };
  if (!(target > 0)) throw new RangeError(`KPA target concurrency must be > 0, got ${target}`);
  return {
    name: "knative-kpa",
    periodMs: options.tickMs ?? KPA_DEFAULTS.tickMs,
    windows: { rateMs: stableWindow, concurrencyMs: stableWindow, concurrencyShortMs: panicWindow },
    initialState: () => ({ panicSince: undefined, maxPanicPods: 0 }),
    decide(ctx: ScalingContext<KpaState>): { decision: ScalingDecision; state: KpaState } {
      const { now, observed, state } = ctx;
      const readyPods = Math.max(1, observed.ready);
      const maxScaleUp = Math.ceil(upRate * readyPods);
      const maxScaleDown = Math.floor(readyPods / downRate);
      const dspc = Math.ceil(observed.concurrency / target);
      const dppc = Math.ceil(observed.concurrencyShort / target);
      const desiredStable = Math.min(Math.max(dspc, maxScaleDown), maxScaleUp);
      const desiredPanic = Math.min(Math.max(dppc, maxScaleDown), maxScaleUp);
      const overThreshold = dppc / readyPods >= threshold;

      let panicSince = state.panicSince;
      let maxPanicPods = state.maxPanicPods;
      if (overThreshold) panicSince = now;
      else if (panicSince !== undefined && now > panicSince + stableWindow) {
        panicSince = undefined;
        maxPanicPods = 0;
      }

      if (panicSince !== undefined) {
        // Never scale down in panic: hold the highest count asked for since panic began (and what is there now).
        maxPanicPods = Math.max(maxPanicPods, desiredPanic, observed.ready);
        return { decision: { replicas: clamp(maxPanicPods, bounds), reason: "panic" }, state: { panicSince, maxPanicPods } };
      }
      return { decision: { replicas: clamp(desiredStable, bounds), reason: "stable" }, state: { panicSince, maxPanicPods } };
    },
  };
}
