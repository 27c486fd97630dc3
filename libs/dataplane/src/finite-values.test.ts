import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { firstNonFinite } from "./finite-values.js";

const naive = (data: ArrayLike<number>): number => {
  for (let i = 0; i < data.length; i++) if (!Number.isFinite(data[i])) return i;
  return -1;
};

describe("firstNonFinite", () => {
  it("finds NaN and both infinities at any position of a Float32Array, and nothing in finite values", () => {
    for (const length of [0, 1, 3, 4, 5, 8, 150_528]) {
      const data = new Float32Array(length).map((_, i) => ((i % 255) / 255) * (i % 2 === 0 ? 1 : -1e38));
      expect(firstNonFinite(data)).toBe(-1);
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
        for (const at of new Set([0, length - 1, Math.floor(length / 2)].filter((i) => i >= 0 && i < length))) {
          const copy = data.slice();
          copy[at] = bad;
          expect(firstNonFinite(copy)).toBe(at);
        }
      }
    }
  });

  it("keeps the largest finite float32, subnormals and negative zero", () => {
    expect(firstNonFinite(Float32Array.of(3.4028234663852886e38, -3.4028234663852886e38, 1e-45, -0, 0))).toBe(-1);
  });

  it("reads a Float32Array that views part of a larger buffer", () => {
    const buffer = new Float32Array(16);
    buffer[2] = Number.NaN;
    expect(firstNonFinite(new Float32Array(buffer.buffer, 12, 8))).toBe(-1);
    expect(firstNonFinite(new Float32Array(buffer.buffer, 4, 8))).toBe(1);
  });

  it("agrees with Number.isFinite per element, typed or not (property)", () => {
    const value = fc.oneof(
      fc.float(),
      fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
      fc.float({ noNaN: true, noDefaultInfinity: true }),
    );
    fc.assert(
      fc.property(fc.array(value, { maxLength: 40 }), (values) => {
        const typed = Float32Array.from(values);
        expect(firstNonFinite(typed)).toBe(naive(typed));
        expect(firstNonFinite(values)).toBe(naive(values));
      }),
      { numRuns: 500 },
    );
  });
});
