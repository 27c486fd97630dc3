/**
 * The slow loop's defaults: the global allocator's flags default to these and the simulator's "infergrid"
 * policy runs with them, so a simulated result speaks for the allocator as shipped.
 */
import type { ObjectiveSpec } from "@infergrid/faro";

/** Cluster objectives by their flag names. */
export const OBJECTIVES = {
  sum: { kind: "sum" },
  fair: { kind: "fair" },
  "fair-sum": { kind: "fairSum" },
  "penalty-sum": { kind: "penaltySum" },
  "penalty-fair-sum": { kind: "penaltyFairSum" },
  attainment: { kind: "attainment" },
} as const satisfies Record<string, ObjectiveSpec>;
export type ObjectiveName = keyof typeof OBJECTIVES;
export const OBJECTIVE_NAMES = Object.keys(OBJECTIVES) as [ObjectiveName, ...ObjectiveName[]];

export const SLOW_LOOP_DEFAULTS = {
  /**
   * Faro-Sum, the jobs' utilities summed (each capped at 1, a job over its SLO credited SLO / latency). With
   * the frontends' pruning budget (libs/swayam PRUNE_BUDGET_DEFAULTS) a job's late minute keeps partial credit
   * as Faro's utility gives it, and Faro-Sum serves some jobs fully rather than every job short of its SLO.
   * Measured in the simulator (seed 1, plan at the 0.5 quantile, the pruning budget without its late cap; docs/results.md), violations
   * % and lost utility: faro-16 60.3 / 5.77 (attainment: 80.0 / 8.82), faro-32 4.83 / 0.63 (4.50 / 0.61),
   * faro-36 1.30 / 0.20 (1.30 / 0.20), faro-48 0.10 / 0.02 (the same): attainment starved whole jobs on the
   * over-subscribed cluster once late requests were no longer all dropped. `attainment` is the objective that
   * had the fewest violations with Swayam's pruning (faro-16: 29.1 %, but 9.4 of 10 utility lost).
   */
  objective: "sum" as ObjectiveName,
  /** Between predictive solves (Faro: 5 min). */
  solvePeriodMs: 300_000,
  /** The reactive stage's period; SLO violations are judged over each tick. */
  reactiveTickMs: 10_000,
  /** Consecutive violating ticks before a share grows by one. */
  reactiveTicks: 3,
  /**
   * Forecast quantile planned for (Faro's artifact: 0.6). The predictor's upper quantiles are wide while its
   * history is short, and on a cluster that binds, planning for them took backends from the jobs they were
   * planned for (faro-36, seed 1, attainment, Swayam's pruning: lost utility 0.44 at 0.9, 0.33 at 0.6; with the
   * pruning budget (no late cap) and Faro-Sum, faro-32: 0.63 at 0.5, 0.69 at 0.6). The frontends' burst factor and learned
   * headroom cover what the median misses, inside the lists.
   */
  planQuantile: 0.5,
  /** Capacity added now is planned to serve only after this. */
  plannedColdStartMs: 10_000,
};
