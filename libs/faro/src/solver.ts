/**
 * Faro's multi-tenant autoscaling (Sec. 4.2) and shrinking (Sec. 4.3), solved on the integer
 * replica counts directly instead of COBYLA on a continuous relaxation.
 *
 * - Sum / PenaltySum: a multiple-choice knapsack over each job's utility table f_j(c); exact by
 *   bounds + reduction + core DP (mckp.ts) for one effective resource.
 * - Fair: max-min by binary search on the utility level t (need_j(t) is monotone, feasible iff
 *   the needs fit), then the priority-weighted sum with every job kept at >= t.
 * - FairSum / PenaltyFairSum: sum - gamma (max - min) by enumerating the floor t and the cap T
 *   among the utility levels, each pair a restricted Sum problem, with bounds that prune pairs.
 * - Several resources (backends, CPU, memory): a constraint implied by another (after scaling by
 *   capacity) is dropped; if one remains the problem is one-dimensional and exact. Otherwise the
 *   surrogate relaxation (a convex combination of the constraints) gives upper bounds and greedy
 *   solutions repaired to fit every resource give the lower bound; the gap is reported.
 * Shrinking: every job ends at the smallest count with the same utility, which leaves every
 * objective unchanged (the paper shrinks only jobs at utility 1; its other jobs never gain from
 * replicas that do not raise their utility either).
 */

import { buildCurve, type CurveContext, curveDrop, curveValue, type JobCurve, type JobSpec } from "./curves.js";
import { type MckpItem, solveMckp } from "./mckp.js";
import { clusterObjective, isFairSumLike, type ObjectiveSpec, objectiveGamma, objectivePenalty, weightedSum } from "./objectives.js";

export interface Capacity {
  /** Backends (replicas) in the pool. */
  backends?: number;
  /** vCPU and memory in the units of JobSpec.cpu / JobSpec.mem. */
  cpu?: number;
  mem?: number;
}

export interface AllocationProblem {
  jobs: readonly JobSpec[];
  capacity: Capacity;
  objective: ObjectiveSpec;
  /** Forecast step length, seconds (default 60). */
  stepSeconds?: number;
  /** Replicas added now serve only after this many seconds (default 0). */
  coldStartSeconds?: number;
  rhoMax?: number;
}

export interface SolveOptions {
  /** Milliseconds clock for the time budget (default: none, so no time limit). */
  now?: () => number;
  /** Stop refining after this long and return the best solution with its proven gap. */
  budgetMs?: number;
  /** Cell limit of the exact DP on the core (default 5e7). */
  maxCells?: number;
}

export interface Allocation {
  replicas: number[];
  /** Planned drop rate per job (penalty objectives; else 0). */
  dropRates: number[];
  /** Planned (effective) utility per job: the mean over the forecast steps. */
  utilities: number[];
  /** The cluster objective (Sec. 3.2) of this allocation. */
  objective: number;
  /** Proven upper bound on the objective over all feasible integer allocations. */
  upperBound: number;
  gap: number;
  optimal: boolean;
  /** Priority-weighted utility sum (Fair's tie-break; the same as objective for Sum). */
  sumUtility: number;
  usage: { backends: number; cpu: number; mem: number };
  stats: { method: string; coreJobs: number; subproblems: number };
}

/** A resource constraint as weights per replica of each job and a capacity. */
export interface Constraint {
  name: "backends" | "cpu" | "mem";
  cap: number;
  w: number[];
}

export interface Prepared {
  jobs: readonly JobSpec[];
  curves: JobCurve[];
  priorities: number[];
  constraints: Constraint[];
  /** Constraints left after dropping the implied ones. */
  active: Constraint[];
}

const TOL = 1e-9;

