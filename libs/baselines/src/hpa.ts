/**
 * Kubernetes Horizontal Pod Autoscaler (autoscaling/v2), as kube-controller-manager runs it
 * (pkg/controller/podautoscaler: horizontal.go, replica_calculator.go; defaults from the API reference
 * "HorizontalPodAutoscalerBehavior" and the --horizontal-pod-autoscaler-* flags):
 *  - sync period 15 s;
 *  - desired = ceil(current metric / target x pods with metrics); no change while |ratio - 1| <= 10 %
 *    (--horizontal-pod-autoscaler-tolerance 0.1);
 *  - pods without metrics yet (starting): counted at 0 usage when scaling up and at the target when scaling
 *    down, then the ratio is recomputed; if that flips the direction or lands within the tolerance, no change
 *    (replica_calculator.go, the "missing pods" rule);
 *  - scale-down stabilisation: the highest recommendation of the last 300 s is used
 *    (behavior.scaleDown.stabilizationWindowSeconds = 300); scale-up stabilisation 0;
 *  - scale-up rate: at most max(4 pods, 100 %) more per 15 s (behavior.scaleUp.policies, selectPolicy Max);
 *    scale-down rate 100 % per 15 s (i.e. unbounded);
 *  - min/max replicas clamp.
 * Two metric types, as users configure them: a Resource utilisation target (CPU; here the busy fraction of a
 * one-request-at-a-time replica) or a Pods metric target of requests per second per replica (custom metrics
 * adapter, AverageValue).
 *
 * Choice: the rate limit is taken relative to the replicas at the start of each 15 s period, which is what
 * the upstream period-based accounting gives when the sync period equals the policy period.
 */
import { clamp, type Observation, type ReplicaBounds, type ScalingContext, type ScalingDecision, type ScalingPolicy } from "./types.js";

export type HpaTarget = { kind: "utilisation"; target: number } | { kind: "requests-per-replica"; target: number };

export interface HpaOptions extends Partial<ReplicaBounds> {
  target: HpaTarget;
  syncPeriodMs?: number;
  tolerance?: number;
  scaleDownStabilisationMs?: number;
  scaleUpPods?: number;
  scaleUpPercent?: number;
}

export interface HpaState {
  /** Recommendations of the last stabilisation window, oldest first. */
  readonly recommendations: readonly { at: number; replicas: number }[];
}

export const HPA_DEFAULTS = {
  syncPeriodMs: 15_000,
  tolerance: 0.1,
  scaleDownStabilisationMs: 300_000,
  scaleUpPods: 4,
  scaleUpPercent: 100,
} as const;

/** The metric of the ready pods, per pod (utilisation fraction, or req/s per pod). */
function perPodMetric(target: HpaTarget, o: Observation): number {
  if (target.kind === "utilisation") return o.utilisation;
  return o.ready > 0 ? o.requestRate / o.ready : 0;
}

/**
 * replica_calculator.go: the raw recommendation from the metric, with the tolerance and the missing-pods rule.
 * `current` is spec.replicas; `ready` pods report the metric, the other `current - ready` do not (yet).
 */
export function hpaRecommendation(metricPerReadyPod: number, target: number, current: number, ready: number, tolerance: number): number {
  if (ready <= 0) return current;
  const ratio = metricPerReadyPod / target;
  const missing = Math.max(0, current - ready);
  if (missing === 0) {
    if (Math.abs(ratio - 1) <= tolerance) return current;
    return Math.ceil(ratio * ready);
  }
  if (Math.abs(ratio - 1) <= tolerance) return current;
  const scaleUp = ratio > 1;
  // Missing pods: 0 usage when scaling up, the target when scaling down.
  const total = metricPerReadyPod * ready + (scaleUp ? 0 : target * missing);
  const newRatio = total / (target * (ready + missing));
  if (Math.abs(newRatio - 1) <= tolerance || (scaleUp && newRatio < 1) || (!scaleUp && newRatio > 1)) return current;
  return Math.ceil(newRatio * (ready + missing));
}

export function hpaPolicy(options: HpaOptions): ScalingPolicy<HpaState> {
  const period = options.syncPeriodMs ?? HPA_DEFAULTS.syncPeriodMs;
  const tolerance = options.tolerance ?? HPA_DEFAULTS.tolerance;
  const window = options.scaleDownStabilisationMs ?? HPA_DEFAULTS.scaleDownStabilisationMs;
  const upPods = options.scaleUpPods ?? HPA_DEFAULTS.scaleUpPods;
  const upPercent = options.scaleUpPercent ?? HPA_DEFAULTS.scaleUpPercent;
  const bounds: ReplicaBounds = { minReplicas: options.minReplicas ?? 1, maxReplicas: options.maxReplicas ?? Number.POSITIVE_INFINITY };
  if (!(options.target.target > 0)) throw new RangeError(`HPA target must be > 0, got ${options.target.target}`);
  return {
    name: options.target.kind === "utilisation" ? "hpa-utilisation" : "hpa-requests",
    periodMs: period,
    windows: { rateMs: period, concurrencyMs: period, concurrencyShortMs: period },
    initialState: () => ({ recommendations: [] }),
    decide(ctx: ScalingContext<HpaState>): { decision: ScalingDecision; state: HpaState } {
      const { now, observed } = ctx;
      const current = observed.target;
      const raw = hpaRecommendation(perPodMetric(options.target, observed), options.target.target, current, observed.ready, tolerance);
      const recommendation = clamp(raw, bounds);
      // Stabilisation (horizontal.go stabilizeRecommendationWithBehaviors): scale-down takes the max of the window.
      const recommendations = ctx.state.recommendations.filter((r) => r.at > now - window);
      recommendations.push({ at: now, replicas: recommendation });
      let stabilised = recommendation;
      if (recommendation < current) {
        let highest = recommendation;
        for (const r of recommendations) highest = Math.max(highest, r.replicas);
        stabilised = Math.min(current, highest);
      }
      // Rate limit on scale-up: the larger of the two policies (selectPolicy: Max).
      const upLimit = Math.max(current + upPods, Math.floor(current * (1 + upPercent / 100)));
      let replicas = stabilised;
      let reason = stabilised > current ? "scale-up" : stabilised < current ? "scale-down" : "steady";
      if (replicas > upLimit) {
        replicas = upLimit;
        reason = "scale-up-rate-limited";
      }
      if (recommendation < current && stabilised === current) reason = "scale-down-stabilised";
      return { decision: { replicas: clamp(replicas, bounds), reason }, state: { recommendations } };
    },
  };
}
