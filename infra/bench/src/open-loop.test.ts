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

  it("opens its window as the first measured request goes out and closes it once the last has ended", async () => {
    const events: string[] = [];
    let calls = 0;
    await openLoop(
      async () => {
        calls += 1;
        events.push(`call ${calls}`);
        await new Promise((res) => setTimeout(res, 30));
        events.push(`done ${calls}`);
      },
      50,
      100,
      100,
      { onStart: () => events.push("start"), onEnd: () => events.push("end") },
    );
    // 5 warm-up sends (0, 20, ... 80 ms), then 5 measured: the window opens before the 6th and closes after every answer.
    expect(events.indexOf("start")).toBe(events.indexOf("call 6") - 1);
    expect(events.filter((e) => e.startsWith("call")).length).toBe(10);
    expect(events.at(-1)).toBe("end");
    expect(events.filter((e) => e === "start" || e === "end")).toEqual(["start", "end"]);
  });

  it("refuses a rate that is not positive", async () => {
    await expect(openLoop(async () => undefined, 0, 0, 10)).rejects.toThrow(/positive/);
  });
});
