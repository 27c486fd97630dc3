import { mdcLatency } from "@infergrid/faro";
import { describe, expect, it } from "vitest";
import { floorsTotal, rateNeed, ServiceFloors, type ServiceLoad, withFloors } from "./floors.js";

const svc = (name: string, over: Partial<ServiceLoad> = {}): ServiceLoad => ({
  name,
  share: 3,
  ratePerS: 0,
  serviceMs: 165,
  sloMs: 720,
  percentile: 99,
  ...over,
});

describe("rateNeed", () => {
  it("is the smallest count whose M/D/c p99 is within the SLO at the observed rate", () => {
    const n = rateNeed(svc("a", { ratePerS: 24 }));
    expect(mdcLatency(99, 0.165, 24, n)).toBeLessThanOrEqual(0.72);
    expect(mdcLatency(99, 0.165, 24, n - 1)).toBeGreaterThan(0.72);
    // At least the offered load (24 x 0.165 = 3.96 backends busy).
    expect(n).toBeGreaterThanOrEqual(4);
  });

  it("is 0 with no load or no rate, and grows with the rate", () => {
    expect(rateNeed(svc("a", { ratePerS: 0 }))).toBe(0);
    expect(rateNeed(svc("a", { ratePerS: undefined }))).toBe(0);
    expect(rateNeed(svc("a", { ratePerS: 50 }))).toBeGreaterThan(rateNeed(svc("a", { ratePerS: 10 })));
  });

  it("refuses a percentile outside (0, 100)", () => {
    expect(() => rateNeed(svc("a", { ratePerS: 1, percentile: 100 }))).toThrow(RangeError);
  });
});

describe("ServiceFloors", () => {
  it("keeps the larger of the share and the rate's need, a rise at once, a fall only after the hold", () => {
    const f = new ServiceFloors(300_000);
    expect(f.observe(0, [svc("a", { share: 3 })]).get("a")).toBe(3);
    // The load doubles before the plan sees it: the floor follows the rate at once.
    const burst = rateNeed(svc("a", { ratePerS: 24 }));
    expect(burst).toBeGreaterThan(3);
    expect(f.observe(2_000, [svc("a", { share: 3, ratePerS: 24 })]).get("a")).toBe(burst);
    // It falls back only once the lower level has held for the window.
    expect(f.observe(200_000, [svc("a", { share: 3, ratePerS: 1 })]).get("a")).toBe(burst);
    expect(f.observe(302_001, [svc("a", { share: 3, ratePerS: 1 })]).get("a")).toBe(3);
  });

  it("leaves out a service with neither a share nor a rate, and forgets one that left", () => {
    const f = new ServiceFloors(60_000);
    const first = f.observe(0, [svc("a", { share: 5 }), svc("b", { share: undefined, ratePerS: undefined })]);
    expect([...first.keys()]).toEqual(["a"]);
    f.observe(1_000, [svc("b", { share: 2 })]);
    // a left: its old peak of 5 is not carried when it comes back.
    expect(f.observe(2_000, [svc("a", { share: 1 })]).get("a")).toBe(1);
    expect(floorsTotal(f.floors)).toBe(1);
  });
});

describe("withFloors", () => {
  const shares = new Map([
    ["a", { share: 3, minWarm: 1 }],
    ["b", { share: 6, minWarm: 2 }],
    ["c", { share: 2, minWarm: 1 }],
  ]);

  it("raises each share to its floor out of the leftover pool and keeps the rest of the share's fields", () => {
    const out = withFloors(shares, new Map([["a", 5]]), 20);
    expect(out.get("a")).toEqual({ share: 5, minWarm: 1 });
    expect(out.get("b")).toEqual({ share: 6, minWarm: 2 });
    expect(shares.get("a")?.share).toBe(3);
  });

  it("never takes from another service's share: a short leftover goes to the largest gaps first", () => {
    // Shares 11 of a pool of 13: 2 to give, a is 3 short, c 1 short: a gets the first, then a and c tie at 1
    // short each and the name decides.
    const out = withFloors(
      shares,
      new Map([
        ["a", 6],
        ["c", 3],
      ]),
      13,
    );
    expect([...out].map(([n, s]) => [n, s.share])).toEqual([
      ["a", 5],
      ["b", 6],
      ["c", 2],
    ]);
    // A pool the shares fill: nothing is raised.
    expect(withFloors(shares, new Map([["a", 9]]), 11).get("a")?.share).toBe(3);
  });
});
