import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { kthSmallest } from "./order-statistic.js";

describe("kthSmallest", () => {
  it("is the value a sort puts at index k, for every k, with ties, sorted and reversed runs", () => {
    const random = seededRandom(17);
    for (let trial = 0; trial < 300; trial++) {
      const n = 1 + Math.floor(random.uniform() * 200);
      const few = random.uniform() < 0.3; // many ties
      let values = Array.from({ length: n }, () => (few ? Math.floor(random.uniform() * 4) : random.uniform() * 1000));
      const shape = trial % 3;
      if (shape === 1) values = values.sort((a, b) => a - b);
      if (shape === 2) values = values.sort((a, b) => b - a);
      const sorted = Float64Array.from(values).sort();
      for (const k of [0, n - 1, Math.floor(random.uniform() * n), Math.ceil(0.99 * n) - 1]) {
        // Values past n must not be looked at.
        expect(kthSmallest(Float64Array.from([...values, -1, -2]), n, k)).toBe(sorted[k]);
      }
    }
    expect(() => kthSmallest(new Float64Array(3), 3, 3)).toThrow(RangeError);
  });
});
