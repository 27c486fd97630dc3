import { describe, expect, it } from "vitest";
import { type OpenLoopResult, openLoop, pooled } from "./open-loop.js";

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

  it("pools windows: counts summed, percentiles over every latency, not averaged", () => {
    const window = (latencies: number[], errors: number): OpenLoopResult => ({
      sent: latencies.length + errors,
      answered: latencies.length,
      errors,
      p50Ms: Number.NaN,
      p99Ms: Number.NaN,
      latencies,
    });
    // 100 fast answers and one window whose slowest 2 % are slow: pooled, the slow ones are 1 % of 200.
    const fast = window(
      Array.from({ length: 100 }, () => 1),
      0,
    );
    const slow = window([...Array.from({ length: 98 }, () => 1), 50, 60], 3);
    const p = pooled([fast, slow]);
    expect(p.sent).toBe(203);
    expect(p.answered).toBe(200);
    expect(p.errors).toBe(3);
    expect(p.latencies).toHaveLength(200);
    expect(p.p50Ms).toBe(1);
    // Nearest rank over 200: the 198th is a fast one; averaging the windows' p99s would have said about 30 ms.
    expect(p.p99Ms).toBe(1);
    expect(pooled([slow]).p99Ms).toBe(50);
    expect(() => pooled([])).toThrow(/no open-loop windows/);
  });
});
