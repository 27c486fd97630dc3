import { describe, expect, it } from "vitest";
import { ROUND_BACKOFF_DEFAULTS, roundBackoffMs } from "./round-backoff.js";

const o = { deltaMs: 5, ...ROUND_BACKOFF_DEFAULTS };

describe("roundBackoffMs", () => {
  it("doubles per round for a young request, up to the cap", () => {
    expect(roundBackoffMs(1, 0, 720, o)).toBe(10);
    expect(roundBackoffMs(3, 100, 720, o)).toBe(40);
    expect(roundBackoffMs(5, 179, 720, o)).toBe(100);
    expect(roundBackoffMs(9, 179, 720, o)).toBe(100);
  });
  it("adds nothing past the urgent fraction of RT_max: old requests probe every delta", () => {
    expect(roundBackoffMs(1, 180, 720, o)).toBe(0);
    expect(roundBackoffMs(9, 700, 720, o)).toBe(0);
  });
  it("never makes an unbounded SLA urgent", () => {
    expect(roundBackoffMs(2, 1e9, Number.POSITIVE_INFINITY, o)).toBe(20);
  });
});
