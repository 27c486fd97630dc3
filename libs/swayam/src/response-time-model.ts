/**
 * Swayam's model-based backend estimation (Gujarati et al., Middleware'17, sections 4.3 and 4.5, Eq. 1).
 *
 * Random dispatch with retries: every probe finds its backend busy with probability rho = lambda E[S] / n,
 * independently, so the number of probes K is geometric, P(K > k) = rho^k. The first probe costs the
 * fixed delay (d1 in Eq. 1); every extra probe costs d1 + d2 + Delta (refusal round trip plus the retry
 * gap). The waiting time W = fixed + (K - 1) * probeCost is discrete, so convolving it with the
 * service-time distribution S is an exact sum:
 *
 *   P(W + S <= RT_max) = sum_{k >= 1} (1 - rho) rho^(k-1) F_S(RT_max - fixed - (k - 1) probeCost).
 *
 * The sum is truncated once rho^k (a bound on everything left) is negligible or the argument of F_S falls
 * below the support of S, so one evaluation costs O(k) CDF calls with small k. This is the convolution the
 * paper asks for, not "waiting percentile + service percentile", which would be pessimistic.
 */
import { type Lognormal, lognormalCdf, lognormalMean } from "@infergrid/core";

export type ServiceTime = { kind: "lognormal"; dist: Lognormal } | { kind: "empirical"; samplesMs: readonly number[] | Float64Array };

export interface SizingParams {
  /** Global arrival rate in requests per second, already multiplied by n_F and by the burst factor U. */
  ratePerSec: number;
  serviceTime: ServiceTime;
  rtMaxMs: number;
  /** Target fraction of requests within rtMaxMs, e.g. 0.99. */
  slMin: number;
  /** Cost of one extra probe: d1 + d2 + Delta (ms). */
  probeCostMs: number;
  /** Largest n allowed (the length of the ordered backend list). */
  maxN: number;
  /** Smallest n returned (default 1). */
  minN?: number;
  /**
   * Delay every request pays once whatever the number of probes (ms, default 0): d1 in Eq. 1, plus d2 when the
   * response time is measured at the frontend (the reply's trip back).
   */
  fixedDelayMs?: number;
  /**
   * Sizing never accepts an n with utilisation above this (default 1: only stability, as in the paper). The
   * model assumes independent probes and is optimistic at high utilisation (see README), so a cap such as 0.8
   * is a guard when the burst factor U gives little headroom.
   */
  maxUtilisation?: number;
  /**
   * Entries that do not serve alike (a prefix mixing instance types): entry i's service rate relative to
   * the mean of `serviceTime`, in prefix order (E[S] / the mean time of the requests entry i's type serves).
   * n entries then serve sum_{i<n} w_i times what one average entry does; an entry past the array weighs 1.
   * Undefined: every entry weighs 1 (the paper's identical backends).
   */
  entryWeights?: readonly number[];
}

export type AttainmentParams = Omit<SizingParams, "maxN" | "minN" | "maxUtilisation">;

export interface SizingResult {
  /** Backends to use: the smallest n meeting the SLA, capped at maxN. */
  n: number;
  /** Whether n meets the SLA (false when maxN is too small, or when no n can meet it). */
  feasible: boolean;
  /** P(response time <= RT_max) with n backends (0 when utilisation >= 1). */
  attainment: number;
  /** Backends missing beyond maxN; 0 if feasible; Infinity when no number of backends meets the SLA. */
  shortfall: number;
  /** rho with n backends. */
  utilisation: number;
}

/** A remaining geometric tail below this is ignored: far below any SL_min granularity. */
const TAIL_EPSILON = 1e-12;
/** Hard bound on the terms of one sum, for pathological inputs (probe cost ~0 with rho ~1). */
const MAX_TERMS = 200_000;
/** Doublings beyond which sizing gives up (2^60 backends). */
const MAX_DOUBLINGS = 60;

