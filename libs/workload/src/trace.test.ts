import { describe, expect, it } from "vitest";
import { parsePerMinuteCsv } from "./parse.js";
import {
  concatTraces,
  jobCounts,
  peakPerMinute,
  renameJobs,
  scaleJob,
  scaleToPeak,
  selectJobs,
  sliceMinutes,
  topJobs,
  totalRequests,
} from "./trace.js";

const trace = parsePerMinuteCsv("minute,a,b,c\n0,1,10,0\n1,2,20,0\n2,3,30,0\n3,4,40,5\n", "small.csv");

describe("trace helpers", () => {
  it("slices minutes [from, to) and renumbers from 0", () => {
    const s = sliceMinutes(trace, 1, 3);
    expect(s.minutes).toBe(2);
    expect([...jobCounts(s, "b")]).toEqual([20, 30]);
    expect(s.source).toBe("small.csv [minutes 1..2]");
    expect(sliceMinutes(trace, 2).minutes).toBe(2);
    expect(() => sliceMinutes(trace, 3, 5)).toThrow(RangeError);
    expect(() => sliceMinutes(trace, 2, 1)).toThrow(RangeError);
  });

  it("selects jobs in the order given and rejects unknown ones", () => {
    expect(selectJobs(trace, ["c", "a"]).jobs).toEqual(["c", "a"]);
    expect(() => selectJobs(trace, ["a", "zzz"])).toThrow(/unknown job 'zzz'.*jobs: a, b, c/);
    expect(topJobs(trace, 2).jobs).toEqual(["b", "a"]);
  });

  it("scales one job by a factor or to a peak, leaving the others and the input alone", () => {
    const doubled = scaleJob(trace, "a", 2);
    expect([...jobCounts(doubled, "a")]).toEqual([2, 4, 6, 8]);
    expect(jobCounts(doubled, "b")).toBe(jobCounts(trace, "b"));
    expect([...jobCounts(trace, "a")]).toEqual([1, 2, 3, 4]);
    expect(doubled.source).toBe("small.csv [a x2]");
    const peaked = scaleToPeak(trace, "b", 8);
    expect(peakPerMinute(peaked, "b")).toBe(8);
    expect(totalRequests(peaked, "b")).toBeCloseTo(20, 12);
    expect(() => scaleToPeak(trace, "c", 0)).not.toThrow();
    expect(() => scaleToPeak(sliceMinutes(trace, 0, 3), "c", 10)).toThrow(/no requests/);
    expect(() => scaleJob(trace, "a", -1)).toThrow(RangeError);
  });

  it("renames jobs by mapping or function and refuses clashes", () => {
    expect(renameJobs(trace, { a: "alpha" }).jobs).toEqual(["alpha", "b", "c"]);
    expect(renameJobs(trace, (j) => `job-${j}`).jobs).toEqual(["job-a", "job-b", "job-c"]);
    expect([...jobCounts(renameJobs(trace, { a: "alpha" }), "alpha")]).toEqual([1, 2, 3, 4]);
    expect(() => renameJobs(trace, { a: "b" })).toThrow(/two jobs would be named 'b'/);
    expect(() => renameJobs(trace, { nope: "x" })).toThrow(/unknown job 'nope'/);
  });

  it("concatenates days, filling jobs absent from a part with zeros", () => {
    const day2 = parsePerMinuteCsv("minute,b,d\n0,7,9\n", "day2.csv");
    const both = concatTraces([trace, day2]);
    expect(both.minutes).toBe(5);
    expect(both.jobs).toEqual(["a", "b", "c", "d"]);
    expect([...jobCounts(both, "b")]).toEqual([10, 20, 30, 40, 7]);
    expect([...jobCounts(both, "d")]).toEqual([0, 0, 0, 0, 9]);
    expect([...jobCounts(both, "a")]).toEqual([1, 2, 3, 4, 0]);
  });
});
