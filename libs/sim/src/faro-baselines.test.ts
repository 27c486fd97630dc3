/**
 * Faro's baselines in the simulator (libs/baselines faro-baselines.ts, faro-published-policy.ts run by BalancedCluster):
 * each runs end to end on the smoke experiment, and on a controlled input each does what its rule says at the
 * time it says it. Two jobs on 12 backends: "hot" at 20 req/s (3.3 busy replicas of the 166 ms ResNet-34
 * profile), "cool" at 2 req/s; every job starts at 1 replica (FairShare at its share), cold start 10 s.
 */

import { describe, expect, it } from "vitest";
import { BalancedCluster } from "./balanced-cluster.js";
import type { SimConfig } from "./config.js";
import { Simulation } from "./engine.js";
import { EXPERIMENTS } from "./experiments.js";
import { buildPolicy, type PolicyName } from "./policies.js";
import { runExperiment } from "./run-experiment.js";
import { poissonArrivals } from "./simulate.js";
import { paperSwayam, resnetJobs } from "./test-support.js";

const RATES = [20, 2];
const CAPACITY = 12;
const FARO_POLICIES = ["fairshare", "oneshot", "aiad", "mark", "faro-published"] as const satisfies readonly PolicyName[];

function config(policy: PolicyName, durationMs: number, seed = 1, startAtOnePerJob = false): SimConfig {
  const jobs = resnetJobs(["hot", "cool"]);
  return {
    jobs,
    capacity: CAPACITY,
    durationMs,
    hopMs: 0.5,
    coldStartMs: 10_000,
    idleTimeoutMs: 60_000,
    dropAfterMs: 10_000,
    binMs: 60_000,
    seed,
    policy: buildPolicy(policy, { jobs, peakRatePerSec: RATES, capacity: CAPACITY, fixedDelayMs: 2, startAtOnePerJob }),
    swayam: paperSwayam(2),
  };
}

/** Runs a policy for durationMs; the targets are the controller's after its last tick (ticks run before durationMs). */
function run(policy: PolicyName, durationMs: number, seed = 1, startAtOnePerJob = false) {
  const sim = new Simulation(config(policy, durationMs, seed, startAtOnePerJob), poissonArrivals(RATES, durationMs, seed));
  const model = new BalancedCluster(sim);
  sim.attach(model);
  sim.run();
  return { targets: model.targets(), hot: sim.metrics.job(0), cool: sim.metrics.job(1), hotSeries: sim.metrics.series(0) };
}

