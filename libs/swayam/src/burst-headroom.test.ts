import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BURST_HEADROOM_DEFAULTS, BurstHeadroom } from "./burst-headroom.js";

const settings = { riseMs: 20_000, spanMs: 10_000, memoryMs: 3_600_000, noiseSigmas: 3 };

describe("BurstHeadroom", () => {
  it("learns nothing from a steady rate: its changes are within Poisson noise", () => {
    const h = new BurstHeadroom(settings);
    // 10 req/s over 10 s is 100 requests, sd 10: 3 sd is 3 req/s.
    const rates = [10, 11, 9.5, 10.5, 10, 9, 10.8];
    rates.forEach((r, i) => {
      h.observe(i * 10_000, r, 8);
    });
    expect(h.headroom(70_000)).toBe(0);
  });

  it("remembers a burst's whole rise once it is beyond the noise, times the most frontends seen", () => {
    const h = new BurstHeadroom(settings);
    h.observe(0, 0.01, 1);
    h.observe(10_000, 0.01, 1);
    // Within 20 s the rate rose from 0.01 to 1.5 req/s at this frontend; a count of at most 1 has noise 3 / 10 s.
    h.observe(20_000, 1.5, 8);
    expect(h.headroom(20_000)).toBeCloseTo((1.5 - 0.01) * 8, 9);
    // Back to idle: the rise is kept, and so are the 8 frontends the burst was seen by.
    h.observe(30_000, 0.01, 1);
    expect(h.headroom(30_000)).toBeCloseTo((1.5 - 0.01) * 8, 9);
  });

  it("measures a rise against the lowest rate of the last riseMs only", () => {
    const h = new BurstHeadroom(settings);
    h.observe(0, 0, 1);
    h.observe(10_000, 2, 1);
    h.observe(20_000, 4, 1);
    // At 30 s the window is [10 s, 30 s): its lowest rate is 2 (the 0 at time 0 is older than 20 s).
    h.observe(30_000, 6, 1);
    // Both rises are beyond their noise (3 sqrt(20) / 10 = 1.34 from 2, 0.3 from 0), so both count whole.
    const fromTwo = 6 - 2;
    const fromZero = 4 - 0;
    expect(h.headroom(30_000)).toBeCloseTo(Math.max(fromTwo, fromZero), 9);
  });

  it("learns no rise in its first settleMs, only the rates it measures later rises from", () => {
    const h = new BurstHeadroom({ ...settings, settleMs: 30_000 });
    h.observe(0, 0, 1);
    h.observe(10_000, 5, 1);
    h.observe(20_000, 5, 1);
    expect(h.headroom(20_000)).toBe(0);
    h.observe(30_000, 0, 1);
    h.observe(40_000, 5, 1);
    expect(h.headroom(40_000)).toBeCloseTo(5, 9);
  });

  it("forgets a rise after memoryMs", () => {
    const h = new BurstHeadroom({ ...settings, memoryMs: 60_000 });
    h.observe(0, 0, 1);
    h.observe(10_000, 5, 1);
    expect(h.headroom(70_000)).toBeGreaterThan(0);
    expect(h.headroom(70_001)).toBe(0);
  });

  it("is never negative and never above the largest rate seen times the most frontends", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ rate: fc.double({ min: 0, max: 100, noNaN: true }), frontends: fc.integer({ min: 1, max: 16 }) }), {
          minLength: 1,
          maxLength: 60,
        }),
        (obs) => {
          const h = new BurstHeadroom(BURST_HEADROOM_DEFAULTS);
          let most = 0;
          let fmax = 1;
          obs.forEach((o, i) => {
            h.observe(i * 10_000, o.rate, o.frontends);
            most = Math.max(most, o.rate);
            fmax = Math.max(fmax, o.frontends);
          });
          const got = h.headroom((obs.length - 1) * 10_000);
          return got >= 0 && got <= most * fmax + 1e-9;
        },
      ),
    );
  });

  it("refuses settings it cannot keep", () => {
    expect(() => new BurstHeadroom({ ...settings, riseMs: 0 })).toThrow(RangeError);
    expect(() => new BurstHeadroom({ ...settings, memoryMs: 1000 })).toThrow(RangeError);
  });
});