export function curveContext(problem: AllocationProblem): CurveContext {
  const ctx: CurveContext = {
    stepSeconds: problem.stepSeconds ?? 60,
    coldStartSeconds: problem.coldStartSeconds ?? 0,
  };
  const pen = objectivePenalty(problem.objective);
  if (pen !== undefined) ctx.penalty = pen;
  if (problem.objective.kind === "attainment") ctx.attainment = true;
  if (problem.rhoMax !== undefined) ctx.rhoMax = problem.rhoMax;
  return ctx;
}

/** Validates the problem, builds the constraints and every job's utility table. */
export function prepare(problem: AllocationProblem): Prepared {
  const jobs = problem.jobs;
  const ids = new Set<string>();
  for (const j of jobs) {
    if (ids.has(j.id)) throw new RangeError(`duplicate job id ${JSON.stringify(j.id)}`);
    ids.add(j.id);
  }
  const constraints: Constraint[] = [];
  const cap = problem.capacity;
  const addC = (name: Constraint["name"], c: number | undefined, w: (j: JobSpec) => number) => {
    if (c === undefined) return;
    if (!(c >= 0) || !Number.isFinite(c)) throw new RangeError(`capacity.${name} must be a finite number >= 0, got ${c}`);
    constraints.push({ name, cap: c, w: jobs.map(w) });
  };
  addC("backends", cap.backends, () => 1);
  addC("cpu", cap.cpu, (j) => j.cpu ?? 1);
  addC("mem", cap.mem, (j) => j.mem ?? 1);
  if (constraints.length === 0) throw new RangeError("capacity needs at least one of backends, cpu, mem");
  const lo = jobs.map((j) => j.minReplicas ?? 1);
  for (const c of constraints) {
    let used = 0;
    for (let j = 0; j < jobs.length; j++) used += lo[j]! * c.w[j]!;
    if (used > c.cap + TOL) throw new RangeError(`the minimum replicas need ${used} ${c.name}, more than the capacity ${c.cap}`);
  }
  const ctx = curveContext(problem);
  const loUse = constraints.map((c) => c.w.reduce((s, w, j) => s + w * lo[j]!, 0));
  const curves = jobs.map((job, j) => buildCurve(job, ctx, maxFit(constraints, loUse, lo, j)));
  // A constraint whose normalised weights never exceed another's is implied by it.
  const norm = (c: Constraint) => c.w.map((w) => (c.cap > 0 ? w / c.cap : Number.POSITIVE_INFINITY));
  const active: Constraint[] = [];
  for (let a = 0; a < constraints.length; a++) {
    const na = norm(constraints[a]!);
    let implied = false;
    for (let b = 0; b < constraints.length && !implied; b++) {
      if (a === b) continue;
      const nb = norm(constraints[b]!);
      const dominates = na.every((x, j) => x <= nb[j]! * (1 + TOL));
      const equal = dominates && nb.every((x, j) => x <= na[j]! * (1 + TOL));
      // Of two equivalent constraints keep the first.
      if (dominates && (!equal || b < a)) implied = true;
    }
    if (!implied) active.push(constraints[a]!);
  }
  // Attainment weighs each job's share served in time by its planned rate: requests/s in time.
  const rateWeight = (j: JobSpec) => (problem.objective.kind === "attainment" ? j.rates.reduce((x, r) => x + r, 0) / j.rates.length : 1);
  return { jobs, curves, priorities: jobs.map((j) => (j.priority ?? 1) * rateWeight(j)), constraints, active };
}

/** The most replicas job j can hold with every other job at its minimum. */
export function maxFit(constraints: readonly Constraint[], loUse: readonly number[], lo: readonly number[], j: number): number {
  let hi = Number.POSITIVE_INFINITY;
  constraints.forEach((c, r) => {
    const others = loUse[r]! - lo[j]! * c.w[j]!;
    hi = Math.min(hi, Math.floor((c.cap - others) / c.w[j]! + TOL));
  });
  return hi;
}

