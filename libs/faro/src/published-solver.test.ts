import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { curveValue, type JobSpec } from "./curves.js";
import { projectCapped, solveFaroPublished } from "./published-solver.js";
import { needFor, prepare, solveAllocation } from "./solver.js";

const job = (i: number, lambda: number): JobSpec => ({
  id: `j${i}`,
  processingTime: 0.15 + 0.01 * (i % 5),
  slo: { latency: 0.6, percentile: 99 },
  rates: [lambda, lambda * 1.1, lambda * 0.9],
  currentReplicas: 1,
});

describe("projection onto {lo <= x <= hi, a.x <= C}", () => {
  it("keeps feasible points and lands infeasible ones on the boundary", () => {
    expect(projectCapped([1, 2], [1, 1], [0, 0], [5, 5], 10)).toEqual([1, 2]);
    const y = projectCapped([6, 6], [1, 1], [1, 1], [5, 5], 6);
    expect(y[0]).toBeCloseTo(3, 6);
    expect(y[1]).toBeCloseTo(3, 6);
    const z = projectCapped([10, 1], [2, 1], [1, 1], [20, 20], 9);
    expect(2 * z[0]! + z[1]!).toBeLessThanOrEqual(9 + 1e-9);
    expect(z[1]).toBeGreaterThanOrEqual(1);
  });
});

describe("Faro's published solver (continuous search, ceil, greedy removal, shrink)", () => {
  it("fits the capacity and never beats the exact optimum", () => {
    for (let seed = 1; seed <= 10; seed++) {
      const rnd = seededRandom(seed);
      const jobs = Array.from({ length: 6 }, (_, i) => job(i, 5 + 30 * rnd.uniform()));
      for (const kind of ["sum", "fairSum", "penaltySum"] as const) {
        const problem = { jobs, capacity: { backends: 20 }, objective: { kind } };
        const pub = solveFaroPublished(problem, { random: seededRandom(seed) });
        const exact = solveAllocation(problem);
        expect(pub.usage.backends).toBeLessThanOrEqual(20);
        expect(pub.objective).toBeLessThanOrEqual(exact.objective + 1e-9);
        expect(pub.replicas.every((c) => c >= 1)).toBe(true);
      }
    }
  });
  it("is close to the optimum on a small Faro-Sum instance (ungrouped)", () => {
    const jobs = [job(0, 20), job(1, 30), job(2, 10), job(3, 25)];
    const problem = { jobs, capacity: { backends: 16 }, objective: { kind: "sum" as const } };
    const pub = solveFaroPublished(problem, { random: seededRandom(1) });
    const exact = solveAllocation(problem);
    expect(pub.stats.method).toBe("published");
    expect(pub.objective).toBeGreaterThan(exact.objective - 0.25);
  });
  it("groups more than 10 jobs into 10 random groups, deterministically for a seed, and shrinks jobs at utility 1", () => {
    const rnd = seededRandom(42);
    const jobs = Array.from({ length: 40 }, (_, i) => job(i, 2 + 20 * rnd.uniform()));
    const problem = { jobs, capacity: { backends: 400 }, objective: { kind: "sum" as const } };
    const a = solveFaroPublished(problem, { random: seededRandom(7) });
    const b = solveFaroPublished(problem, { random: seededRandom(7) });
    expect(a.stats.method).toBe("published-grouped");
    expect(a.replicas).toEqual(b.replicas);
    expect(a.usage.backends).toBeLessThanOrEqual(400);
    const prep = prepare(problem);
    a.replicas.forEach((c, j) => {
      const curve = prep.curves[j]!;
      if (curveValue(curve, c) >= 1) expect(c).toBe(needFor(curve, 1));
    });
  });
});
