/** Hand-made catalogues for the tests: latencies chosen so the paper's formulas can be worked by hand. */
import type { InstanceType, LatencyPoint } from "./instance-types.js";

export function flatType(name: string, pricePerHour: number, maxCount: number, points: readonly LatencyPoint[], model = "m"): InstanceType {
  return { name, pricePerHour, maxCount, profiles: new Map([[model, { points }]]) };
}

/** A point with the same mean and p99. */
export const pt = (batch: number, ms: number): LatencyPoint => ({ batch, meanMs: ms, p99Ms: ms });
