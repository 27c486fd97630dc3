import { describe, expect, it } from "vitest";
import { instanceTypeFilter, summarizeInstanceTypes } from "./instance-types.js";
import { planStaticAllocation, type ServiceDemand } from "./static.js";

const prices = [
  { name: "g4dn.xlarge", pricePerHour: 0.526, maxCount: 8 },
  { name: "r5n.large", pricePerHour: 0.149, maxCount: 20 },
  { name: "c5.xlarge", pricePerHour: 0.17, maxCount: 4 },
];

describe("summarizeInstanceTypes", () => {
  it("counts live and assigned backends per type, prices them and sums the cost", () => {
    const s = summarizeInstanceTypes(
      [
        { instanceType: "r5n.large", assigned: true },
        { instanceType: "g4dn.xlarge", assigned: false },
        { instanceType: "r5n.large", assigned: false },
        { instanceType: "g4dn.xlarge", assigned: true },
        { instanceType: "r5n.large", assigned: true },
      ],
      prices,
    );
    expect(s.types).toEqual([
      { instanceType: "g4dn.xlarge", backends: 2, assigned: 1, pricePerHour: 0.526, costPerHour: 1.052 },
      { instanceType: "r5n.large", backends: 3, assigned: 2, pricePerHour: 0.149, costPerHour: 0.149 * 3 },
    ]);
    expect(s.costPerHour).toBeCloseTo(1.052 + 0.447, 12);
  });

  it("counts a type the price list does not name, and a backend reporting none, at price 0; leaves out types with no backend", () => {
    const s = summarizeInstanceTypes(
      [
        { instanceType: "m5.large", assigned: true },
        { instanceType: "", assigned: false },
        { instanceType: "c5.xlarge", assigned: false },
      ],
      prices,
    );
    expect(s.types.map((t) => [t.instanceType, t.backends, t.pricePerHour, t.costPerHour])).toEqual([
      ["", 1, 0, 0],
      ["c5.xlarge", 1, 0.17, 0.17],
      ["m5.large", 1, 0, 0],
    ]);
    expect(s.costPerHour).toBeCloseTo(0.17, 12);
    expect(summarizeInstanceTypes([], prices)).toEqual({ types: [], costPerHour: 0 });
  });
});

describe("instanceTypeFilter", () => {
  const types = new Map([
    ["g-1", "g4dn.xlarge"],
    ["r-1", "r5n.large"],
    ["x-1", ""],
  ]);
  const typeOf = (id: string) => types.get(id);

  it("is undefined (any backend) for a model without per-type profiles", () => {
    expect(instanceTypeFilter([], typeOf)).toBeUndefined();
  });

  it("accepts only backends of a profiled type; an unknown backend or one with no type is refused", () => {
    const accepts = instanceTypeFilter(["g4dn.xlarge"], typeOf);
    expect(["g-1", "r-1", "x-1", "gone"].filter((id) => accepts?.(id))).toEqual(["g-1"]);
  });
});

describe("planStaticAllocation with per-service instance types", () => {
  const typeOf = (id: string) => (id.startsWith("g") ? "g4dn.xlarge" : "r5n.large");
  const svc = (name: string, currentList: string[], profiled: string[] = [], over: Partial<ServiceDemand> = {}): ServiceDemand => {
    const accepts = instanceTypeFilter(profiled, typeOf);
    return { name, minBackends: 1, maxBackends: 0, initialBackends: 1, currentList, ...(accepts ? { accepts } : {}), ...over };
  };

  it("gives a profiled service only backends of its types, and the unrestricted one leaves those to it", () => {
    const d = planStaticAllocation({
      services: [svc("gpu", [], ["g4dn.xlarge"]), svc("any", [])],
      freeBackends: ["g0", "g1", "r0", "r1", "r2", "r3"],
      poolSize: 6,
    });
    // "any" picks first (name order) but does not take the g4dn backends gpu is short of; gpu's equal
    // share (3) is capped at the two there are; "any" keeps its own equal share (3), so r3 stays free.
    expect(d.lists.get("gpu")).toEqual(["g0", "g1"]);
    expect(d.lists.get("any")).toEqual(["r0", "r1", "r2"]);
    expect(d.free).toEqual(["r3"]);
  });

  it("leaves a backend free rather than give it to a service that cannot use it", () => {
    const d = planStaticAllocation({
      services: [svc("cpu", [], ["r5n.large"], { maxBackends: 5 })],
      freeBackends: ["g0", "r0", "r1"],
      poolSize: 3,
    });
    expect(d.lists.get("cpu")).toEqual(["r0", "r1"]);
    expect(d.free).toEqual(["g0"]);
  });

  it("reclaims from another list only a tail entry of an accepted type", () => {
    const d = planStaticAllocation({
      services: [svc("any", ["g0", "r0", "g1", "r1"]), svc("gpu", [], ["g4dn.xlarge"])],
      freeBackends: [],
      poolSize: 4,
    });
    // any's tail is r1 (not accepted by gpu): nothing moves, where an unrestricted gpu would take r1 and g1.
    expect(d.lists.get("gpu")).toEqual([]);
    expect(d.lists.get("any")).toEqual(["g0", "r0", "g1", "r1"]);
    const d2 = planStaticAllocation({
      services: [svc("any", ["r0", "r1", "g0", "g1"]), svc("gpu", [], ["g4dn.xlarge"])],
      freeBackends: [],
      poolSize: 4,
    });
    expect(d2.lists.get("gpu")).toEqual(["g1", "g0"]);
    expect(d2.lists.get("any")).toEqual(["r0", "r1"]);
  });

  it("without accepts, plans exactly as before", () => {
    const input = { services: [svc("a", ["r0"]), svc("b", [])], freeBackends: ["g0", "g1", "r1"], poolSize: 4 };
    expect(planStaticAllocation(input).lists).toEqual(
      new Map([
        ["a", ["r0", "g0"]],
        ["b", ["g1", "r1"]],
      ]),
    );
  });
});
