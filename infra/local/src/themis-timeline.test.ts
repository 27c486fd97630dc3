import { backend } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { renderTimeline, ThemisTimeline } from "./themis-timeline.js";

const WARM = backend.BackendState.BACKEND_STATE_WARM_IDLE;
const BUSY = backend.BackendState.BACKEND_STATE_BUSY;
const PROVISIONING = backend.BackendState.BACKEND_STATE_PROVISIONING;
const T0 = 1_000_000;

describe("ThemisTimeline", () => {
  it("shows the resize before the new backend is warm, then the return to 1-core replicas, and counts core-seconds", () => {
    const t = new ThemisTimeline("resnet18", 1000, 2_000);
    t.observe("a", "resnet18", WARM, 1, 1, false, T0 - 100);
    t.begin(T0);
    // Second 0: one 1-core backend, two requests (one late).
    t.onOutcome(true, 50, T0 + 100);
    t.onOutcome(true, 1500, T0 + 600);
    t.observe("a", "resnet18", BUSY, 1, 1, false, T0 + 500);
    t.sample(T0 + 1000);
    // Second 1: a resized to 4 cores in place, b starting.
    t.observe("a", "resnet18", BUSY, 4, 4, false, T0 + 1000);
    t.observe("b", "resnet18", PROVISIONING, 1, 1, false, T0 + 1200);
    t.onOutcome(false, 10, T0 + 1500);
    t.sample(T0 + 2000);
    // Second 2: b warm, a back to one core.
    t.observe("a", "resnet18", BUSY, 1, 1, false, T0 + 2000);
    t.observe("b", "resnet18", WARM, 1, 1, false, T0 + 2500);
    t.sample(T0 + 3000);
    t.finish(T0 + 3000);

    const s = t.summary();
    expect(s.events).toEqual({ firstResizeS: 1, firstNewWarmS: 2, backOnOneCoreS: 2 });
    expect(s.rows.map((r) => [r.second, r.sent, r.violations, r.cores, r.starting])).toEqual([
      [0, 2, 1, [1], 0],
      [1, 1, 1, [4], 1],
      [2, 0, 0, [1, 1], 0],
    ]);
    // a: 1 core for 1 s, 4 cores for 1 s, 1 core for 1 s; b: 1 core from 1.2 s on.
    expect(s.coreSeconds).toBeCloseTo(1 + 4 + 1 + 1.8, 1);
    const text = renderTimeline(s, (second) => second >= 1);
    expect(text).toContain("first in-place resize: second 1; first new backend warm: second 2; back on 1-core replicas: second 2");
    expect(text).toMatch(/ {3}1\* {4}1 {5}1 {9}1 {2}4/);
  });

  it("does not bill a backend that stopped beating past the stale time, nor one of another service", () => {
    const t = new ThemisTimeline("resnet18", 1000, 1_000);
    t.observe("a", "resnet18", WARM, 2, 1, false, T0);
    t.observe("x", "other", WARM, 8, 1, false, T0);
    t.begin(T0);
    t.finish(T0 + 5_000);
    expect(t.coreSeconds()).toBeCloseTo(2, 6);
  });
});
