import type { ScalingPolicy, TickDecision, TickInput, TransitionState } from "@infergrid/themis";
import { initialTransitionState } from "@infergrid/themis";
import { describe, expect, it } from "vitest";
import { runThemisCluster, type ThemisClusterSetting } from "./themis-cluster.js";
import { resizeMsAt, sessionCreateTimes } from "./themis-scenario.js";

// l(k, c) = 10 k / c + 10 ms: a batch of 3 on 1 core takes 40 ms, on 2 cores 25 ms.
const PROFILE = { gamma: 10, eps: 0, delta: 0, eta: 10 };

const base: ThemisClusterSetting = {
  profile: PROFILE,
  sloMs: 100,
  maxCores: 16,
  maxBatch: 16,
  coldStartMs: 300,
  resizeMs: () => 100,
  batchTimeout: 50,
  dropAfterMs: 10_000,
  tickMs: 250,
  peakWindowMs: 1000,
  durationMs: 1000,
  initial: { count: 1, cores: 1, batch: 4 },
  timeline: true,
};

/** A policy that applies a fixed decision at given ticks and keeps everything as it is otherwise. */
function scripted(script: Record<number, (input: TickInput) => Partial<TickDecision>>): ScalingPolicy & { inputs: TickInput[] } {
  const inputs: TickInput[] = [];
  return {
    name: "infergrid",
    inputs,
    initialState: initialTransitionState,
    step(state: TransitionState, input: TickInput) {
      inputs.push(input);
      const keep: TickDecision = {
        mode: "horizontal",
        targets: input.warm.map((w) => ({ id: w.id, cores: w.cores, batch: w.batch })),
        start: [],
        remove: [],
        reason: "scripted",
      };
      const change = script[input.nowMs]?.(input) ?? {};
      return { state, decision: { ...keep, ...change } };
    },
  };
}

