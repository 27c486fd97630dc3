import { type Random, seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { curveValue, type JobSpec, plannedStepUtilities } from "./curves.js";
import { mdcLatency, onTimeFraction } from "./latency.js";
import { clusterObjective, type ObjectiveSpec } from "./objectives.js";
import { type AllocationProblem, prepare, shrink, solveAllocation } from "./solver.js";

/** Upper-bound latency with a 1 s window: job needs ceil(p * lambda / slo) replicas; u = c / need (relaxed). */
const ub = (id: string, lambda: number, extra: Partial<JobSpec> = {}): JobSpec => ({
  id,
  processingTime: 0.1,
  slo: { latency: 0.5, percentile: 99 },
  rates: [lambda],
  latencyModel: "upperBound",
  ...extra,
});

const mean = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

describe("objectives on hand-solved cases (needs 4, 6, 2; capacity 9)", () => {
  const jobs = [ub("a", 20), ub("b", 30), ub("c", 10)];
  const base = { jobs, capacity: { backends: 9 } };
  it("Sum with step utilities is a knapsack: two of three jobs fit", () => {
    const step = jobs.map((j) => ({ ...j, utility: { kind: "step" as const } }));
    const r = solveAllocation({ jobs: step, capacity: { backends: 9 }, objective: { kind: "sum" } });
    expect(r.objective).toBe(2);
    expect(r.optimal).toBe(true);
    const prio = step.map((j) => (j.id === "b" ? { ...j, priority: 3 } : j));
    const rp = solveAllocation({ jobs: prio, capacity: { backends: 9 }, objective: { kind: "sum" } });
    expect(rp.replicas).toEqual([1, 6, 2]);
    expect(rp.objective).toBe(4);
  });
  it("Sum with relaxed utilities fills by marginal utility: c first, then a, then b", () => {
    const r = solveAllocation({ ...base, objective: { kind: "sum" } });
    expect(r.replicas).toEqual([4, 3, 2]);
    expect(r.objective).toBeCloseTo(2.5, 9);
    expect(r.gap).toBeLessThan(1e-9);
  });
  it("Fair is max-min: the level 2/3 is the highest whose needs (3 + 4 + 2) fit", () => {
    const r = solveAllocation({ ...base, objective: { kind: "fair" } });
    expect(r.replicas).toEqual([3, 4, 2]);
    expect(r.objective).toBeCloseTo(2 / 3, 9);
    expect(r.sumUtility).toBeCloseTo(0.75 + 2 / 3 + 1, 9);
  });
  it("FairSum (gamma = 3 jobs) prefers everyone at 1/2 (1.5) to [3, 4, 2] (1.4167) and [4, 3, 2] (1.0)", () => {
    const r = solveAllocation({ ...base, objective: { kind: "fairSum" } });
    expect(r.objective).toBeCloseTo(1.5, 9);
    expect(r.replicas).toEqual([2, 3, 1]);
    const g0 = solveAllocation({ ...base, objective: { kind: "fairSum", gamma: 0 } });
    expect(g0.objective).toBeCloseTo(2.5, 9);
  });
  it("PenaltySum drops the 1 % the table does not charge for", () => {
    const one = [ub("a", 20, { minReplicas: 3, maxReplicas: 3 })];
    const r = solveAllocation({ jobs: one, capacity: { backends: 3 }, objective: { kind: "penaltySum", penalty: "step" } });
    expect(r.dropRates[0]).toBe(0.01);
    expect(r.objective).toBeCloseTo(3 / 3.96, 9);
    const relaxed = solveAllocation({ jobs: one, capacity: { backends: 3 }, objective: { kind: "penaltySum", penalty: "relaxed" } });
    // Relaxed: phi(d) = 1 - penalty(d); d in [0.001, 0.03] trades 25/0.029 per unit of drop against utility 3/(4(1-d)).
    expect(relaxed.objective).toBeGreaterThanOrEqual(0.75 * 1.001 - 1e-12);
    expect(relaxed.objective).toBeLessThan(0.76);
  });
  it("PenaltyFairSum combines both", () => {
    const r = solveAllocation({ ...base, objective: { kind: "penaltyFairSum", penalty: "step" } });
    const u = r.utilities;
    expect(r.objective).toBeCloseTo(u.reduce((s, x) => s + x, 0) - 3 * (Math.max(...u) - Math.min(...u)), 12);
    expect(r.objective).toBeGreaterThanOrEqual(1.5);
  });
});

function randomJob(rnd: Random, i: number, stepUtility: boolean): JobSpec {
  const p = 0.1 + 0.2 * rnd.uniform();
  const base = 2 + 25 * rnd.uniform();
  return {
    id: `j${i}`,
    processingTime: p,
    slo: { latency: p * (2 + 3 * rnd.uniform()), percentile: 99 },
    rates: [base, base * (0.7 + 0.6 * rnd.uniform()), base * (0.7 + 0.6 * rnd.uniform())],
    priority: rnd.uniform() < 0.3 ? 2 : 1,
    minReplicas: rnd.uniform() < 0.3 ? 0 : 1,
    currentReplicas: 1 + Math.floor(4 * rnd.uniform()),
    cpu: 1 + Math.floor(3 * rnd.uniform()),
    mem: 1 + Math.floor(3 * rnd.uniform()),
    ...(stepUtility ? { utility: { kind: "step" as const } } : {}),
  };
}

/** Exhaustive search over every allocation that fits: the reference optimum. */
function bruteForce(problem: AllocationProblem): { best: number; bestSum: number } {
  const prep = prepare(problem);
  const n = prep.jobs.length;
  const reps = prep.curves.map((c) => c.lo);
  let best = Number.NEGATIVE_INFINITY;
  let bestSum = Number.NEGATIVE_INFINITY;
  const fits = () => prep.constraints.every((c) => reps.reduce((s, x, j) => s + x * c.w[j]!, 0) <= c.cap + 1e-9);
  const rec = (j: number) => {
    if (j === n) {
      const us = reps.map((c, i) => curveValue(prep.curves[i]!, c));
      const v = clusterObjective(problem.objective, us, prep.priorities);
      const s = us.reduce((a, u, i) => a + u * prep.priorities[i]!, 0);
      if (v > best + 1e-12 || (Math.abs(v - best) <= 1e-12 && s > bestSum)) {
        best = v;
        bestSum = s;
      }
      return;
    }
    for (let c = prep.curves[j]!.lo; ; c++) {
      reps[j] = c;
      if (!fits()) break;
      rec(j + 1);
    }
    reps[j] = prep.curves[j]!.lo;
  };
  rec(0);
  return { best, bestSum };
}

describe("attainment: requests/s served within the SLO", () => {
  // ResNet-34 at Faro's SLO: a busy job (40 req/s, 6.6 backends of work) and a light one (1 req/s).
  const job = (id: string, lambda: number): JobSpec => ({
    id,
    processingTime: 0.166,
    slo: { latency: 0.72, percentile: 99 },
    rates: [lambda],
  });
  const jobs = [job("busy", 40), job("light", 1)];
  // Computed from the latency functions, not the solver's tables: 1 where the M/D/c p99 meets the SLO.
  const inTime = (lambda: number, c: number) =>
    lambda * (mdcLatency(99, 0.166, lambda, c) <= 0.72 ? 1 : onTimeFraction(0.166, lambda, c, 0.72));
  it("the objective is the requests/s in time, and every backend the light job does not need goes to the busy one", () => {
    for (const capacity of [2, 4, 6]) {
      const r = solveAllocation({ jobs, capacity: { backends: capacity }, objective: { kind: "attainment" } });
      let best = { v: -1, c: -1 };
      for (let c = 1; c < capacity; c++) {
        const v = inTime(40, c) + inTime(1, capacity - c);
        if (v > best.v) best = { v, c };
      }
      expect(r.replicas, `capacity ${capacity}`).toEqual([best.c, capacity - best.c]);
      expect(r.objective).toBeCloseTo(best.v, 9);
      // The light job meets its SLO on one backend, so the busy one gets the rest.
      expect(r.replicas[1]).toBe(1);
    }
  });
  it("with room for both, the busy job stops where it meets its SLO (the rest is left to the pool)", () => {
    const r = solveAllocation({ jobs, capacity: { backends: 30 }, objective: { kind: "attainment" } });
    const need = [...Array(30).keys()].find((c) => c > 0 && mdcLatency(99, 0.166, 40, c) <= 0.72);
    expect(r.replicas).toEqual([need, 1]);
    expect(r.utilities).toEqual([1, 1]);
    expect(r.objective).toBeCloseTo(41, 9);
  });
});

describe("solver vs exhaustive search on small instances", () => {
  const objectives: ObjectiveSpec[] = [
    { kind: "sum" },
    { kind: "fair" },
    { kind: "fairSum" },
    { kind: "penaltySum", penalty: "step" },
    { kind: "penaltyFairSum", penalty: "relaxed" },
    { kind: "attainment" },
  ];
  for (const objective of objectives) {
    it(`${objective.kind}: same optimum on 60 random instances (3-5 jobs, capacity <= 12)`, () => {
      for (let seed = 1; seed <= 60; seed++) {
        const rnd = seededRandom(seed * 7919 + objective.kind.length);
        const n = 3 + (seed % 3);
        const jobs = Array.from({ length: n }, (_, i) => randomJob(rnd, i, seed % 2 === 0));
        const problem: AllocationProblem = {
          jobs,
          capacity: { backends: n + Math.floor(rnd.uniform() * (13 - n)) },
          objective,
          coldStartSeconds: seed % 3 === 0 ? 60 : 0,
        };
        const r = solveAllocation(problem);
        const bf = bruteForce(problem);
        expect(r.objective, `seed ${seed}`).toBeCloseTo(bf.best, 9);
        if (objective.kind === "fair") expect(r.sumUtility, `seed ${seed}`).toBeCloseTo(bf.bestSum, 9);
        expect(r.optimal).toBe(true);
        expect(r.usage.backends).toBeLessThanOrEqual(problem.capacity.backends!);
      }
    });
  }
  it("CPU + memory (2-D knapsack, surrogate bounds): feasible, never above the optimum, bound holds", () => {
    let exact = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const rnd = seededRandom(seed + 1000);
      const n = 3 + (seed % 2);
      const jobs = Array.from({ length: n }, (_, i) => randomJob(rnd, i, false));
      const need = (k: "cpu" | "mem") => jobs.reduce((s, j) => s + (j.minReplicas ?? 1) * (j[k] ?? 1), 0);
      const capacity = { cpu: need("cpu") + 4 + Math.floor(10 * rnd.uniform()), mem: need("mem") + 4 + Math.floor(10 * rnd.uniform()) };
      const problem: AllocationProblem = { jobs, capacity, objective: { kind: "sum" } };
      const r = solveAllocation(problem);
      const bf = bruteForce(problem);
      expect(r.usage.cpu).toBeLessThanOrEqual(problem.capacity.cpu!);
      expect(r.usage.mem).toBeLessThanOrEqual(problem.capacity.mem!);
      expect(r.objective).toBeLessThanOrEqual(bf.best + 1e-9);
      expect(r.upperBound).toBeGreaterThanOrEqual(bf.best - 1e-9);
      if (r.objective >= bf.best - 1e-9) exact++;
    }
    expect(exact).toBeGreaterThanOrEqual(30);
  });
  it("CPU and memory in the same ratio collapse to one exact constraint", () => {
    const rnd = seededRandom(5);
    const jobs = Array.from({ length: 4 }, (_, i) => ({ ...randomJob(rnd, i, false), cpu: 2, mem: 4 }));
    const problem: AllocationProblem = { jobs, capacity: { cpu: 20, mem: 48, backends: 100 }, objective: { kind: "sum" } };
    const r = solveAllocation(problem);
    expect(r.optimal).toBe(true);
    expect(r.objective).toBeCloseTo(bruteForce(problem).best, 9);
  });
});

