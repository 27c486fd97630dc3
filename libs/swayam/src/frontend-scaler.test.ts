import { seededRandom } from "@infergrid/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BURST_HEADROOM_DEFAULTS } from "./burst-headroom.js";
import { FrontendScaler, learnedHeadroomFor, mergeAscending, sortSmall } from "./frontend-scaler.js";

const sla = { rtMaxMs: 500, slMin: 0.99, burstFactor: 1 };
const prior = { shape: 0.0001, loc: 0, scale: 100 }; // about 100 ms, nearly deterministic

function feed(s: FrontendScaler, from: number, to: number, perSec: number): void {
  for (let t = from; t < to; t += 1000 / perSec) s.recordArrival(t);
}

describe("FrontendScaler", () => {
  it("multiplies the local rate by n_F from backend gossip", () => {
    const a = new FrontendScaler({ probeCostMs: 2, rateWindowMs: 10_000, rateHistoryMs: 50_000, tSetupMs: 10_000 });
    const b = new FrontendScaler({ probeCostMs: 2, rateWindowMs: 10_000, rateHistoryMs: 50_000, tSetupMs: 10_000 });
    feed(a, 0, 60_000, 20);
    feed(b, 0, 60_000, 20);
    b.observeReply("b1", 3, 100, 59_000);
    const one = a.decide(60_000, { sla, listLength: 50, minWarm: 1, serviceTimePrior: prior });
    const three = b.decide(60_000, { sla, listLength: 50, minWarm: 1, serviceTimePrior: prior });
    expect(one.frontendsEstimate).toBe(1);
    expect(three.frontendsEstimate).toBe(3);
    expect(three.globalRatePerSec).toBeCloseTo(3 * one.globalRatePerSec, 6);
    // 20 req/s x 100 ms = 2 busy backends; 60 req/s = 6: n grows with the global rate.
    expect(one.n).toBeGreaterThanOrEqual(3);
    expect(three.n).toBeGreaterThan(one.n * 2);
  });

  it("with fast reaction and learned headroom, follows a burst within a decision and keeps warm what bursts needed", () => {
    const options = { probeCostMs: 2, rateWindowMs: 100_000, rateHistoryMs: 500_000, tSetupMs: 10_000 };
    const swayam = new FrontendScaler(options);
    const ours = new FrontendScaler({ ...options, learnedHeadroom: true });
    expect(learnedHeadroomFor(10_000).burst).toEqual(BURST_HEADROOM_DEFAULTS);
    const u2 = { ...sla, burstFactor: 2 };
    const decide = (t: number) => [swayam, ours].map((s) => s.decide(t, { sla: u2, listLength: 50, minWarm: 1, serviceTimePrior: prior }));
    // A request every 10 s for 10 minutes (past the first rate history, the service's onset), then 30 req/s.
    for (const s of [swayam, ours]) {
      feed(s, 0, 600_000, 0.1);
      feed(s, 600_000, 610_000, 30);
    }
    for (let t = 10_000; t < 600_000; t += 10_000) decide(t);
    const [paper, fast] = decide(610_000);
    // Swayam's 100 s window has seen 10 s of the burst (about 3 req/s); the fast path sees about 30 less its noise.
    expect(paper?.n).toBeLessThan(4);
    expect(fast?.n).toBeGreaterThanOrEqual(6);
    // The burst ends; once its peak has left the scale-in window, the learned headroom keeps warm what it needed
    // (Swayam's n falls back to 1) until the burst is six hours old, and n follows one scale-in window later.
    for (const s of [swayam, ours]) feed(s, 610_000, 23_000_000, 0.1);
    let last = decide(620_000);
    for (let t = 630_000; t <= 1_800_000; t += 10_000) last = decide(t);
    expect(last[0]?.n).toBe(1);
    expect(last[1]?.headroomRatePerSec).toBeGreaterThan(20);
    expect(last[1]?.n).toBeGreaterThanOrEqual(4);
    for (let t = 1_810_000; t <= 22_000_000; t += 10_000) last = decide(t);
    expect(last[1]?.headroomRatePerSec).toBeGreaterThan(20);
    for (let t = 22_010_000; t <= 23_000_000; t += 10_000) last = decide(t);
    expect(last[1]?.headroomRatePerSec).toBe(0);
    expect(last[1]?.n).toBe(1);
  });

  it("warms the new entries on scale-out and keeps n within the list", () => {
    const s = new FrontendScaler({ probeCostMs: 2, rateWindowMs: 10_000, rateHistoryMs: 50_000 });
    feed(s, 0, 30_000, 100);
    const out = s.decide(30_000, { sla, listLength: 6, minWarm: 1, serviceTimePrior: prior });
    expect(out.n).toBe(6);
    expect(out.sizing.feasible).toBe(false);
    expect(out.warmUp).toEqual([1, 2, 3, 4, 5]);
  });

  it("switches from the prior to the reported service times", () => {
    const s = new FrontendScaler({ probeCostMs: 2, minEmpiricalSamples: 20 });
    expect(s.serviceTime(prior).kind).toBe("lognormal");
    for (let i = 0; i < 20; i++) s.observeReply("b", 1, 50 + i, i);
    const st = s.serviceTime(prior);
    expect(st.kind).toBe("empirical");
    expect(st.kind === "empirical" && st.samplesMs.length).toBe(20);
  });

  it("hands the model the same samples a full sort gives, renewal after renewal, around the ring", () => {
    const s = new FrontendScaler({ probeCostMs: 2, maxSamples: 50, minEmpiricalSamples: 20 });
    const random = seededRandom(5);
    const window: number[] = [];
    let renewals = 0;
    let previous: unknown;
    for (let i = 0; i < 2_000; i++) {
      // Few distinct values, so equal samples come and go (the merge must remove exactly one of them).
      const x = 50 + Math.floor(random.uniform() * 8) * 10;
      s.observeReply("b", 1, x, i);
      window.push(x);
      if (window.length > 50) window.shift();
      // Irregular decisions, sometimes far apart (more new samples than half the buffer: a full sort again).
      if (i < 1_000 ? i % 17 === 0 : i % 113 === 0) {
        const st = s.serviceTime();
        // A renewed snapshot (every 10 new samples here) holds exactly the samples of that moment.
        if (st !== previous && window.length >= 20) {
          renewals++;
          expect(st.kind === "empirical" && Array.from(st.samplesMs)).toEqual(Array.from(Float64Array.from(window).sort()));
        }
        previous = st;
      }
    }
    expect(renewals).toBeGreaterThan(20);
  });
});