/** Smallest c with f(c) >= t, or undefined if the job cannot reach t. */
export function needFor(curve: JobCurve, t: number): number | undefined {
  const v = curve.values;
  if (v[v.length - 1]! < t - TOL) return undefined;
  let lo = 0;
  let hi = v.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (v[mid]! >= t - TOL) hi = mid;
    else lo = mid + 1;
  }
  return curve.lo + lo;
}

/** Largest c with f(c) <= T (T at or above the curve's top means its last entry). */
function capFor(curve: JobCurve, T: number): number | undefined {
  const v = curve.values;
  if (v[0]! > T + TOL) return undefined;
  let lo = 0;
  let hi = v.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (v[mid]! <= T + TOL) lo = mid;
    else hi = mid - 1;
  }
  return curve.lo + lo;
}

/** Smallest replica count with the same utility: the shrinking stage, never lowering any objective. */
export function shrink(curves: readonly JobCurve[], replicas: readonly number[]): number[] {
  return replicas.map((c, j) => {
    const curve = curves[j]!;
    return Math.min(c, needFor(curve, curveValue(curve, c)) ?? c);
  });
}

interface SumResult {
  replicas: number[];
  sum: number;
  upperBound: number;
  optimal: boolean;
  method: string;
  coreJobs: number;
}

/** Integer scale that makes every weight and the capacity integral, if a small one exists. */
function integerScale(c: Constraint): number | undefined {
  for (const s of [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 250, 256, 500, 1000, 1024]) {
    if (c.w.every((w) => Math.abs(w * s - Math.round(w * s)) <= 1e-9 * Math.max(1, w * s))) return s;
  }
  return undefined;
}

/**
 * Maximise sum_j pi_j f_j(c_j) with c_j in [floor_j, cap_j] (replica bounds), subject to the
 * active constraints. Undefined when the bounds are infeasible.
 */
function solveSum(
  prep: Prepared,
  floor: readonly number[],
  cap: readonly number[],
  opts: SolveOptions,
  deadline: number,
): SumResult | undefined {
  const { curves, priorities, active } = prep;
  const n = curves.length;
  for (const c of active) {
    let used = 0;
    for (let j = 0; j < n; j++) used += floor[j]! * c.w[j]!;
    if (used > c.cap + TOL) return undefined;
  }
  // Choices: the counts where the utility strictly rises (a count with no gain is never needed).
  const counts: number[][] = [];
  for (let j = 0; j < n; j++) {
    const curve = curves[j]!;
    if (floor[j]! > cap[j]!) return undefined;
    const cs: number[] = [floor[j]!];
    let last = curveValue(curve, floor[j]!);
    for (let c = floor[j]! + 1; c <= Math.min(cap[j]!, curve.hi); c++) {
      const v = curveValue(curve, c);
      if (v > last + 1e-12) {
        cs.push(c);
        last = v;
      }
    }
    counts.push(cs);
  }
  const valuesOf = (j: number) => counts[j]!.map((c) => priorities[j]! * curveValue(curves[j]!, c));
  const mkOpts = (integral: boolean) => ({
    integral,
    deadline,
    ...(opts.now !== undefined ? { now: opts.now } : {}),
    ...(opts.maxCells !== undefined ? { maxCells: opts.maxCells } : {}),
  });
  if (active.length === 1) {
    const c = active[0]!;
    const s = integerScale(c);
    const scale = s ?? 1;
    const items: MckpItem[] = counts.map((cs, j) => ({ weights: cs.map((x) => x * c.w[j]! * scale), values: valuesOf(j) }));
    const capUnits = s !== undefined ? Math.floor(c.cap * scale + TOL) : c.cap;
    const r = solveMckp(items, capUnits, mkOpts(s !== undefined));
    return {
      replicas: counts.map((cs, j) => cs[r.choice[j]!]!),
      sum: r.value,
      upperBound: r.upperBound,
      optimal: r.optimal,
      method: r.method,
      coreJobs: r.coreSize,
    };
  }
  return solveSurrogate(prep, counts, valuesOf, mkOpts(false));
}

