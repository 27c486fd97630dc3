import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RateHistory } from "./rate-history.js";

/** Records, at each bucket start, exactly the arrivals of rate(t) = a + b t (t in s) over that bucket. */
function feedRamp(h: RateHistory, a: number, b: number, untilMs: number): void {
  const bucketS = h.bucketMs / 1000;
  for (let start = 0; start * 1000 < untilMs; start += bucketS) {
    const end = start + bucketS;
    h.recordArrival(start * 1000, a * bucketS + (b * (end * end - start * start)) / 2);
  }
}

describe("RateHistory", () => {
  it("predicts a linear ramp exactly, t_setup ahead (sliding 100 s windows over 500 s)", () => {
    const h = new RateHistory({ origin: 0 });
    feedRamp(h, 5, 0.1, 600_000);
    // now = 603 s: the instantaneous rate at 613 s is 5 + 61.3 = 66.3 req/s.
    expect(h.predictRate(603_000, 10_000)).toBeCloseTo(66.3, 9);
    expect(h.predictRate(603_000, 100_000)).toBeCloseTo(5 + 0.1 * 703, 9);
  });

  it("predicts a ramp exactly with the paper's disjoint windows too", () => {
    const h = new RateHistory({ origin: 0, bucketMs: 100_000 });
    feedRamp(h, 2, 0.05, 1_000_000);
    expect(h.predictRate(1_000_000, 10_000)).toBeCloseTo(2 + 0.05 * 1010, 9);
  });

  it("only uses the last 500 s: an old level does not bend the trend", () => {
    const h = new RateHistory({ origin: 0 });
    for (let t = 0; t < 1_000_000; t += 100) h.recordArrival(t, t < 400_000 ? 5 : 1); // 50/s then 10/s
    expect(h.predictRate(1_000_000, 10_000)).toBeCloseTo(10, 9);
    expect(h.localRate(1_000_000)).toBeCloseTo(10, 9);
  });

  it("localRate is the rate over the last window, or since the origin before the window fills", () => {
    const h = new RateHistory({ origin: 0 });
    for (let t = 0; t < 200_000; t += 100) h.recordArrival(t); // 10 req/s
    expect(h.localRate(200_000)).toBeCloseTo(10, 9);
    const young = new RateHistory({ origin: 0 });
    for (let t = 0; t < 40_000; t += 250) young.recordArrival(t); // 4 req/s for 40 s
    expect(young.localRate(40_000)).toBeCloseTo(4, 9);
    expect(new RateHistory().localRate(5_000)).toBe(0);
  });

  it("recentRate follows a burst within a bucket, less its noise allowance", () => {
    const h = new RateHistory({ origin: 0 });
    for (let t = 0; t < 100_000; t += 10_000) h.recordArrival(t); // 0.1 req/s
    for (let t = 100_000; t < 105_000; t += 100) h.recordArrival(t); // then 10 req/s, 50 in 5 s
    // Over the last 10 s at 105 s: buckets [90 s, 100 s) (1 request) and [100 s, 105 s) (50), over 15 s.
    expect(h.recentRate(105_000, 10_000)).toBeCloseTo(51 / 15, 9);
    expect(h.recentRate(105_000, 10_000, 2)).toBeCloseTo((51 - 2 * Math.sqrt(51)) / 15, 9);
    // The window's rate has hardly moved yet.
    expect(h.localRate(105_000)).toBeLessThan(1);
    expect(new RateHistory().recentRate(5_000, 10_000)).toBe(0);
    // A quiet stream's chance pair of requests is within its noise allowance.
    const quiet = new RateHistory({ origin: 0 });
    quiet.recordArrival(1_000, 2);
    expect(quiet.recentRate(10_000, 10_000, 2)).toBe(0);
  });

  it("falls back to the local rate with too little history", () => {
    const h = new RateHistory({ origin: 0 });
    // 115 s of history holds two complete 100 s windows (ending at 100 s and 110 s): fewer than 3.
    for (let t = 0; t < 115_000; t += 50) h.recordArrival(t, t < 60_000 ? 1 : 3);
    expect(h.predictRate(115_000, 10_000)).toBeCloseTo(h.localRate(115_000), 12);
    // At 120 s there are three, and the prediction follows the rising trend above the local rate.
    for (let t = 115_000; t < 120_000; t += 50) h.recordArrival(t, 3);
    expect(h.predictRate(120_000, 10_000)).toBeGreaterThan(h.localRate(120_000));
  });

  it("never predicts a negative rate", () => {
    const h = new RateHistory({ origin: 0 });
    feedRamp(h, 60, -0.1, 550_000); // rate reaches 5 at 550 s, falling 1/s every 10 s
    expect(h.predictRate(550_000, 100_000)).toBe(0);
    expect(h.predictRate(550_000, 0)).toBeGreaterThan(0);
  });

  it("defaults the origin to the first arrival and drops arrivals older than the history", () => {
    const h = new RateHistory();
    h.recordArrival(1_000_000, 10);
    h.recordArrival(1_000_000 - 600_000, 1_000); // beyond the ring: must not land in a live bucket
    expect(h.localRate(1_005_000)).toBeCloseTo(10 / 10, 9);
    expect(() => new RateHistory({ windowMs: 100_000, bucketMs: 30_000 })).toThrow(RangeError);
  });

  it("predicts exactly what the regression over the windows' counts gives, wherever the ring has wrapped", () => {
    // The reference reads every bucket's count from a plain map and sums in the same order, so the two agree to
    // the last bit (the prediction steps its ring slots along; a slip of one slot would change the sums).
    fc.assert(
      fc.property(
        fc.constantFrom(10_000, 20_000, 50_000),
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 3_000_000 }), fc.integer({ min: 1, max: 9 })), { maxLength: 300 }),
        fc.integer({ min: 0, max: 3_100_000 }),
        (bucketMs, historyWindows, arrivals, nowRaw) => {
          const windowMs = 2 * bucketMs;
          const h = new RateHistory({ windowMs, historyMs: historyWindows * windowMs + bucketMs, bucketMs, origin: 0 });
          const sorted = [...arrivals].sort((x, y) => x[0] - y[0]);
          const now = Math.max(nowRaw, sorted.at(-1)?.[0] ?? 0);
          const counts = new Map<number, number>();
          for (const [t, n] of sorted) {
            h.recordArrival(t, n);
            const b = Math.floor(t / bucketMs);
            counts.set(b, (counts.get(b) ?? 0) + n);
          }
          const current = Math.floor(now / bucketMs);
          const historyBuckets = Math.ceil((historyWindows * windowMs + bucketMs) / bucketMs);
          const count = (b: number) => (b > current - historyBuckets - 1 && b <= current ? (counts.get(b) ?? 0) : 0);
          let end = Math.max(current - historyBuckets + 2, 2);
          if (end > current) return;
          let windowSum = count(end - 2) + count(end - 1);
          let sx = 0;
          let sy = 0;
          let sxx = 0;
          let sxy = 0;
          let points = 0;
          for (;;) {
            const x = end * bucketMs - windowMs / 2 - now;
            const y = (windowSum * 1000) / windowMs;
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
            points++;
            if (end === current) break;
            windowSum += count(end) - count(end - 2);
            end++;
          }
          if (points < 3) return;
          const meanX = sx / points;
          const meanY = sy / points;
          const varX = sxx - points * meanX * meanX;
          const slope = varX > 0 ? (sxy - points * meanX * meanY) / varX : 0;
          expect(h.predictRate(now, 10_000)).toBe(Math.max(0, meanY + slope * (10_000 - meanX)));
        },
      ),
    );
  });
});