describe("sortSmall", () => {
  it("orders as the built-in typed-array sort does, below and above the insertion-sort size", () => {
    // Few distinct values (ties) and many, short arrays and ones past the insertion-sort bound.
    const value = fc.oneof(
      fc.integer({ min: 0, max: 5 }).map((k) => 70 + k),
      fc.double({ min: 0, max: 1e4, noNaN: true }),
    );
    fc.assert(
      fc.property(fc.array(value, { maxLength: 150 }), (xs) => {
        const expected = Float64Array.from(xs).sort();
        const got = sortSmall(Float64Array.from(xs));
        expect(Array.from(got)).toEqual(Array.from(expected));
      }),
    );
  });

  it("sorts a subarray in place", () => {
    const buffer = Float64Array.from([9, 3, 1, 2, 0]);
    sortSmall(buffer.subarray(0, 3));
    expect(Array.from(buffer)).toEqual([1, 3, 9, 2, 0]);
  });
});

describe("mergeAscending", () => {
  const f64 = (xs: number[]) => Float64Array.from(xs);
  it("takes removed values out and puts added ones in, in order", () => {
    const base = f64([1, 2, 2, 3, 5]);
    expect(Array.from(mergeAscending(base, f64([0, 2, 4]), f64([2, 5])) ?? [])).toEqual([0, 1, 2, 2, 3, 4]);
    expect(Array.from(mergeAscending(base, f64([]), f64([])) ?? [])).toEqual([1, 2, 2, 3, 5]);
  });

  it("gives up when a removed value is not in the base", () => {
    expect(mergeAscending(f64([1, 3]), f64([]), f64([2]))).toBeUndefined();
    expect(mergeAscending(f64([1, 3]), f64([]), f64([4]))).toBeUndefined();
  });

  it("equals a full sort of base minus removed plus added", () => {
    // Few distinct values, so equal samples are common (exactly one copy must go per removal).
    const value = fc.integer({ min: 0, max: 12 }).map((k) => 50 + k * 2.5);
    fc.assert(
      fc.property(
        fc.array(value, { maxLength: 60 }),
        fc.array(value, { maxLength: 30 }),
        fc.array(fc.nat(), { maxLength: 30 }),
        (base, added, picks) => {
          // Remove distinct positions of the base.
          const positions = [...new Set(picks.map((p) => p % Math.max(1, base.length)))].filter((p) => p < base.length);
          const removed = positions.map((p) => base[p] as number);
          const kept = base.filter((_, i) => !positions.includes(i));
          const sorted = (xs: number[]) => f64(xs).sort();
          const merged = mergeAscending(sorted(base), sorted(added), sorted(removed));
          expect(merged && Array.from(merged)).toEqual(Array.from(sorted([...kept, ...added])));
        },
      ),
    );
  });
});

describe("FrontendScaler: a list that mixes instance types", () => {
  const make = () => {
    const s = new FrontendScaler({ probeCostMs: 2, rateWindowMs: 10_000, rateHistoryMs: 50_000, tSetupMs: 10_000 });
    feed(s, 0, 60_000, 100);
    // 200 replies: "fast" computes its requests in 5 ms, "slow" in 20 ms (pooled mean 12.5 ms).
    for (let i = 0; i < 100; i++) {
      s.observeReply("f", 1, 5, 59_000, "fast");
      s.observeReply("s", 1, 20, 59_000, "slow");
    }
    return s;
  };
  const types = (layout: string[]) => (i: number) => layout[i];
  const fastFirst = ["fast", "fast", ...Array(18).fill("slow")];
  const slowFirst = [...Array(18).fill("slow"), "fast", "fast"];

  it("weighs each usable entry by its type's speed on what it serves, in prefix order", () => {
    const s = make();
    const w = s.entryWeights(s.serviceTime(), 4, types(["fast", "slow", "fast", "gpu"]), (i) => i !== 2);
    expect(w).toEqual([2.5, 0.625, 1]); // entry 2 unusable; a type never measured weighs 1
    expect(s.entryWeights(s.serviceTime(), 3, types(["slow", "slow", "slow"]))).toBeUndefined(); // one type: alike
  });
  it("sizes a prefix of fast entries smaller than one of slow entries, and the unweighted model in between", () => {
    const sla2 = { rtMaxMs: 100, slMin: 0.99, burstFactor: 1 };
    const n = (layout?: string[]) =>
      make().decide(60_000, { sla: sla2, listLength: 20, minWarm: 1, ...(layout ? { entryType: types(layout) } : {}) }).n;
    // 100 req/s x 12.5 ms = 1.25 average entries busy.
    expect(n(fastFirst)).toBeLessThan(n(slowFirst));
    expect(n(fastFirst)).toBeLessThanOrEqual(n());
    expect(n(slowFirst)).toBeGreaterThanOrEqual(n());
  });
});
