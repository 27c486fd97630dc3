import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Summary } from "./summary.js";
import { accepts, alive, freshRunDir, processesMentioning, removeRunDir, runCli, runCliRefused } from "./test-support.js";
import type { ThemisTimelineSummary } from "./themis-timeline.js";

/**
 * The Themis mode on real processes (compiled dist/, nats-server, the allocator whose Themis controller resizes
 * the backends its local pool starts, one frontend, the broker, the predictor): ResNet-34's fitted profile
 * (71 ms a request on one core, at most about 15 req/s with the largest batch), a load step from 3 to 20 req/s.
 * The controller plans 50 % of a backend's modelled throughput as its capacity, so the step is a surge; a new
 * backend takes its process start plus the 5 s cold start. Checked through --summary-json: the step was
 * absorbed by an in-place resize before any new backend was warm, few requests of the step were late, and the
 * service ended on 1-core replicas; nothing is left running. Needs `npx tsc -b`.
 */
interface SummaryJson extends Summary {
  processes: Array<{ name: string; pid: number; log: string }>;
  themis: { sloMs: number; step: { atS: number; forS: number; baseRps: number; stepRps: number }; timeline: ThemisTimelineSummary };
}

const STEP_AT_S = 4;
const STEP_FOR_S = 16;
const DURATION_S = 28;
let dir: string;

beforeAll(() => {
  dir = freshRunDir("ig-themis-");
});

// Stops a CLI a failed or timed-out test left running (it stops its processes, the allocator's backends with it).
afterAll(() => removeRunDir(dir));

describe("npm start -- --themis (infra/local)", () => {
  it("refuses a model the measurements lack, with status 2 and the known ones", () => {
    const { code, stderr } = runCliRefused(["--themis", "vgg16"]);
    expect(code).toBe(2);
    expect(stderr).toContain('--themis: no model "vgg16"');
    expect(stderr).toContain("resnet18");
  });

  it("absorbs a load step by resizing in place before a new backend is warm, then runs on 1-core replicas", async () => {
    const run = await runCli<SummaryJson>(dir, [
      "--themis",
      "resnet34",
      "--base-rps",
      "3",
      "--peak-rps",
      "20",
      "--step-at",
      String(STEP_AT_S),
      "--step-for",
      String(STEP_FOR_S),
      "--duration",
      String(DURATION_S),
      "--cold-start-ms",
      "5000",
      "--frontends",
      "1",
    ]);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const { summary } = run;
    const svc = summary.services[0];
    if (!svc) throw new Error(`no service in the summary:\n${run.stdout}`);
    expect(svc.lost).toBe(0);
    expect(svc.answered + svc.failed).toBe(svc.sent);
    expect(svc.sent).toBeGreaterThan(3 * 6 + 20 * 12);
    expect(svc.coreSeconds).toBeGreaterThan(0);

    const { events, rows } = summary.themis.timeline;
    const why = `${run.stdout}`;
    // The resize came within 3 s of the step (a load report and a tick), and before any new backend was warm.
    expect(events.firstResizeS, why).not.toBeNull();
    expect(events.firstNewWarmS, why).not.toBeNull();
    expect(events.firstResizeS ?? 99, why).toBeLessThanOrEqual(STEP_AT_S + 3);
    expect(events.firstResizeS ?? 99, why).toBeLessThan(events.firstNewWarmS ?? -1);
    // The first seconds with a resized backend and the new one not warm yet: vertical scaling carried the step.
    const bridged = rows.filter((r) => r.second > (events.firstResizeS ?? 0) && r.second < (events.firstNewWarmS ?? 0));
    expect(bridged.length, why).toBeGreaterThanOrEqual(2);
    expect(
      bridged.every((r) => (r.cores[0] ?? 0) > 1),
      why,
    ).toBe(true);

    // Few requests of the step were late: at most 10 %. Without the resize one 1-core backend carries at most
    // about 15 req/s even with batches of 16 and gets 20 until a new one is warm: its queue grows by 5 requests a
    // second, so nearly every request after the first second or two misses 1 s (the same run with --node-cores 1
    // had 88 % of the step late). 10 % leaves room for the second or two before the resize applies.
    const step = rows.filter((r) => r.second >= STEP_AT_S && r.second < STEP_AT_S + STEP_FOR_S);
    const sent = step.reduce((a, r) => a + r.sent, 0);
    const late = step.reduce((a, r) => a + r.violations, 0);
    expect(sent).toBeGreaterThan(250);
    expect(late / sent, why).toBeLessThanOrEqual(0.1);

    // Then back on 1-core replicas: a second at which two or more warm backends all had one core, once the new
    // ones were warm (a later burst may resize them again: that is the rule working, not a failure). The shrink
    // waits until as many 1-core replicas as the held peak needs are warm, 14-16 s into the step here; the run
    // goes on 8 s after the step for that.
    expect(events.backOnOneCoreS, why).not.toBeNull();
    expect(events.backOnOneCoreS ?? -1, why).toBeGreaterThanOrEqual(events.firstNewWarmS ?? 99);
    const back = rows.find((r) => r.second === events.backOnOneCoreS);
    expect(back?.cores.length, why).toBeGreaterThanOrEqual(2);
    expect(
      back?.cores.every((c) => c === 1),
      why,
    ).toBe(true);
    expect(run.stdout).toContain("first in-place resize: second");

    // Nothing left behind: the CLI's processes and the backends the allocator started.
    expect(summary.processes.filter((p) => alive(p.pid))).toEqual([]);
    expect(processesMentioning(dir)).toEqual([]);
    expect(run.stdout).toContain("all processes stopped (0 left)");
    const started = summary.themis.timeline.backends;
    expect(started.length).toBeGreaterThanOrEqual(2);
    const stillServing = await Promise.all(started.map(async (b) => ((await accepts(b.address)) ? b.id : undefined)));
    expect(stillServing.filter(Boolean)).toEqual([]);
  }, 75_000);
});
