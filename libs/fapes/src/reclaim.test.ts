import { seededRandom } from "@infergrid/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  bruteForceReclaim,
  fapesGreedyReclaim,
  fewestPreemptionsReclaim,
  type LoanedServer,
  planReclaim,
  type ReclaimPlan,
  randomReclaim,
} from "./reclaim.js";

const s = (id: string, ...jobs: string[]): LoanedServer => ({ id, jobs });

/** A plan is sound when it takes `needed` distinct loaned servers, each of whose jobs it preempts. */
function expectSound(servers: readonly LoanedServer[], needed: number, plan: ReclaimPlan): void {
  const byId = new Map(servers.map((x) => [x.id, x]));
  expect(plan.servers).toHaveLength(Math.min(needed, servers.length));
  expect(new Set(plan.servers).size).toBe(plan.servers.length);
  const preempted = new Set(plan.preempted);
  expect(preempted.size).toBe(plan.preempted.length);
  for (const id of plan.servers) for (const j of byId.get(id)?.jobs ?? ["missing"]) expect(preempted.has(j)).toBe(true);
}

describe("FaPES's greedy reclaim", () => {
  it("takes FaPES's Fig. 6(a) choice: server 1 (gain 2, cost 2), then server 2 at no further cost", () => {
    // Servers 1 and 2 both hold jobs A and B; preempting them on server 1 frees server 2 too. Servers 3 and 4
    // also free each other, but at three preemptions.
    const servers = [s("s1", "A", "B"), s("s2", "A", "B"), s("s3", "C", "D", "E"), s("s4", "C", "D", "E")];
    const plan = fapesGreedyReclaim(servers, 2);
    expect(plan).toEqual({ servers: ["s1", "s2"], preempted: ["A", "B"] });
    expect(bruteForceReclaim(servers, 2).preempted).toEqual(["A", "B"]);
  });

  it("takes idle loans first, at no cost", () => {
    const plan = fapesGreedyReclaim([s("a", "J"), s("b"), s("c", "K"), s("d")], 2);
    expect(plan).toEqual({ servers: ["b", "d"], preempted: [] });
  });

  it("prefers the largest gain that fits the need over smaller ones", () => {
    // Need 3: job X frees 3 backends at one preemption; jobs Y and Z one backend each.
    const servers = [s("y1", "Y"), s("z1", "Z"), s("x1", "X"), s("x2", "X"), s("x3", "X")];
    expect(fapesGreedyReclaim(servers, 3)).toEqual({ servers: ["x1", "x2", "x3"], preempted: ["X"] });
  });

  it("never takes a gain above the need while one fits, which can cost more than the optimum", () => {
    // Need 2: preempting W (4 backends) would do at one preemption; the rule takes U and V (gains 1 <= 2).
    const servers = [s("u", "U"), s("v", "V"), s("w1", "W"), s("w2", "W"), s("w3", "W"), s("w4", "W")];
    const greedy = fapesGreedyReclaim(servers, 2);
    expect(greedy.preempted).toEqual(["U", "V"]);
    const fewest = fewestPreemptionsReclaim(servers, 2);
    expect(fewest.preempted).toEqual(["W"]);
    expect(fewest.servers).toEqual(["w1", "w2"]);
  });

  it("with every gain above the need, preempts the smallest", () => {
    const servers = [s("a1", "A"), s("a2", "A"), s("a3", "A"), s("b1", "B"), s("b2", "B")];
    expect(fapesGreedyReclaim(servers, 1)).toEqual({ servers: ["b1"], preempted: ["B"] });
  });

  it("asks for nothing, or for more than is loaned", () => {
    const servers = [s("a", "A"), s("b", "B")];
    expect(fapesGreedyReclaim(servers, 0)).toEqual({ servers: [], preempted: [] });
    expect(fapesGreedyReclaim(servers, 5).servers).toHaveLength(2);
  });
});

/** Small clusters: up to 7 loaned backends, each running 0-2 of up to 5 jobs. */
const cluster = fc
  .array(fc.uniqueArray(fc.constantFrom("A", "B", "C", "D", "E"), { maxLength: 2 }), { minLength: 1, maxLength: 7 })
  .map((jobs) => jobs.map((j, i) => s(`b${i}`, ...j)));

describe("reclaim plans against brute force", () => {
  it("every strategy's plan is sound, and the exact one preempts exactly as few jobs as brute force", () => {
    fc.assert(
      fc.property(cluster, fc.integer({ min: 0, max: 8 }), fc.integer(), (servers, needed, seed) => {
        for (const strategy of ["fapes-greedy", "fewest-preemptions", "random"] as const)
          expectSound(servers, needed, planReclaim(strategy, servers, needed, seededRandom(seed)));
        const exact = bruteForceReclaim(servers, needed).preempted.length;
        expect(fewestPreemptionsReclaim(servers, needed).preempted).toHaveLength(exact);
        expect(fapesGreedyReclaim(servers, needed).preempted.length).toBeGreaterThanOrEqual(exact);
      }),
      { numRuns: 400 },
    );
  });

  it("the greedy is optimal in most small cases and random reclaim preempts more than it on average", () => {
    const random = seededRandom(7);
    let cases = 0;
    let optimal = 0;
    let greedyCost = 0;
    let randomCost = 0;
    fc.assert(
      fc.property(cluster, fc.integer({ min: 1, max: 6 }), (servers, needed) => {
        cases++;
        const g = fapesGreedyReclaim(servers, needed).preempted.length;
        if (g === bruteForceReclaim(servers, needed).preempted.length) optimal++;
        greedyCost += g;
        randomCost += randomReclaim(servers, needed, random).preempted.length;
      }),
      { numRuns: 500, seed: 42 },
    );
    expect(optimal / cases).toBeGreaterThan(0.8);
    expect(randomCost).toBeGreaterThan(greedyCost);
  });

  it("one job per backend: the fewest jobs, and among those the fewest backends disturbed", () => {
    const servers = [s("a1", "A"), s("b1", "B"), s("b2", "B"), s("c1", "C"), s("c2", "C"), s("c3", "C")];
    // Two preemptions are needed for 4; {A, C} disturbs 4 backends, {B, C} 5.
    expect(fewestPreemptionsReclaim(servers, 4).preempted.sort()).toEqual(["A", "C"]);
    expect(fewestPreemptionsReclaim(servers, 3).preempted).toEqual(["C"]);
  });
});