describe("runThemisCluster on one backend", () => {
  it("latency = batch wait + l(k, c): closes at the timeout, at b, and a refused request waits for a free slot", () => {
    // 0, 10, 20: a partial batch closes at its timeout (50) and runs 3 in l(3, 1) = 40 ms -> done at 90.
    // 200-203: a full batch of 4 closes at 203 and runs l(4, 1) = 50 ms -> done at 253; 204-207 form the next,
    // full at 207, run when the model frees: 253-303.
    // 210: the backend holds 2b = 8 in flight (BackendMachine), so it is refused until 253, then waits its
    // timeout (50) to 303 and runs alone in l(1, 1) = 20 ms -> done at 323, latency 113.
    const r = runThemisCluster(base, scripted({}), [0, 10, 20, 200, 201, 202, 203, 204, 205, 206, 207, 210]);
    expect(r.requests).toBe(12);
    expect(r.completed).toBe(12);
    expect(r.dropped).toBe(0);
    // Latencies sorted: 50, 51, 52, 53, 70, 80, 90, 96, 97, 98, 99, 113.
    expect(r.p50Ms).toBe(80);
    expect(r.p99Ms).toBe(113);
    expect(r.violations).toBe(1);
    expect(r.violationRate).toBeCloseTo(1 / 12, 12);
    expect(r.coreSeconds).toBeCloseTo(1, 9);
    expect(r.resizes).toBe(0);
    expect(r.coldStarts).toBe(0);
  });

  it("with timeout 0, a backlog runs as full batches: the backend admits a running batch and the next forming (2b)", () => {
    // 12 requests at 0, b = 4: the first runs alone at once ([1] 0-20), the next 7 wait; then [4] 20-70, [4] 70-120,
    // [3] 120-160. Admitting only b would run [1] 0-20, [3] 20-60, [1] 60-80, [3] 80-120, [1] 120-140, [3] 140-180.
    const r = runThemisCluster({ ...base, sloMs: 1e6, batchTimeout: 0 }, scripted({}), Array(12).fill(0));
    expect(r.p99Ms).toBe(160);
    expect(r.p50Ms).toBe(120); // latencies 20, 70 x4, 120 x4, 160 x3
  });

  it("the policy sees the rate of the last tick and the largest over the window", () => {
    const policy = scripted({});
    runThemisCluster(
      base,
      policy,
      Array.from({ length: 6 }, (_, i) => 10 + i * 10),
    );
    // Six arrivals in the first 250 ms: 24/s at the first tick, 0 after, the peak held over the 1 s window.
    expect(policy.inputs.map((i) => i.ratePerS)).toEqual([24, 0, 0]);
    expect(policy.inputs.map((i) => i.predictedPeakPerS)).toEqual([24, 24, 24]);
    expect(policy.inputs[0]?.warm).toEqual([{ id: "b0", cores: 1, batch: 4 }]);
  });

  it("a resize takes effect after its resize time; cores are charged at the larger size meanwhile", () => {
    const policy = scripted({ 500: (i) => ({ targets: i.warm.map((w) => ({ ...w, cores: 2 })) }) });
    // The batch of 520-540 closes 50 ms after its first, at 570, before the resize is effective (600): it runs
    // on 1 core, l(3, 1) = 40 -> done 610. The one of 700-702 closes at 750 on 2 cores, l(3, 2) = 25 -> done 775.
    const r = runThemisCluster(base, policy, [520, 530, 540, 700, 701, 702]);
    expect(r.resizes).toBe(1);
    expect(r.p99Ms).toBe(90); // 610 - 520
    expect(r.p50Ms).toBe(74); // latencies 70, 73, 74, 75, 80, 90
    // 1 core over [0, 500), 2 cores over [500, 1000).
    expect(r.coreSeconds).toBeCloseTo(0.5 + 1, 9);
    expect(policy.inputs[2]?.warm[0]?.cores).toBe(2);
  });

  it("a resize's batch size waits for its cores, as the backend-worker applies them", () => {
    // At 500: 2 cores and batch 1 (from 4). Until 600 the backend still takes 4: 520-522 run together at 570
    // on 1 core (l(3, 1) = 40 -> 610); 700 and 701 then run one by one on 2 cores (l(1, 2) = 15).
    const policy = scripted({ 500: (i) => ({ targets: i.warm.map((w) => ({ ...w, cores: 2, batch: 1 })) }) });
    const r = runThemisCluster(base, policy, [520, 521, 522, 700, 701]);
    expect(r.p99Ms).toBe(90); // 610 - 520
    // Latencies 15 (700), 29 (701 waits for it), 88, 89, 90.
    expect(r.p50Ms).toBe(88);
    expect(policy.inputs[2]?.warm[0]).toEqual({ id: "b0", cores: 2, batch: 1 });
  });

  it("a new backend is charged from when it is asked for and serves only once warm; a removed one stops costing", () => {
    const policy = scripted({
      250: () => ({ start: [{ cores: 2, batch: 1 }] }),
      750: (i) => ({ remove: [i.warm[0]?.id ?? ""] }),
    });
    const r = runThemisCluster({ ...base, initial: { count: 1, cores: 1, batch: 1 } }, policy, []);
    expect(r.coldStarts).toBe(1);
    expect(policy.inputs[1]?.starting).toEqual([{ id: "b1", cores: 2, readyAtMs: 550 }]);
    expect(policy.inputs[2]?.warm.map((w) => w.id)).toEqual(["b0", "b1"]);
    // b0: 1 core over [0, 750); b1: 2 cores over [250, 1000).
    expect(r.coreSeconds).toBeCloseTo(0.75 + 1.5, 9);
    expect(r.peakCores).toBe(3);
  });

  it("requests wait for a warm backend and are dropped past dropAfterMs; dropped ones are violations", () => {
    const policy = scripted({ 250: () => ({ start: [{ cores: 1, batch: 1 }] }) });
    // No backend at first: the start at 250 is warm at 550; 100 waited 450 ms (served), 10 waited 540 > 500 (dropped).
    const r = runThemisCluster({ ...base, initial: { count: 0, cores: 1, batch: 1 }, dropAfterMs: 500 }, policy, [10, 100]);
    expect(r.dropped).toBe(1);
    expect(r.completed).toBe(1);
    expect(r.violations).toBe(2);
    expect(r.p99Ms).toBe(470); // 550 + l(1, 1) = 20 - 100
  });
});

describe("resize times", () => {
  it("reads session-create times per thread count and interpolates between them", () => {
    const table = sessionCreateTimes({ models: { m: { session_create_ms_1c: 100, session_create_ms_4c: 160, onnx_bytes: 5 } } }, "m");
    expect(table).toEqual([
      { cores: 1, ms: 100 },
      { cores: 4, ms: 160 },
    ]);
    expect(resizeMsAt(table, 2)).toBeCloseTo(120, 9);
    expect(resizeMsAt(table, 16)).toBe(160);
    expect(resizeMsAt([], 3)).toBe(0);
  });
});
