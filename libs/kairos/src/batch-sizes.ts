/**
 * Query sizes: how many items a query batches. Kairos's whole gain comes from their spread (small queries
 * meet QoS on cheap instances, large ones only on the fast one), so the mix is an input of both the upper
 * bound and the simulator.
 */
import { type Random, randomInt, standardNormal } from "@infergrid/core";

export type BatchMix =
  /**
   * The production mix Kairos evaluates on (DeepRecSys's query sizes as replayed by the Kairos artifact):
   * 8 % uniform in 1-99, 22 % in 200-599, 5 % in 600-999, the other 65 % lognormal(5.1, 0.2) kept to
   * 100-200 (outside it, uniform in 190-199).
   */
  | { kind: "kairos-production" }
  /** exp(N(mu, sigma)), rounded up and clamped to [1, max]. */
  | { kind: "lognormal"; mu: number; sigma: number; max: number }
  /** N(mean, sd), rounded and clamped to [1, max] (Kairos's robustness runs). */
  | { kind: "gaussian"; mean: number; sd: number; max: number };

const clamp = (x: number, max: number) => Math.min(max, Math.max(1, x));

/** One query's batch size, an integer >= 1. */
export function sampleBatch(random: Random, mix: BatchMix): number {
  switch (mix.kind) {
    case "kairos-production": {
      const r = 1 + randomInt(random, 99);
      if (r <= 8) return 1 + randomInt(random, 99);
      if (r <= 30) return 200 + randomInt(random, 400);
      if (r <= 35) return 600 + randomInt(random, 400);
      const x = Math.exp(5.1 + 0.2 * standardNormal(random));
      return x > 200 || x < 100 ? 190 + randomInt(random, 10) : Math.ceil(x);
    }
    case "lognormal":
      return clamp(Math.ceil(Math.exp(mix.mu + mix.sigma * standardNormal(random))), mix.max);
    case "gaussian":
      return clamp(Math.round(mix.mean + mix.sd * standardNormal(random)), mix.max);
  }
}

/** `n` sizes from one stream: the sample the upper bound is computed on (Kairos monitors its last 10,000). */
export function sampleBatches(random: Random, mix: BatchMix, n: number): number[] {
  return Array.from({ length: n }, () => sampleBatch(random, mix));
}

/**
 * A request's batch size: the first dimension of its input tensors (the largest, if they differ), 1 for a
 * request without inputs or with scalar ones. The frontend prices a request by it and an emulated backend
 * sleeps by it, so both read it here.
 */
export function batchOf(inputDims: Iterable<readonly number[]>): number {
  let batch = 1;
  for (const dims of inputDims) {
    const first = dims[0];
    if (first !== undefined && Number.isInteger(first) && first > batch) batch = first;
  }
  return batch;
}
