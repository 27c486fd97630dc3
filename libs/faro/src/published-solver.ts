/**
 * Faro's published solver (Sec. 3.4 "Hierarchical Optimization", Sec. 4.2-4.3, artifact constants):
 * the allocation step alone, one solve of one problem. Faro as published, the controller that runs
 * this solver in Faro's hybrid loop (the simulator's `faro-published` policy), is libs/baselines
 * faro-published-policy.ts. The solve: a continuous relaxation of the cluster objective solved by a
 * derivative-free method from the current replicas (initial step 2, 1000 objective evaluations),
 * ceil, remove replicas greedily until within capacity, shrink jobs at utility 1; with more than
 * 10 jobs, G = 10 random groups (lambda_g = sum lambda, p_g = mean p) are optimised instead.
 *
 * The solver is not literally COBYLA: npm has no maintained pure-JS COBYLA (the only port found,
 * nlopt-js, is an unmaintained WebAssembly build). The substitute is a projected compass
 * (pattern) search: like COBYLA it uses only objective values, starts from the current point with
 * a trust-region-like step of 2 that halves when no move improves, and respects the linear
 * capacity constraints, here by Euclidean projection onto {lo <= x <= hi, a.x <= C}. The
 * continuous objective evaluates each unit's integer utility table with linear interpolation.
 */

import { MinHeap, type Random, randomInt } from "@infergrid/core";
import { buildCurve, curveValue, type JobCurve, type JobSpec } from "./curves.js";
import { clusterObjective, type ObjectiveSpec } from "./objectives.js";
import { type Allocation, type AllocationProblem, curveContext, describe, maxFit, prepare } from "./solver.js";

export interface PublishedSolverOptions {
  random: Random;
  /** Groups when there are more than `groups` jobs (default 10). */
  groups?: number;
  /** Objective evaluations of the continuous search (default 1000, the artifact's COBYLA maxiter). */
  evaluations?: number;
  /** Initial step (default 2, the artifact's rhobeg). */
  initialStep?: number;
}

interface Unit {
  members: number[];
  curve: JobCurve;
  priority: number;
  /** Resources per replica, per constraint. */
  w: number[];
  lo: number;
  hi: number;
}

const interp = (curve: JobCurve, x: number): number => {
  const xl = Math.max(curve.lo, Math.min(x, curve.hi));
  const f = Math.floor(xl);
  const a = curveValue(curve, f);
  if (f >= curve.hi) return a;
  return a + (xl - f) * (curveValue(curve, f + 1) - a);
};

/** Euclidean projection onto {lo <= x <= hi, sum a_i x_i <= cap} (a_i > 0), by bisection on the multiplier. */
export function projectCapped(
  x: readonly number[],
  a: readonly number[],
  lo: readonly number[],
  hi: readonly number[],
  cap: number,
): number[] {
  const n = x.length;
  const load = (tau: number): number => {
    let s = 0;
    for (let i = 0; i < n; i++) s += a[i]! * Math.min(hi[i]!, Math.max(lo[i]!, x[i]! - tau * a[i]!));
    return s;
  };
  const clip = (tau: number) => x.map((v, i) => Math.min(hi[i]!, Math.max(lo[i]!, v - tau * a[i]!)));
  if (load(0) <= cap) return clip(0);
  let l = 0;
  let h = 1;
  while (load(h) > cap && h < 1e12) h *= 2;
  for (let it = 0; it < 50; it++) {
    const m = (l + h) / 2;
    if (load(m) > cap) l = m;
    else h = m;
  }
  return clip(h);
}

