import { backend } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { HeartbeatBackendSeconds, InUseTracker, occupies } from "./observers.js";

const S = backend.BackendState;

describe("occupies", () => {
  it("counts provisioning, warm, busy and draining; not cold", () => {
    expect([S.BACKEND_STATE_PROVISIONING, S.BACKEND_STATE_WARM_IDLE, S.BACKEND_STATE_BUSY, S.BACKEND_STATE_DRAINING].map(occupies)).toEqual(
      [true, true, true, true],
    );
    expect([S.BACKEND_STATE_COLD, S.BACKEND_STATE_UNSPECIFIED, undefined, null].map(occupies)).toEqual([false, false, false, false]);
  });
});

describe("HeartbeatBackendSeconds", () => {
  it("integrates each backend's non-cold time per service, provisioning included", () => {
    const m = new HeartbeatBackendSeconds(60_000);
    m.begin(0);
    m.observe("b1", "a", true, false, 0); // provisioning
    m.observe("b1", "a", true, false, 1_000); // warm
    m.observe("b1", "a", false, false, 3_000); // decommissioned: cold
    m.observe("b2", "b", true, false, 500);
    m.observe("b1", "b", true, false, 4_000); // reassigned to b, provisioning
    expect(m.seconds("a", 5_000)).toBeCloseTo(3);
    // b2 from 0.5 s, b1 from 4 s: open intervals count up to now.
    expect(m.seconds("b", 5_000)).toBeCloseTo(4.5 + 1);
    expect(m.occupiedNow("b", 5_000)).toBe(2);
    expect(m.occupiedNow("a", 5_000)).toBe(0);
  });

  it("counts only [begin, finish]: start-up and shutdown are not billed", () => {
    const m = new HeartbeatBackendSeconds(60_000);
    m.observe("b1", "a", true, false, 0);
    m.begin(2_000);
    m.observe("b1", "a", true, false, 3_000);
    m.finish(10_000);
    m.observe("b1", "a", true, false, 12_000);
    expect(m.seconds("a", 20_000)).toBeCloseTo(8);
  });

  it("a draining beat closes the backend's interval; a silent backend is billed until it goes stale", () => {
    const m = new HeartbeatBackendSeconds(2_000);
    m.begin(0);
    m.observe("b1", "a", true, false, 0);
    m.observe("b1", "a", true, true, 1_000);
    m.observe("b2", "a", true, false, 0);
    // b2 never reports again (crashed): 2 s, not 10.
    expect(m.seconds("a", 10_000)).toBeCloseTo(1 + 2);
    expect(m.occupiedNow("a", 10_000)).toBe(0);
  });

  it("a backend without a service is not billed to anyone", () => {
    const m = new HeartbeatBackendSeconds(60_000);
    m.begin(0);
    m.observe("b1", "", true, false, 0);
    m.observe("b1", "", false, false, 5_000);
    expect(m.seconds("", 5_000)).toBe(0);
  });
});

describe("InUseTracker", () => {
  it("is the largest n among the frontends' fresh reports, with its peak while measuring", () => {
    const t = new InUseTracker(2_500);
    t.onReport("a", "f0", 9, 0); // before measuring: not a peak
    t.begin();
    t.onReport("a", "f0", 2, 1_000);
    t.onReport("a", "f1", 4, 1_100);
    expect(t.current("a", 1_200)).toBe(4);
    t.onReport("a", "f0", 3, 4_000);
    // f1's report is stale by now.
    expect(t.current("a", 4_000)).toBe(3);
    expect(t.peakOf("a")).toBe(4);
    t.finish();
    t.onReport("a", "f0", 7, 5_000);
    expect(t.peakOf("a")).toBe(4);
    expect(t.current("b", 0)).toBe(0);
  });
});
