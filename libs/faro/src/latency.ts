/**
 * Latency estimation (Faro, Sec. 3.3, and the relaxation of Sec. 3.4, Fig. 6 right).
 *
 * - M/M/c probability of waiting, Erlang C, from the Erlang B recursion (every term stays in
 *   (0, 1], so it neither overflows nor loses precision for thousands of servers).
 * - k-th percentile wait of M/M/c: max(0, ln(C / (1 - k/100)) / (c/p - lambda)) (artifact formula).
 * - M/D/c: wait is about half of M/M/c's (the engineering approximation the paper adopts), so
 *   latency = wait / 2 + p.
 * - Upper-bound estimator: kappa requests arriving together on N replicas finish after p * kappa / N.
 * - Relaxation beyond rho_max: latency(lambda) = (lambda / lambda_max) * latency(lambda_max) with
 *   lambda_max = rho_max * c / p, which grows with the overload instead of being a flat infinity.
 */

/** Faro's rho_max: close enough to 1 to track the real queue, far enough to keep latency finite. */
export const RHO_MAX = 0.95;

/** Erlang B blocking probability for c servers and offered load a (Erlangs). */
export function erlangB(c: number, a: number): number {
  if (!Number.isInteger(c) || c < 0) throw new RangeError(`erlangB: servers must be a non-negative integer, got ${c}`);
  if (!(a >= 0)) throw new RangeError(`erlangB: offered load must be >= 0, got ${a}`);
  let b = 1;
  for (let i = 1; i <= c; i++) b = (a * b) / (i + a * b);
  return b;
}

/** Erlang C from Erlang B: the probability an arrival waits in M/M/c. 1 when the queue is unstable. */
export function erlangCFromB(c: number, a: number, b: number): number {
  if (a >= c) return 1;
  if (a === 0) return 0;
  return (c * b) / (c - a * (1 - b));
}

export function erlangC(c: number, a: number): number {
  if (c === 0) return 1;
  if (a >= c) return 1;
  return erlangCFromB(c, a, erlangB(c, a));
}

/** k-th percentile of the M/M/c waiting time (seconds), given Erlang C; Infinity when unstable. */
export function mmcWaitPercentileFromC(percentile: number, p: number, lambda: number, c: number, erlang: number): number {
  if (lambda <= 0) return 0;
  const drain = c / p - lambda;
  if (drain <= 0) return Number.POSITIVE_INFINITY;
  const tail = 1 - percentile / 100;
  if (erlang <= tail) return 0;
  return Math.log(erlang / tail) / drain;
}

export function mmcWaitPercentile(percentile: number, p: number, lambda: number, c: number): number {
  checkArgs(percentile, p, lambda, c);
  if (lambda <= 0) return 0;
  if (c === 0) return Number.POSITIVE_INFINITY;
  return mmcWaitPercentileFromC(percentile, p, lambda, c, erlangC(c, lambda * p));
}

/** k-th percentile latency of M/D/c (seconds): half the M/M/c wait plus the service time. */
export function mdcLatency(percentile: number, p: number, lambda: number, c: number): number {
  return mmcWaitPercentile(percentile, p, lambda, c) / 2 + p;
}

// Erlang C at load rho_max * c depends on c alone; jobs and steps share it, so it is memoised.
const rhoMaxErlang: number[] = [];
let rhoMaxErlangFor = RHO_MAX;

/** Erlang C(c, rhoMax * c), memoised per c (the relaxed latency evaluates it for every unstable c). */
export function erlangCAtRho(c: number, rhoMax: number = RHO_MAX): number {
  if (rhoMax !== rhoMaxErlangFor) {
    rhoMaxErlang.length = 0;
    rhoMaxErlangFor = rhoMax;
  }
  let v = rhoMaxErlang[c];
  if (v === undefined) {
    v = erlangC(c, rhoMax * c);
    rhoMaxErlang[c] = v;
  }
  return v;
}

/**
 * Relaxed M/D/c latency (Sec. 3.4): exact up to rho_max, then proportional to lambda, so more
 * replicas always help and the objective has no plateau where the queue is unstable.
 */
