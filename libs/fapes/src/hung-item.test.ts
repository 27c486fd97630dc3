import { describe, expect, it } from "vitest";
import { HUNG_ITEM_FACTOR, HUNG_ITEM_FLOOR_MS, hungItemLimitMs } from "./hung-item.js";

describe("hungItemLimitMs", () => {
  it("is a multiple of the job's item time, never below the floor", () => {
    expect(hungItemLimitMs(10_000)).toBe(HUNG_ITEM_FACTOR * 10_000);
    expect(hungItemLimitMs(100)).toBe(HUNG_ITEM_FLOOR_MS);
    expect(hungItemLimitMs(HUNG_ITEM_FLOOR_MS / HUNG_ITEM_FACTOR + 1)).toBeGreaterThan(HUNG_ITEM_FLOOR_MS);
  });

  it("falls back to the floor when the item time is unknown or nonsense", () => {
    for (const t of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) expect(hungItemLimitMs(t)).toBe(HUNG_ITEM_FLOOR_MS);
  });
});
