/**
 * The one shape every replica autoscaler here has: a pure function of a context (time, what was observed,
 * the previous state) that returns a decision and the next state, as Ray Serve's `autoscaling_policy.py`
 * and Knative's `scaling/autoscaler.go` are built. Metric collection and windowing are separate
 * (see window.ts), as in both upstreams: the decider gets already-aggregated numbers.
 */

import type { ServiceForecast } from "@infergrid/faro";

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
  /** Outcomes of the requests that ended since the previous tick; filled only for policies that observe them. */
  tick?: TickWindow;
  /** The predictor's newest forecast of the arrival rate (req/s per step); filled only for policies that ask for it. */
  forecast?: ServiceForecast;
}

/** One job's request outcomes over one controller tick (the latency metrics Faro's controllers scrape). */
export interface TickWindow {
  /** Requests that ended (completed or dropped). */
  ended: number;
  dropped: number;
  /** Ended over the SLO, or dropped. */
  violations: number;
  /** 99th percentile latency of all that ended, a dropped request counted as infinite; NaN if none ended. */
  p99Ms: number;
  /** Mean service time of the completed ones (NaN if none). */
  serviceMeanMs: number;
  arrivals: number;
  spanMs: number;
}

/**
 * What a policy needs beyond the windowed averages, so the controller pays for a signal only when a policy
 * reads it (a forecast runs the predictor's model per job; a tick window sorts the tick's latencies).
 */
export interface ObservedSignals {
  tick?: boolean;
  forecast?: boolean;
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
  /** Signals beyond the windowed averages (default: none). */
  readonly observes?: ObservedSignals;
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
  readonly observes?: ObservedSignals;
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

/** The cluster as a central controller sees it: what it may hand out and how long a new replica takes. */
export interface ClusterFacts {
  /** Replicas the cluster can hold (all jobs together). */
  capacity: number;
  /** From a replica's creation to serving, ms. */
  coldStartMs: number;
}

export interface ClusterScalingContext<S> {
  now: number;
  state: S;
  /** One observation per job, in job order. */
  observed: readonly Observation[];
  cluster: ClusterFacts;
}

/**
 * A controller that decides every job's replicas at once from all jobs' observations (Faro's autoscaler
 * scales all jobs of the cluster together), where a ScalingPolicy decides one job alone.
 */
export interface ClusterScalingPolicy<S> {
  readonly name: string;
  readonly periodMs: number;
  readonly windows: MetricWindows;
  readonly observes?: ObservedSignals;
  /** replicas: each job's replicas at `now`. */
  initialState(now: number, replicas: readonly number[], cluster: ClusterFacts): S;
  /** One decision per job, in job order. */
  decide(ctx: ClusterScalingContext<S>): { decisions: ScalingDecision[]; state: S };
}

export interface AnyClusterScalingPolicy {
  readonly name: string;
  readonly periodMs: number;
  readonly windows: MetricWindows;
  readonly observes?: ObservedSignals;
  initialState(now: number, replicas: readonly number[], cluster: ClusterFacts): unknown;
  decide(ctx: ClusterScalingContext<unknown>): { decisions: ScalingDecision[]; state: unknown };
}

/** Erases a central policy's state type, as erase does for a per-job one. */
export function eraseCluster<S>(policy: ClusterScalingPolicy<S>): AnyClusterScalingPolicy {
  return policy as unknown as AnyClusterScalingPolicy;
}
