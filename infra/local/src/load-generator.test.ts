import { makeTrace } from "@infergrid/workload";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type InFlight, LoadGenerator, type Outcome } from "./load-generator.js";
import { ServiceStats } from "./stats.js";

interface Pending {
  service: string;
  at: number;
  settle(o: Outcome): void;
  cancelled: boolean;
}

function harness(arrivalTimes: Array<[number, string]>, durationMs: number, maxInFlight = 100) {
  const pending: Pending[] = [];
  const stats = new Map([
    ["a", new ServiceStats("a", 100, 0.99)],
    ["b", new ServiceStats("b", 100, 0.99)],
  ]);
  const send = (service: string): InFlight => {
    let settle: (o: Outcome) => void = () => {};
    const result = new Promise<Outcome>((r) => {
      settle = r;
    });
    const p: Pending = { service, at: Date.now(), settle, cancelled: false };
    pending.push(p);
    return {
      result,
      cancel: () => {
        p.cancelled = true;
        settle({ ok: false, code: "CANCELLED" });
      },
    };
  };
  const gen = new LoadGenerator({
    arrivals: arrivalTimes.map(([atMs, job]) => ({ atMs, job }))[Symbol.iterator](),
    durationMs,
    send,
    stats,
    maxInFlight,
    now: () => Date.now(),
  });
  return { gen, pending, stats };
}

describe("LoadGenerator", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("sends at the scheduled times whether or not earlier requests were answered (open loop)", async () => {
    const { gen, pending, stats } = harness(
      [
        [0, "a"],
        [100, "b"],
        [250, "a"],
        [900, "a"],
      ],
      10_000,
    );
    gen.start();
    expect(pending.map((p) => p.service)).toEqual(["a"]);
    await vi.advanceTimersByTimeAsync(300);
    expect(pending.map((p) => [p.service, p.at - 1_000_000])).toEqual([
      ["a", 0],
      ["b", 100],
      ["a", 250],
    ]);
    expect(gen.inFlightCount).toBe(3);
    pending[1]?.settle({ ok: true });
    pending[0]?.settle({ ok: false, code: "UNAVAILABLE" });
    await vi.advanceTimersByTimeAsync(700);
    expect(pending).toHaveLength(4);
    let finished = false;
    void gen.finished.then(() => {
      finished = true;
    });
    await vi.advanceTimersByTimeAsync(1);
    expect(finished).toBe(true);
    for (const p of pending.slice(2)) p.settle({ ok: true });
    expect(await gen.drain(1_000)).toBe(true);
    expect(stats.get("a")?.totals()).toMatchObject({ sent: 3, answered: 2, failed: 1, outstanding: 0 });
    expect(stats.get("b")?.totals()).toMatchObject({ sent: 1, answered: 1, failed: 0, outstanding: 0 });
    // Latency is measured from the send: b was answered 200 ms after it went out.
    expect(stats.get("b")?.totals().p50Ms).toBeCloseTo(200, -1);
  });

  it("counts arrivals beyond the in-flight bound as not sent", async () => {
    const { gen, pending, stats } = harness(
      [
        [0, "a"],
        [1, "a"],
        [2, "a"],
        [3, "b"],
      ],
      10_000,
      2,
    );
    gen.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(pending).toHaveLength(2);
    expect(stats.get("a")?.totals()).toMatchObject({ sent: 2, notSent: 1 });
    expect(stats.get("b")?.totals()).toMatchObject({ sent: 0, notSent: 1 });
  });

  it("stops at --duration even if the schedule goes on, and waits through a quiet stretch until then", async () => {
    const { gen, pending } = harness(
      [
        [0, "a"],
        [5_000, "a"],
      ],
      2_000,
    );
    let finished = false;
    void gen.finished.then(() => {
      finished = true;
    });
    gen.start();
    await vi.advanceTimersByTimeAsync(1_900);
    expect(finished).toBe(false);
    await vi.advanceTimersByTimeAsync(200);
    expect(finished).toBe(true);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(pending).toHaveLength(1);
  });

  it("stopSending ends the run early; cancelInFlight ends every outstanding request as a failure, none lost", async () => {
    const { gen, pending, stats } = harness(
      [
        [0, "a"],
        [10, "b"],
        [20, "a"],
      ],
      10_000,
    );
    gen.start();
    await vi.advanceTimersByTimeAsync(15);
    gen.stopSending();
    await vi.advanceTimersByTimeAsync(100);
    expect(pending).toHaveLength(2);
    const waited = gen.drain(50);
    await vi.advanceTimersByTimeAsync(100);
    expect(await waited).toBe(false);
    gen.cancelInFlight();
    expect(await gen.drain(50)).toBe(true);
    expect(pending.every((p) => p.cancelled)).toBe(true);
    expect(stats.get("a")?.totals()).toMatchObject({ sent: 1, failed: 1, failedByCode: { CANCELLED: 1 }, outstanding: 0 });
  });

  it("replays a real arrival schedule: every arrival becomes exactly one send", async () => {
    const { arrivalSchedule } = await import("@infergrid/workload");
    const { seededRandom } = await import("@infergrid/core");
    const trace = makeTrace(
      ["a", "b"],
      new Map([
        ["a", Float64Array.from([30, 60])],
        ["b", Float64Array.from([10, 0])],
      ]),
      2,
      "t",
    );
    const expected = [...arrivalSchedule(trace, { compression: 60, random: seededRandom(3) })].length;
    const sent: string[] = [];
    const real = new LoadGenerator({
      arrivals: arrivalSchedule(trace, { compression: 60, random: seededRandom(3) }),
      durationMs: 2_000,
      send: (s) => {
        sent.push(s);
        return { result: Promise.resolve({ ok: true }), cancel: () => {} };
      },
      stats: new Map([
        ["a", new ServiceStats("a", 100, 0.99)],
        ["b", new ServiceStats("b", 100, 0.99)],
      ]),
      maxInFlight: 1_000,
      now: () => Date.now(),
    });
    real.start();
    await vi.advanceTimersByTimeAsync(2_100);
    expect(sent).toHaveLength(expected);
    expect(expected).toBeGreaterThan(60);
  });
});
