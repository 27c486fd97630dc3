import { describe, expect, it } from "vitest";
import { openLoop } from "./open-loop.js";

describe("openLoop", () => {
  it("sends at the rate whatever the answers take, and measures only after the warm-up", async () => {
    let calls = 0;
    const r = await openLoop(
      async () => {
        calls += 1;
        const mine = calls;
        // Slower than the gap: a closed loop of one would halve the rate; an open loop keeps it.
        await new Promise((res) => setTimeout(res, 40));
        if (mine % 5 === 0) throw new Error("x");
      },
      50,
      200,
      400,
    );
    expect(calls).toBe(30);
    expect(r.sent).toBe(20);
    expect(r.answered + r.errors).toBe(r.sent);
    expect(r.errors).toBe(4);
    expect(r.p50Ms).toBeGreaterThanOrEqual(39);
  });

  it("refuses a rate that is not positive", async () => {
    await expect(openLoop(async () => undefined, 0, 0, 10)).rejects.toThrow(/positive/);
  });
});
