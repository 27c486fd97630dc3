/**
 * Exact multiple-choice knapsack (MCKP) for Faro's Stage 2 (Sec. 4.2) with one resource: every
 * job picks one replica count (a "choice": weight = resources, value = weighted utility), the
 * weights must fit the capacity, the value sum is maximised.
 *
 * Method (classic MCKP machinery, Sinha & Zoltners 1979; Pisinger 1995 for the reduction + core DP):
 *  1. Upper bound: the LP relaxation. Its optimum is the greedy over every job's concave upper
 *     envelope segments in decreasing value/weight order, the last one fractional (Dantzig bound).
 *  2. Lower bound: the same greedy kept integral (a segment that does not fit blocks its job), then
 *     repeated best upgrades into the leftover capacity.
 *  3. Reduction: for every job j and choice i, an upper bound with j forced to i is
 *     v_ji + LP of the other jobs on the remaining capacity (computed exactly in O(log n) from the
 *     sorted segment prefix sums by skipping j's own segments). A choice whose bound is <= the
 *     lower bound cannot be in any strictly better solution and is dropped; a job left with one
 *     choice is fixed.
 *  4. The remaining core jobs are solved exactly by dynamic programming over the leftover capacity
 *     (integer weights), within the time / cell budget. If the budget runs out the lower-bound
 *     solution is returned with the proven gap to the LP bound.
 * The answer is optimal whenever step 1 = step 2, or the reduction leaves nothing, or the DP ends.
 */

export interface MckpItem {
  /** Absolute weight of each choice, strictly increasing. */
  weights: readonly number[];
  /** Value of each choice, strictly increasing (dominated choices removed by the caller). */
  values: readonly number[];
}

export interface MckpOptions {
  /** Weights are integers, so the exact DP may run. */
  integral: boolean;
  /** Milliseconds clock and the time at which to stop refining (ms, same clock). */
  now?: () => number;
  deadline?: number;
  /** Stop after the LP bound and the greedy solution (no reduction, no DP). */
  boundsOnly?: boolean;
  /** Upper limit on DP cells (choices x capacity) for the core. */
  maxCells?: number;
}

export interface MckpResult {
  /** Index of the chosen choice per item. */
  choice: Int32Array;
  value: number;
  weight: number;
  /** Proven upper bound on the optimum. */
  upperBound: number;
  optimal: boolean;
  /** Items left for the DP after the reduction (0 when the bounds met). */
  coreSize: number;
  /** "bounds" (LP = greedy), "reduction", "dp", "budget" (stopped with a gap), "lp-only". */
  method: string;
}

const EPS = 1e-9;

