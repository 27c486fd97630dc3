import type { ServiceForecast } from "@infergrid/faro";
import { describe, expect, it } from "vitest";
import { ShareController, type ShareControllerOptions, type ShareService } from "./share-controller.js";
import { withLeftover } from "./share-planning.js";

const options: ShareControllerOptions = {
  objective: { kind: "fairSum" },
  solvePeriodMs: 300_000,
  reactiveTicks: 3,
  plan: { kind: "quantile", q: 0.5 },
  coldStartMs: 0,
  stepMs: 60_000,
};
const svc = (name: string, initialShare = 2): ShareService => ({
  name,
  serviceTimeMs: 100,
  sloMs: 500,
  percentile: 99,
  minShare: 1,
  maxShare: 0,
  initialShare,
});
const rate = (r: number): ServiceForecast => ({ kind: "quantiles", levels: [0.5], values: [[r]] });

describe("ShareController", () => {
  it("holds services without a signal at their initial share, and plans one as soon as its signal arrives", () => {
    const c = new ShareController(options);
    const first = c.tick(
      0,
      [svc("a", 3), svc("b", 2)],
      [
        { forecast: undefined, violating: false },
        { forecast: undefined, violating: false },
      ],
      10,
    );
    expect(first.ok && [...first.shares.values()].map((s) => s.share)).toEqual([3, 2]);
    // Ten seconds later, long before the 5-minute period: a's first forecast is planned at once.
    const second = c.tick(
      10_000,
      [svc("a", 3), svc("b", 2)],
      [
        { forecast: rate(40), violating: false },
        { forecast: undefined, violating: false },
      ],
      10,
    );
    expect(second.ok && second.decision.kind).toBe("solve");
    // 40 req/s x 100 ms = 4 busy: at least 5 for p99 under 500 ms; b stays held at 2.
    expect(c.shares.get("a")?.share).toBeGreaterThanOrEqual(5);
    expect(c.shares.get("b")?.share).toBe(2);
    expect(c.shares.get("a")?.plannedRatePerS).toBe(40);
    // No change, no new solve until the period.
    const third = c.tick(
      20_000,
      [svc("a", 3), svc("b", 2)],
      [
        { forecast: rate(40), violating: false },
        { forecast: undefined, violating: false },
      ],
      10,
    );
    expect(third.ok && third.decision.kind).toBe("hold");
  });

  it("re-plans at once when a service joins, and reports what cannot be planned", () => {
    const c = new ShareController(options);
    c.tick(0, [svc("a")], [{ forecast: rate(10), violating: false }], 6);
    const joined = c.tick(
      1000,
      [svc("a"), svc("b")],
      [
        { forecast: rate(10), violating: false },
        { forecast: rate(10), violating: false },
      ],
      6,
    );
    expect(joined.ok && joined.decision.kind).toBe("solve");
    const tooSmall = c.tick(
      2000,
      [
        { ...svc("a"), minShare: 4 },
        { ...svc("b"), minShare: 4 },
      ],
      [
        { forecast: rate(1), violating: false },
        { forecast: rate(1), violating: false },
      ],
      6,
    );
    expect(tooSmall.ok).toBe(false);
    expect(!tooSmall.ok && tooSmall.error).toMatch(/exceed the capacity/);
    expect(c.shares.size).toBe(0);
  });
});

describe("withLeftover", () => {
  it("hands the leftover pool out in proportion to the shares, within caps", () => {
    expect(withLeftover([4, 2], 12, [Infinity, Infinity])).toEqual([8, 4]);
    expect(withLeftover([4, 2], 12, [5, Infinity])).toEqual([5, 7]);
    // 1 left for two equal shares: one of them gets it, the total is the pool.
    expect(withLeftover([3, 3], 7, [Infinity, Infinity]).reduce((x, y) => x + y, 0)).toBe(7);
    // Shares beyond the pool (the pool shrank): nothing added, nothing taken here.
    expect(withLeftover([5, 5], 8, [Infinity, Infinity])).toEqual([5, 5]);
    expect(withLeftover([2, 2], 10, [2, 2])).toEqual([2, 2]);
  });
});
