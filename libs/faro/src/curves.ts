/**
 * Per-job autoscaling formulation (Faro, Sec. 4.1): the utility of a job as a function of its
 * integer replica count c, averaged over the forecast steps,
 *   f(c) = (1/w) * sum_k U(L(lambda_k, p, c), s),
 * with the cold start of Sec. 4.1 (replicas added now serve only after it) and, for the penalty
 * objectives, the best drop rate d (Sec. 3.2, Eq. 2-3): f(c) = max_d phi(d) * mean_k U(lambda_k (1 - d), c).
 * Everything the solvers need is this table of f over c, computed once per job per period.
 */

import {
  erlangCFromB,
  type LatencyModelKind,
  mmcWaitPercentileFromC,
  onTimeFractionFromB,
  RHO_MAX,
  relaxedMdcLatency,
  upperBoundLatency,
} from "./latency.js";
import { dropRateCandidates, type PenaltyKind, penaltyMultiplier, type UtilityKind, utilityOf } from "./utility.js";

export interface Slo {
  /** Latency target, seconds. */
  latency: number;
  /** Percentile in (0, 100), e.g. 99. */
  percentile: number;
}

export interface JobSpec {
  id: string;
  /** Mean per-request processing time p, seconds. */
  processingTime: number;
  slo: Slo;
  /** Planned arrival rate (requests/s) for each forecast step; see planningRates. */
  rates: readonly number[];
  /** pi_j in Faro-Sum (default 1). */
  priority?: number;
  /** Default 1 (the paper's x_i >= 1). */
  minReplicas?: number;
  /** Default: unbounded (the cluster capacity bounds it). */
  maxReplicas?: number;
  /** Replicas warm now; the only ones serving during the cold start (default: minReplicas). */
  currentReplicas?: number;
  /** Resources per replica, for CPU / memory capacities (default 1 each). */
  cpu?: number;
  mem?: number;
  /** Default relaxed with alpha = 1. */
  utility?: UtilityKind;
  /** Default M/D/c with the rho_max relaxation. */
  latencyModel?: LatencyModelKind;
}

export interface CurveContext {
  /** Length of one forecast step, seconds (the paper's one-minute bins). */
  stepSeconds?: number;
  /** Cold start, seconds (0 = none). The artifact plans about one bin. */
  coldStartSeconds?: number;
  /** Set for PenaltySum / PenaltyFairSum: the curve then maximises over the drop rate. */
  penalty?: PenaltyKind;
  /**
   * Set for the attainment objective: f(c) is the share of the window's planned requests served within
   * the SLO (onTimeFraction per step, weighted by the step's rate) instead of a latency utility.
   */
  attainment?: boolean;
  rhoMax?: number;
}

/** f(c) for c in [lo, hi]; beyond hi the curve is flat (saturated) or the replicas cannot fit. */
export interface JobCurve {
  lo: number;
  hi: number;
  /** values[c - lo] = f(c), non-decreasing in c. */
  values: Float64Array;
  /** The drop rate that achieves values[c - lo] (0 without a penalty objective). */
  drops: Float64Array;
}

export function curveValue(curve: JobCurve, c: number): number {
  if (c < curve.lo) throw new RangeError(`replicas ${c} below the job's minimum ${curve.lo}`);
  return curve.values[Math.min(c, curve.hi) - curve.lo]!;
}

export function curveDrop(curve: JobCurve, c: number): number {
  return curve.drops[Math.max(0, Math.min(c, curve.hi) - curve.lo)]!;
}

/** Share of each step served by the warm replicas alone: the part of the step inside the cold start. */
export function coldStartWeights(steps: number, stepSeconds: number, coldStartSeconds: number): number[] {
  if (!(stepSeconds > 0)) throw new RangeError(`stepSeconds must be > 0, got ${stepSeconds}`);
  if (!(coldStartSeconds >= 0)) throw new RangeError(`coldStartSeconds must be >= 0, got ${coldStartSeconds}`);
  const w: number[] = [];
  for (let k = 0; k < steps; k++) w.push(Math.min(1, Math.max(0, (coldStartSeconds - k * stepSeconds) / stepSeconds)));
  return w;
}