interface PreparedServiceTime {
  meanMs: number;
  /** Below this, F_S is 0. */
  minMs: number;
  cdf: (x: number) => number;
  /** An empirical distribution's samples, ascending (undefined for a lognormal). */
  sorted: Float64Array | undefined;
  /** F_S on the probe grid budget - (k - 1) * cost, per (budget, cost), filled lazily. */
  grids: Map<string, CdfGrid>;
  /** The grid used last and its (budget, cost): sizing asks for the same one ~10 times in a row. */
  lastGrid: CdfGrid | undefined;
  lastBudget: number;
  lastCost: number;
}

interface CdfGrid {
  /** The first `length` points' values (a typed array grown by doubling: a plain one boxed every value it took). */
  values: Float64Array;
  length: number;
  /** The grid has reached the bottom of S's support: every further value is 0. */
  complete: boolean;
  /**
   * Empirical only: how many samples are <= the grid's last point. Points fall as the grid grows, so the next
   * count is found by stepping down from this one (each sample passed once per grid) instead of by a binary
   * search per point, which was most of what a renewed snapshot cost the simulator.
   */
  atOrBelow: number;
}

// Sorting an empirical sample (and filling CDF grids) on every call would dominate the simulator's cost, so
// the prepared form is cached per ServiceTime *object*: treat a ServiceTime as an immutable value and build a
// new one when its samples change (a frontend doing so once per decision re-sorts a few hundred samples per
// tick). The length is re-checked as a cheap guard against an array that grew under a reused object. A
// lognormal is keyed by its Lognormal object, so fresh wrappers around the same profile share one cache.
const preparedEmpirical = new WeakMap<ServiceTime, PreparedServiceTime & { length: number }>();
const preparedLognormal = new WeakMap<Lognormal, PreparedServiceTime>();
/** Grids kept per service time; RT_max and probe cost rarely change, but a live-measured cost could. */
const MAX_GRIDS = 16;

function prepare(s: ServiceTime): PreparedServiceTime {
  if (s.kind === "lognormal") {
    let p = preparedLognormal.get(s.dist);
    if (p === undefined) {
      const d = { ...s.dist };
      p = { meanMs: lognormalMean(d), minMs: d.loc, cdf: (x) => lognormalCdf(d, x), sorted: undefined, grids: new Map(), ...NO_LAST_GRID };
      preparedLognormal.set(s.dist, p);
    }
    return p;
  }
  const length = s.samplesMs.length;
  const cached = preparedEmpirical.get(s);
  if (cached !== undefined && cached.length === length) return cached;
  if (length === 0) throw new RangeError("empirical service time needs at least one sample");
  const sorted = s.samplesMs instanceof Float64Array ? s.samplesMs.slice() : Float64Array.from(s.samplesMs);
  if (!isAscending(sorted)) sorted.sort();
  const p = preparedAscending(sorted);
  preparedEmpirical.set(s, p);
  return p;
}

/** The prepared form of samples in ascending order, which it keeps (the caller must not change them). */
function preparedAscending(sorted: Float64Array): PreparedServiceTime & { length: number } {
  const length = sorted.length;
  let sum = 0;
  for (let i = 0; i < length; i++) sum += sorted[i] as number;
  return {
    meanMs: sum / length,
    minMs: sorted[0] ?? 0,
    cdf: (x: number) => upperBound(sorted, x) / length,
    sorted,
    grids: new Map(),
    ...NO_LAST_GRID,
    length,
  };
}

/**
 * An empirical service time over samples already in ascending order that nobody changes afterwards (FrontendScaler
 * renews its snapshot as a new array): prepared as it is, without the defensive copy and the order check, which
 * cost the simulator as much as the sizing itself. Sizes exactly as `{ kind: "empirical", samplesMs }` does.
 */
