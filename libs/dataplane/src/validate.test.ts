import { describe, expect, it } from "vitest";
import { effectiveDeadline } from "./deadline.js";
import { inferRequestProblem, tensorProblem } from "./validate.js";

describe("request validation", () => {
  it("accepts a well-formed tensor and an empty input map", () => {
    expect(tensorProblem("x", { dims: [2, 3], data: [1, 2, 3, 4, 5, 6] })).toBeUndefined();
    expect(inferRequestProblem({ service: "resnet", inputs: {} })).toBeUndefined();
  });

  it("names what is wrong", () => {
    expect(tensorProblem("x", { dims: [2, 3], data: [1, 2] })).toBe('input "x": dims [2,3] need 6 values, got 2');
    expect(tensorProblem("x", { dims: [-1], data: [] })).toContain("non-negative integers");
    expect(tensorProblem("x", { dims: [1], data: [Number.NaN] })).toContain("value 0 is not a finite number");
    expect(tensorProblem("x", { dtype: "int8", dims: [], data: [] })).toContain("float32 only");
    expect(inferRequestProblem({ service: "" })).toBe("service is required");
    expect(inferRequestProblem({ service: "Bad Name" })).toContain("not a valid service name");
    expect(inferRequestProblem({ service: "a", deadlineUnixMs: -5 })).toContain("deadline_unix_ms");
  });
});

describe("effectiveDeadline", () => {
  it("takes the earliest of the three", () => {
    expect(effectiveDeadline(1000, Number.POSITIVE_INFINITY, 0, 5000)).toBe(6000);
    expect(effectiveDeadline(1000, 3000, 0, 5000)).toBe(3000);
    expect(effectiveDeadline(1000, 3000, 2500, 5000)).toBe(2500);
    expect(effectiveDeadline(1000, 0, 900, 5000)).toBe(900);
  });
});
