import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  fcfsPreferBase,
  heterogeneityCoefficients,
  kairosMatch,
  kairosMatching,
  type MatchingContext,
  type PendingQuery,
  type PoolInstance,
  pairCost,
  requestCost,
  typedPricing,
} from "./matching.js";
import { flatType, pt } from "./test-support.js";

// Two types: a fast one (type 0) and a slow one that takes 4 x as long.
const ctx: MatchingContext = {
  serviceMs: (type, batch) => (type === 0 ? batch / 10 : (4 * batch) / 10),
  coefficients: [1, 0.25],
  qosMs: 100,
  safeguard: 0.02,
};

/** The least total cost over every one-to-one matching of min(m, n) pairs, by enumeration. */
function bruteForce(queries: readonly PendingQuery[], instances: readonly PoolInstance[]): number {
  const m = Math.min(queries.length, 2 * instances.length);
  const k = Math.min(m, instances.length);
  let best = Number.POSITIVE_INFINITY;
  const usedQ = new Array(m).fill(false);
  const usedI = new Array(instances.length).fill(false);
  const walk = (pairs: number, cost: number, fromQ: number) => {
    if (pairs === k) {
      best = Math.min(best, cost);
      return;
    }
    for (let q = fromQ; q < m; q++) {
      if (usedQ[q]) continue;
      usedQ[q] = true;
      for (let i = 0; i < instances.length; i++) {
        if (usedI[i]) continue;
        usedI[i] = true;
        walk(pairs + 1, cost + pairCost(queries[q] as PendingQuery, instances[i] as PoolInstance, ctx), q + 1);
        usedI[i] = false;
      }
      usedQ[q] = false;
    }
  };
  walk(0, 0, 0);
  return best;
}

const queryArb = fc.record({ batch: fc.integer({ min: 1, max: 400 }), waitedMs: fc.integer({ min: 0, max: 120 }) });
const instanceArb = fc.record({
  type: fc.integer({ min: 0, max: 1 }),
  busyForMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 80 })),
});

describe("Kairos's matching", () => {
  it("is a min-cost matching: its total equals brute force over every assignment", () => {
    fc.assert(
      fc.property(fc.array(queryArb, { minLength: 1, maxLength: 5 }), fc.array(instanceArb, { minLength: 1, maxLength: 4 }), (qs, is) => {
        const pairs = kairosMatching(qs, is, ctx);
        expect(pairs.length).toBe(Math.min(qs.length, is.length));
        expect(new Set(pairs.map((p) => p[0])).size).toBe(pairs.length);
        expect(new Set(pairs.map((p) => p[1])).size).toBe(pairs.length);
        const total = pairs.reduce((s, [q, i]) => s + pairCost(qs[q] as PendingQuery, is[i] as PoolInstance, ctx), 0);
        expect(total).toBeCloseTo(bruteForce(qs, is), 6);
      }),
      { numRuns: 300 },
    );
  });
  it("dispatches only to free instances", () => {
    fc.assert(
      fc.property(fc.array(queryArb, { minLength: 1, maxLength: 6 }), fc.array(instanceArb, { minLength: 1, maxLength: 5 }), (qs, is) => {
        for (const [, i] of kairosMatch(qs, is, ctx)) expect(is[i]?.busyForMs).toBe(0);
      }),
    );
  });
  it("lets a large query wait for the busy fast instance rather than miss QoS on the free slow one", () => {
    // Batch 500: 50 ms on the fast one (busy 20 ms more) meets 100 ms; 200 ms on the slow one cannot.
    const out = kairosMatch(
      [{ batch: 500, waitedMs: 0 }],
      [
        { type: 0, busyForMs: 20 },
        { type: 1, busyForMs: 0 },
      ],
      ctx,
    );
    expect(out).toEqual([]);
  });
  it("sends the small query to the slow instance and the large one to the fast one", () => {
    const out = kairosMatch(
      [
        { batch: 50, waitedMs: 0 },
        { batch: 600, waitedMs: 0 },
      ],
      [
        { type: 0, busyForMs: 0 },
        { type: 1, busyForMs: 0 },
      ],
      ctx,
    );
    expect(out).toEqual([
      [0, 1],
      [1, 0],
    ]);
  });
  it("FCFS (Ribbon) gives the oldest query a free base instance first", () => {
    const out = fcfsPreferBase(
      [
        { batch: 600, waitedMs: 5 },
        { batch: 50, waitedMs: 0 },
      ],
      [
        { type: 1, busyForMs: 0 },
        { type: 0, busyForMs: 0 },
      ],
      0,
    );
    expect(out).toEqual([
      [0, 1],
      [1, 0],
    ]);
  });
});

it("heterogeneity coefficients are the base's latency on the largest query over each type's", () => {
  const fast = flatType("fast", 1, 1, [pt(1000, 100)]);
  const mid = flatType("mid", 1, 1, [pt(1000, 200)]);
  const slow = flatType("slow", 1, 1, [pt(1000, 500)]);
  expect(heterogeneityCoefficients([fast, mid, slow], "m", 0, 1000)).toEqual([1, 0.5, 0.2]);
});

describe("typedPricing and requestCost (one request at a time, as a frontend places it)", () => {
  const pricing = typedPricing(
    new Map([
      ["gpu", { points: [pt(100, 10), pt(1000, 40)] }],
      ["cpu", { points: [pt(100, 20), pt(1000, 400)] }],
    ]),
    100,
  );
  it("coefficients are the fastest type's latency on the largest profiled query over each type's", () => {
    expect(pricing.coefficients.get("gpu")).toBe(1);
    expect(pricing.coefficients.get("cpu")).toBeCloseTo(0.1);
  });
  it("a small request is cheaper on the slow type, a large one cannot go there at all", () => {
    expect(requestCost(pricing, "cpu", 50, 0, 0)).toBeLessThan(requestCost(pricing, "gpu", 50, 0, 0));
    expect(requestCost(pricing, "cpu", 500, 0, 0)).toBe(Number.POSITIVE_INFINITY);
    expect(requestCost(pricing, "gpu", 500, 0, 0)).toBeCloseTo(40);
    expect(requestCost(pricing, "tpu", 50, 0, 0)).toBe(Number.POSITIVE_INFINITY);
  });
  it("agrees with pairCost, busy time and waiting included", () => {
    const ctx: MatchingContext = {
      serviceMs: (t, b) => (t === 0 ? (b <= 100 ? 10 : 40) : b <= 100 ? 20 : 400),
      coefficients: [1, 0.1],
      qosMs: 100,
      safeguard: 0.02,
    };
    for (const [busy, waited] of [
      [0, 0],
      [30, 10],
      [55, 0],
      [10, 60],
    ] as const) {
      expect(requestCost(pricing, "gpu", 500, busy, waited)).toBeCloseTo(
        pairCost({ batch: 500, waitedMs: waited }, { type: 0, busyForMs: busy }, ctx),
      );
      expect(requestCost(pricing, "cpu", 50, busy, waited)).toBeCloseTo(
        pairCost({ batch: 50, waitedMs: waited }, { type: 1, busyForMs: busy }, ctx),
      );
    }
  });
});