export function ascendingServiceTime(samplesMs: Float64Array): ServiceTime {
  if (samplesMs.length === 0) throw new RangeError("empirical service time needs at least one sample");
  if (!isAscending(samplesMs)) throw new RangeError("ascendingServiceTime: samples not in ascending order");
  const s: ServiceTime = { kind: "empirical", samplesMs };
  preparedEmpirical.set(s, preparedAscending(samplesMs));
  return s;
}

/**
 * The CDF values on the probe grid do not depend on n or on the rate, so sizing (which varies only n) and the
 * simulator (which varies only the rate) evaluate the CDF once per grid point, then only multiply-add.
 */
function gridFor(p: PreparedServiceTime, budget: number, cost: number): CdfGrid {
  if (p.lastGrid !== undefined && p.lastBudget === budget && p.lastCost === cost) return p.lastGrid;
  const key = `${budget}|${cost}`;
  let grid = p.grids.get(key);
  if (grid === undefined) {
    if (p.grids.size >= MAX_GRIDS) {
      const oldest = p.grids.keys().next();
      if (oldest.done !== true) p.grids.delete(oldest.value);
    }
    grid = newGrid(p);
    p.grids.set(key, grid);
  }
  p.lastGrid = grid;
  p.lastBudget = budget;
  p.lastCost = cost;
  return grid;
}

const NO_LAST_GRID = { lastGrid: undefined, lastBudget: Number.NaN, lastCost: Number.NaN } as const;

/** Points a new grid has room for: about a sizing's worth at a 6 ms probe cost. */
const GRID_START = 128;

function newGrid(p: PreparedServiceTime): CdfGrid {
  return { values: new Float64Array(GRID_START), length: 0, complete: false, atOrBelow: p.sorted?.length ?? 0 };
}

function growGrid(grid: CdfGrid): Float64Array {
  const values = new Float64Array(grid.values.length * 2);
  values.set(grid.values);
  grid.values = values;
  return values;
}

/** F_S at x, the grid's next point (below its last): what p.cdf(x) gives, found from the grid's last count. */
function nextGridValue(p: PreparedServiceTime, grid: CdfGrid, x: number): number {
  const sorted = p.sorted;
  if (sorted === undefined || Number.isNaN(x)) return p.cdf(x);
  let count = grid.atOrBelow;
  while (count > 0 && (sorted[count - 1] as number) > x) count--;
  grid.atOrBelow = count;
  return count / sorted.length;
}

/** In ascending order (NaN anywhere fails, so such input takes the typed-array sort, which puts NaN last). */
function isAscending(xs: Float64Array): boolean {
  for (let i = 1; i < xs.length; i++) if (!((xs[i - 1] as number) <= (xs[i] as number))) return false;
  return xs.length === 0 || !Number.isNaN(xs[0]);
}

/** Number of elements <= x in a sorted array. */
function upperBound(sorted: Float64Array, x: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] ?? 0) <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function meanServiceTimeMs(s: ServiceTime): number {
  return prepare(s).meanMs;
}

/** What the first n entries serve, in average entries: n, or the sum of their weights. */
export function prefixCapacity(n: number, weights?: readonly number[]): number {
  if (weights === undefined || n <= 0) return Math.max(0, n);
  let sum = 0;
  const k = Math.min(n, weights.length);
  for (let i = 0; i < k; i++) sum += weights[i] as number;
  return sum + (n - k);
}

/** rho = lambda E[S] / n, or over the prefix's capacity when entries are weighted (may be >= 1: no steady state). */
export function utilisation(params: Pick<AttainmentParams, "ratePerSec" | "serviceTime" | "entryWeights">, n: number): number {
  return utilisationOf(params, prepare(params.serviceTime), n);
}

