/**
 * Solver benchmark (Faro, Sec. 3.4 / 4.2, Fig. 7; the target: 1,000 services in < 100 ms).
 * Random Faro-like instances (service time 100-300 ms, lognormal rates over 7 one-minute steps,
 * SLO 3-5x the service time at p99, relaxed utility, M/D/c), capacity = sum of the replicas each
 * job needs for utility 1 x {0.5, 0.8, 1.2}. Prints, per instance: the exact solver's objective,
 * time, proven gap and method; an independent plain DP optimum where affordable; and Faro's
 * published solver (continuous search + rounding, G = 10 groups) on the same instance.
 * Run: npm run bench:solver (after tsc -b).
 */

import { availableParallelism, loadavg } from "node:os";
import { type Random, seededRandom, standardNormal } from "@infergrid/core";
import type { JobSpec } from "./curves.js";
import { curveValue } from "./curves.js";
import type { ObjectiveSpec } from "./objectives.js";
import { solveFaroPublished } from "./published-solver.js";
import { type AllocationProblem, needFor, prepare, solveAllocation } from "./solver.js";

function makeJobs(rnd: Random, n: number): JobSpec[] {
  const jobs: JobSpec[] = [];
  for (let i = 0; i < n; i++) {
    const p = 0.1 + 0.2 * rnd.uniform();
    const base = Math.exp(Math.log(8) + 0.9 * standardNormal(rnd));
    const rates: number[] = [];
    let r = base;
    for (let k = 0; k < 7; k++) {
      r = Math.max(0, r * (1 + 0.15 * standardNormal(rnd)));
      rates.push(r);
    }
    jobs.push({
      id: `job-${i}`,
      processingTime: p,
      slo: { latency: p * (3 + 2 * rnd.uniform()), percentile: 99 },
      rates,
      currentReplicas: 1 + Math.floor(base * p),
    });
  }
  return jobs;
}

/** Plain multiple-choice knapsack DP over every job and every count: the reference optimum. */
function referenceOptimum(problem: AllocationProblem): number {
  const prep = prepare(problem);
  const C = problem.capacity.backends!;
  let base = 0;
  for (const c of prep.curves) base += c.lo;
  const K = C - base;
  let dp = new Float64Array(K + 1);
  let next = new Float64Array(K + 1);
  prep.curves.forEach((curve, j) => {
    next.fill(Number.NEGATIVE_INFINITY);
    const pr = prep.priorities[j]!;
    for (let c = curve.lo; c <= curve.hi && c - curve.lo <= K; c++) {
      const dw = c - curve.lo;
      const v = pr * curveValue(curve, c);
      for (let k = dw; k <= K; k++) {
        const cand = dp[k - dw]! + v;
        if (cand > next[k]!) next[k] = cand;
      }
    }
    [dp, next] = [next, dp];
  });
  return dp[K]!;
}

