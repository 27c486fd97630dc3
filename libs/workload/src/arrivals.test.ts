import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { type Arrival, ArrivalCursor, arrivalSchedule, expectedRate, replayDurationMs } from "./arrivals.js";
import { readTraceFile } from "./read.js";
import { makeTrace, type Trace } from "./trace.js";

function constantTrace(perJob: Record<string, number>, minutes: number): Trace {
  const jobs = Object.keys(perJob);
  return makeTrace(jobs, new Map(jobs.map((j) => [j, new Float64Array(minutes).fill(perJob[j] ?? 0)])), minutes, "constant");
}

function perMinuteCounts(arrivals: Iterable<Arrival>, job: string, msPerMinute: number, minutes: number): number[] {
  const counts = new Array<number>(minutes).fill(0);
  for (const a of arrivals) {
    if (a.job !== job) continue;
    const m = Math.floor(a.atMs / msPerMinute);
    counts[m] = (counts[m] ?? 0) + 1;
  }
  return counts;
}

function meanAndVariance(xs: readonly number[]): [number, number] {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return [mean, xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (xs.length - 1)];
}

describe("arrivalSchedule", () => {
  it("gives Poisson per-minute counts with the trace's mean (mean ≈ variance)", () => {
    const trace = constantTrace({ a: 50, b: 5 }, 2000);
    const arrivals = [...arrivalSchedule(trace, { random: seededRandom(11) })];
    for (const [job, rate] of [
      ["a", 50],
      ["b", 5],
    ] as const) {
      const [mean, variance] = meanAndVariance(perMinuteCounts(arrivals, job, 60_000, 2000));
      expect(Math.abs(mean / rate - 1)).toBeLessThan(0.03);
      expect(Math.abs(variance / rate - 1)).toBeLessThan(0.1);
    }
    // Uniform inside each minute: about half of them land in the first 30 s.
    const firstHalf = arrivals.filter((a) => a.atMs % 60_000 < 30_000).length / arrivals.length;
    expect(Math.abs(firstHalf - 0.5)).toBeLessThan(0.01);
  });

  it("yields arrivals of all jobs in time order, within the replay", () => {
    const trace = makeTrace(
      ["x", "y", "z"],
      new Map([
        ["x", Float64Array.from([10, 0, 0, 30])],
        ["y", Float64Array.from([0, 0, 0, 0])],
        ["z", Float64Array.from([3, 40, 1, 2])],
      ]),
      4,
      "t",
    );
    const arrivals = [...arrivalSchedule(trace, { random: seededRandom(3) })];
    expect(arrivals.length).toBeGreaterThan(40);
    for (let i = 1; i < arrivals.length; i++) expect(arrivals[i]?.atMs).toBeGreaterThanOrEqual(arrivals[i - 1]?.atMs as number);
    expect(arrivals.every((a) => a.atMs >= 0 && a.atMs < 4 * 60_000)).toBe(true);
    expect(arrivals.some((a) => a.job === "y")).toBe(false);
    // x is silent in minutes 1 and 2.
    expect(arrivals.filter((a) => a.job === "x" && a.atMs >= 60_000 && a.atMs < 180_000)).toHaveLength(0);
    expect(new Set(arrivals.map((a) => a.job))).toEqual(new Set(["x", "z"]));
  });

  it("is deterministic for a seeded random", () => {
    const trace = constantTrace({ a: 20, b: 7 }, 30);
    const one = [...arrivalSchedule(trace, { random: seededRandom(5) })];
    const two = [...arrivalSchedule(trace, { random: seededRandom(5) })];
    expect(two).toEqual(one);
    const onlyB = [...arrivalSchedule(trace, { random: seededRandom(5), jobs: ["b"] })];
    expect(onlyB.length).toBeGreaterThan(100);
    expect(onlyB.every((a) => a.job === "b")).toBe(true);
  });

  it("compresses time: factor 60 puts each trace minute into one second, at 60x the rate", () => {
    const trace = constantTrace({ a: 120 }, 600);
    const compressed = [...arrivalSchedule(trace, { compression: 60, random: seededRandom(9) })];
    expect(Math.abs(compressed.length / (120 * 600) - 1)).toBeLessThan(0.02);
    expect(compressed.every((a) => a.atMs < 600_000)).toBe(true);
    expect(replayDurationMs(trace, { compression: 60 })).toBe(600_000);
    // rateScale 1/60 keeps the original per-second rate (2/s) in the shorter replay.
    const sameLoad = [...arrivalSchedule(trace, { compression: 60, rateScale: 1 / 60, random: seededRandom(9) })];
    expect(Math.abs(sameLoad.length / (2 * 600) - 1)).toBeLessThan(0.06);
    expect(expectedRate(trace, "a", 1_500, { compression: 60 })).toBe(120);
    expect(expectedRate(trace, "a", 1_500, { compression: 60, rateScale: 1 / 60 })).toBeCloseTo(2, 12);
  });

  it("replays a window of minutes from wall time 0", () => {
    const counts = Float64Array.from({ length: 10 }, (_, m) => m * 10);
    const trace = makeTrace(["a"], new Map([["a", counts]]), 10, "ramp");
    const window = [...arrivalSchedule(trace, { fromMinute: 5, toMinute: 7, random: seededRandom(2), mode: "exact" })];
    expect(window).toHaveLength(50 + 60);
    expect(window.filter((a) => a.atMs < 60_000)).toHaveLength(50);
    expect(window.every((a) => a.atMs < 120_000)).toBe(true);
    expect(expectedRate(trace, "a", 61_000, { fromMinute: 5 })).toBe(1);
    expect(expectedRate(trace, "a", 6 * 60_000, { fromMinute: 5 })).toBe(0);
    expect(() => [...arrivalSchedule(trace, { fromMinute: 5, toMinute: 11, random: seededRandom(1) })]).toThrow(RangeError);
  });

  it("exact mode reproduces every minute's count, stochastically rounding fractional ones", () => {
    const counts = Float64Array.from([3, 0, 17, 250, 1]);
    const trace = makeTrace(["a"], new Map([["a", counts]]), 5, "t");
    const arrivals = [...arrivalSchedule(trace, { mode: "exact", random: seededRandom(4) })];
    expect(perMinuteCounts(arrivals, "a", 60_000, 5)).toEqual([3, 0, 17, 250, 1]);
    for (let i = 1; i < arrivals.length; i++) expect(arrivals[i]?.atMs).toBeGreaterThanOrEqual(arrivals[i - 1]?.atMs as number);
    const half = constantTrace({ a: 0.5 }, 4000);
    const n = [...arrivalSchedule(half, { mode: "exact", random: seededRandom(8) })].length;
    expect(Math.abs(n / 2000 - 1)).toBeLessThan(0.05);
  });
});

