import { describe, expect, it } from "vitest";
import type { InstanceTypeSpec } from "./catalogue.js";
import type { LatencyProfile } from "./instance-types.js";
import { ASSUMED_BATCHES, serviceConfiguration, servingProblem } from "./service-configuration.js";
import { pt } from "./test-support.js";

// A fast type that meets 100 ms for every query, a cheap one only up to batch 100.
const fast: LatencyProfile = { points: [pt(100, 10), pt(1000, 40)] };
const cheap: LatencyProfile = { points: [pt(100, 20), pt(200, 150), pt(1000, 900)] };
const prices: InstanceTypeSpec[] = [
  { name: "cpu.small", pricePerHour: 0.2, maxCount: 10 },
  { name: "gpu.large", pricePerHour: 1, maxCount: 4 },
  { name: "unprofiled", pricePerHour: 0.01, maxCount: 100 },
];
const model = {
  profiles: new Map([
    ["gpu.large", fast],
    ["cpu.small", cheap],
  ]),
  qosMs: 100,
};

describe("serviceConfiguration", () => {
  it("buys a base instance of the type that meets QoS for every query, and cheap ones for the small queries, within the budget", () => {
    const c = serviceConfiguration(model, prices, 2.5);
    expect(c.base).toBe("gpu.large");
    expect([...c.counts.keys()]).toEqual(["cpu.small", "gpu.large"]); // the price list's order, only profiled types
    expect(c.counts.get("gpu.large")).toBeGreaterThanOrEqual(1);
    expect(c.counts.get("cpu.small")).toBeGreaterThanOrEqual(1);
    expect(c.costPerHour).toBeLessThanOrEqual(2.5 + 1e-9);
    expect(c.bound).toBeGreaterThan(0);
    // The same spec, the same choice: the assumed mix is seeded.
    expect(serviceConfiguration(model, prices, 2.5)).toEqual(c);
  });
  it("keeps within what other services left of each type", () => {
    const c = serviceConfiguration(model, prices, 2.5, { limits: new Map([["cpu.small", 1]]) });
    expect(c.counts.get("cpu.small")).toBeLessThanOrEqual(1);
    expect(c.costPerHour).toBeLessThanOrEqual(2.5 + 1e-9);
  });
  it("ranks on the query sizes it is given", () => {
    // Only small queries: the cheap type meets QoS for all of them and is the more cost-effective, so it
    // is the base; with the production mix only the fast type can be.
    const c = serviceConfiguration(model, prices, 2.5, { batches: [10, 20, 50] });
    expect(c.base).toBe("cpu.small");
    expect(c.counts.get("cpu.small")).toBeGreaterThan(c.counts.get("gpu.large") ?? 0);
    expect(serviceConfiguration(model, prices, 2.5).base).toBe("gpu.large");
  });
  it("assumes Kairos's production mix until the service's own sizes are known", () => {
    expect(ASSUMED_BATCHES.length).toBe(10_000);
    expect(Math.max(...ASSUMED_BATCHES)).toBeGreaterThan(900);
    expect(Math.min(...ASSUMED_BATCHES)).toBeGreaterThanOrEqual(1);
  });
});

describe("servingProblem: what registration refuses", () => {
  it("none for a servable model within budget", () => {
    expect(servingProblem(model, prices, 2.5)).toBeUndefined();
  });
  it("a QoS no type meets for the largest queries", () => {
    expect(servingProblem({ ...model, qosMs: 30 }, prices, 2.5)).toMatch(
      /no configuration can serve it within QoS 30 ms: no instance type meets .* gpu.large exceeds it from batch 1000/,
    );
  });
  it("a budget below one base instance", () => {
    expect(servingProblem(model, prices, 0.5)).toMatch(
      /budget 0.5 USD\/h buys no configuration: one gpu.large, the base type, costs 1 USD\/h/,
    );
  });
  it("profiles for types the price list does not have", () => {
    expect(servingProblem({ profiles: new Map([["tpu", fast]]), qosMs: 100 }, prices, 2.5)).toMatch(
      /none of the profiled types \(tpu\) is in the price list \(cpu.small, gpu.large, unprofiled\)/,
    );
  });
  it("a space too large to enumerate", () => {
    const many: InstanceTypeSpec[] = ["a", "b", "c", "d"].map((name) => ({ name, pricePerHour: 0.01, maxCount: 1000 }));
    const profiles = new Map(["a", "b", "c", "d"].map((n) => [n, fast]));
    expect(servingProblem({ profiles, qosMs: 100 }, many, 100)).toMatch(/configurations within 100 USD\/h: more than the 200000/);
  });
});

describe("serviceConfiguration: what others left", () => {
  it("chooses the base among the types left, and says so when none is", () => {
    // No fast instance left: the cheap type cannot serve the large queries, so nothing can.
    expect(() => serviceConfiguration(model, prices, 2.5, { limits: new Map([["gpu.large", 0]]) })).toThrow(/no instance type meets/);
    expect(() =>
      serviceConfiguration(model, prices, 2.5, {
        limits: new Map([
          ["gpu.large", 0],
          ["cpu.small", 0],
        ]),
      }),
    ).toThrow(/no instance of its types \(cpu.small, gpu.large\) is left/);
  });
  it("with atLeastOneBase, a budget below one base instance still buys one", () => {
    const c = serviceConfiguration(model, prices, 0.3, { atLeastOneBase: true });
    expect(c.counts.get("gpu.large")).toBe(1);
    expect(c.costPerHour).toBe(1);
  });
});
