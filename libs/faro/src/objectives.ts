/**
 * Cluster objective functions (Faro, Sec. 3.2): Faro-Sum, Faro-Fair, Faro-FairSum,
 * Faro-PenaltySum, Faro-PenaltyFairSum, evaluated on the per-job (effective) utilities; and Attainment,
 * this project's: the requests served within their SLO, the quantity a cluster's violation rate counts.
 *
 * Faro-Fair is written in the paper as "minimise max U - min U"; taken literally every job at
 * utility 0 is optimal, which is not what the paper measures ("rich jobs pull poorer jobs
 * upwards"). Here Fair is max-min (maximise the smallest utility), ties broken by the largest
 * priority-weighted sum; its objective value is the smallest utility.
 */

import type { PenaltyKind } from "./utility.js";

export type ObjectiveSpec =
  | { kind: "sum" }
  | { kind: "fair" }
  /** gamma defaults to the number of jobs (the paper's recommendation). */
  | { kind: "fairSum"; gamma?: number }
  /** penalty defaults to "relaxed" (the plateau-free piecewise-linear multiplier). */
  | { kind: "penaltySum"; penalty?: PenaltyKind }
  | { kind: "penaltyFairSum"; gamma?: number; penalty?: PenaltyKind }
  /**
   * The requests served within their SLO, cluster-wide: each job's utility is the share of its planned
   * requests served in time (late ones dropped, see onTimeFraction) and its weight its planned rate, so the
   * objective is requests/s in time: what a cluster's SLO violation rate counts.
   */
  | { kind: "attainment" };

export function objectivePenalty(o: ObjectiveSpec): PenaltyKind | undefined {
  return o.kind === "penaltySum" || o.kind === "penaltyFairSum" ? (o.penalty ?? "relaxed") : undefined;
}

export function objectiveGamma(o: ObjectiveSpec, jobs: number): number {
  return o.kind === "fairSum" || o.kind === "penaltyFairSum" ? (o.gamma ?? jobs) : 0;
}

export function isFairSumLike(o: ObjectiveSpec): boolean {
  return o.kind === "fairSum" || o.kind === "penaltyFairSum";
}

/** Sum of pi_j * U_j. */
export function weightedSum(utilities: readonly number[], priorities: readonly number[]): number {
  let s = 0;
  for (let j = 0; j < utilities.length; j++) s += (priorities[j] ?? 1) * utilities[j]!;
  return s;
}

/** The cluster objective of Sec. 3.2 for the given per-job (effective) utilities. */
export function clusterObjective(o: ObjectiveSpec, utilities: readonly number[], priorities: readonly number[]): number {
  if (utilities.length === 0) return 0;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const u of utilities) {
    if (u < min) min = u;
    if (u > max) max = u;
  }
  switch (o.kind) {
    case "sum":
    case "penaltySum":
    case "attainment":
      return weightedSum(utilities, priorities);
    case "fair":
      return min;
    case "fairSum":
    case "penaltyFairSum":
      return weightedSum(utilities, priorities) - objectiveGamma(o, utilities.length) * (max - min);
  }
}