export function validateJob(job: JobSpec): void {
  const ok =
    job.processingTime > 0 &&
    Number.isFinite(job.processingTime) &&
    job.slo.latency > 0 &&
    job.slo.percentile > 0 &&
    job.slo.percentile < 100 &&
    job.rates.length > 0 &&
    job.rates.every((r) => r >= 0 && Number.isFinite(r)) &&
    Number.isInteger(job.minReplicas ?? 1) &&
    (job.minReplicas ?? 1) >= 0 &&
    (job.maxReplicas === undefined || (Number.isInteger(job.maxReplicas) && job.maxReplicas >= (job.minReplicas ?? 1))) &&
    (job.currentReplicas === undefined || (Number.isInteger(job.currentReplicas) && job.currentReplicas >= 0)) &&
    (job.priority ?? 1) >= 0 &&
    (job.cpu ?? 1) > 0 &&
    (job.mem ?? 1) > 0;
  if (ok) return;
  // The slow path only runs to name the bad field.
  const where = `job ${JSON.stringify(job.id)}`;
  if (!(job.processingTime > 0) || !Number.isFinite(job.processingTime)) throw new RangeError(`${where}: processingTime must be > 0 s`);
  if (!(job.slo.latency > 0)) throw new RangeError(`${where}: SLO latency must be > 0 s`);
  if (!(job.slo.percentile > 0 && job.slo.percentile < 100)) throw new RangeError(`${where}: SLO percentile must be in (0, 100)`);
  if (job.rates.length === 0) throw new RangeError(`${where}: needs at least one forecast step`);
  for (const r of job.rates) if (!(r >= 0) || !Number.isFinite(r)) throw new RangeError(`${where}: rates must be finite and >= 0`);
  const lo = job.minReplicas ?? 1;
  if (!Number.isInteger(lo) || lo < 0) throw new RangeError(`${where}: minReplicas must be an integer >= 0`);
  const hi = job.maxReplicas;
  if (hi !== undefined && (!Number.isInteger(hi) || hi < lo))
    throw new RangeError(`${where}: maxReplicas must be an integer >= minReplicas`);
  const cur = job.currentReplicas;
  if (cur !== undefined && (!Number.isInteger(cur) || cur < 0)) throw new RangeError(`${where}: currentReplicas must be an integer >= 0`);
  if ((job.priority ?? 1) < 0) throw new RangeError(`${where}: priority must be >= 0`);
  if (!((job.cpu ?? 1) > 0) || !((job.mem ?? 1) > 0)) throw new RangeError(`${where}: cpu and mem per replica must be > 0`);
}

/** One arrival stream evaluated at increasing c, with the Erlang B recursion carried along. */
interface Track {
  lambda: number;
  a: number;
  b: number;
  /** Utility at the warm replica count (used for the cold-start share of steps when c > warm). */
  warmUtility: number;
}

/**
 * Builds f(c) for c in [lo, min(hiCap, saturation)]. Erlang B is advanced one server at a time per
 * step rate, so the whole curve costs O(steps x hi) plus the memoised rho_max terms.
 */
