import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { LoadWindow, REPORTED_BATCHES } from "./load-window.js";

describe("LoadWindow: the batch sizes a load report carries", () => {
  it("all of them up to the cap, then a uniform sample of every arrival", () => {
    const w = new LoadWindow(0, seededRandom(3));
    for (let i = 1; i <= 100; i++) w.recordArrival(i);
    expect(w.batches).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    // 10,000 more: half batch 1000; a uniform sample keeps about half of them.
    for (let i = 0; i < 10_000; i++) w.recordArrival(i % 2 === 0 ? 1000 : 1);
    expect(w.arrivals).toBe(10_100);
    expect(w.batches).toHaveLength(REPORTED_BATCHES);
    const large = w.batches.filter((b) => b === 1000).length / REPORTED_BATCHES;
    expect(large).toBeGreaterThan(0.35);
    expect(large).toBeLessThan(0.65);
  });
});
