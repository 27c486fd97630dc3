/**
 * The one shape every replica autoscaler here has: a pure function of a context (time, what was observed,
 * the previous state) that returns a decision and the next state, as Ray Serve's `autoscaling_policy.py`
 * and Knative's `scaling/autoscaler.go` are built. Metric collection and windowing are separate
 * (see window.ts), as in both upstreams: the decider gets already-aggregated numbers.
 */

/** What a controller observed about one deployment (job) when it ticks. Each policy reads what it needs. */
export interface Observation {
  /** Replicas serving (ready / running). */
  ready: number;
  /** Replicas created but not serving yet (starting, loading the model). */
  starting: number;
  /** The replica count the controller last asked for (Ray's curr_target_num_replicas, the HPA's spec.replicas). */
  target: number;
  /** Mean busy fraction of the ready replicas over the policy's metric window, 0..1 (HPA CPU utilisation). */
  utilisation: number;
  /** Arrivals per second over the policy's metric window (HPA requests-per-replica target = this / ready). */
  requestRate: number;
  /** Requests in the system (queued and in service), time-averaged over the stable / look-back window. */
  concurrency: number;
  /** The same over the short (panic) window; policies without one may ignore it. */
  concurrencyShort: number;
}

export interface ScalingDecision {
  /** Replicas wanted (the controller creates or removes replicas to match). */
  replicas: number;
  reason: string;
}

export interface ScalingContext<S> {
  now: number;
  state: S;
  observed: Observation;
}

export interface ScalingPolicy<S> {
  readonly name: string;
  /** How often the controller runs decide (ms). */
  readonly periodMs: number;
  /** The metric windows the controller must aggregate for this policy (ms). */
  readonly windows: MetricWindows;
  initialState(now: number, replicas: number): S;
  decide(ctx: ScalingContext<S>): { decision: ScalingDecision; state: S };
}

export interface MetricWindows {
  /** Window of utilisation and requestRate. */
  rateMs: number;
  /** Window of concurrency. */
  concurrencyMs: number;
  /** Window of concurrencyShort. */
  concurrencyShortMs: number;
}

/** A policy whose state type is hidden, so a controller can hold any of them. */
export interface AnyScalingPolicy {
  readonly name: string;
  readonly periodMs: number;
  readonly windows: MetricWindows;
  initialState(now: number, replicas: number): unknown;
  decide(ctx: ScalingContext<unknown>): { decision: ScalingDecision; state: unknown };
}

/** Erases a policy's state type; the controller only passes the state back to the same policy. */
export function erase<S>(policy: ScalingPolicy<S>): AnyScalingPolicy {
  return policy as unknown as AnyScalingPolicy;
}

export interface ReplicaBounds {
  minReplicas: number;
  maxReplicas: number;
}

export function clamp(n: number, bounds: ReplicaBounds): number {
  return Math.min(bounds.maxReplicas, Math.max(bounds.minReplicas, n));
}