const faroFile = new URL("../../../../shared/traces/faro-10jobs-6h-per-minute.csv", import.meta.url);
const faroPresent = existsSync(fileURLToPath(faroFile));
if (!faroPresent) console.warn(`skipping the full-replay test: ${fileURLToPath(faroFile)} is absent`);

describe.skipIf(!faroPresent)("arrivalSchedule over the Faro trace", () => {
  it("streams 10 jobs x 6 hours (~2.7 million arrivals) in order", async () => {
    const trace = await readTraceFile(faroFile);
    let n = 0;
    let last = 0;
    let disorder = 0;
    let cluster0 = 0;
    for (const a of arrivalSchedule(trace, { random: seededRandom(1), compression: 60 })) {
      if (a.atMs < last) disorder++;
      last = a.atMs;
      n++;
      if (a.job === "serve-cluster0") cluster0++;
    }
    expect(disorder).toBe(0);
    // 2,675,770 requests in the file; the Poisson replay's sd is about 1,600.
    expect(Math.abs(n - 2_675_770)).toBeLessThan(10_000);
    expect(Math.abs(cluster0 - 343_187)).toBeLessThan(3_000);
    expect(last).toBeLessThan(360_000);
  });
});

describe("ArrivalCursor", () => {
  it("walks arrivals in time order, each job by its index in the jobs asked for, then stays exhausted", () => {
    const trace = constantTrace({ a: 30, b: 0, c: 12 }, 5);
    const jobs = ["c", "b", "a"];
    const cursor = new ArrivalCursor(trace, { random: seededRandom(4), jobs, mode: "exact" });
    const seen = new Map<string, number>();
    let last = Number.NEGATIVE_INFINITY;
    while (cursor.advance()) {
      expect(cursor.atMs).toBeGreaterThanOrEqual(last);
      last = cursor.atMs;
      expect(jobs[cursor.jobIndex]).toBe(cursor.job);
      seen.set(cursor.job, (seen.get(cursor.job) ?? 0) + 1);
    }
    // Exact mode: the trace's counts, 5 minutes of them.
    expect(Object.fromEntries(seen)).toEqual({ a: 150, c: 60 });
    expect(cursor.advance()).toBe(false);
    expect(new ArrivalCursor(trace, { random: seededRandom(4), jobs: [] }).advance()).toBe(false);
  });
});
