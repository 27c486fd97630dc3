import { describe, expect, it } from "vitest";
import { interpretOcrCls, makeOcrClsSampleInput } from "./ocr-cls.js";

describe("makeOcrClsSampleInput", () => {
  const plane = 48 * 192;
  const upright = makeOcrClsSampleInput("upright").x;
  const flipped = makeOcrClsSampleInput("flipped").x;

  it("builds a normalised [1, 3, 48, 192] grey image of dark text on white", () => {
    expect(upright.dims).toEqual([1, 3, 48, 192]);
    expect(upright.data).toHaveLength(3 * plane);
    const values = new Set(upright.data);
    // White paper normalises to 1 and the ink (grey 20) to 20 / 127.5 - 1.
    expect([...values].sort()).toEqual([Math.fround(20 / 127.5 - 1), 1]);
    const ink = upright.data.subarray(0, plane).filter((v) => v < 0).length;
    expect(ink / plane).toBeGreaterThan(0.15);
    expect(ink / plane).toBeLessThan(0.4);
    expect(upright.data.subarray(plane, 2 * plane)).toEqual(upright.data.subarray(0, plane));
    expect(upright.data.subarray(2 * plane)).toEqual(upright.data.subarray(0, plane));
  });

  it("keeps the top rows blank in the upright sample and puts ink there when flipped", () => {
    const rowInk = (data: Float32Array | number[], row: number) =>
      Array.from(data)
        .slice(row * 192, (row + 1) * 192)
        .filter((v) => v < 0).length;
    expect(rowInk(upright.data, 5)).toBe(0);
    expect(rowInk(upright.data, 10)).toBeGreaterThan(50);
    expect(rowInk(flipped.data, 37)).toBeGreaterThan(50);
    expect(rowInk(flipped.data, 42)).toBe(0);
  });

  it("is the same image every time, and flipped is upright rotated by 180 degrees", () => {
    expect(makeOcrClsSampleInput("upright").x.data).toEqual(upright.data);
    const u = upright.data.subarray(0, plane);
    const f = flipped.data.subarray(0, plane);
    expect(Array.from(f)).toEqual(Array.from(u).reverse());
    expect(Array.from(f)).not.toEqual(Array.from(u));
  });
});

describe("interpretOcrCls", () => {
  it("picks the more probable direction of the first item", () => {
    expect(interpretOcrCls({ "softmax_0.tmp_0": { dims: [2, 2], data: [0.3, 0.7, 0.9, 0.1] } })).toEqual({ label: "180", confidence: 0.7 });
    expect(interpretOcrCls({ "softmax_0.tmp_0": { dims: [1, 2], data: [0.6, 0.4] } })).toEqual({ label: "0", confidence: 0.6 });
  });

  it("throws when the classifier output is missing", () => {
    expect(() => interpretOcrCls({ y: { dims: [1, 2], data: [0.5, 0.5] } })).toThrow(/softmax_0.tmp_0/);
  });
});