/** One solve by Faro's published solver; stats.method is "published" (or "published-grouped" with groups). */
export function solveFaroPublished(problem: AllocationProblem, opts: PublishedSolverOptions): Allocation {
  const prep = prepare(problem);
  const jobs = problem.jobs;
  const n = jobs.length;
  const cons = prep.constraints;
  const G = opts.groups ?? 10;
  const ctx = curveContext(problem);
  const loUse = cons.map((c) => c.w.reduce((s, w, j) => s + w * prep.curves[j]!.lo, 0));
  const loAll = prep.curves.map((c) => c.lo);
  const hiOf = prep.curves.map((_, j) => capBound(prep, j, loUse, loAll));

  // Units: the jobs themselves, or G random groups of them.
  let units: Unit[];
  if (n <= G) {
    units = jobs.map((_, j) => ({
      members: [j],
      curve: prep.curves[j]!,
      priority: prep.priorities[j]!,
      w: cons.map((c) => c.w[j]!),
      lo: prep.curves[j]!.lo,
      hi: hiOf[j]!,
    }));
  } else {
    const perm = jobs.map((_, j) => j);
    for (let i = n - 1; i > 0; i--) {
      const k = randomInt(opts.random, i + 1);
      [perm[i], perm[k]] = [perm[k]!, perm[i]!];
    }
    const groups: number[][] = Array.from({ length: G }, () => []);
    perm.forEach((j, i) => {
      groups[i % G]!.push(j);
    });
    units = groups.map((members) => groupUnit(prep, jobs, members, ctx));
  }
  const U = units.length;
  const gammaFix: ObjectiveSpec = fixGamma(problem.objective, n);
  const evalUnits = (x: readonly number[]) =>
    clusterObjective(
      gammaFix,
      units.flatMap((u, i) => u.members.map(() => interp(u.curve, x[i]!))),
      units.flatMap((u) => u.members.map((j) => prep.priorities[j]!)),
    );
  const f = evalUnits;
  const project = (x: number[]): number[] => {
    let y = x;
    // Alternating projections: exact for one constraint, close enough for the baseline with more.
    for (let round = 0; round < (cons.length > 1 ? 20 : 1); round++) {
      for (let r = 0; r < cons.length; r++) {
        y = projectCapped(
          y,
          units.map((u) => u.w[r]!),
          units.map((u) => u.lo),
          units.map((u) => u.hi),
          cons[r]!.cap,
        );
      }
    }
    return y;
  };
  let x = project(units.map((u) => u.members.reduce((s, j) => s + (jobs[j]!.currentReplicas ?? prep.curves[j]!.lo), 0)));
  let fx = f(x);
  let evals = 1;
  let step = opts.initialStep ?? 2;
  const maxEvals = opts.evaluations ?? 1000;
  while (evals < maxEvals && step > 1e-3) {
    let improved = false;
    for (let i = 0; i < U && evals < maxEvals; i++) {
      for (const dir of [1, -1]) {
        if (evals >= maxEvals) break;
        const y = x.slice();
        y[i] = y[i]! + dir * step;
        const py = project(y);
        const fy = f(py);
        evals++;
        if (fy > fx + 1e-12) {
          x = py;
          fx = fy;
          improved = true;
          break;
        }
      }
    }
    if (!improved) step /= 2;
  }

  // Members share their group's replicas in proportion to offered load (the paper leaves this open).
  const real = new Array<number>(n).fill(0);
  units.forEach((u, i) => {
    if (u.members.length === 1) {
      real[u.members[0]!] = x[i]!;
      return;
    }
    const load = u.members.map((j) => meanRate(jobs[j]!) * jobs[j]!.processingTime);
    const totalLoad = load.reduce((s, v) => s + v, 0);
    const extra = x[i]! - u.lo;
    u.members.forEach((j, k) => {
      const share = totalLoad > 0 ? load[k]! / totalLoad : 1 / u.members.length;
      real[j] = prep.curves[j]!.lo + extra * share;
    });
  });
  const reps = real.map((v, j) => Math.min(hiOf[j]!, Math.max(prep.curves[j]!.lo, Math.ceil(v - 1e-9))));

  // Remove replicas greedily (least utility lost first) until every resource fits.
  const used = cons.map((c) => reps.reduce((s, v, j) => s + v * c.w[j]!, 0));
  const loss = (j: number) => prep.priorities[j]! * (curveValue(prep.curves[j]!, reps[j]!) - curveValue(prep.curves[j]!, reps[j]! - 1));
  const heap = new MinHeap<number>();
  for (let j = 0; j < n; j++) if (reps[j]! > prep.curves[j]!.lo) heap.push(loss(j), j);
  while (cons.some((c, r) => used[r]! > c.cap + 1e-9) && heap.size > 0) {
    const j = heap.pop() as number;
    reps[j] = reps[j]! - 1;
    cons.forEach((c, r) => {
      used[r] = used[r]! - c.w[j]!;
    });
    if (reps[j]! > prep.curves[j]!.lo) heap.push(loss(j), j);
  }
  // Stage 3 as in the paper: only jobs at utility 1 give back what they do not need for it.
  for (let j = 0; j < n; j++) {
    const curve = prep.curves[j]!;
    if (curveValue(curve, reps[j]!) >= 1 - 1e-12) {
      let c = reps[j]!;
      while (c > curve.lo && curveValue(curve, c - 1) >= 1 - 1e-12) c--;
      reps[j] = c;
    }
  }
  return describe(problem, prep, reps, Number.POSITIVE_INFINITY, {
    method: units.length === n ? "published" : "published-grouped",
    coreJobs: 0,
    subproblems: 1,
  });
}