/**
 * Several resources: for each convex combination mu of the normalised constraints the
 * single-constraint LP bound is an upper bound (surrogate relaxation); its greedy solution is
 * repaired to fit every resource and topped up, giving lower bounds. Best of both over a mu grid.
 */
function solveSurrogate(
  prep: Prepared,
  counts: number[][],
  valuesOf: (j: number) => number[],
  mopts: { integral: boolean; deadline: number; now?: () => number },
): SumResult {
  const { active } = prep;
  const n = counts.length;
  const R = active.length;
  const grid: number[][] = [];
  const steps = R === 2 ? 20 : 6;
  const rec = (prefix: number[], left: number) => {
    if (prefix.length === R - 1) {
      grid.push([...prefix, left].map((x) => x / steps));
      return;
    }
    for (let i = 0; i <= left; i++) rec([...prefix, i], left - i);
  };
  rec([], steps);
  const values = counts.map((_, j) => valuesOf(j));
  let bestUb = Number.POSITIVE_INFINITY;
  let best: number[] | undefined;
  let bestV = Number.NEGATIVE_INFINITY;
  for (const mu of grid) {
    if (mopts.now !== undefined && best !== undefined && mopts.now() > mopts.deadline) break;
    const agg = (j: number) => active.reduce((s, c, r) => s + (mu[r]! * c.w[j]!) / c.cap, 0);
    const items: MckpItem[] = counts.map((cs, j) => ({ weights: cs.map((x) => x * agg(j)), values: values[j]! }));
    const r = solveMckp(items, 1, { ...mopts, integral: false, boundsOnly: true });
    bestUb = Math.min(bestUb, r.upperBound);
    const choice = Array.from(r.choice);
    repairAndFill(active, counts, values, choice);
    const v = choice.reduce((s, i, j) => s + values[j]![i]!, 0);
    if (v > bestV) {
      bestV = v;
      best = choice;
    }
  }
  const replicas = counts.map((cs, j) => cs[best![j]!]!);
  return {
    replicas,
    sum: bestV,
    upperBound: Math.max(bestUb, bestV),
    optimal: bestUb - bestV <= TOL * Math.max(1, n),
    method: "surrogate",
    coreJobs: 0,
  };
}

/** Steps choices down (least value lost per unit of overload) until every resource fits, then up. */
function repairAndFill(active: Constraint[], counts: number[][], values: number[][], choice: number[]): void {
  const n = counts.length;
  const used = active.map((c) => choice.reduce((s, i, j) => s + counts[j]![i]! * c.w[j]!, 0));
  const over = () => active.map((c, r) => used[r]! - c.cap);
  for (;;) {
    const ov = over();
    if (ov.every((x) => x <= TOL)) break;
    let bestJ = -1;
    let bestScore = Number.POSITIVE_INFINITY;
    for (let j = 0; j < n; j++) {
      const i = choice[j]!;
      if (i === 0) continue;
      const dc = counts[j]![i]! - counts[j]![i - 1]!;
      const relief = active.reduce((s, c, r) => s + (ov[r]! > TOL ? (dc * c.w[j]!) / c.cap : 0), 0);
      const loss = values[j]![i]! - values[j]![i - 1]!;
      const score = loss / relief;
      if (relief > 0 && score < bestScore) {
        bestScore = score;
        bestJ = j;
      }
    }
    if (bestJ < 0) break;
    const i = choice[bestJ]!;
    const dc = counts[bestJ]![i]! - counts[bestJ]![i - 1]!;
    active.forEach((c, r) => {
      used[r] = used[r]! - dc * c.w[bestJ]!;
    });
    choice[bestJ] = i - 1;
  }
  for (;;) {
    let bestJ = -1;
    let bestI = -1;
    let bestGain = TOL;
    for (let j = 0; j < n; j++) {
      const i0 = choice[j]!;
      for (let i = i0 + 1; i < counts[j]!.length; i++) {
        const dc = counts[j]![i]! - counts[j]![i0]!;
        if (!active.every((c, r) => used[r]! + dc * c.w[j]! <= c.cap + TOL)) break;
        const g = values[j]![i]! - values[j]![i0]!;
        if (g > bestGain) {
          bestGain = g;
          bestJ = j;
          bestI = i;
        }
      }
    }
    if (bestJ < 0) break;
    const dc = counts[bestJ]![bestI]! - counts[bestJ]![choice[bestJ]!]!;
    active.forEach((c, r) => {
      used[r] = used[r]! + dc * c.w[bestJ]!;
    });
    choice[bestJ] = bestI;
  }
}

