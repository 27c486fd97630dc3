/**
 * The runs spread over worker processes are the sequential runner's runs: same order, same numbers. Starts real
 * child processes (the built libs/sim/dist/run-worker.js; `npm test` builds first).
 */
import { describe, expect, it } from "vitest";
import { EXPERIMENTS } from "./experiments.js";
import { runExperimentInProcesses } from "./parallel.js";
import type { PolicyName } from "./policies.js";
import { defaultTracesDir, runExperiment } from "./run-experiment.js";

describe("runExperimentInProcesses", () => {
  it("gives the sequential runner's results, in its order, with 2 workers", async () => {
    const policies: PolicyName[] = ["infergrid", "knative-kpa", "fixed-peak"];
    const seeds = [1, 2];
    const tracesDir = defaultTracesDir();
    const seen: number[] = [];
    const sequential = await runExperiment(EXPERIMENTS.smoke, { tracesDir, policies, seeds });
    const parallel = await runExperimentInProcesses("smoke", {
      tracesDir,
      workers: 2,
      policies,
      seeds,
      hooks: { onTotalProgress: (f) => seen.push(f) },
    });
    expect(parallel.runs.map((r) => `${r.policy}/${r.seed}`)).toEqual(sequential.runs.map((r) => `${r.policy}/${r.seed}`));
    parallel.runs.forEach((r, i) => {
      const s = sequential.runs[i];
      expect(r.cluster).toEqual(s?.cluster);
      expect(r.jobs).toEqual(s?.jobs);
      expect(Array.from(r.clusterP99)).toEqual(Array.from(s?.clusterP99 ?? []));
      expect(r.clusterP99).toBeInstanceOf(Float64Array);
    });
    expect(parallel.capacity).toBe(sequential.capacity);
    expect(seen.at(-1)).toBe(1);
  }, 120_000);

  it("fails with the worker's error instead of hanging", async () => {
    const tracesDir = defaultTracesDir();
    await expect(
      runExperimentInProcesses("smoke", { tracesDir, workers: 2, policies: ["fixed-peak", "no-such-policy" as PolicyName], seeds: [1] }),
    ).rejects.toThrow(/no-such-policy seed 1 failed: .*unknown policy/);
    await expect(
      runExperimentInProcesses("smoke", { tracesDir: "/nonexistent-traces", workers: 2, policies: ["fixed-peak"], seeds: [1] }),
    ).rejects.toThrow(/trace not found/);
    await expect(runExperimentInProcesses("smoke", { tracesDir, workers: 0 })).rejects.toThrow(/workers/);
  });
});
