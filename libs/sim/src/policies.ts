/**
 * The policies an experiment can name, each built from the production code it stands for. Targets that
 * users must choose (the HPA's) are set to the values of the upstream documentation's examples.
 */

import { fairShares } from "@infergrid/allocation";
import {
  aiadPolicy,
  erase,
  eraseCluster,
  fairSharePolicy,
  fairShareReplicas,
  faroPublishedPolicy,
  fixedPolicy,
  hpaPolicy,
  kpaPolicy,
  markPolicy,
  oneshotPolicy,
  peakSizedReplicas,
  rayServePolicy,
} from "@infergrid/baselines";
import { lognormalMean, lognormalQuantile } from "@infergrid/core";
import type { JobSpec, PolicySpec, ServiceTimeSpec } from "./config.js";

export const POLICY_NAMES = [
  "infergrid",
  "infergrid-no-prune",
  "infergrid-no-park",
  "infergrid-prune-all",
  "infergrid-no-headroom",
  "swayam",
  "swayam-park",
  "hpa-utilisation",
  "hpa-requests",
  "knative-kpa",
  "ray-serve",
  "fixed-peak",
  "clair-a1",
  "clair-a2",
  "swayam-static",
  "fairshare",
  "oneshot",
  "aiad",
  "mark",
  "faro-published",
] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export function isPolicyName(s: string): s is PolicyName {
  return (POLICY_NAMES as readonly string[]).includes(s);
}

export interface PolicyContext {
  jobs: readonly JobSpec[];
  /** Each job's busiest minute, as a mean rate (req/s of simulated time). */
  peakRatePerSec: readonly number[];
  capacity: number;
  /** Network time every request pays (ms), for sizing. */
  fixedDelayMs: number;
  /**
   * Each job's replica cap (an autoscaler's max replicas): the job's share of the cluster, the same list length
   * Swayam's frontends scale within. Without it one overloaded job's autoscaler can take the whole cluster.
   */
  maxReplicas?: readonly number[];
  /** Fixed allocations start at one warm backend per job too (Experiment.startAtOnePerJob). */
  startAtOnePerJob?: boolean;
}

export function meanServiceMs(s: ServiceTimeSpec): number {
  switch (s.kind) {
    case "lognormal":
      return lognormalMean(s.dist);
    case "exponential":
      return s.meanMs;
    case "deterministic":
      return s.ms;
  }
}

export function servicePercentileMs(s: ServiceTimeSpec, p: number): number {
  switch (s.kind) {
    case "lognormal":
      return lognormalQuantile(s.dist, p);
    case "exponential":
      return -Math.log(1 - p) * s.meanMs;
    case "deterministic":
      return s.ms;
  }
}

/** Each job's peak-sized replica count (fixed.ts), cut max-min fairly to the capacity if they do not all fit. */
export function peakSizes(ctx: PolicyContext): number[] {
  const wanted = ctx.jobs.map((job, j) =>
    peakSizedReplicas({
      peakRatePerSec: ctx.peakRatePerSec[j] ?? 0,
      meanServiceMs: meanServiceMs(job.serviceTime),
      servicePercentileMs: servicePercentileMs(job.serviceTime, job.slMin),
      sloMs: job.sloMs,
      percentile: job.slMin * 100,
      fixedDelayMs: ctx.fixedDelayMs,
    }),
  );
  const total = wanted.reduce((a, b) => a + b, 0);
  if (total <= ctx.capacity) return wanted;
  const shares = fairShares(
    ctx.jobs.map((job, j) => ({ name: job.name, target: wanted[j] ?? 0, held: 0 })),
    ctx.capacity,
  );
  return ctx.jobs.map((job) => shares.get(job.name) ?? 0);
}

/** HPA examples: 50 % CPU (the Kubernetes HPA walkthrough), or the request rate a replica serves at 50 %. */
export const HPA_TARGET_UTILISATION = 0.5;

/**
 * The routing of Faro's baselines: Faro runs every job on Ray Serve, whose router buffers requests until a
 * replica has a free slot; with max_ongoing_requests = 1 that is one FIFO queue per job served by the first
 * free replica, the most favourable discipline for them (no request waits behind a busy replica while
 * another is free).
 */
const FARO_ROUTING = { kind: "first-available" } as const;

