import { describe, expect, it } from "vitest";
import { isPastSaving, RecentQuantile } from "./pruning.js";

describe("isPastSaving", () => {
  it("drops only a request already refused that cannot finish within RT_max", () => {
    expect(isPastSaving(1000, 0, 200, 1000, 1)).toBe(true);
    expect(isPastSaving(700, 0, 200, 1000, 1)).toBe(false);
    expect(isPastSaving(1000, 0, 200, 1000, 0)).toBe(false);
  });
});

describe("RecentQuantile", () => {
  it("is the quantile of the samples seen, and 0 before any", () => {
    const r = new RecentQuantile(0.9, 1000);
    expect(r.value()).toBe(0);
    for (let i = 1; i <= 100; i++) r.record(i);
    expect(r.value()).toBe(90);
  });

  it("forgets samples older than its capacity", () => {
    const r = new RecentQuantile(0.5, 16);
    for (let i = 0; i < 16; i++) r.record(1000);
    for (let i = 0; i < 16; i++) r.record(10);
    expect(r.value()).toBe(10);
  });

  it("ignores values that are not durations", () => {
    const r = new RecentQuantile(0.5, 8);
    r.record(Number.NaN);
    r.record(-3);
    r.record(Number.POSITIVE_INFINITY);
    expect(r.value()).toBe(0);
    r.record(42);
    expect(r.value()).toBe(42);
  });
});