function fixGamma(o: ObjectiveSpec, jobs: number): ObjectiveSpec {
  if (o.kind === "fairSum") return { kind: "fairSum", gamma: o.gamma ?? jobs };
  if (o.kind === "penaltyFairSum") return { ...o, gamma: o.gamma ?? jobs };
  return o;
}

function meanRate(job: JobSpec): number {
  return job.rates.reduce((s, r) => s + r, 0) / job.rates.length;
}

function capBound(prep: ReturnType<typeof prepare>, j: number, loUse: readonly number[], lo: readonly number[]): number {
  return Math.max(
    prep.curves[j]!.lo,
    Math.min(prep.jobs[j]!.maxReplicas ?? Number.POSITIVE_INFINITY, maxFit(prep.constraints, loUse, lo, j)),
  );
}

/** A group as one aggregated job (Sec. 3.4): summed rates, mean processing time and SLO. */
function groupUnit(
  prep: ReturnType<typeof prepare>,
  jobs: readonly JobSpec[],
  members: number[],
  ctx: ReturnType<typeof curveContext>,
): Unit {
  const steps = Math.max(...members.map((j) => jobs[j]!.rates.length));
  const rates: number[] = [];
  for (let k = 0; k < steps; k++)
    rates.push(members.reduce((s, j) => s + (jobs[j]!.rates[k] ?? jobs[j]!.rates[jobs[j]!.rates.length - 1]!), 0));
  const mean = (g: (j: JobSpec) => number) => members.reduce((s, j) => s + g(jobs[j]!), 0) / members.length;
  const lo = members.reduce((s, j) => s + prep.curves[j]!.lo, 0);
  const w = prep.constraints.map((c) => members.reduce((s, j) => s + c.w[j]!, 0) / members.length);
  // Extra replicas beyond every job's minimum that fit, at the group's mean size per replica.
  let hi = Number.POSITIVE_INFINITY;
  prep.constraints.forEach((c, r) => {
    let allLo = 0;
    for (let i = 0; i < jobs.length; i++) allLo += prep.curves[i]!.lo * c.w[i]!;
    hi = Math.min(hi, lo + Math.floor((c.cap - allLo) / w[r]! + 1e-9));
  });
  const first = jobs[members[0]!]!;
  const pseudo: JobSpec = {
    id: `group:${members.join(",")}`,
    processingTime: mean((j) => j.processingTime),
    slo: { latency: mean((j) => j.slo.latency), percentile: mean((j) => j.slo.percentile) },
    rates,
    minReplicas: lo,
    currentReplicas: members.reduce((s, j) => s + (jobs[j]!.currentReplicas ?? prep.curves[j]!.lo), 0),
    ...(first.utility !== undefined ? { utility: first.utility } : {}),
    ...(first.latencyModel !== undefined ? { latencyModel: first.latencyModel } : {}),
  };
  const curve = buildCurve(pseudo, ctx, Math.max(lo, hi));
  return { members, curve, priority: members.reduce((s, j) => s + prep.priorities[j]!, 0), w, lo, hi: Math.max(lo, hi) };
}
