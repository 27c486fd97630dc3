import { describe, expect, it } from "vitest";
import { HeadroomLearner, PeakWindow } from "./headroom.js";

const settings = { leadTimeMs: 30_000, memoryMs: 600_000, floor: 1 };

describe("the learned headroom", () => {
  it("is the floor before any rise", () => {
    const h = new HeadroomLearner(settings);
    expect(h.headroom()).toBe(1);
    for (let t = 0; t < 100_000; t += 10_000) h.observe(t, 5);
    expect(h.headroom()).toBe(1);
  });

  it("is the largest rise within one lead time, not a slow climb", () => {
    const h = new HeadroomLearner(settings);
    // A slow climb of one backend per 40 s (never two within 30 s), then a burst of 4 within 20 s.
    let t = 0;
    for (let u = 2; u <= 6; u++, t += 40_000) h.observe(t, u);
    expect(h.headroom()).toBe(1);
    h.observe(t, 6);
    h.observe(t + 10_000, 8);
    h.observe(t + 20_000, 10);
    expect(h.headroom()).toBe(4);
  });

  it("forgets a rise older than its memory", () => {
    const h = new HeadroomLearner(settings);
    h.observe(0, 2);
    h.observe(10_000, 9);
    expect(h.headroom()).toBe(7);
    for (let t = 20_000; t <= 700_000; t += 10_000) h.observe(t, 9);
    expect(h.headroom()).toBe(1);
  });

  it("does not count a rise its plan foresaw, only use beyond the plan", () => {
    const h = new HeadroomLearner(settings);
    // A service registers: use goes 0 -> 6 within 20 s, as planned.
    h.observe(0, 0, 6);
    h.observe(10_000, 3, 6);
    h.observe(20_000, 6, 6);
    expect(h.headroom()).toBe(1);
    // Then a burst the plan did not see: 6 -> 9 within 10 s.
    h.observe(30_000, 9, 6);
    expect(h.headroom()).toBe(3);
  });

  it("refuses settings that cannot work", () => {
    expect(() => new HeadroomLearner({ leadTimeMs: 0, memoryMs: 1, floor: 0 })).toThrow(RangeError);
  });
});

describe("the held need", () => {
  it("follows a rise at once and a fall only once it has held for the window", () => {
    const w = new PeakWindow(300_000);
    expect(w.observe(0, 10)).toBe(10);
    expect(w.observe(2_000, 14)).toBe(14);
    expect(w.observe(60_000, 8)).toBe(14);
    // 14 (at 2 s) leaves the window after 302 s; 8 (at 60 s) is below 9.
    expect(w.observe(301_000, 9)).toBe(14);
    expect(w.observe(303_000, 9)).toBe(9);
    expect(w.observe(304_000, 7)).toBe(9);
    expect(w.observe(604_000, 7)).toBe(7);
  });

  it("with no window is the value itself", () => {
    const w = new PeakWindow(0);
    expect(w.observe(0, 5)).toBe(5);
    expect(w.observe(1, 3)).toBe(3);
  });
});
