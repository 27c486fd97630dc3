import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isPastSaving, PRUNE_BUDGET_DEFAULTS, PruneBudget, type PruneBudgetMode, RecentQuantile } from "./pruning.js";

describe("isPastSaving", () => {
  it("drops only a request already refused that cannot finish within RT_max", () => {
    expect(isPastSaving(1000, 0, 200, 1000, 1)).toBe(true);
    expect(isPastSaving(700, 0, 200, 1000, 1)).toBe(false);
    expect(isPastSaving(1000, 0, 200, 1000, 0)).toBe(false);
  });
});

describe("RecentQuantile", () => {
  it("is the quantile of the samples seen, and 0 before any", () => {
    const r = new RecentQuantile(0.9, 1000);
    expect(r.value()).toBe(0);
    for (let i = 1; i <= 100; i++) r.record(i);
    expect(r.value()).toBe(90);
  });

  it("forgets samples older than its capacity", () => {
    const r = new RecentQuantile(0.5, 16);
    for (let i = 0; i < 16; i++) r.record(1000);
    for (let i = 0; i < 16; i++) r.record(10);
    expect(r.value()).toBe(10);
  });

  it("ignores values that are not durations", () => {
    const r = new RecentQuantile(0.5, 8);
    r.record(Number.NaN);
    r.record(-3);
    r.record(Number.POSITIVE_INFINITY);
    expect(r.value()).toBe(0);
    r.record(42);
    expect(r.value()).toBe(42);
  });
});

describe("PruneBudget", () => {
  const minute = 60_000;
  const rt = 720;
  const settings = (mode: PruneBudgetMode) => ({ ...PRUNE_BUDGET_DEFAULTS, mode });
  /** A budget whose previous minute had `n` arrivals, now at the start of the next minute. */
  function after(n: number, mode: PruneBudgetMode): PruneBudget {
    const b = new PruneBudget(0.01, settings(mode));
    for (let i = 0; i < n; i++) b.recordArrival(i);
    return b;
  }

  it("drops within the minute's tail: 300 requests last minute allow 3 drops, not a 4th", () => {
    const b = after(300, "tail");
    const allowed: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      const ok = b.allows(minute + i, 0, rt);
      allowed.push(ok);
      if (ok) b.recordDrop(minute + i);
    }
    expect(allowed).toEqual([true, true, true, false]);
  });

  it("counts this minute's arrivals once they exceed the last minute's", () => {
    const b = after(100, "tail");
    expect(b.allows(minute, 0, rt)).toBe(true);
    b.recordDrop(minute);
    expect(b.allows(minute + 1, 0, rt)).toBe(false);
    for (let i = 0; i < 200; i++) b.recordArrival(minute + 2 + i);
    expect(b.allows(minute + 300, 0, rt)).toBe(true);
  });

  it("tail-or-lost drops freely once the tail is lost to drops (a give-up), tail does not", () => {
    for (const mode of ["tail", "tail-or-lost"] as const) {
      const b = after(100, mode);
      b.recordDrop(minute);
      expect(b.allows(minute + 1, 0, rt)).toBe(false);
      b.recordDrop(minute + 2); // a request given up at its deadline: 2 drops for a budget of 1
      expect(b.allows(minute + 3, 0, rt)).toBe(mode === "tail-or-lost");
    }
  });

  it("drops a request later than lateCap thresholds whatever the budget", () => {
    const b = after(100, "tail");
    b.recordDrop(minute);
    expect(b.allows(minute + 1, 2 * rt, rt)).toBe(false);
    expect(b.allows(minute + 1, 2 * rt + 1, rt)).toBe(true);
  });

  it("always drops in Swayam's mode, and a new minute starts a new budget", () => {
    const always = after(0, "always");
    expect(always.allows(0, 0, rt)).toBe(true);
    const b = after(100, "tail");
    b.recordDrop(minute);
    expect(b.allows(minute + 10, 0, rt)).toBe(false);
    // Minute 1 had no arrivals and minute 3 follows a gap: no budget until requests arrive.
    expect(b.allows(3 * minute, 0, rt)).toBe(false);
    for (let i = 0; i < 100; i++) b.recordArrival(3 * minute + i);
    expect(b.allows(3 * minute + 200, 0, rt)).toBe(true);
  });

  it("refuses settings it cannot keep", () => {
    expect(() => new PruneBudget(1)).toThrow(RangeError);
    expect(() => new PruneBudget(0.01, { ...PRUNE_BUDGET_DEFAULTS, windowMs: 0 })).toThrow(RangeError);
    expect(() => new PruneBudget(0.01, { ...PRUNE_BUDGET_DEFAULTS, lateCap: 0.5 })).toThrow(RangeError);
  });

  it("in tail mode, no minute's drops exceed its tail of the larger of its own and the last minute's arrivals", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 5000 }), arrival: fc.boolean() }), { maxLength: 400 }),
        fc.double({ min: 0.001, max: 0.2, noNaN: true }),
        (events, tail) => {
          const b = new PruneBudget(tail, settings("tail"));
          const arrivals = new Map<number, number>();
          const drops = new Map<number, number>();
          let t = 0;
          for (const e of events) {
            t += e.gap;
            const w = Math.floor(t / minute);
            if (e.arrival) {
              b.recordArrival(t);
              arrivals.set(w, (arrivals.get(w) ?? 0) + 1);
            } else if (b.allows(t, 0, rt)) {
              b.recordDrop(t);
              const d = (drops.get(w) ?? 0) + 1;
              drops.set(w, d);
              const bound = tail * Math.max(arrivals.get(w) ?? 0, arrivals.get(w - 1) ?? 0);
              if (d > bound + 1e-9) return false;
            }
          }
          return true;
        },
      ),
    );
  });
});
