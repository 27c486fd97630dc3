import { describe, expect, it } from "vitest";
import { renderTyped } from "./summary.js";
import { TypedStats } from "./typed-stats.js";

describe("TypedStats", () => {
  it("splits answers by the type of the backend that served them and by size, failures by size only", () => {
    const stats = new TypedStats((batch) => batch > 200);
    const typeOf = (id: string) => ({ f0: "fast", c0: "cheap", c1: "cheap" })[id];
    stats.record(500, { ok: true, backendId: "f0" }, 20);
    stats.record(900, { ok: true, backendId: "f0" }, 30);
    stats.record(50, { ok: true, backendId: "c0" }, 10);
    stats.record(150, { ok: true, backendId: "c1" }, 12);
    stats.record(100, { ok: true, backendId: "f0" }, 8);
    stats.record(300, { ok: false, code: "DEADLINE_EXCEEDED" }, 5000);
    stats.record(20, { ok: true, backendId: "x9" }, 9);
    const types = [
      { name: "fast", backends: 1, pricePerHour: 0.5 },
      { name: "cheap", backends: 2, pricePerHour: 0.1 },
    ];
    const s = stats.summary(types, typeOf, { largeAbove: 200, largeRule: "large = batch > 200", baseType: "fast" });
    expect(s.small).toEqual({ answered: 4, failed: 0 });
    expect(s.large).toEqual({ answered: 2, failed: 1 });
    expect(s.types.map((r) => [r.instanceType, r.answered, r.small.answered, r.large.answered])).toEqual([
      ["fast", 3, 1, 2],
      ["cheap", 2, 2, 0],
      ["unknown", 1, 1, 0],
    ]);
    const fast = s.types[0];
    expect(fast?.share).toBeCloseTo(3 / 6, 5);
    expect(fast?.large.share).toBe(1);
    expect(fast?.small.share).toBe(0.25);
    expect(s.types[1]?.large).toEqual({ answered: 0, share: 0, p50Ms: null, p99Ms: null });
    expect(s.types[1]?.small.p99Ms).toBeCloseTo(12, 0);
    const text = renderTyped("dien", s);
    expect(text).toContain("dien by instance type: large = batch > 200");
    expect(text).toContain("fast (base)");
    expect(text).toContain("large: 2 answered, 1 failed");
  });

  it("no large query when the rule says none", () => {
    const s = new TypedStats(() => false).summary([], () => undefined, {
      largeAbove: Number.POSITIVE_INFINITY,
      largeRule: "",
      baseType: "a",
    });
    expect(s.largeAbove).toBeNull();
    expect(s.types).toEqual([]);
  });
});
