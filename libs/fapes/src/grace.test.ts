import { describe, expect, it } from "vitest";
import { FAPES_GRACE_MS, reclaimedItem } from "./grace.js";

describe("a reclaimed backend's in-flight item", () => {
  it("is finished when it is expected to end within the grace period", () => {
    expect(reclaimedItem(1_000, 4_000, 2_000, FAPES_GRACE_MS)).toEqual({ action: "finish", deadlineMs: 17_000 });
    // Exactly at the deadline still finishes.
    expect(reclaimedItem(0, 17_000, 2_000, FAPES_GRACE_MS)).toEqual({ action: "finish", deadlineMs: 17_000 });
  });

  it("is abandoned at once when it would end after the grace period", () => {
    expect(reclaimedItem(0, 17_001, 2_000, FAPES_GRACE_MS)).toEqual({ action: "abandon" });
    expect(reclaimedItem(0, 10, 0, 0)).toEqual({ action: "abandon" });
  });

  it("is abandoned when its expected time is unknown", () => {
    expect(reclaimedItem(0, Number.NaN, 0, FAPES_GRACE_MS)).toEqual({ action: "abandon" });
  });
});