/** Packs an allocation into the result shape, evaluating it with the prepared curves. */
export function describe(
  problem: AllocationProblem,
  prep: Prepared,
  replicas: number[],
  upperBound: number,
  stats: Allocation["stats"],
): Allocation {
  const utilities = replicas.map((c, j) => curveValue(prep.curves[j]!, c));
  const objective = clusterObjective(problem.objective, utilities, prep.priorities);
  const usage = { backends: 0, cpu: 0, mem: 0 };
  replicas.forEach((c, j) => {
    const job = prep.jobs[j]!;
    usage.backends += c;
    usage.cpu += c * (job.cpu ?? 1);
    usage.mem += c * (job.mem ?? 1);
  });
  const ub = Math.max(upperBound, objective);
  const gap = ub - objective;
  return {
    replicas,
    dropRates: replicas.map((c, j) => curveDrop(prep.curves[j]!, c)),
    utilities,
    objective,
    upperBound: ub,
    gap,
    optimal: gap <= 1e-7 * Math.max(1, Math.abs(objective)),
    sumUtility: weightedSum(utilities, prep.priorities),
    usage,
    stats,
  };
}

/** Distinct utility levels over all curves, ascending. */
function levels(curves: readonly JobCurve[]): number[] {
  const all: number[] = [];
  for (const c of curves) for (const v of c.values) all.push(v);
  all.sort((a, b) => a - b);
  const out: number[] = [];
  for (const v of all) if (out.length === 0 || v > out[out.length - 1]! + 1e-12) out.push(v);
  return out;
}

/** Whether every job can reach t and the needs fit every resource. */
function floorsFor(prep: Prepared, t: number): number[] | undefined {
  const need: number[] = [];
  for (const curve of prep.curves) {
    const c = needFor(curve, t);
    if (c === undefined) return undefined;
    need.push(c);
  }
  for (const c of prep.constraints) {
    let used = 0;
    for (let j = 0; j < need.length; j++) used += need[j]! * c.w[j]!;
    if (used > c.cap + TOL) return undefined;
  }
  return need;
}

/** The max-min utility level: the largest t whose per-job needs fit (exact, by binary search). */
function maxMinLevel(prep: Prepared, lv: readonly number[]): { t: number; floor: number[] } {
  let lo = 0;
  let hi = lv.length - 1;
  // The smallest level is every job's value at its minimum, always feasible after prepare().
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (floorsFor(prep, lv[mid]!) !== undefined) lo = mid;
    else hi = mid - 1;
  }
  const t = lv[lo]!;
  return { t, floor: floorsFor(prep, t)! };
}

