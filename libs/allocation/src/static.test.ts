import { describe, expect, it } from "vitest";
import { type AllocationInput, fairShares, planStaticAllocation, type ServiceDemand, staticTarget } from "./static.js";

const svc = (name: string, currentList: string[] = [], over: Partial<ServiceDemand> = {}): ServiceDemand => ({
  name,
  minBackends: 1,
  maxBackends: 0,
  initialBackends: 5,
  currentList,
  ...over,
});
const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, "0")}`);
const plan = (input: AllocationInput) => planStaticAllocation(input);

describe("staticTarget", () => {
  it("is the cap when there is one, else an equal share, never below the minimum", () => {
    expect(staticTarget({ minBackends: 1, maxBackends: 3 }, 100, 2)).toBe(3);
    expect(staticTarget({ minBackends: 1, maxBackends: 0 }, 10, 3)).toBe(3);
    expect(staticTarget({ minBackends: 4, maxBackends: 0 }, 10, 3)).toBe(4);
    expect(staticTarget({ minBackends: 0, maxBackends: 0 }, 10, 0)).toBe(0);
  });
});

describe("fairShares", () => {
  it("water-fills: small targets are met, the rest is split evenly", () => {
    const s = fairShares(
      [
        { name: "a", target: 2, held: 0 },
        { name: "b", target: 10, held: 0 },
        { name: "c", target: 10, held: 0 },
      ],
      10,
    );
    expect([...s.entries()]).toEqual([
      ["a", 2],
      ["b", 4],
      ["c", 4],
    ]);
  });

  it("gives an odd unit to a service that already holds it rather than by name", () => {
    const s = fairShares(
      [
        { name: "a", target: 10, held: 0 },
        { name: "b", target: 10, held: 4 },
      ],
      7,
    );
    expect(s.get("a")).toBe(3);
    expect(s.get("b")).toBe(4);
  });
});

describe("planStaticAllocation", () => {
  it("fills each service to an equal share of the pool from the sorted free list, round-robin", () => {
    const d = plan({ services: [svc("b"), svc("a")], freeBackends: ids("x", 10), poolSize: 10 });
    expect(d.lists.get("a")).toEqual(["x00", "x02", "x04", "x06", "x08"]);
    expect(d.lists.get("b")).toEqual(["x01", "x03", "x05", "x07", "x09"]);
    expect(d.free).toEqual([]);
    expect(d.minWarm.get("a")).toBe(5);
  });

  it("under scarcity gives each service about the same, whatever its cap", () => {
    const services = [svc("a", [], { maxBackends: 8 }), svc("b", [], { maxBackends: 8 }), svc("c", [], { maxBackends: 8 })];
    const d = plan({ services, freeBackends: ids("x", 7), poolSize: 7 });
    const lengths = ["a", "b", "c"].map((n) => d.lists.get(n)?.length);
    expect(lengths).toEqual([3, 2, 2]);
    expect(d.services.get("a")?.target).toBe(8);
    expect(d.services.get("a")?.fairShare).toBe(3);
  });

  it("never reorders existing entries: new backends are appended, dead ones were already removed", () => {
    const d = plan({ services: [svc("a", ["k", "c", "x"], { maxBackends: 5 })], freeBackends: ["b", "z"], poolSize: 5 });
    expect(d.lists.get("a")).toEqual(["k", "c", "x", "b", "z"]);
    expect(d.services.get("a")?.added).toEqual(["b", "z"]);
    expect(d.services.get("a")?.removed).toEqual([]);
  });

  it("respects the cap (trimming the tail when it was lowered) and the minimum", () => {
    const d = plan({
      services: [svc("a", ["a1", "a2", "a3", "a4"], { maxBackends: 2 }), svc("b", [], { minBackends: 3 })],
      freeBackends: ["f1"],
      poolSize: 5,
    });
    expect(d.lists.get("a")).toEqual(["a1", "a2"]);
    expect(d.services.get("a")?.removed).toEqual(["a3", "a4"]);
    // b: equal share floor(5/2) = 2, raised to its minimum 3, from the freed tail and the free backend.
    expect(d.lists.get("b")).toEqual(["a3", "a4", "f1"]);
    expect(d.free).toEqual([]);
  });

  it("leaves spare backends free when every service has its target", () => {
    const d = plan({ services: [svc("a", [], { maxBackends: 2, initialBackends: 5 })], freeBackends: ids("x", 6), poolSize: 6 });
    expect(d.lists.get("a")).toEqual(["x00", "x01"]);
    expect(d.minWarm.get("a")).toBe(2);
    expect(d.free).toEqual(["x02", "x03", "x04", "x05"]);
  });

  it("reclaims from the tail of a service above its share only when another one is short", () => {
    const a = ids("a", 10);
    // Alone, a held the whole pool; b registers: equal share 5 each, taken from a's tail.
    const d = plan({ services: [svc("a", a), svc("b")], freeBackends: [], poolSize: 10 });
    expect(d.lists.get("a")).toEqual(a.slice(0, 5));
    expect(d.lists.get("b")).toEqual(["a09", "a08", "a07", "a06", "a05"]);
    expect(d.services.get("a")?.removed).toEqual(["a05", "a06", "a07", "a08", "a09"]);

    // A service above its share keeps its backends when nobody is short.
    const calm = plan({ services: [svc("a", ids("a", 6)), svc("b", ids("b", 3), { maxBackends: 3 })], freeBackends: [], poolSize: 9 });
    expect(calm.lists.get("a")).toHaveLength(6);
    expect(calm.lists.get("b")).toHaveLength(3);
    expect(calm.services.get("a")?.removed).toEqual([]);
  });

  it("is stable: planning its own result again changes nothing", () => {
    const first = plan({
      services: [svc("a", [], { maxBackends: 4 }), svc("b"), svc("c", [], { minBackends: 2 })],
      freeBackends: ids("x", 11),
      poolSize: 11,
    });
    const again = plan({
      services: [...first.services.values()].map((p) => svc(p.name, p.list, p.name === "a" ? { maxBackends: 4 } : {})),
      freeBackends: first.free,
      poolSize: 11,
    });
    for (const p of again.services.values()) {
      expect(p.added).toEqual([]);
      expect(p.removed).toEqual([]);
    }
  });

  it("ignores a free backend that is already in a list and handles an empty pool", () => {
    const d = plan({ services: [svc("a", ["x"])], freeBackends: ["x", "y"], poolSize: 2 });
    expect(d.lists.get("a")).toEqual(["x", "y"]);
    const empty = plan({ services: [svc("a"), svc("b")], freeBackends: [], poolSize: 0 });
    expect(empty.lists.get("a")).toEqual([]);
    expect(empty.minWarm.get("a")).toBe(0);
  });
});

describe("planStaticAllocation: per-type counts (Kairos's configuration of a service)", () => {
  const typeOf = (id: string) => (id.startsWith("g") ? "gpu" : id.startsWith("c") ? "cpu" : undefined);
  const counts = (gpu: number, cpu: number) => ({
    counts: new Map([
      ["gpu", gpu],
      ["cpu", cpu],
    ]),
    typeOf,
  });
  const svc = (name: string, currentList: string[], typeCounts = counts(1, 2)) => ({
    name,
    minBackends: 0,
    maxBackends: 3,
    initialBackends: 1,
    currentList,
    typeCounts,
  });

  it("gives each type up to its count, nothing of a type it holds enough of", () => {
    const d = planStaticAllocation({ services: [svc("a", [])], freeBackends: ["c1", "c2", "c3", "g1", "g2", "x1"], poolSize: 6 });
    expect([...(d.lists.get("a") ?? [])].sort()).toEqual(["c1", "c2", "g1"]);
    expect(d.free).toEqual(["c3", "g2", "x1"]);
  });
  it("loses the entries of a type it holds too many of, from that type's tail, and keeps the rest in order", () => {
    const d = planStaticAllocation({ services: [svc("a", ["g1", "c1", "g2", "c2"])], freeBackends: [], poolSize: 4 });
    expect(d.lists.get("a")).toEqual(["g1", "c1", "c2"]);
    expect(d.services.get("a")?.removed).toEqual(["g2"]);
    expect(d.free).toEqual(["g2"]);
  });
  it("two services share the types by their counts", () => {
    const d = planStaticAllocation({
      services: [svc("a", [], counts(2, 0)), { ...svc("b", [], counts(1, 3)), maxBackends: 4 }],
      freeBackends: ["c1", "c2", "c3", "g1", "g2", "g3"],
      poolSize: 6,
    });
    expect([...(d.lists.get("a") ?? [])].sort()).toEqual(["g1", "g2"]);
    expect([...(d.lists.get("b") ?? [])].sort()).toEqual(["c1", "c2", "c3", "g3"]);
  });
});
