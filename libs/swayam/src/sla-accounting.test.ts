import { describe, expect, it } from "vitest";
import { BackendSecondsMeter, SlaWindowTracker } from "./sla-accounting.js";

describe("SlaWindowTracker", () => {
  it("counts windows on a hand-built sequence (window 4, step 2, 75 %)", () => {
    const t = new SlaWindowTracker({ windowSize: 4, step: 2, rtMaxMs: 100, slMin: 0.75 });
    // hit hit miss hit | miss(undefined) miss | hit hit
    for (const l of [10, 100, 101, 50, undefined, 200, 1, 2]) t.record(l);
    // Windows end after 4, 6, 8 requests: [h h m h] 3/4 ok, [m h m m] 1/4, [m m h h] 2/4.
    expect(t.compliance()).toEqual({ windows: 3, compliant: 1, frequency: 1 / 3 });
    expect(t.totals()).toEqual({ requests: 8, withinRtMax: 5, attainment: 5 / 8 });
  });

  it("gives no window before windowSize requests", () => {
    const t = new SlaWindowTracker({ rtMaxMs: 100 });
    for (let i = 0; i < 999; i++) t.record(1);
    expect(t.compliance().windows).toBe(0);
    expect(Number.isNaN(t.compliance().frequency)).toBe(true);
    t.record(1);
    expect(t.compliance()).toEqual({ windows: 1, compliant: 1, frequency: 1 });
  });

  it("uses the paper's 1000/10 windows at 99 %: 10 misses pass, 11 fail", () => {
    const t = new SlaWindowTracker({ rtMaxMs: 100, slMin: 0.99 });
    // 11 misses first, then hits: the window ending at 1000 has 989 hits (fails); every later one has <= 1 miss.
    for (let i = 0; i < 1100; i++) t.record(i < 11 ? undefined : 5);
    expect(t.compliance()).toEqual({ windows: 11, compliant: 10, frequency: 10 / 11 });

    const u = new SlaWindowTracker({ rtMaxMs: 100, slMin: 0.99 });
    for (let i = 0; i < 1000; i++) u.record(i < 10 ? 500 : 5);
    expect(u.compliance().compliant).toBe(1);
  });
});

describe("BackendSecondsMeter", () => {
  it("accumulates occupied time, provisioning included, with open intervals up to now", () => {
    const m = new BackendSecondsMeter();
    m.observe("a", "provisioning", 0);
    m.observe("a", "warm-idle", 10_000); // still occupied: no new interval
    m.observe("b", "provisioning", 100_000);
    m.observe("a", "busy", 150_000);
    expect(m.totalSeconds(200_000)).toBeCloseTo(200 + 100, 9);
    expect(m.occupied).toBe(2);
    m.observe("a", "cold", 310_000);
    m.observe("a", "cold", 320_000); // repeated cold: nothing
    expect(m.totalSeconds(400_000)).toBeCloseTo(310 + 300, 9);
    m.observe("b", "cold", 400_000);
    expect(m.totalSeconds(1_000_000)).toBeCloseTo(610, 9);
    expect(m.occupied).toBe(0);
  });
});
