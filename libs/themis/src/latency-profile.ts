/**
 * Themis's performance model (Razavi et al., section 4.1, Eq. 1): the processing latency of one batch of b
 * requests on an instance with c cores, l(b, c) = gamma*b/c + eps/c + delta*b + eta, in ms. The first two
 * terms are the part that parallelises over cores, the last two the part that does not (Amdahl). Its
 * throughput is h(b, c) = b / l(b, c), and forming a batch of b at arrival rate lambda makes its first request
 * wait (b - 1)/lambda (Eq. 4).
 */
import { Matrix, solve } from "ml-matrix";
import { z } from "zod";

export interface ThemisProfile {
  /** ms per request that parallelises over cores. */
  gamma: number;
  /** ms per batch that parallelises over cores. */
  eps: number;
  /** ms per request that does not. */
  delta: number;
  /** ms per batch that does not. */
  eta: number;
}

export const themisProfileSchema = z.strictObject({
  gamma: z.number().finite().nonnegative(),
  eps: z.number().finite().nonnegative(),
  delta: z.number().finite().nonnegative(),
  eta: z.number().finite().nonnegative(),
});

/** l(b, c) in ms. */
export function processingMs(p: ThemisProfile, batch: number, cores: number): number {
  return (p.gamma * batch + p.eps) / cores + p.delta * batch + p.eta;
}

/** h(b, c): requests per second one instance serves with back-to-back batches of b. */
export function throughputPerS(p: ThemisProfile, batch: number, cores: number): number {
  return (batch * 1000) / processingMs(p, batch, cores);
}

/** q(b): how long the first request of a batch of b waits for the last at `ratePerS` (Eq. 4), in ms. */
export function batchWaitMs(batch: number, ratePerS: number): number {
  if (batch <= 1) return 0;
  return ratePerS > 0 ? ((batch - 1) * 1000) / ratePerS : Number.POSITIVE_INFINITY;
}

/** One measurement: a batch of `batch` on `cores` cores took `ms`. */
export interface ProfileSample {
  batch: number;
  cores: number;
  ms: number;
}

export interface ProfileFit {
  profile: ThemisProfile;
  /** Mean of |predicted - measured| / measured over the samples. */
  meanAbsPctError: number;
  maxAbsPctError: number;
  rmseMs: number;
  samples: number;
}

const TERMS = ["gamma", "eps", "delta", "eta"] as const;
const features = (s: ProfileSample): number[] => [s.batch / s.cores, 1 / s.cores, s.batch, 1];

/**
 * Least squares in relative error (each sample weighted by 1/ms, so batch 1 counts as much as batch 16) with
 * every coefficient non-negative: a negative term would predict a latency that falls as the batch grows or
 * cores are removed somewhere outside the measured grid. With four unknowns the non-negative optimum is found
 * exactly by solving the unconstrained problem on each of the 15 non-empty subsets of terms and keeping the
 * best whose coefficients are all non-negative (the optimum is one of them: its positive terms are the
 * unconstrained optimum on their subset).
 */
export function fitThemisProfile(samples: readonly ProfileSample[]): ProfileFit {
  for (const s of samples) {
    if (!(Number.isInteger(s.batch) && s.batch >= 1 && Number.isInteger(s.cores) && s.cores >= 1 && s.ms > 0 && Number.isFinite(s.ms))) {
      throw new RangeError(`a profile sample needs an integer batch and cores >= 1 and a positive ms, got ${JSON.stringify(s)}`);
    }
  }
  const distinct = new Set(samples.map((s) => `${s.batch}/${s.cores}`));
  if (distinct.size < 4) throw new RangeError(`fitting l(b, c) needs at least 4 distinct (batch, cores) points, got ${distinct.size}`);
  let best: { coef: number[]; sse: number } | undefined;
  for (let mask = 1; mask < 1 << TERMS.length; mask++) {
    const cols = TERMS.map((_, i) => i).filter((i) => mask & (1 << i));
    const a = new Matrix(samples.map((s) => cols.map((i) => (features(s)[i] ?? 0) / s.ms)));
    const y = Matrix.columnVector(samples.map(() => 1));
    let x: Matrix;
    try {
      x = solve(a, y, true);
    } catch {
      continue;
    }
    const coef = [0, 0, 0, 0];
    cols.forEach((i, k) => {
      coef[i] = x.get(k, 0);
    });
    if (coef.some((v) => !(v >= 0) || !Number.isFinite(v))) continue;
    const sse = samples.reduce((acc, s) => acc + (dot(coef, features(s)) / s.ms - 1) ** 2, 0);
    if (best === undefined || sse < best.sse) best = { coef, sse };
  }
  if (best === undefined) throw new RangeError("no non-negative fit of l(b, c) to these samples");
  const [gamma = 0, eps = 0, delta = 0, eta = 0] = best.coef;
  const profile = { gamma, eps, delta, eta };
  return { profile, ...fitError(profile, samples) };
}

/** How far a profile's predictions are from measurements. */
export function fitError(profile: ThemisProfile, samples: readonly ProfileSample[]): Omit<ProfileFit, "profile"> {
  let sumPct = 0;
  let maxPct = 0;
  let sq = 0;
  for (const s of samples) {
    const predicted = processingMs(profile, s.batch, s.cores);
    const pct = Math.abs(predicted - s.ms) / s.ms;
    sumPct += pct;
    maxPct = Math.max(maxPct, pct);
    sq += (predicted - s.ms) ** 2;
  }
  const n = samples.length;
  return { meanAbsPctError: n ? sumPct / n : 0, maxAbsPctError: maxPct, rmseMs: n ? Math.sqrt(sq / n) : 0, samples: n };
}

function dot(a: readonly number[], b: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] ?? 0) * (b[i] ?? 0);
  return s;
}
