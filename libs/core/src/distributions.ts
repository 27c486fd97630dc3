import type { Random } from "./random.js";

/**
 * Lognormal in scipy's parameterisation: X = loc + scale * exp(shape * Z), Z ~ N(0, 1).
 * The Faro ResNet-34 profile is shape 0.3602, loc 72.86 ms, scale 86.69 ms.
 */
export interface Lognormal {
  shape: number;
  loc: number;
  scale: number;
}

export function standardNormal(random: Random): number {
  // Box-Muller; 1 - u keeps log() away from 0.
  const u1 = 1 - random.uniform();
  const u2 = random.uniform();
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

export function sampleLognormal(random: Random, d: Lognormal): number {
  return d.loc + d.scale * Math.exp(d.shape * standardNormal(random));
}

export function lognormalMean(d: Lognormal): number {
  return d.loc + d.scale * Math.exp((d.shape * d.shape) / 2);
}

export function lognormalVariance(d: Lognormal): number {
  const s2 = d.shape * d.shape;
  return d.scale * d.scale * (Math.exp(s2) - 1) * Math.exp(s2);
}

/** Complementary error function, fractional error below 1.2e-7 everywhere (Numerical Recipes' erfcc). */
export function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? r : 2 - r;
}

export function normalCdf(z: number): number {
  return 0.5 * erfc(-z / Math.SQRT2);
}

const A = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
const B = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
const C = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
const D = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];

/** Inverse of the standard normal cdf, p in (0, 1) (Acklam's rational approximation, relative error 1.2e-9). */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`normalQuantile needs p in (0, 1), got ${p}`);
  const [a0, a1, a2, a3, a4, a5] = A as [number, number, number, number, number, number];
  const [b0, b1, b2, b3, b4] = B as [number, number, number, number, number];
  const [c0, c1, c2, c3, c4, c5] = C as [number, number, number, number, number, number];
  const [d0, d1, d2, d3] = D as [number, number, number, number];
  const low = 0.02425;
  if (p < low) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1);
  }
  if (p > 1 - low) {
    const q = Math.sqrt(-2 * Math.log(1 - p));
    return -(((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1);
  }
  const q = p - 0.5;
  const r = q * q;
  return ((((((a0 * r + a1) * r + a2) * r + a3) * r + a4) * r + a5) * q) / (((((b0 * r + b1) * r + b2) * r + b3) * r + b4) * r + 1);
}

export function lognormalCdf(d: Lognormal, x: number): number {
  if (x <= d.loc) return 0;
  if (d.shape === 0) return x >= d.loc + d.scale ? 1 : 0;
  return normalCdf(Math.log((x - d.loc) / d.scale) / d.shape);
}

/** The p-quantile, p in (0, 1). */
export function lognormalQuantile(d: Lognormal, p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`quantile needs p in (0, 1), got ${p}`);
  return d.loc + d.scale * Math.exp(d.shape * normalQuantile(p));
}

/** Fits scale and shape to a sample by the moments of log(x - loc) (loc given, 0 by default). */
export function fitLognormal(samples: readonly number[], loc = 0): Lognormal | undefined {
  const logs = samples.filter((x) => x > loc).map((x) => Math.log(x - loc));
  if (logs.length < 2) return undefined;
  const mean = logs.reduce((a, b) => a + b, 0) / logs.length;
  const variance = logs.reduce((a, b) => a + (b - mean) ** 2, 0) / (logs.length - 1);
  return { shape: Math.sqrt(variance), loc, scale: Math.exp(mean) };
}

export function sampleExponential(random: Random, rate: number): number {
  return -Math.log(1 - random.uniform()) / rate;
}

/** Poisson count with the given mean (Knuth for small means, normal approximation above 500). */
export function samplePoisson(random: Random, mean: number): number {
  if (mean <= 0) return 0;
  if (mean > 500) return Math.max(0, Math.round(mean + Math.sqrt(mean) * standardNormal(random)));
  const limit = Math.exp(-mean);
  let k = 0;
  let p = random.uniform();
  while (p > limit) {
    k += 1;
    p *= random.uniform();
  }
  return k;
}
