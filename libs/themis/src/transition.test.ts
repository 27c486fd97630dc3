import { describe, expect, it } from "vitest";
import { planHorizontal } from "./horizontal-scaling.js";
import { type QueueRate, resolvePlanOptions } from "./stage-config.js";
import {
  allocationCarries,
  HORIZONTAL_ONLY,
  horizontalOnlyPolicy,
  INFERGRID_THEMIS,
  infergridPolicy,
  publishedThemisPolicy,
  type ScalingPolicy,
  type ServiceSpec,
  type StartingBackend,
  scalingPolicy,
  THEMIS_PUBLISHED,
  type TickDecision,
  type TickInput,
  VERTICAL_ONLY,
  verticalOnlyPolicy,
  type WarmBackend,
} from "./transition.js";

const profile = { gamma: 60, eps: 5, delta: 2, eta: 5 };
const service: ServiceSpec = { profile, sloMs: 1000, maxCores: 16, maxBatch: 8 };
const TICK_MS = 1000;
const SETUP_MS = 10_000;

interface Tick {
  t: number;
  input: TickInput;
  decision: TickDecision;
  /** The warm backends after the decision is applied. */
  after: WarmBackend[];
}

/**
 * A tiny deterministic world: every tick the policy sees the rate, a forecast, the warm and starting backends;
 * resizes apply at once, new backends are warm SETUP_MS later, removals are immediate.
 */
function run(
  policy: ScalingPolicy,
  rates: readonly number[],
  opts: { predict?: (t: number) => number; warm?: WarmBackend[]; spec?: ServiceSpec } = {},
): Tick[] {
  const spec = opts.spec ?? service;
  let warm: WarmBackend[] = (opts.warm ?? [{ id: "w0", cores: 1, batch: 1 }]).map((w) => ({ ...w }));
  let starting: (StartingBackend & { batch: number })[] = [];
  let state = policy.initialState();
  let next = 0;
  const out: Tick[] = [];
  rates.forEach((rate, t) => {
    const now = t * TICK_MS;
    const ready = starting.filter((s) => s.readyAtMs <= now);
    starting = starting.filter((s) => s.readyAtMs > now);
    warm.push(...ready.map((s) => ({ id: s.id, cores: s.cores, batch: s.batch })));
    const input: TickInput = {
      nowMs: now,
      ratePerS: rate,
      predictedPeakPerS: opts.predict ? opts.predict(t) : rate,
      warm: warm.map((w) => ({ ...w })),
      starting: starting.map(({ id, cores, readyAtMs }) => ({ id, cores, readyAtMs })),
      service: spec,
    };
    const r = policy.step(state, input);
    state = r.state;
    const byId = new Map(r.decision.targets.map((x) => [x.id, x]));
    expect(r.decision.targets.map((x) => x.id).sort()).toEqual(warm.map((w) => w.id).sort());
    const gone = new Set(r.decision.remove);
    warm = warm.filter((w) => !gone.has(w.id)).map((w) => ({ ...w, ...byId.get(w.id) }));
    starting = starting.filter((s) => !gone.has(s.id));
    for (const s of r.decision.start) starting.push({ id: `n${next++}`, cores: s.cores, batch: s.batch, readyAtMs: now + SETUP_MS });
    out.push({ t, input, decision: r.decision, after: warm.map((w) => ({ ...w })) });
  });
  return out;
}

const repeat = (rate: number, ticks: number) => Array.from({ length: ticks }, () => rate);
/** The peak of the next 10 ticks: a perfect forecast of the window's maximum. */
const windowPeak = (rates: readonly number[]) => (t: number) => Math.max(...rates.slice(t, t + 10));
const coresOf = (tick: Tick) => tick.after.reduce((a, w) => a + w.cores, 0);
const need = (rate: number, u = INFERGRID_THEMIS.maxUtilization, queueRate: QueueRate = "per-instance") =>
  planHorizontal({ profile, ratePerS: rate, sloMs: service.sloMs, maxBatch: service.maxBatch, maxUtilization: u, queueRate })?.instances ??
  -1;
const needPublished = (rate: number) => need(rate, THEMIS_PUBLISHED.maxUtilization, THEMIS_PUBLISHED.queueRate);

/** A shrink happened at a tick where a backend's target has fewer cores than it had. */
function shrinks(ticks: readonly Tick[]): Tick[] {
  return ticks.filter((k) => k.decision.targets.some((x) => x.cores < (k.input.warm.find((w) => w.id === x.id)?.cores ?? 0)));
}

