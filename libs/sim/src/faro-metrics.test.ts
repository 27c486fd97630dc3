/**
 * Faro's metric definitions (a scenario's `metrics: { p99: exact, binBy: arrival, queueCap: N }`): the exact
 * per-minute p99 (nearest rank, drops as infinite), outcomes scored in their arrival minute, and the balanced
 * cluster's queue cap (an arrival finding N requests of its job waiting is dropped at once); and FairShare on a
 * shortened faro-table7-36, pinned: it has no policy freedom, so it checks the simulator itself.
 */
import { relaxedUtility } from "@infergrid/faro";
import { jobCounts } from "@infergrid/workload";
import { describe, expect, it } from "vitest";
import { BalancedCluster } from "./balanced-cluster.js";
import type { ArrivalEvent, JobSpec, MetricsDefinition, SimConfig } from "./config.js";
import { Simulation } from "./engine.js";
import { loadNamedScenario } from "./experiments.js";
import { Metrics } from "./metrics.js";
import { buildPolicy } from "./policies.js";
import { prepareExperiment, runExperiment } from "./run-experiment.js";
import { paperSwayam } from "./test-support.js";

const SLO = 720;
const MINUTE = 60_000;
const JOB = [{ name: "a", sloMs: SLO, slMin: 0.99 }];

/** A deterministic stream in [0, 1) (a linear congruential generator), so the test needs no seed plumbing. */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

/** The nearest-rank p99 of `values` with `drops` infinite latencies added: the ceil(0.99 n)-th smallest. */
function nearestRankP99(values: readonly number[], drops: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil(0.99 * (values.length + drops));
  return rank > sorted.length ? Number.POSITIVE_INFINITY : (sorted[rank - 1] as number);
}

describe("p99: exact", () => {
  it("each minute's p99 is the nearest-rank order statistic of its latencies, drops counting as infinite", () => {
    const exact = new Metrics(JOB, 3 * MINUTE, MINUTE, { p99: "exact", binBy: "completion" });
    const bucketed = new Metrics(JOB, 3 * MINUTE, MINUTE);
    const random = lcg(7);
    // Minute 0: 537 latencies in [100, 2100) ms, no drops. Minute 1: 300 latencies and 2 drops (rank 299 of 302
    // is still a latency). Minute 2: 100 latencies and 2 drops (rank 101 of 102: a drop, an infinite p99).
    const minutes = [
      { n: 537, drops: 0 },
      { n: 300, drops: 2 },
      { n: 100, drops: 2 },
    ];
    const latencies: number[][] = [];
    minutes.forEach(({ n, drops }, b) => {
      const lat: number[] = [];
      for (let i = 0; i < n; i++) {
        const l = 100 + 2000 * random();
        const at = b * MINUTE + (MINUTE * i) / n;
        lat.push(l);
        exact.completed(0, at, l, 100, at - l);
        bucketed.completed(0, at, l, 100, at - l);
      }
      for (let i = 0; i < drops; i++) {
        exact.recordDrop(0, b * MINUTE + 1000 * i);
        bucketed.recordDrop(0, b * MINUTE + 1000 * i);
      }
      latencies.push(lat);
    });
    const want = minutes.map(({ drops }, b) => nearestRankP99(latencies[b] as number[], drops));
    expect(want[1]).toBeLessThan(Number.POSITIVE_INFINITY);
    expect(want[2]).toBe(Number.POSITIVE_INFINITY);
    // The series' p99 is over the completions (drops not counted), exact to the last bit.
    const series = exact.series(0).p99;
    minutes.forEach((_, b) => {
      expect(series[b]).toBe(nearestRankP99(latencies[b] as number[], 0));
    });
    // Utility: the mean over the minutes of min(SLO / p99, 1), each p99 exact.
    const utility = want.reduce((s, p) => s + relaxedUtility(p, SLO), 0) / minutes.length;
    expect(exact.job(0).utility).toBe(utility);
    // The bucketed p99 is the upper edge of a 12 % bucket: never below the exact one, at most a bucket above.
    const b0 = bucketed.series(0).p99[0] as number;
    expect(b0).toBeGreaterThanOrEqual(want[0] as number);
    expect(b0).toBeLessThan((want[0] as number) * 1.13);
    expect(bucketed.job(0).utility).toBeLessThanOrEqual(utility);
  });
});