describe("Faro's baselines on a controlled input", () => {
  it("FairShare holds floor(capacity / jobs) each for the whole run", () => {
    const r = run("fairshare", 600_000);
    expect(r.targets).toEqual([6, 6]);
    expect(r.hot.backendSeconds + r.cool.backendSeconds).toBeCloseTo(CAPACITY * 600, 6);
    expect(r.hot.coldStarts + r.cool.coldStarts).toBe(0);
  });

  it("started at one backend per job (Faro's setting), FairShare and fixed-peak cold-start the rest at time 0", () => {
    for (const policy of ["fairshare", "fixed-peak"] as const) {
      const warm = run(policy, 120_000);
      const one = run(policy, 120_000, 1, true);
      // Same allocation once started; what differs is how it starts.
      expect(one.targets, policy).toEqual(warm.targets);
      expect(warm.hot.coldStarts + warm.cool.coldStarts, policy).toBe(0);
      const added = warm.targets.reduce((a, b) => a + b, 0) - 2;
      expect(one.hot.coldStarts + one.cool.coldStarts, policy).toBe(added);
      // The hot job runs on 1 backend (rho 3.3) for the first 10 s, so it misses its SLO more.
      expect(one.hot.violations, policy).toBeGreaterThan(warm.hot.violations);
    }
  });

  it("AIAD adds one replica to the overloaded job after 30 s (3 ticks) of overload, and keeps climbing", () => {
    // Ticks at 10, 20 s: the hot job (1 replica, rho 3.3) is over its SLO but not for 30 s yet.
    expect(run("aiad", 25_000).targets).toEqual([1, 1]);
    // The tick at 30 s: +1 for hot; cool (rho 0.33 on 1 replica) is under its SLO and stays at 1.
    expect(run("aiad", 35_000).targets).toEqual([2, 1]);
    // +1 per 30 s of overload: after 10 minutes it holds at least the 4 replicas 3.3 busy ones need.
    const r = run("aiad", 600_000);
    expect(r.targets[0]).toBeGreaterThanOrEqual(4);
    expect(r.targets[1]).toBe(1);
    // Every replica beyond the first was a cold start (more if it also scaled down after 5 minutes under the SLO).
    expect(r.hot.coldStarts).toBeGreaterThanOrEqual((r.targets[0] ?? 0) - 1);
  });

  it("Oneshot jumps to its cap when drops make the p99 infinite", () => {
    // By the third tick the hot job drops requests (1 replica, waits past 10 s): the ratio is infinite and it
    // goes to its max replicas (the capacity here).
    expect(run("oneshot", 25_000).targets).toEqual([1, 1]);
    expect(run("oneshot", 35_000).targets).toEqual([CAPACITY, 1]);
  });

  it("MArk holds until the first forecast (after the first minute), then sizes from it", () => {
    expect(run("mark", 55_000).targets).toEqual([1, 1]);
    // About 20 req/s planned: ceil(20 x 0.166 / 0.72) = 5 (4.6); cool: ceil(2 x 0.23) = 1.
    const r = run("mark", 75_000);
    expect(r.targets[0]).toBeGreaterThanOrEqual(4);
    expect(r.targets[0]).toBeLessThanOrEqual(7);
    expect(r.targets[1]).toBe(1);
  });

  it("Faro as published moves replicas to the hot job at its first solve and stays within the capacity", () => {
    // The first tick (10 s) solves on the observed rates (no forecast yet): 20 req/s needs 5 replicas at p99 720 ms.
    const first = run("faro-published", 15_000);
    expect(first.targets[0]).toBeGreaterThanOrEqual(4);
    expect(first.targets[1]).toBeGreaterThanOrEqual(1);
    expect((first.targets[0] ?? 0) + (first.targets[1] ?? 0)).toBeLessThanOrEqual(CAPACITY);
    const r = run("faro-published", 900_000);
    expect((r.targets[0] ?? 0) + (r.targets[1] ?? 0)).toBeLessThanOrEqual(CAPACITY);
    // Most of the hot job's violations are the first minute's: 10 s on 1 replica, then a backlog to drain.
    const sum = (a: ArrayLike<number>, from: number) =>
      Array.from(a)
        .slice(from)
        .reduce((x, y) => x + y, 0);
    const { violations, arrivals } = r.hotSeries;
    expect(sum(violations, 0)).toBeGreaterThan(2 * sum(violations, 1));
    expect(sum(violations, 1) / sum(arrivals, 1)).toBeLessThan(0.02);
    expect(r.cool.violationRate).toBeLessThan(0.01);
  });
});

describe("Faro's baselines on the smoke experiment", () => {
  it("each runs end to end on the real trace and serves the same requests", async () => {
    const result = await runExperiment(EXPERIMENTS.smoke, { policies: [...FARO_POLICIES] });
    expect(result.runs.map((r) => r.policy)).toEqual([...FARO_POLICIES]);
    expect(new Set(result.runs.map((r) => r.cluster.requests)).size).toBe(1);
    for (const r of result.runs) {
      expect(r.cluster.requests).toBeGreaterThan(25_000);
      expect(r.cluster.backendSeconds).toBeGreaterThan(0);
      expect(r.cluster.backendSeconds).toBeLessThanOrEqual(result.capacity * 1200 + 1e-6);
    }
    // FairShare: floor(16 / 2) = 8 replicas per job, warm from the start, for all 20 minutes.
    const fair = result.runs.find((r) => r.policy === "fairshare");
    expect(result.capacity).toBe(16);
    expect(fair?.cluster.backendSeconds).toBeCloseTo(16 * 1200, 6);
    expect(fair?.cluster.coldStarts).toBe(0);
  });
});
