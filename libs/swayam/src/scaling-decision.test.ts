import { describe, expect, it } from "vitest";
import { decideScale, initialScaleState, type ScaleContext, type ScaleState } from "./scaling-decision.js";

// Deterministic 100 ms service, RT_max 130 ms, probes 10 ms: 1 - (0.1 rate / n)^4 >= 0.99, i.e. n >= 0.3162 rate.
// rate 10 -> 4, rate 20 -> 7, rate 30 -> 10.
const sizing: ScaleContext["sizing"] = {
  serviceTime: { kind: "empirical", samplesMs: [100] },
  rtMaxMs: 130,
  slMin: 0.99,
  probeCostMs: 10,
};

function ctx(now: number, state: ScaleState, rate: number, extra: Partial<ScaleContext> = {}): ScaleContext {
  return { now, state, predictedGlobalRate: rate, burstFactor: 1, sizing, listLength: 50, ...extra };
}

/** Runs one decision per 10 s tick and returns n after each tick. */
function run(rateAt: (t: number) => number, untilMs: number, start = initialScaleState(0, 1)) {
  let state = start;
  const trace: { t: number; n: number; reason: string }[] = [];
  for (let t = 0; t <= untilMs; t += 10_000) {
    const { decision, state: next } = decideScale(ctx(t, state, rateAt(t)));
    state = next;
    trace.push({ t, n: decision.n, reason: decision.reason });
  }
  return trace;
}

describe("decideScale", () => {
  it("scales out immediately and warms the new prefix entries", () => {
    const { decision, state } = decideScale(ctx(0, initialScaleState(0, 1), 20));
    expect(decision).toMatchObject({ n: 7, reason: "scale-out", need: 7, warmUp: [1, 2, 3, 4, 5, 6] });
    expect(state.n).toBe(7);
    // The burst factor multiplies the rate: U = 2 at 10 req/s sizes for 20.
    expect(decideScale({ ...ctx(0, initialScaleState(0, 1), 10), burstFactor: 2 }).decision.n).toBe(7);
  });

  it("sizes for the predicted rate plus the learned headroom when U x the rate is less", () => {
    // Idle between bursts: U = 2 at 0.1 req/s sizes for 0.2 (1 backend), a headroom of 19.9 req/s for 20 (7).
    expect(decideScale({ ...ctx(0, initialScaleState(0, 1), 0.1), burstFactor: 2, headroomRate: 19.9 }).decision.n).toBe(7);
    // Busy: U = 2 at 10 req/s already sizes for 20, more than 10 + 5.
    expect(decideScale({ ...ctx(0, initialScaleState(0, 1), 10), burstFactor: 2, headroomRate: 5 }).decision.n).toBe(7);
    expect(decideScale({ ...ctx(0, initialScaleState(0, 1), 0.1), burstFactor: 2 }).decision.n).toBe(1);
  });

  it("does not flap under oscillating load", () => {
    const trace = run((t) => ((t / 10_000) % 2 === 0 ? 20 : 10), 3_600_000);
    expect(trace.every((s) => s.n === 7)).toBe(true);
    expect(trace.filter((s) => s.reason === "scale-out")).toHaveLength(1);
    expect(trace.filter((s) => s.reason === "scale-in")).toHaveLength(0);
  });

  it("scales in once, after the drop has lasted a whole cooldown, to the window's peak need", () => {
    const trace = run((t) => (t < 600_000 ? 20 : 10), 2_400_000);
    const changes = trace.filter((s, i) => i > 0 && s.n !== trace[i - 1]?.n);
    // The last tick needing 7 is at 590 s, so the window [t - 600 s, t] (inclusive) is all 4s from t = 1200 s.
    expect(changes).toEqual([{ t: 1_200_000, n: 4, reason: "scale-in" }]);
    expect(trace.find((s) => s.t === 1_190_000)?.reason).toBe("recent-peak");
    expect(trace.find((s) => s.t === 1_000_000)?.reason).toBe("recent-peak");
  });

  it("scales in at most once per cooldown", () => {
    const rate = (t: number) => (t < 600_000 ? 30 : t < 1_300_000 ? 20 : 10);
    const trace = run(rate, 2_400_000);
    const changes = trace.filter((s, i) => i > 0 && s.n !== trace[i - 1]?.n);
    // 10 -> 7 when the 30s (last at 590 s) leave the window (1200 s); the next scale-in waits 600 s (1800 s)
    // and then for the 7s (last at 1290 s) to leave the window: 1900 s.
    expect(changes).toEqual([
      { t: 1_200_000, n: 7, reason: "scale-in" },
      { t: 1_900_000, n: 4, reason: "scale-in" },
    ]);
    expect(trace.find((s) => s.t === 1_500_000)?.reason).toBe("cooldown");
    expect(trace.find((s) => s.t === 1_800_000)?.reason).toBe("recent-peak");
  });

  it("scales out at once even right after a scale-in", () => {
    const trace = run((t) => (t < 600_000 ? 20 : t <= 1_200_000 ? 10 : 30), 1_300_000);
    expect(trace.find((s) => s.t === 1_200_000)).toEqual({ t: 1_200_000, n: 4, reason: "scale-in" });
    expect(trace.find((s) => s.t === 1_210_000)).toEqual({ t: 1_210_000, n: 10, reason: "scale-out" });
  });

  it("stays within [max(1, minWarm), listLength]", () => {
    const capped = decideScale(ctx(0, initialScaleState(0, 1), 20, { listLength: 5 })).decision;
    expect(capped).toMatchObject({ n: 5, warmUp: [1, 2, 3, 4], need: 5 });
    expect(capped.sizing).toMatchObject({ feasible: false, shortfall: 2 });

    const floor = decideScale(ctx(0, initialScaleState(0, 1), 0, { minWarm: 3 })).decision;
    expect(floor).toMatchObject({ n: 3, reason: "scale-out", need: 1 });
    const idle = run(() => 0, 2_000_000, initialScaleState(0, 8));
    expect(idle.at(-1)?.n).toBe(1);
    let state = initialScaleState(0, 8);
    for (let t = 0; t <= 2_000_000; t += 10_000) state = decideScale(ctx(t, state, 0, { minWarm: 3 })).state;
    expect(state.n).toBe(3);

    const shrunk = decideScale(ctx(0, initialScaleState(0, 7), 20, { listLength: 4 })).decision;
    expect(shrunk).toMatchObject({ n: 4, reason: "list-shrunk", warmUp: [] });
    expect(decideScale(ctx(0, initialScaleState(0, 1), 20, { listLength: 0 })).decision.n).toBe(0);
  });

  it("warms usable entries by rank when the list has failures", () => {
    const failed = new Set([2]);
    const d = decideScale(ctx(0, initialScaleState(0, 1), 10, { usable: (i) => !failed.has(i) })).decision;
    expect(d.n).toBe(4);
    expect(d.warmUp).toEqual([1, 3, 4]);
  });

  it("is a pure function of its context", () => {
    const state = Object.freeze(initialScaleState(0, 3));
    const c = ctx(700_000, state, 10);
    const a = decideScale(c);
    const b = decideScale(c);
    expect(a).toEqual(b);
    expect(state).toEqual(initialScaleState(0, 3));
  });
});