/** utilisation with the service time already prepared (sizing asks for it at every n it tries). */
function utilisationOf(params: Pick<AttainmentParams, "ratePerSec" | "entryWeights">, p: PreparedServiceTime, n: number): number {
  if (params.ratePerSec <= 0) return 0;
  const capacity = prefixCapacity(n, params.entryWeights);
  if (!(capacity > 0)) return Number.POSITIVE_INFINITY;
  return (params.ratePerSec * p.meanMs) / (1000 * capacity);
}

/** The smallest n >= minN whose capacity exceeds the offered load and keeps rho <= maxRho. */
function firstStableN(offered: number, maxRho: number, minN: number, weights?: readonly number[]): number {
  const enough = (c: number) => c > offered && c >= offered / maxRho - 1e-9;
  if (weights === undefined) return Math.max(minN, Math.floor(offered) + 1, Math.ceil(offered / maxRho - 1e-9));
  let n = minN;
  while (n <= weights.length && !enough(prefixCapacity(n, weights))) n++;
  if (n <= weights.length) return n;
  // Past the weights every entry adds 1.
  const base = prefixCapacity(weights.length, weights);
  const more = Math.max(1, Math.floor(offered - base) + 1, Math.ceil(offered / maxRho - base - 1e-9));
  return Math.max(n, weights.length + more);
}

/** With cached = false the CDF is evaluated directly (for one-off budgets that would only churn the grid cache). */
function attainmentAt(
  p: PreparedServiceTime,
  rho: number,
  rtMaxMs: number,
  probeCostMs: number,
  fixedDelayMs: number,
  cached = true,
): number {
  if (!(rho < 1)) return 0;
  const budget = rtMaxMs - fixedDelayMs;
  if (rho <= 0 || probeCostMs <= 0) return p.cdf(budget);
  const grid = cached ? gridFor(p, budget, probeCostMs) : newGrid(p);
  let total = 0;
  let weight = 1 - rho; // P(K = k)
  let tail = rho; // P(K > k), a bound on all the terms left
  let i = 0;
  for (;;) {
    // Over the points the grid has, a loop that only multiplies and adds: filling the grid point by point
    // inside it (a length check and a store per term) cost a sizing a third more.
    const values = grid.values;
    const known = Math.min(grid.length, MAX_TERMS);
    for (; i < known; i++) {
      total += weight * (values[i] as number);
      if (tail < TAIL_EPSILON) return Math.min(1, total);
      weight *= rho;
      tail *= rho;
    }
    if (i >= MAX_TERMS || grid.complete) break;
    extendGrid(p, grid, budget, probeCostMs, Math.min(MAX_TERMS, Math.max(i + GRID_CHUNK, 2 * i)));
  }
  return Math.min(1, total);
}

/** Points the grid grows by at least, when a sum runs past its end. */
const GRID_CHUNK = 32;

/**
 * The grid's points up to `upTo` (exclusive), or up to the bottom of S's support (then complete). Every point is
 * what it would be filled one at a time: a point depends only on its place, never on how far the grid had got.
 */
function extendGrid(p: PreparedServiceTime, grid: CdfGrid, budget: number, probeCostMs: number, upTo: number): void {
  let values = grid.values;
  for (let i = grid.length; i < upTo; i++) {
    const x = budget - i * probeCostMs;
    if (x < p.minMs) {
      grid.complete = true;
      return;
    }
    if (i === values.length) values = growGrid(grid);
    values[i] = nextGridValue(p, grid, x);
    grid.length = i + 1;
  }
}

/** P(response time <= RT_max) with n backends. 0 when n is infeasible (utilisation >= 1). */
export function attainment(params: AttainmentParams, n: number): number {
  const p = prepare(params.serviceTime);
  return attainmentAt(p, utilisation(params, n), params.rtMaxMs, params.probeCostMs, params.fixedDelayMs ?? 0);
}

/**
 * Eq. 1 as printed: the p-quantile (p in (0, 1)) of the waiting time, treating the number of probes as continuous.
 * For reference and checks; the sizing uses the exact discrete convolution above.
 */
