import { describe, expect, it } from "vitest";
import { closedLoop, percentile } from "./closed-loop.js";

describe("percentile", () => {
  it("takes the nearest rank", () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(xs, 0.5)).toBe(50);
    expect(percentile(xs, 0.99)).toBe(99);
    expect(percentile([7], 0.99)).toBe(7);
    expect(percentile([], 0.5)).toBeNaN();
  });
});

describe("closedLoop", () => {
  it("counts requests and errors only while measuring", async () => {
    let n = 0;
    const r = await closedLoop(
      async () => {
        n += 1;
        await new Promise((res) => setTimeout(res, 5));
        if (n % 10 === 0) throw new Error("x");
      },
      2,
      50,
      300,
    );
    expect(r.requests).toBeGreaterThan(20);
    expect(r.errors).toBeGreaterThan(0);
    expect(r.errors).toBeLessThan(r.requests);
    expect(r.p50Ms).toBeGreaterThanOrEqual(5);
    expect(r.meanMs).toBeGreaterThanOrEqual(5);
    expect(r.meanMs).toBeLessThan(r.p99Ms + 1);
  });
});
