import { describe, expect, it } from "vitest";
import { checkPoolSizing, planPoolSize } from "./pool-size.js";

const options = { minSize: 2, maxSize: 10, headroom: 1, scaleDownDelayMs: 60_000 };

describe("planPoolSize", () => {
  it("grows at once to the lists' demand plus headroom", () => {
    expect(planPoolSize({ now: 0, demand: 6, requested: 3, free: [] }, options)).toMatchObject({ size: 7, removeFirst: [] });
  });

  it("stays inside [minSize, maxSize]", () => {
    expect(planPoolSize({ now: 0, demand: 40, requested: 3, free: [] }, options).size).toBe(10);
    expect(planPoolSize({ now: 0, demand: 0, requested: 1, free: [] }, options).size).toBe(2);
  });

  it("shrinks only by backends free for the whole delay, the longest free first", () => {
    const free = [
      { id: "b-3", since: 50_000 },
      { id: "b-1", since: 10_000 },
      { id: "b-2", since: 20_000 },
    ];
    // Target 3 (2 + 1), requested 8: only b-1 and b-2 have been free for 60 s at t = 80 s.
    expect(planPoolSize({ now: 80_000, demand: 2, requested: 8, free }, options)).toMatchObject({ size: 6, removeFirst: ["b-1", "b-2"] });
    // At t = 110 s all three have: still not below the target.
    expect(planPoolSize({ now: 110_000, demand: 2, requested: 5, free }, options)).toMatchObject({
      size: 3,
      removeFirst: ["b-1", "b-2"],
    });
  });

  it("keeps the size when above target but nothing has been free long enough", () => {
    expect(planPoolSize({ now: 1000, demand: 1, requested: 6, free: [{ id: "b", since: 0 }] }, options)).toMatchObject({ size: 6 });
  });

  it("rejects inconsistent options", () => {
    expect(() => checkPoolSizing({ ...options, maxSize: 1 })).toThrow(/below minSize/);
    expect(() => checkPoolSizing({ ...options, headroom: -1 })).toThrow(/non-negative/);
    expect(() => checkPoolSizing({ ...options, headroom: 0.5 })).toThrow(/integers/);
  });
});