describe("binBy: arrival", () => {
  it("a late request's violation, and a drop, count in the minute they arrived, not the one they ended", () => {
    const run = (binBy: MetricsDefinition["binBy"]) => {
      const m = new Metrics(JOB, 3 * MINUTE, MINUTE, { p99: "exact", binBy });
      // Arrived at 59 s, done at 61 s: 2000 ms, over the SLO.
      m.completed(0, 61_000, 2000, 180, 59_000);
      // Arrived at 50 s, dropped at 70 s (its deadline passed in the next minute).
      m.recordDrop(0, 70_000, 50_000);
      // Arrived and done in minute 2, within the SLO.
      m.completed(0, 130_200, 200, 180, 130_000);
      return { series: m.series(0), job: m.job(0) };
    };
    const byCompletion = run("completion");
    expect(Array.from(byCompletion.series.violations)).toEqual([0, 2, 0]);
    expect(Array.from(byCompletion.series.completions)).toEqual([0, 1, 1]);
    const byArrival = run("arrival");
    expect(Array.from(byArrival.series.violations)).toEqual([2, 0, 0]);
    expect(Array.from(byArrival.series.completions)).toEqual([1, 0, 1]);
    // Utility: minutes 0 (a drop among 2: infinite p99, utility 0) and 2 (utility 1) by arrival; by completion
    // the same two outcomes fall in minute 1, so again 0 and 1.
    expect(byArrival.job.utility).toBe(0.5);
    expect(byCompletion.job.utility).toBe(0.5);
    // Whole-run counts do not depend on the binning.
    expect(byArrival.job.violations).toBe(byCompletion.job.violations);
  });
});

describe("queueCap (balanced cluster)", () => {
  const job: JobSpec = { name: "a", serviceTime: { kind: "deterministic", ms: 1000 }, sloMs: SLO, slMin: 0.99, burstFactor: 2 };

  /** FairShare on 1 backend (one replica, first-available routing), deterministic 1 s service, arrivals as given. */
  function run(arrivalsMs: readonly number[], queueCap: number | undefined) {
    const config: SimConfig = {
      jobs: [job],
      capacity: 1,
      durationMs: 20_000,
      hopMs: 0.5,
      coldStartMs: 10_000,
      idleTimeoutMs: 60_000,
      dropAfterMs: 100_000,
      binMs: 10_000,
      seed: 1,
      policy: buildPolicy("fairshare", { jobs: [job], peakRatePerSec: [1], capacity: 1, fixedDelayMs: 2 }),
      swayam: paperSwayam(1),
      metrics: { p99: "bucketed", binBy: "completion", ...(queueCap === undefined ? {} : { queueCap }) },
    };
    const events: ArrivalEvent[] = arrivalsMs.map((atMs) => ({ atMs, job: 0 }));
    const sim = new Simulation(config, events[Symbol.iterator]());
    sim.attach(new BalancedCluster(sim));
    sim.run();
    return { job: sim.metrics.job(0), series: sim.metrics.series(0) };
  }

  it("drops the (N+1)-th waiting request at once, and admits again once the queue has room", () => {
    // t = 0: one starts; t = 1..3 ms: 3 wait (the cap); t = 4 ms: a 4th would wait, dropped. At 1.5 s the first
    // is done and one waiting has started, so 2 wait: t = 1500 ms is admitted.
    const arrivals = [0, 1, 2, 3, 4, 1500];
    const capped = run(arrivals, 3);
    expect(capped.job.requests).toBe(6);
    expect(capped.job.dropped).toBe(1);
    expect(capped.job.completed).toBe(5);
    // Every completion is late (1 s of service against 720 ms) and the drop is a violation too.
    expect(capped.job.violations).toBe(6);
    const uncapped = run(arrivals, undefined);
    expect(uncapped.job.dropped).toBe(0);
    expect(uncapped.job.completed).toBe(6);
    // With a cap of 4 the 4 ms arrival is the 4th waiting: admitted.
    expect(run(arrivals, 4).job.dropped).toBe(0);
  });
});

describe("FairShare on Faro's setting (faro-table7-36, the first 60 minutes, seed 1)", () => {
  it("loses the utility pinned here", async () => {
    const e = loadNamedScenario("faro-table7-36");
    const result = await runExperiment({ ...e, trace: { ...e.trace, minutes: 60 } }, { policies: ["fairshare"], seeds: [1] });
    const lost = result.runs[0]?.cluster.lostUtility ?? Number.NaN;
    // Measured on this code: 1.9988 of 10 over the first hour. The whole 6 hours (seeds 1-3) lose 2.181 at 36
    // backends (and at 32: floor(32 / 10) = floor(36 / 10) = 3 replicas each, the same run) and 9.282 at 16;
    // Faro's Table 7 gives FairShare 2.08 (its simulator; 2.42 on its cluster) at 36 and 32, 9.22 (8.71 on its
    // cluster) at 16: within 4.9 % and 0.7 % of Faro's simulator, with faro-36's cold start (10 s, not Faro's 35 s).
    // With Poisson arrivals instead of each minute's exact count, 2.190 and 9.290; without Faro's definitions at
    // all (faro-36: bucketed p99, completion binning, no cap, Poisson), 2.327.
    expect(lost).toBeCloseTo(1.9988307024188452, 6);
    // Faro's replay: each minute's count exactly (Poisson arrivals would vary it).
    const { trace } = await prepareExperiment({ ...e, trace: { ...e.trace, minutes: 60 } });
    const counted = trace.jobs.reduce((n, job) => n + jobCounts(trace, job).reduce((a, b) => a + b, 0), 0);
    expect(e.trace.arrivals).toBe("exact");
    expect(result.runs[0]?.cluster.requests).toBe(counted);
  }, 60_000);
});