/** CPU time of this process in ms: on a shared machine it tracks the work better than wall time. */
function cpuMs(): number {
  // biome-ignore lint/style/noRestrictedGlobals: the bench script (not policy code) reads its own CPU time.
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function timed<T>(f: () => T, runs: number): { r: T; ms: number; cpu: number } {
  let r = f();
  const times: number[] = [];
  const cpus: number[] = [];
  for (let i = 0; i < runs; i++) {
    const c0 = cpuMs();
    const t0 = performance.now();
    r = f();
    times.push(performance.now() - t0);
    cpus.push(cpuMs() - c0);
  }
  const med = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { r, ms: med(times), cpu: med(cpus) };
}

const pad = (s: string | number, w: number) => String(s).padStart(w);
const fmt = (x: number, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : "-");

function run(): void {
  const rows: string[] = [];
  const header = [
    pad("J", 6),
    pad("capacity", 9),
    pad("x need", 7),
    pad("objective", 11),
    pad("max", 7),
    pad("solve ms", 9),
    pad("cpu ms", 8),
    pad("gap", 9),
    pad("method", 10),
    pad("core", 5),
    pad("DP optimum", 11),
    pad("DP ms", 8),
    pad("published", 10),
    pad("pub ms", 8),
    pad("pub lost", 9),
  ].join(" ");
  rows.push(header);
  const objective: ObjectiveSpec = { kind: "sum" };
  for (const J of [10, 100, 1000, 10000]) {
    const jobs = makeJobs(seededRandom(J), J);
    const needs = prepare({ jobs, capacity: { backends: 1e7 }, objective }).curves.map((c) => needFor(c, c.values[c.values.length - 1]!)!);
    const totalNeed = needs.reduce((s, x) => s + x, 0);
    for (const factor of [0.5, 0.8, 1.2]) {
      const capacity = Math.max(J, Math.round(totalNeed * factor));
      const problem: AllocationProblem = { jobs, capacity: { backends: capacity }, objective, stepSeconds: 60, coldStartSeconds: 60 };
      // Median of several runs after a warm-up: the machine is shared, single runs are noisy.
      const { r, ms, cpu } = timed(() => solveAllocation(problem, { now: () => performance.now(), budgetMs: 5000 }), J >= 10000 ? 3 : 7);
      let dpOpt = Number.NaN;
      let dpMs = Number.NaN;
      if (J * (capacity - J) <= 3e7) {
        const d0 = performance.now();
        dpOpt = referenceOptimum(problem);
        dpMs = performance.now() - d0;
      }
      const p0 = performance.now();
      const pub = solveFaroPublished(problem, { random: seededRandom(J + 1) });
      const pubMs = performance.now() - p0;
      rows.push(
        [
          pad(J, 6),
          pad(capacity, 9),
          pad(factor, 7),
          pad(fmt(r.objective), 11),
          pad(J, 7),
          pad(fmt(ms, 1), 9),
          pad(fmt(cpu, 1), 8),
          pad(r.gap.toExponential(1), 9),
          pad(r.stats.method, 10),
          pad(r.stats.coreJobs, 5),
          pad(fmt(dpOpt), 11),
          pad(fmt(dpMs, 0), 8),
          pad(fmt(pub.objective), 10),
          pad(fmt(pubMs, 1), 8),
          pad(fmt(r.objective - pub.objective), 9),
        ].join(" "),
      );
      console.log(rows[rows.length - 1]);
    }
  }
  console.log("");
  console.log(rows.join("\n"));
}

/** The other objectives, and CPU + memory with differing replica sizes (2-D: surrogate bounds). */
function runOthers(): void {
  const rows: string[] = [
    [
      pad("J", 6),
      pad("objective", 16),
      pad("resources", 10),
      pad("value", 11),
      pad("bound", 11),
      pad("gap", 9),
      pad("solve ms", 9),
      pad("cpu ms", 8),
      pad("subprobs", 8),
      pad("published", 10),
      pad("pub ms", 8),
    ].join(" "),
  ];
  for (const J of [10, 100, 1000]) {
    const jobs = makeJobs(seededRandom(J), J);
    const curves = prepare({ jobs, capacity: { backends: 1e7 }, objective: { kind: "sum" } }).curves;
    const needs = curves.map((c) => needFor(c, c.values[c.values.length - 1]!)!);
    const totalNeed = needs.reduce((s, x) => s + x, 0);
    const cases: { name: string; res: string; problem: AllocationProblem }[] = [];
    for (const objective of [
      { kind: "fair" },
      { kind: "fairSum" },
      { kind: "penaltySum" },
      { kind: "penaltyFairSum" },
      { kind: "attainment" },
    ] as ObjectiveSpec[]) {
      cases.push({
        name: objective.kind,
        res: "backends",
        problem: { jobs, capacity: { backends: Math.round(totalNeed * 0.8) }, objective, coldStartSeconds: 60 },
      });
    }
    // Replica sizes as in a mixed cluster: 1, 2 or 4 vCPU with 2, 4 or 8 GiB, not proportional.
    const rnd = seededRandom(J + 7);
    const sized = jobs.map((j) => ({
      ...j,
      cpu: [1, 2, 4][Math.floor(3 * rnd.uniform())]!,
      mem: [2, 4, 8][Math.floor(3 * rnd.uniform())]!,
    }));
    const cpuNeed = sized.reduce((s, j, i) => s + needs[i]! * j.cpu, 0);
    const memNeed = sized.reduce((s, j, i) => s + needs[i]! * j.mem, 0);
    cases.push({
      name: "sum",
      res: "cpu+mem",
      problem: {
        jobs: sized,
        capacity: { cpu: Math.round(cpuNeed * 0.7), mem: Math.round(memNeed * 0.7) },
        objective: { kind: "sum" },
        coldStartSeconds: 60,
      },
    });
    for (const c of cases) {
      const { r, ms, cpu } = timed(() => solveAllocation(c.problem, { now: () => performance.now(), budgetMs: 2000 }), 3);
      const p0 = performance.now();
      const pub = solveFaroPublished(c.problem, { random: seededRandom(J + 1) });
      const pubMs = performance.now() - p0;
      const row = [
        pad(J, 6),
        pad(c.name, 16),
        pad(c.res, 10),
        pad(fmt(r.objective), 11),
        pad(fmt(r.upperBound), 11),
        pad(r.gap.toExponential(1), 9),
        pad(fmt(ms, 1), 9),
        pad(fmt(cpu, 1), 8),
        pad(r.stats.subproblems, 8),
        pad(fmt(pub.objective), 10),
        pad(fmt(pubMs, 1), 8),
      ].join(" ");
      rows.push(row);
      console.log(row);
    }
  }
  console.log("");
  console.log(rows.join("\n"));
}

console.log(
  `Faro solver benchmark (load average at start: ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores; times are medians: wall ms and this process's CPU ms)`,
);
console.log("Faro-Sum of relaxed utilities (max = J), 7 one-minute steps, 60 s cold start; solve ms includes building the utility tables");
run();
console.log("");
console.log("Other objectives (capacity 0.8 x need; gamma = J) and CPU + memory (0.7 x need of each; budget 2 s)");
runOthers();