/** Faro's Stage 2 + Stage 3 on integers: see the file header for the method per objective. */
export function solveAllocation(problem: AllocationProblem, opts: SolveOptions = {}): Allocation {
  const prep = prepare(problem);
  const n = prep.jobs.length;
  const start = opts.now?.() ?? 0;
  const deadline = opts.budgetMs !== undefined ? start + opts.budgetMs : Number.POSITIVE_INFINITY;
  if (n === 0) return describe(problem, prep, [], 0, { method: "empty", coreJobs: 0, subproblems: 0 });
  const lo = prep.curves.map((c) => c.lo);
  const hi = prep.curves.map((c) => c.hi);
  const o = problem.objective;

  if (o.kind === "sum" || o.kind === "penaltySum" || o.kind === "attainment") {
    const r = solveSum(prep, lo, hi, opts, deadline)!;
    const reps = shrink(prep.curves, r.replicas);
    return describe(problem, prep, reps, r.upperBound, { method: r.method, coreJobs: r.coreJobs, subproblems: 1 });
  }

  const lv = levels(prep.curves);
  const mm = maxMinLevel(prep, lv);
  if (o.kind === "fair") {
    const r = solveSum(prep, mm.floor, hi, opts, deadline)!;
    return describe(problem, prep, shrink(prep.curves, r.replicas), mm.t, {
      method: `maxmin+${r.method}`,
      coreJobs: r.coreJobs,
      subproblems: 1,
    });
  }
  if (!isFairSumLike(o)) throw new RangeError(`unknown objective ${JSON.stringify(o)}`);
  return solveFairSum(problem, prep, lv, mm.t, opts, deadline);
}

/**
 * FairSum: sum - gamma (max - min). For the optimum x* with min m and max M, the Sum problem with
 * every job in [t = m, T = M] has x* feasible, so enumerating the pairs (t, T) of utility levels
 * and solving each restricted Sum exactly finds it. Bounds prune pairs:
 *   value(t, T) <= min(SumUB(t), sum_j pi_j min(T, top_j)) - gamma (T - t),
 * and, since min <= the max-min level t*, only t <= t* is searched.
 */
