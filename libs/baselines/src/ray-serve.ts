/**
 * Ray Serve's default autoscaling policy (python/ray/serve/autoscaling_policy.py,
 * replica_queue_length_autoscaling_policy and _calculate_desired_num_replicas; defaults from AutoscalingConfig):
 * target_ongoing_requests 2 per replica, look_back_period_s 30, upscale_delay_s 30, downscale_delay_s 600,
 * smoothing factors 1, control loop every 0.1 s (CONTROL_LOOP_INTERVAL_S).
 *
 *   error_ratio = (total ongoing requests / running replicas) / target_ongoing_requests
 *   desired     = ceil(running x (1 + (error_ratio - 1) x smoothing))
 *   if desired > current target: the decision counter goes up (reset first if it was negative) and the target
 *     becomes `desired` once the counter exceeds upscale_delay / interval;
 *   if desired < current target: the counter goes down likewise, downscale_delay / interval;
 *   otherwise the counter resets.
 * "Total ongoing requests" are queued at the handles plus running at the replicas, averaged over the look-back
 * window by the controller before the policy sees them. With no running replica but requests waiting, Ray
 * asks for one replica at once (the cold-start path).
 */
import { clamp, type ReplicaBounds, type ScalingContext, type ScalingDecision, type ScalingPolicy } from "./types.js";

export interface RayServeOptions extends Partial<ReplicaBounds> {
  targetOngoingRequests?: number;
  lookBackMs?: number;
  upscaleDelayMs?: number;
  downscaleDelayMs?: number;
  controlLoopMs?: number;
  upscaleSmoothing?: number;
  downscaleSmoothing?: number;
}

export interface RayServeState {
  readonly decisionCounter: number;
}

export const RAY_SERVE_DEFAULTS = {
  targetOngoingRequests: 2,
  lookBackMs: 30_000,
  upscaleDelayMs: 30_000,
  downscaleDelayMs: 600_000,
  controlLoopMs: 100,
  upscaleSmoothing: 1,
  downscaleSmoothing: 1,
} as const;

/** _calculate_desired_num_replicas, without the bounds. */
export function rayDesiredReplicas(totalOngoing: number, running: number, target: number, upSmoothing = 1, downSmoothing = 1): number {
  if (running <= 0) return totalOngoing > 0 ? 1 : 0;
  const errorRatio = totalOngoing / running / target;
  const smoothing = errorRatio >= 1 ? upSmoothing : downSmoothing;
  return Math.ceil(running * (1 + (errorRatio - 1) * smoothing));
}

export function rayServePolicy(options: RayServeOptions = {}): ScalingPolicy<RayServeState> {
  const target = options.targetOngoingRequests ?? RAY_SERVE_DEFAULTS.targetOngoingRequests;
  const interval = options.controlLoopMs ?? RAY_SERVE_DEFAULTS.controlLoopMs;
  const upTicks = (options.upscaleDelayMs ?? RAY_SERVE_DEFAULTS.upscaleDelayMs) / interval;
  const downTicks = (options.downscaleDelayMs ?? RAY_SERVE_DEFAULTS.downscaleDelayMs) / interval;
  const lookBack = options.lookBackMs ?? RAY_SERVE_DEFAULTS.lookBackMs;
  const up = options.upscaleSmoothing ?? RAY_SERVE_DEFAULTS.upscaleSmoothing;
  const down = options.downscaleSmoothing ?? RAY_SERVE_DEFAULTS.downscaleSmoothing;
  const bounds: ReplicaBounds = { minReplicas: options.minReplicas ?? 1, maxReplicas: options.maxReplicas ?? Number.POSITIVE_INFINITY };
  if (!(target > 0)) throw new RangeError(`target_ongoing_requests must be > 0, got ${target}`);
  return {
    name: "ray-serve",
    periodMs: interval,
    windows: { rateMs: lookBack, concurrencyMs: lookBack, concurrencyShortMs: lookBack },
    initialState: () => ({ decisionCounter: 0 }),
    decide(ctx: ScalingContext<RayServeState>): { decision: ScalingDecision; state: RayServeState } {
      const { observed } = ctx;
      const current = observed.target;
      if (observed.ready === 0 && current === 0) {
        const replicas = clamp(observed.concurrency > 0 ? 1 : 0, bounds);
        return { decision: { replicas, reason: "cold-start" }, state: { decisionCounter: 0 } };
      }
      const desired = clamp(rayDesiredReplicas(observed.concurrency, observed.ready, target, up, down), bounds);
      let counter = ctx.state.decisionCounter;
      let replicas = current;
      let reason = "steady";
      if (desired > current) {
        counter = Math.max(0, counter) + 1;
        reason = "upscale-delay";
        if (counter > upTicks) {
          counter = 0;
          replicas = desired;
          reason = "upscale";
        }
      } else if (desired < current) {
        counter = Math.min(0, counter) - 1;
        reason = "downscale-delay";
        if (counter < -downTicks) {
          counter = 0;
          replicas = desired;
          reason = "downscale";
        }
      } else counter = 0;
      return { decision: { replicas: clamp(replicas, bounds), reason }, state: { decisionCounter: counter } };
    },
  };
}