export function solveMckp(items: readonly MckpItem[], capacity: number, opts: MckpOptions): MckpResult {
  const n = items.length;
  let w0 = 0;
  let v0 = 0;
  for (const it of items) {
    if (it.weights.length === 0 || it.weights.length !== it.values.length) throw new RangeError("solveMckp: every item needs choices");
    w0 += it.weights[0]!;
    v0 += it.values[0]!;
  }
  const R = capacity - w0;
  if (R < -EPS) throw new RangeError(`solveMckp: the smallest choices need ${w0}, more than the capacity ${capacity}`);
  const tol = EPS * Math.max(1, Math.abs(v0) + n);

  // Concave upper envelope of each item, as segments between its vertices.
  const segItem: number[] = [];
  const segTo: number[] = [];
  const segW: number[] = [];
  const segV: number[] = [];
  const hull: number[] = [];
  for (let j = 0; j < n; j++) {
    const it = items[j]!;
    hull.length = 0;
    hull.push(0);
    for (let i = 1; i < it.weights.length; i++) {
      while (hull.length >= 2) {
        const a = hull[hull.length - 2]!;
        const b = hull[hull.length - 1]!;
        const s1 = (it.values[b]! - it.values[a]!) / (it.weights[b]! - it.weights[a]!);
        const s2 = (it.values[i]! - it.values[b]!) / (it.weights[i]! - it.weights[b]!);
        if (s2 >= s1) hull.pop();
        else break;
      }
      hull.push(i);
    }
    for (let h = 1; h < hull.length; h++) {
      const a = hull[h - 1]!;
      const b = hull[h]!;
      segItem.push(j);
      segTo.push(b);
      segW.push(it.weights[b]! - it.weights[a]!);
      segV.push(it.values[b]! - it.values[a]!);
    }
  }
  const S = segItem.length;
  const order = new Int32Array(S);
  for (let i = 0; i < S; i++) order[i] = i;
  const slopes = new Float64Array(S);
  for (let i = 0; i < S; i++) slopes[i] = segV[i]! / segW[i]!;
  const slope = (i: number) => slopes[i]!;
  // Within an item the envelope slopes strictly decrease, so the index tie-break keeps its order.
  order.sort((x, y) => slopes[y]! - slopes[x]! || x - y);
  const PW = new Float64Array(S + 1);
  const PV = new Float64Array(S + 1);
  const sortedSlope = new Float64Array(S);
  for (let r = 0; r < S; r++) {
    const s = order[r]!;
    PW[r + 1] = PW[r]! + segW[s]!;
    PV[r + 1] = PV[r]! + segV[s]!;
    sortedSlope[r] = slope(s);
  }
  /** Number of whole segments the LP takes with capacity x. */
  const fullCount = (x: number): number => {
    let lo = 0;
    let hi = S;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (PW[mid]! <= x + EPS) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const fillAll = (x: number): number => {
    if (x <= 0) return 0;
    const m = fullCount(x);
    return PV[m]! + (m < S ? Math.max(0, x - PW[m]!) * sortedSlope[m]! : 0);
  };
  const upperBound = v0 + fillAll(R);

  // Greedy lower bound along the same order.
  const cur = new Int32Array(n);
  const blocked = new Uint8Array(n);
  let rem = R;
  for (let r = 0; r < S; r++) {
    const s = order[r]!;
    const j = segItem[s]!;
    if (blocked[j]) continue;
    if (segW[s]! <= rem + EPS) {
      cur[j] = segTo[s]!;
      rem -= segW[s]!;
    } else blocked[j] = 1;
  }
  for (let pass = 0; pass < 32; pass++) {
    let bestGain = tol;
    let bestJ = -1;
    let bestI = -1;
    for (let j = 0; j < n; j++) {
      const it = items[j]!;
      const c = cur[j]!;
      const wc = it.weights[c]!;
      const vc = it.values[c]!;
      for (let i = c + 1; i < it.weights.length; i++) {
        if (it.weights[i]! - wc > rem + EPS) break;
        const g = it.values[i]! - vc;
        if (g > bestGain) {
          bestGain = g;
          bestJ = j;
          bestI = i;
        }
      }
    }
    if (bestJ < 0) break;
    const it = items[bestJ]!;
    rem -= it.weights[bestI]! - it.weights[cur[bestJ]!]!;
    cur[bestJ] = bestI;
  }
  const total = (choice: Int32Array) => {
    let v = 0;
    let w = 0;
    for (let j = 0; j < n; j++) {
      v += items[j]!.values[choice[j]!]!;
      w += items[j]!.weights[choice[j]!]!;
    }
    return { v, w };
  };
  const lb = total(cur);
  const result = (choice: Int32Array, optimal: boolean, coreSize: number, method: string, ub = upperBound): MckpResult => {
    const t = total(choice);
    return { choice, value: t.v, weight: t.w, upperBound: optimal ? t.v : Math.max(ub, t.v), optimal, coreSize, method };
  };
  if (upperBound - lb.v <= tol) return result(cur, true, 0, "bounds");
  if (opts.boundsOnly) return result(cur, false, 0, "lp-only");

  // Reduction with the exact "LP without job j" bound.
  const segPosOfItem: number[][] = Array.from({ length: n }, () => []);
  for (let r = 0; r < S; r++) segPosOfItem[segItem[order[r]!]!]!.push(r);
  const keep: number[][] = [];
  let empty = false;
  for (let j = 0; j < n && !empty; j++) {
    const it = items[j]!;
    const pos = segPosOfItem[j]!;
    const m = pos.length;
    const cumW: number[] = [0];
    const cumV: number[] = [0];
    for (let t = 0; t < m; t++) {
      const s = order[pos[t]!]!;
      cumW.push(cumW[t]! + segW[s]!);
      cumV.push(cumV[t]! + segV[s]!);
    }
    const fillExcl = (k: number): number => {
      for (let t = 0; t <= m; t++) {
        const x = k + cumW[t]!;
        const full = fullCount(x);
        if (t < m && pos[t]! <= full) continue;
        return fillAll(x) - cumV[t]!;
      }
      return fillAll(k + cumW[m]!) - cumV[m]!;
    };
    const surv: number[] = [];
    for (let i = 0; i < it.weights.length; i++) {
      const wi = it.weights[i]! - it.weights[0]!;
      if (wi > R + EPS) break;
      const ub = v0 + (it.values[i]! - it.values[0]!) + fillExcl(R - wi);
      if (ub > lb.v + tol) surv.push(i);
    }
    if (surv.length === 0) empty = true;
    keep.push(surv);
  }
  if (empty) return result(cur, true, 0, "reduction");

  const core: number[] = [];
  const fixed = new Int32Array(n);
  let fixedW = 0;
  let fixedV = 0;
  for (let j = 0; j < n; j++) {
    const surv = keep[j]!;
    if (surv.length === 1) {
      fixed[j] = surv[0]!;
      fixedW += items[j]!.weights[surv[0]!]!;
      fixedV += items[j]!.values[surv[0]!]!;
    } else core.push(j);
  }
  let baseW = 0;
  let baseV = 0;
  for (const j of core) {
    baseW += items[j]!.weights[keep[j]![0]!]!;
    baseV += items[j]!.values[keep[j]![0]!]!;
  }
  const kcapRaw = capacity - fixedW - baseW;
  if (kcapRaw < -EPS) return result(cur, true, 0, "reduction");
  if (core.length === 0) return total(fixed).v > lb.v ? result(fixed, true, 0, "reduction") : result(cur, true, 0, "reduction");
  if (!opts.integral) return result(cur, false, core.length, "lp-only");
  const K = Math.floor(kcapRaw + EPS);
  let cells = 0;
  for (const j of core) cells += keep[j]!.length * (K + 1);
  if (cells > (opts.maxCells ?? 5e7)) return result(cur, false, core.length, "budget");

  let dp = new Float64Array(K + 1);
  let next = new Float64Array(K + 1);
  const pick: Uint16Array[] = [];
  const now = opts.now;
  const deadline = opts.deadline ?? Number.POSITIVE_INFINITY;
  for (let ci = 0; ci < core.length; ci++) {
    if (now !== undefined && now() > deadline) return result(cur, false, core.length, "budget");
    const j = core[ci]!;
    const it = items[j]!;
    const surv = keep[j]!;
    const bw = it.weights[surv[0]!]!;
    const bv = it.values[surv[0]!]!;
    const pk = new Uint16Array(K + 1);
    next.fill(Number.NEGATIVE_INFINITY);
    for (let si = 0; si < surv.length; si++) {
      const i = surv[si]!;
      const dw = Math.round(it.weights[i]! - bw);
      const dv = it.values[i]! - bv;
      for (let k = dw; k <= K; k++) {
        const cand = dp[k - dw]! + dv;
        if (cand > next[k]!) {
          next[k] = cand;
          pk[k] = si;
        }
      }
    }
    pick.push(pk);
    const tmp = dp;
    dp = next;
    next = tmp;
  }
  const sol = Int32Array.from(fixed);
  let k = K;
  for (let ci = core.length - 1; ci >= 0; ci--) {
    const j = core[ci]!;
    const si = pick[ci]![k]!;
    const i = keep[j]![si]!;
    sol[j] = i;
    k -= Math.round(items[j]!.weights[i]! - items[j]!.weights[keep[j]![0]!]!);
  }
  const dpValue = fixedV + baseV + dp[K]!;
  if (dpValue > lb.v) return result(sol, true, core.length, "dp");
  return result(cur, true, core.length, "dp");
}
