/**
 * Per-job utilities from SLOs (Faro, Sec. 3.1, Eq. 1) and the drop-rate penalty multiplier
 * (Sec. 3.2, Table 5, Eq. 2), each in its precise (step) and relaxed (plateau-free) form.
 */

import { withinTarget } from "./latency.js";

export type UtilityKind = { kind: "step" } | { kind: "relaxed"; alpha?: number };

/** U_original: 1 when the k-th percentile latency meets the target, else 0. */
export function stepUtility(latency: number, slo: number): number {
  return withinTarget(latency, slo) ? 1 : 0;
}

/** Eq. 1: min((s / l)^alpha, 1); alpha = 1 in the artifact. */
export function relaxedUtility(latency: number, slo: number, alpha = 1): number {
  if (!(latency > 0)) return 1;
  if (!Number.isFinite(latency)) return 0;
  if (withinTarget(latency, slo)) return 1;
  return Math.min((slo / latency) ** alpha, 1);
}

export function utilityOf(kind: UtilityKind, latency: number, slo: number): number {
  return kind.kind === "step" ? stepUtility(latency, slo) : relaxedUtility(latency, slo, kind.alpha ?? 1);
}

export type PenaltyKind = "step" | "relaxed";

/** Table 5 (AWS service credits): the penalty as a function of availability = 1 - drop rate. */
export function penaltyStep(availability: number): number {
  // Half a part per billion of slack so 1 - 0.01 counts as the 99 % it means.
  const a = availability + 5e-10;
  if (a >= 0.99) return 0;
  if (a >= 0.95) return 0.25;
  if (a >= 0.9) return 0.5;
  return 1;
}

/** Artifact's relaxation: piecewise linear in the drop rate through these points. */
export const PENALTY_BREAKPOINTS: readonly (readonly [number, number])[] = [
  [0, 0],
  [0.001, 0],
  [0.03, 0.25],
  [0.08, 0.5],
  [1, 1],
];

export function penaltyRelaxed(dropRate: number): number {
  if (!(dropRate >= 0 && dropRate <= 1)) throw new RangeError(`drop rate must be in [0, 1], got ${dropRate}`);
  for (let i = 1; i < PENALTY_BREAKPOINTS.length; i++) {
    const [x1, y1] = PENALTY_BREAKPOINTS[i]!;
    if (dropRate <= x1) {
      const [x0, y0] = PENALTY_BREAKPOINTS[i - 1]!;
      return y0 + ((y1 - y0) * (dropRate - x0)) / (x1 - x0);
    }
  }
  return 1;
}

/** phi(d) = 1 - penalty(1 - d): the multiplier on the utility of the requests not dropped. */
export function penaltyMultiplier(kind: PenaltyKind, dropRate: number): number {
  if (!(dropRate >= 0 && dropRate <= 1)) throw new RangeError(`drop rate must be in [0, 1], got ${dropRate}`);
  return 1 - (kind === "step" ? penaltyStep(1 - dropRate) : penaltyRelaxed(dropRate));
}

/** Eq. 2: EU = phi(d) * U(non-dropped requests). */
export function effectiveUtility(kind: PenaltyKind, dropRate: number, utilityOfKept: number): number {
  return penaltyMultiplier(kind, dropRate) * utilityOfKept;
}

/**
 * Drop rates worth trying. With the step table only the largest rate of each band matters (more
 * dropping at the same multiplier only lowers the load); the relaxed penalty is searched on its
 * breakpoints plus a grid between them.
 */
export function dropRateCandidates(kind: PenaltyKind): readonly number[] {
  if (kind === "step") return [0, 0.01, 0.05, 0.1];
  return [0, 0.001, 0.005, 0.01, 0.02, 0.03, 0.045, 0.06, 0.08, 0.12, 0.2, 0.35, 0.5];
}
