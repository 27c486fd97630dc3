import { describe, expect, it } from "vitest";
import { deadlineMs, effectiveDeadline } from "./deadline.js";

describe("effectiveDeadline", () => {
  it("takes the earliest of the gRPC deadline, the message's and the default timeout", () => {
    expect(effectiveDeadline(1000, Number.POSITIVE_INFINITY, 0, 30_000)).toBe(31_000);
    expect(effectiveDeadline(1000, 5000, 0, 30_000)).toBe(5000);
    expect(effectiveDeadline(1000, 5000, 4000, 30_000)).toBe(4000);
    expect(effectiveDeadline(1000, 0, 40_000, 30_000)).toBe(31_000);
  });

  it("is whole milliseconds, whatever fractions it is made of (it is encoded as an integer on the next hop)", () => {
    expect(effectiveDeadline(1000.25, Number.POSITIVE_INFINITY, 0, 1500.5)).toBe(2500);
    expect(effectiveDeadline(1000, 2100.5, 0, 30_000)).toBe(2100);
    expect(effectiveDeadline(1000, 5000, 0, 100.9)).toBe(1100);
  });

  it("carries the wall-clock deadlines onto a clock ahead of the wall clock, and neither an absent one", () => {
    // The wall clock stepped back an hour: the component's clock reads an hour ahead of it.
    const hour = 3_600_000;
    expect(effectiveDeadline(hour + 1000, 5000, 4000, 30_000, hour)).toBe(hour + 4000);
    expect(effectiveDeadline(hour + 1000, Number.POSITIVE_INFINITY, 0, 30_000, hour)).toBe(hour + 31_000);
  });
});

describe("deadlineMs", () => {
  it("reads grpc-js's Date or number, Infinity when there is none", () => {
    expect(deadlineMs(new Date(1234))).toBe(1234);
    expect(deadlineMs(99)).toBe(99);
    expect(deadlineMs(undefined)).toBe(Number.POSITIVE_INFINITY);
  });
});
