import { describe, expect, it } from "vitest";
import { FrontendRotation } from "./frontend-rotation.js";

describe("FrontendRotation", () => {
  it("spreads uniformly over live frontends", () => {
    const r = new FrontendRotation(1000);
    const counts = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const id = r.next(["a", "b", "c"], new Set(), 0)!;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    expect([...counts.values()]).toEqual([100, 100, 100]);
  });

  it("skips an ejected frontend until its time is up, and excluded ones", () => {
    const r = new FrontendRotation(1000);
    r.eject("b", 0);
    const seen = new Set<string>();
    for (let i = 0; i < 10; i++) seen.add(r.next(["a", "b", "c"], new Set(), 500)!);
    expect([...seen].sort()).toEqual(["a", "c"]);
    expect(r.next(["a", "b", "c"], new Set(["a", "c"]), 500)).toBe("b");
    const later = new Set<string>();
    for (let i = 0; i < 10; i++) later.add(r.next(["a", "b", "c"], new Set(), 1001)!);
    expect([...later].sort()).toEqual(["a", "b", "c"]);
  });

  it("has nothing to offer when every frontend is excluded or none is live", () => {
    const r = new FrontendRotation(1000);
    expect(r.next([], new Set(), 0)).toBeUndefined();
    expect(r.next(["a"], new Set(["a"]), 0)).toBeUndefined();
  });

  it("gives each service its own rotation, so each frontend gets exactly its share of every service", () => {
    const r = new FrontendRotation(1000);
    const counts = new Map<string, number>();
    // Two services interleaved 2:1: one shared cursor would send every "a" request to the same two frontends.
    for (let i = 0; i < 300; i++) {
      const service = i % 3 === 2 ? "b" : "a";
      const id = r.next(["f1", "f2", "f3"], new Set(), 0, service) ?? "";
      counts.set(`${service}/${id}`, (counts.get(`${service}/${id}`) ?? 0) + 1);
    }
    expect(Object.fromEntries([...counts].sort())).toEqual({
      "a/f1": 67,
      "a/f2": 67,
      "a/f3": 66,
      "b/f1": 34,
      "b/f2": 33,
      "b/f3": 33,
    });
  });
});