describe("shrinking (Sec. 4.3) and cold start (Sec. 4.1)", () => {
  it("gives back replicas that do not raise utility, leaving the objective unchanged", () => {
    const jobs = [ub("a", 20), ub("b", 10)];
    const r = solveAllocation({ jobs, capacity: { backends: 50 }, objective: { kind: "sum" } });
    expect(r.replicas).toEqual([4, 2]);
    expect(r.objective).toBe(2);
    const prep = prepare({ jobs, capacity: { backends: 50 }, objective: { kind: "sum" } });
    expect(shrink(prep.curves, [9, 7])).toEqual([4, 2]);
    expect(shrink(prep.curves, [3, 7])).toEqual([3, 2]);
  });
  it("plans added replicas as serving only after the cold start", () => {
    const job = ub("a", 20, { rates: [20, 20], currentReplicas: 2 });
    expect(plannedStepUtilities(job, 4, { stepSeconds: 60, coldStartSeconds: 60 })).toEqual([0.5, 1]);
    expect(plannedStepUtilities(job, 4, { stepSeconds: 60, coldStartSeconds: 30 })).toEqual([0.75, 1]);
    // Removing is immediate: the first step already runs on the smaller count.
    expect(plannedStepUtilities(job, 1, { stepSeconds: 60, coldStartSeconds: 60 })).toEqual([0.25, 0.25]);
    const r = solveAllocation({ jobs: [job], capacity: { backends: 10 }, objective: { kind: "sum" }, coldStartSeconds: 60 });
    expect(r.replicas).toEqual([4]);
    expect(r.objective).toBeCloseTo(0.75, 12);
  });
  it("with a cold start, the warm job keeps its replicas over a cold one of equal need", () => {
    const warm = ub("warm", 20, { rates: [20, 20], currentReplicas: 4 });
    const cold = ub("cold", 20, { rates: [20, 20], currentReplicas: 1 });
    const r = solveAllocation({ jobs: [warm, cold], capacity: { backends: 5 }, objective: { kind: "sum" }, coldStartSeconds: 60 });
    expect(r.replicas).toEqual([4, 1]);
  });
  it("utility tables agree with a direct evaluation of the latency model", () => {
    const rnd = seededRandom(99);
    for (let i = 0; i < 20; i++) {
      const job = randomJob(rnd, i, i % 2 === 0);
      const ctx = { stepSeconds: 60, coldStartSeconds: i % 3 === 0 ? 90 : 0 };
      const prep = prepare({ jobs: [job], capacity: { backends: 60 }, objective: { kind: "sum" }, ...ctx });
      for (let c = prep.curves[0]!.lo; c <= 60; c++) {
        expect(curveValue(prep.curves[0]!, c)).toBeCloseTo(mean(plannedStepUtilities(job, c, ctx)), 9);
      }
    }
  });
});

