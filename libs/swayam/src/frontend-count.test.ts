import { describe, expect, it } from "vitest";
import { FrontendCountEstimator } from "./frontend-count.js";

describe("FrontendCountEstimator", () => {
  it("is at least 1 with no reports", () => {
    expect(new FrontendCountEstimator().estimate(0)).toBe(1);
  });

  it("takes the max of fresh reports and ignores stale ones (window t_setup = 10 s, inclusive)", () => {
    const e = new FrontendCountEstimator();
    e.observe("b1", 8, 1_000);
    e.observe("b2", 5, 4_000);
    expect(e.estimate(5_000)).toBe(8);
    expect(e.estimate(11_000)).toBe(8); // b1 is exactly 10 s old: still fresh
    expect(e.estimate(11_001)).toBe(5); // b1 stale
    expect(e.estimate(14_001)).toBe(1); // everything stale
  });

  it("keeps the freshest report per backend, even when replies arrive out of order", () => {
    const e = new FrontendCountEstimator({ freshnessMs: 5_000 });
    e.observe("b1", 3, 10_000);
    e.observe("b1", 8, 9_000); // older than what we have: ignored
    expect(e.estimate(10_000)).toBe(3);
    e.observe("b1", 2, 12_000); // a frontend failed: the newer, lower count replaces the old one
    expect(e.estimate(12_000)).toBe(2);
  });

  it("follows a frontend failure once the old reports expire", () => {
    // 3 frontends until t = 20 s, then 2: backends report 3 until their own window forgets the dead frontend.
    const e = new FrontendCountEstimator();
    for (let t = 0; t <= 30_000; t += 1_000) {
      const seen = t < 30_000 ? 3 : 2;
      e.observe("b1", seen, t);
      e.observe("b2", seen, t);
      if (t === 29_000) expect(e.estimate(t)).toBe(3);
    }
    expect(e.estimate(30_000)).toBe(2);
  });

  it("forget and prune drop reports", () => {
    const e = new FrontendCountEstimator();
    e.observe("b1", 4, 0);
    e.observe("b2", 6, 0);
    e.forget("b2");
    expect(e.estimate(0)).toBe(4);
    e.observe("b3", 2, 20_000);
    e.prune(20_000);
    expect(e.size).toBe(1);
    expect(e.estimate(20_000)).toBe(2);
  });
});
