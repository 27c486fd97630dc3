import { describe, expect, it } from "vitest";
import { LogThrottle } from "./log-throttle.js";

describe("LogThrottle", () => {
  it("writes the first lines of each window per key and reports how many it held back", () => {
    const t = new LogThrottle(1_000, 2);
    const at0 = Array.from({ length: 10 }, () => t.admit("ig.hb.x", 0).write);
    expect(at0).toEqual([true, true, false, false, false, false, false, false, false, false]);
    // Another key has its own allowance.
    expect(t.admit("ig.load.y", 10)).toEqual({ write: true, suppressed: 0 });
    // Next window: the first line written says how many were dropped.
    expect(t.admit("ig.hb.x", 1_000)).toEqual({ write: true, suppressed: 8 });
    expect(t.admit("ig.hb.x", 1_001)).toEqual({ write: true, suppressed: 0 });
    expect(t.admit("ig.hb.x", 1_002).write).toBe(false);
  });

  it("remembers at most maxKeys keys, forgetting the oldest", () => {
    const t = new LogThrottle(1_000, 1, 3);
    for (const k of ["a", "b", "c", "d"]) expect(t.admit(k, 0).write).toBe(true);
    expect(t.admit("d", 1).write).toBe(false);
    // "a" was forgotten when "d" came: it starts afresh.
    expect(t.admit("a", 1).write).toBe(true);
  });
});