describe("budget and errors", () => {
  it("reports a proven gap when the time budget is exhausted", () => {
    const rnd = seededRandom(3);
    const jobs = Array.from({ length: 300 }, (_, i) => randomJob(rnd, i, true));
    let t = 0;
    const r = solveAllocation({ jobs, capacity: { backends: 1500 }, objective: { kind: "sum" } }, { now: () => (t += 1000), budgetMs: 1 });
    expect(r.upperBound).toBeGreaterThanOrEqual(r.objective);
    expect(r.usage.backends).toBeLessThanOrEqual(1500);
    const full = solveAllocation({ jobs, capacity: { backends: 1500 }, objective: { kind: "sum" } });
    expect(full.optimal).toBe(true);
    expect(full.objective).toBeGreaterThanOrEqual(r.objective - 1e-9);
    expect(full.objective).toBeLessThanOrEqual(r.upperBound + 1e-9);
  });
  it("rejects infeasible minimums and bad specs", () => {
    expect(() =>
      solveAllocation({ jobs: [ub("a", 1, { minReplicas: 3 })], capacity: { backends: 2 }, objective: { kind: "sum" } }),
    ).toThrow(/minimum/);
    expect(() => solveAllocation({ jobs: [ub("a", 1), ub("a", 2)], capacity: { backends: 2 }, objective: { kind: "sum" } })).toThrow(
      /duplicate/,
    );
    expect(() => solveAllocation({ jobs: [ub("a", 1)], capacity: {}, objective: { kind: "sum" } })).toThrow(/capacity/);
    expect(() => solveAllocation({ jobs: [ub("a", -1)], capacity: { backends: 2 }, objective: { kind: "sum" } })).toThrow(/rates/);
  });
});
