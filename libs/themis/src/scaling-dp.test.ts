import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { planHorizontal, planHorizontalPipeline } from "./horizontal-scaling.js";
import { processingMs, type ThemisProfile, throughputPerS } from "./latency-profile.js";
import { budgetMs, type QueueRate } from "./stage-config.js";
import { maxCarriedRate, planVertical, planVerticalPipeline } from "./vertical-scaling.js";

const profileArb = fc.record({
  gamma: fc.double({ min: 1, max: 200, noNaN: true }),
  eps: fc.double({ min: 0, max: 50, noNaN: true }),
  delta: fc.double({ min: 0, max: 20, noNaN: true }),
  eta: fc.double({ min: 0.5, max: 20, noNaN: true }),
});
const queueArb = fc.constantFrom<QueueRate>("per-instance", "stage");
const utilArb = fc.constantFrom(1, 0.8);

/** Written from Eq. 1, 4-6 directly, sharing no code with the planners. */
function latency(p: ThemisProfile, b: number, c: number, n: number, rate: number, queue: QueueRate): number {
  const perBatchRate = queue === "per-instance" ? rate / n : rate;
  const q = b === 1 ? 0 : perBatchRate > 0 ? ((b - 1) * 1000) / perBatchRate : Number.POSITIVE_INFINITY;
  return processingMs(p, b, c) + q;
}
const ok = (p: ThemisProfile, b: number, c: number, n: number, rate: number, slo: number, u: number, queue: QueueRate) =>
  n * throughputPerS(p, b, c) * u >= rate * (1 - 1e-9) && latency(p, b, c, n, rate, queue) <= slo * (1 + 1e-9);

/** Replica counts worth enumerating: past ceil(lambda / (u * h)) + 3 more replicas only add cost (and q). */
function nBound(p: ThemisProfile, rate: number, u: number, maxBatch: number, c = 1): number {
  let hMin = Number.POSITIVE_INFINITY;
  for (let b = 1; b <= maxBatch; b++) hMin = Math.min(hMin, throughputPerS(p, b, c));
  return Math.ceil(rate / (u * hMin)) + 3;
}

interface Cand {
  b: number;
  c: number;
  n: number;
  lat: number;
}
const lexBetter = (a: Cand, best: Cand | undefined) =>
  best === undefined ||
  a.n * a.c < best.n * best.c ||
  (a.n * a.c === best.n * best.c && (a.lat < best.lat || (a.lat === best.lat && a.b < best.b)));