function solveFairSum(
  problem: AllocationProblem,
  prep: Prepared,
  lv: readonly number[],
  tStar: number,
  opts: SolveOptions,
  deadline: number,
): Allocation {
  const n = prep.curves.length;
  const gamma = objectiveGamma(problem.objective, n);
  const top = prep.curves.map((c) => c.values[c.values.length - 1]!);
  // sum_j pi_j min(T, top_j) from sorted tops and prefix sums.
  const byTop = top.map((t, j) => ({ t, p: prep.priorities[j]! })).sort((a, b) => a.t - b.t);
  const prefTP = [0];
  const prefP = [0];
  for (const x of byTop) {
    prefTP.push(prefTP[prefTP.length - 1]! + x.t * x.p);
    prefP.push(prefP[prefP.length - 1]! + x.p);
  }
  const totalP = prefP[prefP.length - 1]!;
  const capSum = (T: number): number => {
    let lo = 0;
    let hi = byTop.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (byTop[mid]!.t <= T) lo = mid + 1;
      else hi = mid;
    }
    return prefTP[lo]! + T * (totalP - prefP[lo]!);
  };
  const hiAll = prep.curves.map((c) => c.hi);
  const tIdxStar = lv.findIndex((x) => x >= tStar - 1e-12);
  const Tmax = top.reduce((m, x) => Math.max(m, x), Number.NEGATIVE_INFINITY);
  let best: number[] | undefined;
  let bestV = Number.NEGATIVE_INFINITY;
  let subproblems = 0;
  let stoppedAt = -1;
  let allOptimal = true;
  const tol = 1e-9 * Math.max(1, totalP);
  const consider = (reps: number[]) => {
    const us = reps.map((c, j) => curveValue(prep.curves[j]!, c));
    const v = clusterObjective(problem.objective, us, prep.priorities);
    if (v > bestV) {
      bestV = v;
      best = reps;
    }
  };
  // Every allocation has max >= mLo (each job's utility at its minimum) and sum <= the LP bound.
  const mLo = prep.curves.reduce((m, c) => Math.max(m, c.values[0]!), Number.NEGATIVE_INFINITY);
  const unconstrained = solveSum(
    prep,
    prep.curves.map((c) => c.lo),
    hiAll,
    opts,
    deadline,
  )!;
  subproblems++;
  consider(shrink(prep.curves, unconstrained.replicas));
  const sumUb = unconstrained.upperBound;
  const pairBound = (t: number, T: number, ub: number) => Math.min(ub, capSum(T)) - gamma * (T - t);
  /** Bound on any allocation whose minimum is t: the best pair bound over T >= max(t, mLo). */
  const floorBound = (t: number): number => {
    // min(sumUb, capSum(T)) - gamma T is concave piecewise linear with kinks at the tops: check them.
    // The min with sumUb adds one more kink, where capSum crosses it (capSum is non-decreasing).
    const t0 = Math.max(t, mLo);
    let b = pairBound(t, t0, sumUb);
    for (const x of byTop) if (x.t >= t0) b = Math.max(b, pairBound(t, x.t, sumUb));
    if (capSum(t0) < sumUb && capSum(Tmax) > sumUb) {
      let l = t0;
      let h = Tmax;
      for (let i = 0; i < 60; i++) {
        const m = (l + h) / 2;
        if (capSum(m) < sumUb) l = m;
        else h = m;
      }
      b = Math.max(b, pairBound(t, l, sumUb), pairBound(t, h, sumUb));
    }
    return b;
  };
  for (let ti = tIdxStar; ti >= 0; ti--) {
    const t = lv[ti]!;
    if (opts.now !== undefined && best !== undefined && opts.now() > deadline) {
      stoppedAt = ti;
      break;
    }
    const fb = floorBound(t);
    if (fb <= bestV + tol) {
      // With gamma >= sum of priorities the floor bound only falls as t falls (see README).
      if (gamma >= totalP) {
        stoppedAt = -1;
        break;
      }
      continue;
    }
    const floor = floorsFor(prep, t);
    if (floor === undefined) continue;
    const free = solveSum(prep, floor, hiAll, opts, deadline);
    subproblems++;
    if (free === undefined) continue;
    if (!free.optimal) allOptimal = false;
    consider(shrink(prep.curves, free.replicas));
    const maxOf = (reps: readonly number[]) =>
      reps.reduce((m, c, j) => Math.max(m, curveValue(prep.curves[j]!, c)), Number.NEGATIVE_INFINITY);
    const tMin = maxOf(floor);
    // A solution optimal under cap T with max M is optimal under every cap in [M, T], where it
    // scores better than any other: so after each solve the next cap worth trying is below M.
    let ceiling = free.optimal ? maxOf(free.replicas) : Tmax;
    for (let Ti = lv.length - 1; Ti >= 0; Ti--) {
      const T = lv[Ti]!;
      if (T < tMin - 1e-12) break;
      if (T >= ceiling - 1e-12) continue;
      if (pairBound(t, T, free.upperBound) <= bestV + tol) continue;
      if (opts.now !== undefined && opts.now() > deadline) break;
      const cap: number[] = [];
      let ok = true;
      for (let j = 0; j < n && ok; j++) {
        const c = capFor(prep.curves[j]!, T);
        if (c === undefined || c < floor[j]!) ok = false;
        else cap.push(c);
      }
      if (!ok) continue;
      const r = solveSum(prep, floor, cap, opts, deadline);
      subproblems++;
      if (r === undefined) continue;
      if (!r.optimal) allOptimal = false;
      consider(r.replicas);
      ceiling = r.optimal ? maxOf(r.replicas) : T;
    }
  }
  let ub = bestV;
  if (stoppedAt >= 0) for (let ti = stoppedAt; ti >= 0; ti--) ub = Math.max(ub, floorBound(lv[ti]!));
  if (!allOptimal) ub = Math.max(ub, sumUb); // sub-solves with gaps: only the plain Sum bound is proven
  return describe(problem, prep, shrink(prep.curves, best!), ub, { method: "fairsum-enum", coreJobs: 0, subproblems });
}
