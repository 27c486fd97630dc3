import { describe, expect, it } from "vitest";
import { shareInput, stickyLengths, violationRate } from "./share-planning.js";

describe("stickyLengths", () => {
  it("keeps every list as it is when the shares fit beside them", () => {
    // The leftover split moved from [6, 6] to [7, 5]: nobody is below its share, so nothing moves.
    expect(stickyLengths([4, 3], [7, 5], [6, 6], 12)).toEqual([6, 6]);
  });
  it("takes from the list furthest above its split only what a service below its share needs", () => {
    // b's share grew from the 2 it holds to 6 while a holds 8 of 12: a (4 above its split) gives back 4, c keeps its 2.
    expect(stickyLengths([3, 6, 1], [4, 6, 2], [8, 2, 2], 12)).toEqual([4, 6, 2]);
    // b needs only 2 more: a gives back 2 and stays above its split.
    expect(stickyLengths([3, 4, 1], [4, 6, 2], [8, 2, 2], 12)).toEqual([6, 4, 2]);
  });
  it("hands free backends to the lists below their split, the furthest first", () => {
    expect(stickyLengths([2, 2], [6, 4], [2, 2], 10)).toEqual([6, 4]);
    // Three free: the largest gap first, ties to the first list.
    expect(stickyLengths([2, 2], [6, 4], [2, 2], 7)).toEqual([5, 2]);
  });
  it("never leaves a list below its share, nor uses more than the pool", () => {
    const l = stickyLengths([5, 5], [5, 5], [9, 1], 10);
    expect(l).toEqual([5, 5]);
    expect(l.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(10);
  });
});

describe("shareInput", () => {
  const spec = {
    name: "s",
    minBackends: 1,
    maxBackends: 0,
    initialBackends: 2,
    latencyThresholdMs: 500,
    percentile: 99,
    profileMeanMs: 120,
  };
  it("flags a tick whose misses exceed the SLO's tail and plans on the observed rate without a forecast", () => {
    const t = { arrivals: 200, completed: 195, withinSlo: 190, failed: 3, serviceTimeMeanMs: 100 };
    expect(violationRate(t)).toBeCloseTo(8 / 198, 12);
    const { service, signal } = shareInput(spec, t, 10, undefined, 50);
    expect(signal.violating).toBe(true);
    expect(signal.forecast).toEqual({ kind: "quantiles", levels: [0.5], values: [[20]] });
    // 195 completions: the measured service time replaces the profile.
    expect(service.serviceTimeMs).toBe(100);
  });
  it("keeps the profile until enough requests completed, and has no signal without load or forecast", () => {
    const { service, signal } = shareInput(
      spec,
      { arrivals: 0, completed: 5, withinSlo: 5, failed: 0, serviceTimeMeanMs: 300 },
      10,
      undefined,
      50,
    );
    expect(service.serviceTimeMs).toBe(120);
    expect(signal.forecast).toBeUndefined();
    expect(signal.violating).toBe(false);
  });
});