export function buildCurve(job: JobSpec, ctx: CurveContext, hiCap: number): JobCurve {
  validateJob(job);
  const lo = job.minReplicas ?? 1;
  const hi0 = Math.min(job.maxReplicas ?? Number.POSITIVE_INFINITY, Math.max(lo, Math.floor(hiCap)));
  const warm = job.currentReplicas ?? lo;
  const steps = job.rates.length;
  const coldW = coldStartWeights(steps, ctx.stepSeconds ?? 60, ctx.coldStartSeconds ?? 0);
  const drops = ctx.penalty === undefined ? [0] : dropRateCandidates(ctx.penalty);
  const mult = drops.map((d) => (ctx.penalty === undefined ? 1 : penaltyMultiplier(ctx.penalty, d)));
  const p = job.processingTime;
  const k = job.slo.percentile;
  const s = job.slo.latency;
  const uk: UtilityKind = job.utility ?? { kind: "relaxed", alpha: 1 };
  const model = job.latencyModel ?? "mdc";
  const rhoMax = ctx.rhoMax ?? RHO_MAX;
  const attainment = ctx.attainment === true;
  const meanRate = job.rates.reduce((x, r) => x + r, 0) / steps;
  // Attainment counts requests, so a busy step weighs more; latency utilities weigh every step alike.
  const stepWeight = job.rates.map((r) => (attainment && meanRate > 0 ? r / meanRate : 1));
  const tracks: Track[][] = drops.map((d) => job.rates.map((r) => ({ lambda: r * (1 - d), a: r * (1 - d) * p, b: 1, warmUtility: 0 })));

  const tail = 1 - k / 100;
  const sloTol = s * (1 + 1e-9);
  const alpha = uk.kind === "relaxed" ? (uk.alpha ?? 1) : 1;
  const isStep = uk.kind === "step";
  // Set by utilityAt: whether the track's latency is at its floor p (more replicas cannot help).
  let atFloor = false;
  const utilityAt = (t: Track, c: number): number => {
    let l: number;
    if (t.lambda <= 0) {
      atFloor = true;
      l = p;
    } else if (c === 0) {
      atFloor = false;
      return 0;
    } else if (model === "upperBound") {
      l = Math.max(p, (p * t.lambda) / c);
      atFloor = t.lambda <= c;
    } else if (t.a > rhoMax * c) {
      l = relaxedMdcLatency(k, p, t.lambda, c, rhoMax);
      atFloor = false;
    } else {
      const C = erlangCFromB(c, t.a, t.b);
      l = mmcWaitPercentileFromC(k, p, t.lambda, c, C) / 2 + p;
      atFloor = C <= tail;
    }
    if (l <= sloTol) return 1;
    // Attainment credits a job short of its SLO with the share it serves in time (late requests dropped);
    // one that meets it is done, as with the latency utilities, so the replicas beyond go to the pool.
    if (attainment) return onTimeFractionFromB(p, s, c, t.a, t.b);
    return isStep ? 0 : (s / l) ** alpha;
  };

  const values: number[] = [];
  const bestDrops: number[] = [];
  let saturatedAt = -1;
  for (let c = 0; c <= hi0; c++) {
    if (c > 0) for (const ts of tracks) for (const t of ts) t.b = (t.a * t.b) / (c + t.a * t.b);
    let best = -1;
    let bestD = 0;
    let floor = true;
    for (let di = 0; di < tracks.length; di++) {
      const ts = tracks[di]!;
      let sum = 0;
      for (let i = 0; i < steps; i++) {
        const t = ts[i]!;
        const u = utilityAt(t, c);
        if (!atFloor) floor = false;
        if (c === warm) t.warmUtility = u;
        const cw = coldW[i]!;
        // Before the cold start ends only min(c, warm) replicas serve: removals are immediate.
        sum += stepWeight[i]! * (c > warm && cw > 0 ? cw * t.warmUtility + (1 - cw) * u : u);
      }
      const v = (mult[di]! * sum) / steps;
      if (v > best + 1e-15) {
        best = v;
        bestD = drops[di]!;
      }
    }
    if (c >= lo) {
      values.push(best);
      bestDrops.push(bestD);
    }
    // Past the warm count and with every latency at its floor, more replicas change nothing.
    if (c >= lo && c >= warm && (floor || best >= 1 - 1e-12)) {
      saturatedAt = c;
      break;
    }
  }
  const hi = saturatedAt >= 0 ? saturatedAt : hi0;
  // Rounding in the recursions must not make the table decrease: f is non-decreasing in c.
  for (let i = 1; i < values.length; i++) if (values[i]! < values[i - 1]!) values[i] = values[i - 1]!;
  return { lo, hi, values: Float64Array.from(values), drops: Float64Array.from(bestDrops) };
}

