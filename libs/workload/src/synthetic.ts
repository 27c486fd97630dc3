import { type Random, samplePoisson, seededRandom, standardNormal } from "@infergrid/core";
import { makeTrace, type Trace } from "./trace.js";

/**
 * One job of a synthetic trace. Per minute m the rate is
 *   base + (mean - base) * diurnal(m) * burst(m) * noise(m) / E[burst]
 * where diurnal(m) = 1 + amplitude * cos(2π (m - peakMinute) / period), burst(m) = 1 + the decaying excess of the
 * bursts started so far (each starts at multiplier x and decays by e every `burstDecayMinutes`), and noise is
 * lognormal with mean 1. Dividing by E[burst] keeps the long-run mean at `meanPerMinute`.
 */
export interface SyntheticJob {
  name: string;
  meanPerMinute: number;
  /** Relative swing of the daily cycle, 0..1 (default 0.5: the rate moves between 0.5x and 1.5x the mean). */
  diurnalAmplitude?: number;
  /** Length of one cycle in minutes (default 1440). */
  periodMinutes?: number;
  /** The phase: a minute at which the cycle peaks (default 720, i.e. midday when minute 0 is midnight). */
  peakMinute?: number;
  /** Rate that is always present and takes no part in the cycle, bursts or noise (default 0; at most the mean). */
  basePerMinute?: number;
  /** Coefficient of variation of the multiplicative noise (default 0.1). */
  noiseCv?: number;
  /** Mean number of bursts a day, Poisson-timed (default 4). */
  burstsPerDay?: number;
  /** Rate multiplier at the start of a burst (default 3; 1 means no spike). */
  burstMultiplier?: number;
  /** Time constant of a burst's exponential decay in minutes (default 10). */
  burstDecayMinutes?: number;
}

export interface SyntheticTraceOptions {
  jobs: readonly SyntheticJob[];
  minutes: number;
  seed: number;
  /** Round counts to integers as real traces have (stochastic rounding, so the mean is kept). Default true. */
  integerCounts?: boolean;
  source?: string;
}

/**
 * A trace shaped like the public ones (daily cycle, bursts, noise), deterministic for a seed. Each job draws
 * from its own stream seeded by (seed, job name), so adding or reordering jobs leaves the others unchanged.
 */
export function syntheticTrace(options: SyntheticTraceOptions): Trace {
  const { jobs, minutes, seed } = options;
  if (!Number.isInteger(minutes) || minutes < 1) throw new RangeError(`minutes must be a positive integer, got ${minutes}`);
  const counts = new Map<string, Float64Array>();
  for (const job of jobs) {
    if (counts.has(job.name)) throw new Error(`synthetic trace: job '${job.name}' listed twice`);
    counts.set(job.name, syntheticSeries(job, minutes, seededRandom(mixSeed(seed, job.name)), options.integerCounts ?? true));
  }
  const source = options.source ?? `synthetic(seed=${seed}, ${jobs.length} jobs, ${minutes} min)`;
  return makeTrace(
    jobs.map((j) => j.name),
    counts,
    minutes,
    source,
  );
}

function syntheticSeries(job: SyntheticJob, minutes: number, random: Random, integer: boolean): Float64Array {
  const mean = job.meanPerMinute;
  const amplitude = job.diurnalAmplitude ?? 0.5;
  const period = job.periodMinutes ?? 1440;
  const peak = job.peakMinute ?? 720;
  const base = job.basePerMinute ?? 0;
  const cv = job.noiseCv ?? 0.1;
  const burstRate = (job.burstsPerDay ?? 4) / 1440;
  const multiplier = job.burstMultiplier ?? 3;
  const decayMinutes = job.burstDecayMinutes ?? 10;
  const where = `synthetic job '${job.name}'`;
  check(Number.isFinite(mean) && mean >= 0, `${where}: meanPerMinute must be >= 0, got ${mean}`);
  check(amplitude >= 0 && amplitude <= 1, `${where}: diurnalAmplitude must be in [0, 1], got ${amplitude}`);
  check(period > 0 && Number.isFinite(period), `${where}: periodMinutes must be > 0, got ${period}`);
  check(Number.isFinite(peak), `${where}: peakMinute must be finite, got ${peak}`);
  check(base >= 0 && base <= mean, `${where}: basePerMinute must be in [0, meanPerMinute], got ${base}`);
  check(cv >= 0 && Number.isFinite(cv), `${where}: noiseCv must be >= 0, got ${cv}`);
  check(burstRate >= 0 && Number.isFinite(burstRate), `${where}: burstsPerDay must be >= 0`);
  check(multiplier >= 1 && Number.isFinite(multiplier), `${where}: burstMultiplier must be >= 1, got ${multiplier}`);
  check(decayMinutes > 0 && Number.isFinite(decayMinutes), `${where}: burstDecayMinutes must be > 0, got ${decayMinutes}`);

  const retain = Math.exp(-1 / decayMinutes);
  // Stationary mean of the discrete burst excess: each burst contributes (multiplier - 1) / (1 - retain) in total.
  const burstMean = 1 + (burstRate * (multiplier - 1)) / (1 - retain);
  const sigma = Math.sqrt(Math.log(1 + cv * cv));
  const out = new Float64Array(minutes);
  let excess = 0;
  for (let m = 0; m < minutes; m++) {
    excess = excess * retain + samplePoisson(random, burstRate) * (multiplier - 1);
    const diurnal = 1 + amplitude * Math.cos((2 * Math.PI * (m - peak)) / period);
    const noise = sigma === 0 ? 1 : Math.exp(sigma * standardNormal(random) - (sigma * sigma) / 2);
    const rate = base + ((mean - base) * diurnal * (1 + excess) * noise) / burstMean;
    out[m] = integer ? stochasticRound(rate, random) : rate;
  }
  return out;
}

function stochasticRound(x: number, random: Random): number {
  const floor = Math.floor(x);
  return random.uniform() < x - floor ? floor + 1 : floor;
}

function check(ok: boolean, message: string): void {
  if (!ok) throw new RangeError(message);
}

/** FNV-1a of the name folded into the seed: a 32-bit seed per job. */
function mixSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed | 0);
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}