describe("horizontal scaling (Algorithm 2)", () => {
  it("picks the fewest 1-core replicas, then the lowest latency, as brute force over (b, n) does", () => {
    fc.assert(
      fc.property(
        profileArb,
        fc.integer({ min: 30, max: 2000 }),
        fc.double({ min: 0, max: 400, noNaN: true }),
        fc.integer({ min: 1, max: 8 }),
        utilArb,
        queueArb,
        (p, slo, rate, maxBatch, u, queue) => {
          let best: Cand | undefined;
          for (let b = 1; b <= maxBatch; b++) {
            for (let n = 1; n <= nBound(p, rate, u, maxBatch); n++) {
              if (!ok(p, b, 1, n, rate, slo, u, queue)) continue;
              const cand = { b, c: 1, n, lat: latency(p, b, 1, n, rate, queue) };
              if (lexBetter(cand, best)) best = cand;
            }
          }
          const plan = planHorizontal({ profile: p, ratePerS: rate, sloMs: slo, maxBatch, maxUtilization: u, queueRate: queue });
          if (best === undefined) expect(plan).toBeUndefined();
          else {
            expect(plan).toBeDefined();
            expect(plan?.cores).toBe(1);
            expect(plan?.instances).toBe(best.n);
            expect(plan?.batch).toBe(best.b);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("splits the SLO across a pipeline as brute force over every stage's (b, n) does", () => {
    fc.assert(
      fc.property(
        fc.array(profileArb, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 50, max: 1500 }),
        fc.double({ min: 0.5, max: 150, noNaN: true }),
        fc.integer({ min: 1, max: 4 }),
        queueArb,
        (profiles, slo, rate, maxBatch, queue) => {
          // Every stage's options (b, n), with its latency counted in whole ms as the DP's budget does.
          const options = profiles.map((p) => {
            const out: { cost: number; ms: number }[] = [];
            for (let b = 1; b <= maxBatch; b++) {
              for (let n = 1; n <= nBound(p, rate, 1, maxBatch); n++) {
                if (ok(p, b, 1, n, rate, slo, 1, queue)) out.push({ cost: n, ms: budgetMs(latency(p, b, 1, n, rate, queue)) });
              }
            }
            return out;
          });
          let best = Number.POSITIVE_INFINITY;
          const walk = (s: number, cost: number, ms: number) => {
            if (ms > slo) return;
            if (s === options.length) {
              best = Math.min(best, cost);
              return;
            }
            for (const o of options[s] ?? []) walk(s + 1, cost + o.cost, ms + o.ms);
          };
          walk(0, 0, 0);
          const plan = planHorizontalPipeline({ profiles, ratePerS: rate, sloMs: slo, maxBatch, queueRate: queue });
          if (best === Number.POSITIVE_INFINITY) expect(plan).toBeUndefined();
          else {
            expect(plan?.totalCores).toBe(best);
            const stages = plan?.stages ?? [];
            expect(stages.reduce((a, s) => a + budgetMs(s.latencyMs), 0)).toBeLessThanOrEqual(slo);
            stages.forEach((s) => {
              expect(s.capacityPerS).toBeGreaterThanOrEqual(rate * (1 - 1e-9));
            });
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("gives one stage the same replicas through the pipeline DP as directly", () => {
    fc.assert(
      fc.property(profileArb, fc.integer({ min: 30, max: 2000 }), fc.double({ min: 0, max: 400, noNaN: true }), (p, slo, rate) => {
        const one = planHorizontal({ profile: p, ratePerS: rate, sloMs: slo, maxBatch: 8 });
        const pipe = planHorizontalPipeline({ profiles: [p], ratePerS: rate, sloMs: slo, maxBatch: 8 });
        expect(pipe?.totalCores).toBe(one?.instances);
      }),
      { numRuns: 200 },
    );
  });

  it("keeps one replica at rate 0 and refuses bad input by name", () => {
    const p = { gamma: 60, eps: 5, delta: 2, eta: 5 };
    expect(planHorizontal({ profile: p, ratePerS: 0, sloMs: 1000, maxBatch: 8 })).toMatchObject({ instances: 1, batch: 1, cores: 1 });
    expect(planHorizontal({ profile: p, ratePerS: 10, sloMs: 50, maxBatch: 8 })).toBeUndefined();
    expect(() => planHorizontal({ profile: p, ratePerS: -1, sloMs: 1000, maxBatch: 8 })).toThrow(/ratePerS/);
    expect(() => planHorizontal({ profile: p, ratePerS: 1, sloMs: 1000, maxBatch: 0 })).toThrow(/maxBatch/);
    expect(() => planHorizontal({ profile: p, ratePerS: 1, sloMs: 0, maxBatch: 4 })).toThrow(/sloMs/);
  });
});

describe("vertical scaling (Algorithm 1)", () => {
  it("gives n warm instances the fewest cores that carry the rate, as brute force over (b, c) does", () => {
    fc.assert(
      fc.property(
        profileArb,
        fc.integer({ min: 30, max: 2000 }),
        fc.double({ min: 0, max: 400, noNaN: true }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 8 }),
        utilArb,
        queueArb,
        (p, slo, rate, n, maxCores, maxBatch, u, queue) => {
          let best: Cand | undefined;
          for (let c = 1; c <= maxCores; c++) {
            for (let b = 1; b <= maxBatch; b++) {
              if (!ok(p, b, c, n, rate, slo, u, queue)) continue;
              const cand = { b, c, n, lat: latency(p, b, c, n, rate, queue) };
              if (lexBetter(cand, best)) best = cand;
            }
          }
          const plan = planVertical({
            profile: p,
            ratePerS: rate,
            sloMs: slo,
            maxBatch,
            maxCores,
            warmInstances: n,
            maxUtilization: u,
            queueRate: queue,
          });
          expect(plan.carriesAll).toBe(best !== undefined);
          if (best !== undefined) {
            expect(plan.warm).toMatchObject({ cores: best.c, batch: best.b, instances: n });
            expect(plan.fresh).toBeUndefined();
            expect(plan.restPerS).toBe(0);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("when the warm ones cannot carry it all: they carry the most any rate up to lambda allows, new 1-core replicas the rest", () => {
    fc.assert(
      fc.property(
        profileArb,
        fc.integer({ min: 100, max: 2000 }),
        fc.double({ min: 20, max: 600, noNaN: true }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 6 }),
        queueArb,
        (p, slo, rate, n, maxCores, maxBatch, queue) => {
          const input = { profile: p, ratePerS: rate, sloMs: slo, maxBatch, maxCores, warmInstances: n, queueRate: queue };
          const plan = planVertical(input);
          fc.pre(!plan.carriesAll);
          const feasibleAt = (r: number) => {
            for (let c = 1; c <= maxCores; c++) for (let b = 1; b <= maxBatch; b++) if (ok(p, b, c, n, r, slo, 1, queue)) return true;
            return false;
          };
          expect(plan.carriedPerS).toBe(maxCarriedRate(input));
          if (plan.carriedPerS > 0) {
            expect(feasibleAt(plan.carriedPerS)).toBe(true);
            const w = plan.warm;
            expect(w && ok(p, w.batch, w.cores, n, plan.carriedPerS, slo, 1, queue)).toBe(true);
          }
          // No rate above what is carried (up to lambda) is feasible: checked on a grid of 200 rates.
          for (let i = 1; i <= 200; i++) {
            const r = plan.carriedPerS + ((rate - plan.carriedPerS) * i) / 200;
            if (r > plan.carriedPerS * (1 + 1e-6)) expect(feasibleAt(r)).toBe(false);
          }
          expect(plan.restPerS).toBeCloseTo(rate - plan.carriedPerS, 9);
          const direct = planHorizontal({ profile: p, ratePerS: plan.restPerS, sloMs: slo, maxBatch, queueRate: queue });
          expect(plan.fresh?.instances).toBe(direct?.instances);
          if (plan.fresh) expect(plan.fresh.cores).toBe(1);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("gives new instances the warm ones' cores and batch when asked to (Algorithm 1's last line)", () => {
    const p = { gamma: 60, eps: 5, delta: 2, eta: 5 };
    const plan = planVertical({
      profile: p,
      ratePerS: 200,
      sloMs: 1000,
      maxBatch: 8,
      maxCores: 4,
      warmInstances: 1,
      newInstanceCores: "same",
    });
    expect(plan.carriesAll).toBe(false);
    expect(plan.warm?.cores).toBe(4);
    expect(plan.fresh?.cores).toBe(plan.warm?.cores);
    expect(plan.fresh?.batch).toBe(plan.warm?.batch);
    expect((plan.fresh?.capacityPerS ?? 0) + plan.carriedPerS).toBeGreaterThanOrEqual(200 - 1e-6);
  });

  it("splits the SLO across a pipeline as brute force over every stage's (b, c) does", () => {
    fc.assert(
      fc.property(
        fc.array(profileArb, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 50, max: 1500 }),
        fc.double({ min: 0.5, max: 100, noNaN: true }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 4 }),
        queueArb,
        (profiles, slo, rate, maxCores, maxBatch, queue) => {
          const warm = profiles.map((_, i) => 1 + (i % 2));
          const options = profiles.map((p, s) => {
            const n = warm[s] ?? 1;
            const out: { cost: number; ms: number }[] = [];
            for (let c = 1; c <= maxCores; c++) {
              for (let b = 1; b <= maxBatch; b++) {
                if (ok(p, b, c, n, rate, slo, 1, queue)) out.push({ cost: n * c, ms: budgetMs(latency(p, b, c, n, rate, queue)) });
              }
            }
            return out;
          });
          let best = Number.POSITIVE_INFINITY;
          const walk = (s: number, cost: number, ms: number) => {
            if (ms > slo) return;
            if (s === options.length) {
              best = Math.min(best, cost);
              return;
            }
            for (const o of options[s] ?? []) walk(s + 1, cost + o.cost, ms + o.ms);
          };
          walk(0, 0, 0);
          const plan = planVerticalPipeline({
            profiles,
            warmInstances: warm,
            ratePerS: rate,
            sloMs: slo,
            maxBatch,
            maxCores,
            queueRate: queue,
          });
          expect(plan.carriesAll).toBe(best < Number.POSITIVE_INFINITY);
          if (plan.carriesAll) expect(plan.totalCores).toBe(best);
          else if (plan.stages) {
            // What the warm stages carry, they carry within the SLO.
            expect(plan.stages.reduce((a, s) => a + budgetMs(s.latencyMs), 0)).toBeLessThanOrEqual(slo);
            expect(plan.carriedPerS).toBeLessThan(rate);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
