import { describe, expect, it } from "vitest";
import {
  dropRateCandidates,
  effectiveUtility,
  penaltyMultiplier,
  penaltyRelaxed,
  penaltyStep,
  relaxedUtility,
  stepUtility,
} from "./utility.js";

describe("utilities from SLOs (Sec. 3.1)", () => {
  it("step utility is 1 at or under the target, else 0", () => {
    expect(stepUtility(0.5, 0.6)).toBe(1);
    expect(stepUtility(0.6, 0.6)).toBe(1);
    expect(stepUtility(0.61, 0.6)).toBe(0);
    expect(stepUtility(Number.POSITIVE_INFINITY, 0.6)).toBe(0);
  });
  it("relaxed utility is min((s/l)^alpha, 1)", () => {
    expect(relaxedUtility(1.2, 0.6)).toBeCloseTo(0.5, 12);
    expect(relaxedUtility(1.2, 0.6, 2)).toBeCloseTo(0.25, 12);
    expect(relaxedUtility(0.3, 0.6)).toBe(1);
    expect(relaxedUtility(Number.POSITIVE_INFINITY, 0.6)).toBe(0);
  });
});

describe("drop penalty (Table 5, Eq. 2)", () => {
  it("step table of AWS credits", () => {
    expect(penaltyStep(1)).toBe(0);
    expect(penaltyStep(0.99)).toBe(0);
    expect(penaltyStep(0.97)).toBe(0.25);
    expect(penaltyStep(0.95)).toBe(0.25);
    expect(penaltyStep(0.92)).toBe(0.5);
    expect(penaltyStep(0.89)).toBe(1);
  });
  it("relaxed penalty is piecewise linear through the artifact's points", () => {
    expect(penaltyRelaxed(0)).toBe(0);
    expect(penaltyRelaxed(0.001)).toBe(0);
    expect(penaltyRelaxed(0.03)).toBeCloseTo(0.25, 12);
    expect(penaltyRelaxed(0.055)).toBeCloseTo(0.375, 12);
    expect(penaltyRelaxed(0.08)).toBeCloseTo(0.5, 12);
    expect(penaltyRelaxed(0.54)).toBeCloseTo(0.75, 12);
    expect(penaltyRelaxed(1)).toBe(1);
  });
  it("effective utility is phi(d) x U", () => {
    expect(penaltyMultiplier("step", 0.01)).toBe(1);
    expect(effectiveUtility("step", 0.04, 0.8)).toBeCloseTo(0.6, 12);
    expect(effectiveUtility("relaxed", 0.08, 0.8)).toBeCloseTo(0.4, 12);
    expect(dropRateCandidates("step")).toEqual([0, 0.01, 0.05, 0.1]);
    expect(() => penaltyMultiplier("step", 1.5)).toThrow(/drop rate/);
  });
});
