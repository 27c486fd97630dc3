import { describe, expect, it } from "vitest";
import { syntheticTrace } from "./synthetic.js";
import { jobCounts, totalRequests } from "./trace.js";

function mean(xs: Float64Array): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

function argmax(xs: Float64Array): number {
  let best = 0;
  xs.forEach((x, i) => {
    if (x > (xs[best] as number)) best = i;
  });
  return best;
}

describe("syntheticTrace", () => {
  it("is deterministic for a seed and differs across seeds", () => {
    const jobs = [
      { name: "a", meanPerMinute: 300 },
      { name: "b", meanPerMinute: 50 },
    ];
    const one = syntheticTrace({ jobs, minutes: 500, seed: 7 });
    const two = syntheticTrace({ jobs, minutes: 500, seed: 7 });
    const other = syntheticTrace({ jobs, minutes: 500, seed: 8 });
    expect([...jobCounts(one, "a")]).toEqual([...jobCounts(two, "a")]);
    expect([...jobCounts(one, "a")]).not.toEqual([...jobCounts(other, "a")]);
    // A job's stream depends on its name, not on its neighbours.
    const alone = syntheticTrace({ jobs: [{ name: "b", meanPerMinute: 50 }], minutes: 500, seed: 7 });
    expect([...jobCounts(alone, "b")]).toEqual([...jobCounts(one, "b")]);
    expect(jobCounts(one, "a").every((c) => Number.isInteger(c) && c >= 0)).toBe(true);
  });

  it("follows the diurnal cycle exactly when noise and bursts are off", () => {
    const trace = syntheticTrace({
      jobs: [{ name: "d", meanPerMinute: 100, diurnalAmplitude: 0.5, periodMinutes: 1440, peakMinute: 600, noiseCv: 0, burstsPerDay: 0 }],
      minutes: 1440,
      seed: 1,
      integerCounts: false,
    });
    const counts = jobCounts(trace, "d");
    expect(argmax(counts)).toBe(600);
    expect(counts[600]).toBeCloseTo(150, 9);
    expect(counts[1320]).toBeCloseTo(50, 9);
    expect(mean(counts)).toBeCloseTo(100, 9);
  });

  it("keeps the mean near the target with noise and bursts, and the peak near the phase", () => {
    const days = 10;
    const trace = syntheticTrace({
      jobs: [{ name: "j", meanPerMinute: 400, peakMinute: 300, noiseCv: 0.2, burstsPerDay: 6, burstMultiplier: 4, burstDecayMinutes: 8 }],
      minutes: 1440 * days,
      seed: 42,
    });
    const counts = jobCounts(trace, "j");
    expect(totalRequests(trace, "j") / counts.length).toBeGreaterThan(400 * 0.97);
    expect(totalRequests(trace, "j") / counts.length).toBeLessThan(400 * 1.03);
    // Average each minute-of-day over the days: the busiest hour of the folded profile is within an
    // hour of minute 300 (hour 5); random 4x bursts can tip the neighbouring hour over it.
    const profile = new Float64Array(24);
    counts.forEach((c, m) => {
      const hour = Math.floor((m % 1440) / 60);
      profile[hour] = (profile[hour] as number) + c;
    });
    expect(argmax(profile)).toBeGreaterThanOrEqual(4);
    expect(argmax(profile)).toBeLessThanOrEqual(6);
    // Bursts make some minutes well above the diurnal ceiling of 1.5x the mean.
    expect(Math.max(...counts)).toBeGreaterThan(400 * 1.5 * 1.5);
  });

  it("honours a base level that carries no cycle", () => {
    const trace = syntheticTrace({
      jobs: [{ name: "b", meanPerMinute: 100, basePerMinute: 80, diurnalAmplitude: 1, peakMinute: 0, noiseCv: 0, burstsPerDay: 0 }],
      minutes: 1440,
      seed: 3,
      integerCounts: false,
    });
    const counts = jobCounts(trace, "b");
    expect(counts[720]).toBeCloseTo(80, 9);
    expect(counts[0]).toBeCloseTo(120, 9);
  });

  it("rejects impossible parameters", () => {
    expect(() => syntheticTrace({ jobs: [{ name: "x", meanPerMinute: 10, diurnalAmplitude: 2 }], minutes: 10, seed: 1 })).toThrow(
      /diurnalAmplitude/,
    );
    expect(() => syntheticTrace({ jobs: [{ name: "x", meanPerMinute: 10, basePerMinute: 11 }], minutes: 10, seed: 1 })).toThrow(
      /basePerMinute/,
    );
    expect(() => syntheticTrace({ jobs: [{ name: "x", meanPerMinute: 1 }], minutes: 0, seed: 1 })).toThrow(/minutes/);
  });
});