/** A job's planned utility at c replicas (same model and context as the solver uses). */
export function jobUtility(job: JobSpec, c: number, ctx: CurveContext = {}): number {
  const curve = buildCurve({ ...job, minReplicas: Math.min(c, job.minReplicas ?? 1), maxReplicas: undefined }, ctx, c);
  return curveValue(curve, c);
}

/**
 * Cold-start planning (Sec. 4.1): the utility of each forecast step if the job goes from its
 * currentReplicas to `planned` now. During the cold start only min(planned, current) replicas
 * serve (removals are immediate, additions are not); a step partly inside it mixes the two.
 * Evaluated directly from the latency model (no tables), so it also checks the solver's tables.
 */
export function plannedStepUtilities(job: JobSpec, planned: number, ctx: CurveContext = {}, dropRate = 0): number[] {
  validateJob(job);
  if (!Number.isInteger(planned) || planned < 0) throw new RangeError(`planned replicas must be an integer >= 0, got ${planned}`);
  const warm = Math.min(planned, job.currentReplicas ?? planned);
  const coldW = coldStartWeights(job.rates.length, ctx.stepSeconds ?? 60, ctx.coldStartSeconds ?? 0);
  const uk: UtilityKind = job.utility ?? { kind: "relaxed", alpha: 1 };
  const u = (lambda: number, c: number): number => {
    const p = job.processingTime;
    let l: number;
    if (lambda <= 0) l = p;
    else if (c === 0) l = Number.POSITIVE_INFINITY;
    else if ((job.latencyModel ?? "mdc") === "upperBound") l = upperBoundLatency(p, lambda, c);
    else l = relaxedMdcLatency(job.slo.percentile, p, lambda, c, ctx.rhoMax ?? RHO_MAX);
    return utilityOf(uk, l, job.slo.latency);
  };
  const mult = ctx.penalty === undefined ? 1 : penaltyMultiplier(ctx.penalty, dropRate);
  return job.rates.map((r, k) => {
    const lambda = r * (1 - dropRate);
    const cw = coldW[k]!;
    return mult * (cw > 0 && warm < planned ? cw * u(lambda, warm) + (1 - cw) * u(lambda, planned) : u(lambda, planned));
  });
}

export type RatePlan = { kind: "quantile"; q: number } | { kind: "max" };

/**
 * Planning rates from a probabilistic forecast (Sec. 3.5.2): samples[s][k] is sample s's rate at
 * step k. Per step either a quantile across samples (the artifact uses 0.6) or their maximum.
 */
export function planningRates(samples: readonly (readonly number[])[], plan: RatePlan): number[] {
  if (samples.length === 0) throw new RangeError("planningRates: no samples");
  const steps = samples[0]!.length;
  for (const s of samples) if (s.length !== steps) throw new RangeError("planningRates: samples differ in length");
  const out: number[] = [];
  for (let k = 0; k < steps; k++) {
    const col = samples.map((s) => s[k]!).sort((a, b) => a - b);
    if (plan.kind === "max") out.push(col[col.length - 1]!);
    else {
      if (!(plan.q >= 0 && plan.q <= 1)) throw new RangeError(`quantile must be in [0, 1], got ${plan.q}`);
      // Linear interpolation between order statistics (numpy's default).
      const pos = plan.q * (col.length - 1);
      const i = Math.floor(pos);
      const frac = pos - i;
      out.push(col[i]! + (i + 1 < col.length ? frac * (col[i + 1]! - col[i]!) : 0));
    }
  }
  return out;
}
