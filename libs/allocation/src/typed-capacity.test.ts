import type { InstanceTypeSpec, LatencyPoint } from "@infergrid/kairos";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { planTypedCapacity, type TypedService } from "./typed-capacity.js";

const pt = (batch: number, ms: number): LatencyPoint => ({ batch, meanMs: ms, p99Ms: ms });
const prices: InstanceTypeSpec[] = [
  { name: "gpu.large", pricePerHour: 1, maxCount: 4 },
  { name: "cpu.small", pricePerHour: 0.2, maxCount: 10 },
];
const profiles = new Map([
  ["gpu.large", { points: [pt(100, 10), pt(1000, 40)] }],
  ["cpu.small", { points: [pt(100, 20), pt(200, 150), pt(1000, 900)] }],
]);
const svc = (name: string, share: number, qosMs = 100): TypedService => ({ name, share, model: { profiles, qosMs } });

describe("planTypedCapacity: shares of the budget, spent by Kairos per service", () => {
  it("gives the larger share the larger configuration, within the budget and each type's limit, and sums per type", () => {
    const plan = planTypedCapacity([svc("a", 3), svc("b", 1)], prices, 5);
    const a = plan.services.get("a");
    const b = plan.services.get("b");
    expect(a && b).toBeTruthy();
    expect(a?.bound).toBeGreaterThan(b?.bound ?? Number.POSITIVE_INFINITY);
    expect(a?.costPerHour).toBeLessThanOrEqual(3.75 + 1e-9);
    expect(b?.costPerHour).toBeLessThanOrEqual(1.25 + 1e-9);
    for (const t of prices) {
      const sum = (a?.counts.get(t.name) ?? 0) + (b?.counts.get(t.name) ?? 0);
      expect(plan.totals.get(t.name)).toBe(sum);
      expect(sum).toBeLessThanOrEqual(t.maxCount);
    }
    expect(plan.costPerHour).toBeCloseTo((a?.costPerHour ?? 0) + (b?.costPerHour ?? 0), 9);
    expect(plan.problems.size).toBe(0);
  });
  it("raises a share too small for one base instance to one, while the budget has room", () => {
    const plan = planTypedCapacity([svc("big", 20), svc("tiny", 1)], prices, 5);
    expect(plan.services.get("tiny")?.counts.get("gpu.large")).toBe(1);
    expect(plan.costPerHour).toBeLessThanOrEqual(5 + 1e-9);
  });
  it("computes a service's configuration on its measured query sizes when given", () => {
    // Only small queries: the cheap type serves them all and is the more cost-effective base.
    const plan = planTypedCapacity([{ ...svc("small", 1), batches: [10, 20, 50] }], prices, 5);
    expect(plan.services.get("small")?.base).toBe("cpu.small");
    expect(planTypedCapacity([svc("mixed", 1)], prices, 5).services.get("mixed")?.base).toBe("gpu.large");
  });
  it("names a service it cannot serve, and plans the others", () => {
    const plan = planTypedCapacity([svc("ok", 1), svc("strict", 1, 30)], prices, 5);
    expect(plan.services.has("ok")).toBe(true);
    expect(plan.problems.get("strict")).toMatch(/no configuration can serve it within QoS 30 ms/);
    expect(plan.totals.get("gpu.large")).toBe(plan.services.get("ok")?.counts.get("gpu.large"));
  });
  it("says so when the base instances are gone", () => {
    const plan = planTypedCapacity([svc("a", 1), svc("b", 1), svc("c", 1), svc("d", 1), svc("e", 1)], prices, 50);
    expect(plan.services.size).toBe(4); // four fast instances, one base each at least
    expect([...plan.problems.values()]).toEqual([expect.stringMatching(/no instance type meets/)]);
  });
  it("property: never over the budget nor a type's limit; equal shares split alike", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 10 }), { minLength: 1, maxLength: 4 }),
        fc.double({ min: 1, max: 8, noNaN: true }),
        (shares, budget) => {
          const plan = planTypedCapacity(
            shares.map((s, i) => svc(`s${i}`, s)),
            prices,
            budget,
          );
          expect(plan.costPerHour).toBeLessThanOrEqual(budget + 1e-9);
          for (const t of prices) expect(plan.totals.get(t.name)).toBeLessThanOrEqual(t.maxCount);
          expect(plan.services.size + plan.problems.size).toBe(shares.length);
        },
      ),
      { numRuns: 60 },
    );
  });
});
