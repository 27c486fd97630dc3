import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { sampleBatches } from "./batch-sizes.js";

describe("sampleBatches", () => {
  it("draws Kairos's production mix: 8 % below 100, 65 % in 100-199, 22 % in 200-599, 5 % in 600-999", () => {
    const b = sampleBatches(seededRandom(3), { kind: "kairos-production" }, 40_000);
    const share = (lo: number, hi: number) => b.filter((x) => x >= lo && x <= hi).length / b.length;
    expect(b.every((x) => Number.isInteger(x) && x >= 1 && x <= 999)).toBe(true);
    expect(Math.abs(share(1, 99) - 8 / 99)).toBeLessThan(0.01);
    expect(Math.abs(share(100, 200) - 64 / 99)).toBeLessThan(0.01);
    expect(Math.abs(share(200, 599) - 22 / 99)).toBeLessThan(0.01);
    expect(Math.abs(share(600, 999) - 5 / 99)).toBeLessThan(0.01);
  });
  it("clamps the lognormal and gaussian mixes to [1, max]", () => {
    const l = sampleBatches(seededRandom(1), { kind: "lognormal", mu: 6, sigma: 2, max: 1000 }, 5000);
    const g = sampleBatches(seededRandom(1), { kind: "gaussian", mean: 10, sd: 50, max: 1000 }, 5000);
    for (const x of [...l, ...g]) expect(x >= 1 && x <= 1000 && Number.isInteger(x)).toBe(true);
    expect(l.some((x) => x === 1000)).toBe(true);
    expect(g.some((x) => x === 1)).toBe(true);
  });
});