export function relaxedMdcLatency(percentile: number, p: number, lambda: number, c: number, rhoMax: number = RHO_MAX): number {
  checkArgs(percentile, p, lambda, c);
  if (lambda <= 0) return p;
  if (c === 0) return Number.POSITIVE_INFINITY;
  const rho = (lambda * p) / c;
  if (rho <= rhoMax) return mdcLatency(percentile, p, lambda, c);
  const lambdaMax = (rhoMax * c) / p;
  const atMax = mmcWaitPercentileFromC(percentile, p, lambdaMax, c, erlangCAtRho(c, rhoMax)) / 2 + p;
  return (lambda / lambdaMax) * atMax;
}

/**
 * Upper-bound estimator (Sec. 3.3): the requests of one window (kappa = lambda * window) arrive at
 * once and are served N at a time; never below one service time. With a 1 s window it gives the
 * paper's 10 replicas for the worked example.
 */
export function upperBoundLatency(p: number, lambda: number, c: number, windowSeconds = 1): number {
  checkArgs(50, p, lambda, c);
  if (lambda <= 0) return p;
  if (c === 0) return Number.POSITIVE_INFINITY;
  return Math.max(p, (p * lambda * windowSeconds) / c);
}

/**
 * Share of requests served within the SLO latency `target` when a request that could no longer meet it is
 * dropped instead of queued (the frontends' pruning), for M/D/c: M/M/c/K, from Erlang B `b` = B(c, a)
 * (a = lambda p), P(blocked) = b rho^m / (1 + b (rho + ... + rho^m)) with rho = a / c and the queue cut
 * at m = floor(2 c (target - p) / p): the waits that still fit, doubled because M/D/c waits about half
 * as long as M/M/c (the same approximation as mdcLatency). At overload it tends to the fluid c / a.
 */
export function onTimeFractionFromB(p: number, target: number, c: number, a: number, b: number): number {
  if (a <= 0) return 1;
  if (c === 0 || target < p) return 0;
  const m = Math.floor((2 * c * (target - p)) / p + 1e-9);
  const rho = a / c;
  let blocked: number;
  if (m === 0) blocked = b;
  else if (Math.abs(rho - 1) < 1e-12) blocked = b / (1 + b * m);
  else if (rho < 1) {
    const rm = rho ** m;
    blocked = (b * rm) / (1 + (b * rho * (1 - rm)) / (1 - rho));
  } else {
    // Divided through by rho^m so nothing overflows for large m.
    const inv = rho ** -m;
    blocked = b / (inv + (b * rho * (1 - inv)) / (rho - 1));
  }
  return Math.min(1, Math.max(0, 1 - blocked));
}

/** onTimeFractionFromB for arrival rate `lambda` (requests/s) on c servers of service time p (s). */
export function onTimeFraction(p: number, lambda: number, c: number, target: number): number {
  checkArgs(50, p, lambda, c);
  return onTimeFractionFromB(p, target, c, lambda * p, erlangB(c, lambda * p));
}

export type LatencyModelKind = "mdc" | "upperBound";

/** The smallest replica count whose estimated k-th percentile latency is within the target. */
export function replicasForLatency(
  model: LatencyModelKind,
  percentile: number,
  p: number,
  lambda: number,
  target: number,
  maxReplicas = 100_000,
): number | undefined {
  for (let c = 1; c <= maxReplicas; c++) {
    const l = model === "mdc" ? mdcLatency(percentile, p, lambda, c) : upperBoundLatency(p, lambda, c);
    if (withinTarget(l, target)) return c;
  }
  return undefined;
}

/** Latency comparisons tolerate rounding (0.15 * 40 / 10 is 0.6000000000000001). */
export function withinTarget(latency: number, target: number): boolean {
  return latency <= target * (1 + 1e-9);
}

function checkArgs(percentile: number, p: number, lambda: number, c: number): void {
  if (!(percentile > 0 && percentile < 100)) throw new RangeError(`percentile must be in (0, 100), got ${percentile}`);
  if (!(p > 0) || !Number.isFinite(p)) throw new RangeError(`processing time must be > 0 s, got ${p}`);
  if (!(lambda >= 0) || !Number.isFinite(lambda)) throw new RangeError(`arrival rate must be >= 0, got ${lambda}`);
  if (!Number.isInteger(c) || c < 0) throw new RangeError(`replicas must be a non-negative integer, got ${c}`);
}