describe("Themis's transition rule", () => {
  it("answers a step in load with a vertical resize on the same tick, which carries the new rate", () => {
    const rates = [...repeat(20, 20), ...repeat(120, 5), ...repeat(20, 30)];
    const warm = [
      { id: "a", cores: 1, batch: 1 },
      { id: "b", cores: 1, batch: 1 },
    ];
    for (const policy of [infergridPolicy(), publishedThemisPolicy()]) {
      const ticks = run(policy, rates, { warm });
      const step = ticks[20];
      const own = policy.name === "themis" ? THEMIS_PUBLISHED : INFERGRID_THEMIS;
      const opts = resolvePlanOptions({ sloMs: 1000, maxBatch: 8, maxUtilization: own.maxUtilization, queueRate: own.queueRate });
      expect(step?.decision.mode, policy.name).toBe("vertical");
      expect(Math.min(...(step?.decision.targets.map((x) => x.cores) ?? [0]))).toBeGreaterThan(1);
      // Every warm backend gets the same cores (section 5.2.2).
      expect(new Set(step?.decision.targets.map((x) => x.cores)).size).toBe(1);
      expect(allocationCarries(step?.after ?? [], 120, profile, opts)).toBe(true);
      // Before the step nothing changed cores.
      for (const k of ticks.slice(0, 20)) expect(coresOf(k)).toBe(2);
    }
  });

  it("moves to 1-core replicas only after K stable ticks, and shrinks no backend before the replicas are warm", () => {
    const rates = [...repeat(20, 10), ...repeat(120, 80)];
    for (const [policy, k] of [
      [infergridPolicy(), INFERGRID_THEMIS.stableTicks],
      [publishedThemisPolicy(), THEMIS_PUBLISHED.stableTicks],
    ] as const) {
      const ticks = run(policy, rates, { warm: [{ id: "a", cores: 1, batch: 1 }] });
      const u = policy.name === "themis" ? 1 : INFERGRID_THEMIS.maxUtilization;
      const needed = policy.name === "themis" ? needPublished(120) : need(120);
      const firstShrink = shrinks(ticks).find((x) => x.t > 10);
      expect(firstShrink, policy.name).toBeDefined();
      if (!firstShrink) continue;
      // Shrinks wait for K stable ticks after the surge, and for as many warm replicas as the peak needs.
      expect(firstShrink.t - 10).toBeGreaterThanOrEqual(k);
      for (const x of shrinks(ticks)) expect(x.input.warm.length, `tick ${x.t}`).toBeGreaterThanOrEqual(needed);
      // Before the shrink the surge is carried by cores: the warm allocation always carries the rate.
      const opts = resolvePlanOptions({
        sloMs: 1000,
        maxBatch: 8,
        maxUtilization: u,
        queueRate: policy.name === "themis" ? "stage" : "per-instance",
      });
      for (const x of ticks.slice(10)) expect(allocationCarries(x.after, 120, profile, opts), `tick ${x.t}`).toBe(true);
      const last = ticks.at(-1);
      expect(last?.after.every((w) => w.cores === 1)).toBe(true);
      expect(last?.after.length).toBe(needed);
      expect(last?.decision.mode).toBe("horizontal");
    }
  });

  it("starts the horizontal capacity during a surge the forecast says stays when asked to, else after K stable ticks", () => {
    const rates = [...repeat(20, 10), ...repeat(120, 40)];
    const warm = Array.from({ length: needPublished(20) }, (_, i) => ({ id: `w${i}`, cores: 1, batch: 1 }));
    const firstStart = (policy: ScalingPolicy) => run(policy, rates, { warm }).find((x) => x.decision.start.length > 0)?.t ?? -1;
    expect(firstStart(infergridPolicy())).toBe(10);
    expect(firstStart(infergridPolicy({ startHorizontalInSurge: false }))).toBeGreaterThanOrEqual(10 + INFERGRID_THEMIS.stableTicks);
    expect(firstStart(publishedThemisPolicy())).toBeGreaterThanOrEqual(10 + THEMIS_PUBLISHED.stableTicks);
  });

  it("does not flap when the rate oscillates, with a forecast of the window's peak", () => {
    const rates = Array.from({ length: 200 }, (_, t) => (t % 2 === 0 ? 50 : 70));
    for (const policy of [infergridPolicy(), publishedThemisPolicy()]) {
      const ticks = run(policy, rates, { predict: windowPeak(rates) });
      const settled = ticks.slice(60);
      for (const k of settled) {
        expect(k.decision.start, `${policy.name} tick ${k.t}`).toEqual([]);
        expect(k.decision.remove).toEqual([]);
        expect(k.after).toEqual(k.input.warm);
      }
      if (policy.name === "infergrid") {
        // Algorithm 2's configuration for the forecast peak holds, so it moves to the replicas that peak needs.
        expect(settled[0]?.after.every((w) => w.cores === 1)).toBe(true);
        expect(settled[0]?.after.length).toBe(need(70));
      } else {
        // As published, Algorithm 2 never agrees for 50/s and for the 70/s peak: it stays on the resized backend.
        expect(settled[0]?.after).toEqual([{ id: "w0", cores: expect.any(Number), batch: expect.any(Number) }]);
        expect(settled[0]?.after[0]?.cores).toBeGreaterThan(1);
      }
    }
  });

  it("does not flap resizes when the forecast lags the oscillation (infergrid); the published rule does", () => {
    // The forecast is the current rate: each tick Algorithm 2 agrees with itself, but not with the tick before.
    const rates = Array.from({ length: 200 }, (_, t) => (Math.floor(t / 3) % 2 === 0 ? 40 : 90));
    const infergrid = run(infergridPolicy(), rates);
    const published = run(publishedThemisPolicy(), rates);
    const upsAndDowns = (ticks: Tick[]) => shrinks(ticks.slice(30)).length;
    expect(upsAndDowns(infergrid)).toBe(0);
    expect(upsAndDowns(published)).toBeGreaterThan(3);
  });

  it("does not start and remove replicas around a replica-count threshold", () => {
    // Find a rate where Algorithm 2's count steps up by one and oscillate just around it.
    let r = 10;
    while (need(r + 1) === need(r)) r += 1;
    const rates = Array.from({ length: 300 }, (_, t) => (t % 4 < 2 ? r - 0.5 : r + 1.5));
    const ticks = run(infergridPolicy(), rates, { warm: Array.from({ length: need(r) }, (_, i) => ({ id: `w${i}`, cores: 1, batch: 1 })) });
    const events = ticks.filter((k) => k.decision.start.length > 0 || k.decision.remove.length > 0);
    expect(events.length).toBeLessThanOrEqual(1);
  });

  it("at the node limit: every warm backend to the most cores and new backends at once for the rest", () => {
    const spec = { ...service, maxCores: 4 };
    const infergrid = run(infergridPolicy({ startHorizontalInSurge: false }), [200], { spec })[0];
    expect(infergrid?.decision.targets).toEqual([{ id: "w0", cores: 4, batch: expect.any(Number) }]);
    expect(infergrid?.decision.start.length).toBeGreaterThan(0);
    expect(infergrid?.decision.start.every((s) => s.cores === 1)).toBe(true);
    // The warm one and the new ones together carry the rate.
    const newCap = (infergrid?.decision.start ?? []).reduce((a, s) => a + (1000 * s.batch) / (60 * s.batch + 5 + 2 * s.batch + 5), 0);
    const warmCap = (infergrid?.after ?? []).reduce((a, w) => a + (1000 * w.batch) / ((60 * w.batch + 5) / w.cores + 2 * w.batch + 5), 0);
    expect((newCap + warmCap) * INFERGRID_THEMIS.maxUtilization).toBeGreaterThanOrEqual(200);

    const published = run(publishedThemisPolicy(), [200], { spec })[0];
    expect(published?.decision.targets[0]?.cores).toBe(4);
    expect(published?.decision.start.length).toBeGreaterThan(0);
    expect(published?.decision.start.every((s) => s.cores === 4)).toBe(true);
  });

  it("removes surplus replicas only once the held peak has passed (infergrid) or at the next horizontal step (published)", () => {
    const rates = [...repeat(120, 60), ...repeat(20, 80)];
    const warm = Array.from({ length: need(120) }, (_, i) => ({ id: `w${i}`, cores: 1, batch: 1 }));
    const ticks = run(infergridPolicy(), rates, { warm });
    const firstRemove = ticks.find((k) => k.decision.remove.length > 0);
    expect(firstRemove).toBeDefined();
    // The forecast here is the current rate: 120/s stays in the held peaks for peakHoldTicks ticks after the drop.
    expect((firstRemove?.t ?? 0) - 60).toBeGreaterThanOrEqual(INFERGRID_THEMIS.peakHoldTicks - 1);
    expect((firstRemove?.t ?? 0) - 60).toBeLessThanOrEqual(INFERGRID_THEMIS.peakHoldTicks + INFERGRID_THEMIS.scaleDownDelayMs / TICK_MS);
    expect(ticks.at(-1)?.after.length).toBe(need(20));
    const published = run(publishedThemisPolicy(), rates, {
      warm: Array.from({ length: needPublished(120) }, (_, i) => ({ id: `w${i}`, cores: 1, batch: 1 })),
    });
    const pubRemove = published.find((k) => k.decision.remove.length > 0);
    // As published, the next horizontal step removes them: within K + 1 ticks of the drop, not before it.
    expect(pubRemove?.t).toBeGreaterThanOrEqual(60);
    expect(pubRemove?.t).toBeLessThanOrEqual(60 + THEMIS_PUBLISHED.stableTicks + 1);
    expect(published.at(-1)?.after.length).toBe(needPublished(20));
  });

  it("without replicas started in the surge, absorbs a short one with cores alone and shrinks once the held peak passes", () => {
    const rates = [...repeat(20, 30), ...repeat(120, 5), ...repeat(20, 40)];
    const warm = Array.from({ length: need(20) }, (_, i) => ({ id: `w${i}`, cores: 1, batch: 1 }));
    const ticks = run(infergridPolicy({ startHorizontalInSurge: false }), rates, { warm });
    for (const k of ticks) expect(k.decision.start, `tick ${k.t}`).toEqual([]);
    const shrink = shrinks(ticks);
    expect(shrink.length).toBe(1);
    expect(shrink[0]?.t).toBeLessThanOrEqual(35 + INFERGRID_THEMIS.peakHoldTicks);
    expect(ticks.at(-1)?.after.every((w) => w.cores === 1)).toBe(true);
    // It spends fewer core-seconds than horizontal-only, which starts replicas that warm after the surge.
    const coreSeconds = (xs: Tick[]) => xs.reduce((a, k) => a + coresOf(k) + k.input.starting.length, 0);
    const horizontalOnly = coreSeconds(run(horizontalOnlyPolicy(), rates, { warm }));
    expect(coreSeconds(ticks)).toBeLessThan(horizontalOnly);
    // The default starts replicas during the surge too; they cost less than horizontal-only's, which also lag it.
    expect(coreSeconds(run(infergridPolicy(), rates, { warm }))).toBeLessThan(horizontalOnly);
  });

  it("starts replicas for the forecast peak when nothing is warm", () => {
    const tick = run(infergridPolicy(), [0, 0], { warm: [], predict: () => 60 })[0];
    expect(tick?.decision.start.length).toBe(need(60));
    expect(tick?.decision.start.every((s) => s.cores === 1)).toBe(true);
  });

  it("refuses bad input with a message naming the field", () => {
    const policy = infergridPolicy();
    const input: TickInput = { nowMs: 0, ratePerS: 10, predictedPeakPerS: 10, warm: [], starting: [], service };
    expect(() => policy.step(policy.initialState(), { ...input, ratePerS: Number.NaN })).toThrow(/ratePerS/);
    expect(() => policy.step(policy.initialState(), { ...input, predictedPeakPerS: -1 })).toThrow(/predictedPeakPerS/);
    expect(() => policy.step(policy.initialState(), { ...input, warm: [{ id: "x", cores: 0, batch: 1 }] })).toThrow(/warm backend x/);
    expect(() => policy.step(policy.initialState(), { ...input, service: { ...service, maxCores: 0 } })).toThrow(/maxCores/);
    expect(() => infergridPolicy({ stableTicks: 0 })).toThrow(/stableTicks/);
  });
});