export function buildPolicy(name: PolicyName, ctx: PolicyContext): PolicySpec {
  const J = ctx.jobs.length;
  const bounds = (j: number) => ({ minReplicas: 1, maxReplicas: ctx.maxReplicas?.[j] ?? ctx.capacity });
  const ones = new Array<number>(J).fill(1);
  switch (name) {
    case "infergrid":
      // This system: Swayam's frontends inside the slow loop's shares (predictor + the allocator's
      // ShareController), refused requests parked at the prefix (late binding, oldest first), pruning of requests
      // that can no longer meet the SLO within each minute's tail (PruneBudget), and the frontends' fast reaction
      // and learned warm headroom.
      return { kind: "swayam", name, scaling: "swayam", slowLoop: true, prune: "budget", park: true, learnedHeadroom: true };
    case "infergrid-no-prune":
      // The same without pruning (a service's pruneLate off): late requests are served late, not dropped.
      return { kind: "swayam", name, scaling: "swayam", slowLoop: true, park: true, learnedHeadroom: true };
    case "infergrid-no-park":
      // The same with Swayam's data path (a frontend's --park-window-ms 0): refused requests probe again after delta.
      return { kind: "swayam", name, scaling: "swayam", slowLoop: true, prune: "budget", learnedHeadroom: true };
    case "infergrid-prune-all":
      // The same with Swayam's pruning (a frontend's --prune-budget always): every late request is dropped.
      return { kind: "swayam", name, scaling: "swayam", slowLoop: true, prune: "always", park: true, learnedHeadroom: true };
    case "infergrid-no-headroom":
      // The same with Swayam's rate windows alone (a frontend's --learned-headroom false).
      return { kind: "swayam", name, scaling: "swayam", slowLoop: true, prune: "budget", park: true };
    case "swayam":
      return { kind: "swayam", name, scaling: "swayam" };
    case "swayam-park":
      // Swayam with this system's data path (late binding) and the static allocator: the local cluster's
      // `--policy swayam`, for the fidelity check.
      return { kind: "swayam", name, scaling: "swayam", park: true, learnedHeadroom: true };
    case "swayam-static":
      return { kind: "swayam", name, scaling: "static" };
    case "hpa-utilisation":
      return {
        kind: "autoscaler",
        name,
        policies: ctx.jobs.map((_, j) =>
          erase(hpaPolicy({ ...bounds(j), target: { kind: "utilisation", target: HPA_TARGET_UTILISATION } })),
        ),
        routing: { kind: "random" },
        initialReplicas: ones,
      };
    case "hpa-requests":
      return {
        kind: "autoscaler",
        name,
        policies: ctx.jobs.map((job, j) =>
          erase(
            hpaPolicy({
              ...bounds(j),
              target: { kind: "requests-per-replica", target: (HPA_TARGET_UTILISATION * 1000) / meanServiceMs(job.serviceTime) },
            }),
          ),
        ),
        routing: { kind: "random" },
        initialReplicas: ones,
      };
    case "knative-kpa":
      return {
        kind: "autoscaler",
        name,
        policies: ctx.jobs.map((_, j) => erase(kpaPolicy({ ...bounds(j), containerConcurrency: 1 }))),
        routing: { kind: "first-available" },
        initialReplicas: ones,
      };
    case "ray-serve":
      return {
        kind: "autoscaler",
        name,
        policies: ctx.jobs.map((_, j) => erase(rayServePolicy(bounds(j)))),
        routing: { kind: "power-of-two", maxOngoing: 5 },
        initialReplicas: ones,
      };
    case "fixed-peak": {
      const sizes = peakSizes(ctx);
      return {
        kind: "autoscaler",
        name,
        policies: sizes.map((n) => erase(fixedPolicy(n))),
        // A central queue: the assumption the M/M/c sizing makes.
        routing: { kind: "first-available" },
        initialReplicas: ctx.startAtOnePerJob === true ? ones : sizes,
      };
    }
    // Faro's baselines (Faro, section 6). Each job starts at 1 replica (Faro's evaluation), FairShare at its
    // share unless the experiment starts everyone at 1 (startAtOnePerJob); the per-job ones are capped at the
    // job's share of the cluster like every autoscaler here.
    case "fairshare": {
      const share = fairShareReplicas(ctx.capacity, J);
      return {
        kind: "autoscaler",
        name,
        policies: ctx.jobs.map(() => erase(fairSharePolicy(ctx.capacity, J))),
        routing: FARO_ROUTING,
        initialReplicas: ctx.startAtOnePerJob === true ? ones : new Array<number>(J).fill(share),
      };
    }
    case "oneshot":
      return {
        kind: "autoscaler",
        name,
        policies: ctx.jobs.map((job, j) => erase(oneshotPolicy({ ...bounds(j), sloMs: job.sloMs }))),
        routing: FARO_ROUTING,
        initialReplicas: ones,
      };
    case "aiad":
      return {
        kind: "autoscaler",
        name,
        policies: ctx.jobs.map((job, j) => erase(aiadPolicy({ ...bounds(j), sloMs: job.sloMs }))),
        routing: FARO_ROUTING,
        initialReplicas: ones,
      };
    case "mark":
      return {
        kind: "autoscaler",
        name,
        policies: ctx.jobs.map((job, j) =>
          erase(markPolicy({ ...bounds(j), sloMs: job.sloMs, meanServiceMs: meanServiceMs(job.serviceTime) })),
        ),
        routing: FARO_ROUTING,
        initialReplicas: ones,
      };
    case "faro-published":
      // One controller for the whole cluster: the solve shares the capacity out, so no per-job cap.
      return {
        kind: "autoscaler",
        name,
        central: eraseCluster(
          faroPublishedPolicy({
            jobs: ctx.jobs.map((job) => ({
              name: job.name,
              meanServiceMs: meanServiceMs(job.serviceTime),
              sloMs: job.sloMs,
              percentile: job.slMin * 100,
            })),
          }),
        ),
        routing: FARO_ROUTING,
        initialReplicas: ones,
      };
    case "clair-a1":
      return { kind: "clairvoyant", name, variant: "A1" };
    case "clair-a2":
      return { kind: "clairvoyant", name, variant: "A2" };
  }
}