export function waitingTimeQuantileEq1(rho: number, p: number, probeCostMs: number, fixedDelayMs = 0): number {
  if (!(rho < 1)) return Number.POSITIVE_INFINITY;
  if (rho <= 0) return fixedDelayMs;
  return fixedDelayMs + Math.max(0, Math.log(1 - p) / Math.log(rho) - 1) * probeCostMs;
}

/** The p-quantile of the modelled response time with n backends (bisection on the CDF; for reports and plots). */
export function responseTimeQuantile(params: AttainmentParams, n: number, p: number): number {
  const prepared = prepare(params.serviceTime);
  const rho = utilisation(params, n);
  if (!(rho < 1)) return Number.POSITIVE_INFINITY;
  const fixed = params.fixedDelayMs ?? 0;
  const cdf = (x: number) => attainmentAt(prepared, rho, x, params.probeCostMs, fixed, false);
  let lo = fixed + prepared.minMs;
  let hi = Math.max(lo + 1, 2 * (fixed + prepared.meanMs));
  for (let i = 0; i < 200 && cdf(hi) < p; i++) hi *= 2;
  for (let i = 0; i < 100 && hi - lo > 1e-9 * hi; i++) {
    const mid = (lo + hi) / 2;
    if (cdf(mid) >= p) hi = mid;
    else lo = mid;
  }
  return hi;
}

/**
 * The smallest n >= minN with attainment >= slMin (sections 4.3 step 5: "binary search"): doubling from the
 * smallest stable n, then bisection, which is valid because attainment rises with n (rho falls, so K shrinks
 * stochastically and every F_S term is non-increasing in k). Capped at maxN with the shortfall reported.
 */
export function sizeBackends(params: SizingParams): SizingResult {
  const minN = Math.max(1, Math.ceil(params.minN ?? 1));
  const maxN = Math.floor(params.maxN);
  const prepared = prepare(params.serviceTime);
  const needed = smallestSufficientN(params, prepared, minN);
  const n = Math.max(0, Math.min(needed, maxN));
  const rho = utilisationOf(params, prepared, n);
  const attained = n > 0 ? attainmentAt(prepared, rho, params.rtMaxMs, params.probeCostMs, params.fixedDelayMs ?? 0) : 0;
  const feasible = needed <= maxN && attained >= params.slMin;
  return {
    n,
    feasible,
    attainment: attained,
    shortfall: feasible ? 0 : Math.max(0, needed - Math.max(0, maxN)),
    utilisation: rho,
  };
}

function smallestSufficientN(params: SizingParams, prepared: PreparedServiceTime, minN: number): number {
  const fixed = params.fixedDelayMs ?? 0;
  const meets = (n: number) =>
    attainmentAt(prepared, utilisationOf(params, prepared, n), params.rtMaxMs, params.probeCostMs, fixed) >= params.slMin;
  const maxRho = Math.min(1, params.maxUtilisation ?? 1);
  if (!(maxRho > 0)) throw new RangeError(`maxUtilisation must be in (0, 1], got ${params.maxUtilisation}`);
  // As n grows, rho -> 0 and attainment -> F_S(RT_max - fixed): if even that misses SL_min, nothing will do.
  if (prepared.cdf(params.rtMaxMs - fixed) < params.slMin) return Number.POSITIVE_INFINITY;
  const offered = params.ratePerSec > 0 ? (params.ratePerSec * prepared.meanMs) / 1000 : 0;
  // Smallest n with rho < 1 and rho <= maxUtilisation.
  let lo = firstStableN(offered, maxRho, minN, params.entryWeights);
  if (meets(lo)) return lo;
  let hi = lo * 2;
  for (let i = 0; !meets(hi); i++) {
    if (i >= MAX_DOUBLINGS) return Number.POSITIVE_INFINITY;
    lo = hi;
    hi *= 2;
  }
  // Invariant: meets(hi) and not meets(lo).
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (meets(mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}