describe("baselines over the same interface", () => {
  it("horizontal-only keeps every backend at 1 core and starts replicas on a step", () => {
    const rates = [...repeat(20, 10), ...repeat(120, 40)];
    const ticks = run(horizontalOnlyPolicy(), rates);
    for (const k of ticks) expect(k.after.every((w) => w.cores === 1)).toBe(true);
    expect(ticks[10]?.decision.start.length).toBe(need(120, HORIZONTAL_ONLY.maxUtilization) - 2);
    expect(ticks.at(-1)?.after.length).toBe(need(120, HORIZONTAL_ONLY.maxUtilization));
  });

  it("horizontal-only removes replicas only after its scale-down delay", () => {
    const rates = [...repeat(120, 20), ...repeat(20, 60)];
    const u = HORIZONTAL_ONLY.maxUtilization;
    const warm = Array.from({ length: need(120, u) }, (_, i) => ({ id: `w${i}`, cores: 1, batch: 1 }));
    const ticks = run(horizontalOnlyPolicy(), rates, { warm });
    const first = ticks.find((k) => k.decision.remove.length > 0);
    expect((first?.t ?? 0) - 20).toBe(HORIZONTAL_ONLY.scaleDownDelayMs / TICK_MS);
    expect(ticks.at(-1)?.after.length).toBe(need(20, u));
  });

  it("vertical-only never starts or removes a backend; cores go up at once and down only after the delay", () => {
    const rates = [...repeat(20, 10), ...repeat(120, 20), ...repeat(20, 60)];
    const ticks = run(verticalOnlyPolicy(), rates);
    for (const k of ticks) {
      expect(k.decision.start).toEqual([]);
      expect(k.decision.remove).toEqual([]);
    }
    expect(coresOf(ticks[10] as Tick)).toBeGreaterThan(coresOf(ticks[9] as Tick));
    const down = shrinks(ticks);
    expect(down.length).toBeGreaterThan(0);
    expect((down[0]?.t ?? 0) - 30).toBe(VERTICAL_ONLY.scaleDownDelayMs / TICK_MS);
  });

  it("are all reachable by name", () => {
    for (const name of ["infergrid", "themis", "horizontal-only", "vertical-only"] as const) expect(scalingPolicy(name).name).toBe(name);
  });
});
