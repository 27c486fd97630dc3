import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HARVEST_DEFAULTS, HarvestGate, type HarvestJob, harvestJob } from "./harvest.js";

const OPTIONS = { resumeAfterMs: 50, abandonAfterMs: 1_000 };

describe("the harvest gate of a warm inference backend", () => {
  it("stops the best-effort process when a request starts computing, once for overlapping requests", () => {
    const gate = new HarvestGate(0, OPTIONS);
    expect(gate.isStopped).toBe(false);
    expect(gate.nextCheckMs()).toBeUndefined();
    expect(gate.computeStarts(10)).toBe(true);
    expect(gate.computeStarts(12)).toBe(false);
    expect(gate.isStopped).toBe(true);
    expect(gate.inferenceComputing).toBe(2);
  });

  it("resumes only after the backend has been idle resumeAfterMs since the last request ended", () => {
    const gate = new HarvestGate(0, OPTIONS);
    gate.computeStarts(10);
    gate.computeStarts(20);
    gate.computeEnds(30);
    // One request still computes: no resume, only the abandon check is due.
    expect(gate.nextCheckMs()).toBe(1_010);
    expect(gate.check(200)).toBeUndefined();
    gate.computeEnds(300);
    expect(gate.nextCheckMs()).toBe(350);
    expect(gate.check(349)).toBeUndefined();
    expect(gate.check(350)).toBe("resume");
    expect(gate.isStopped).toBe(false);
    expect(gate.nextCheckMs()).toBeUndefined();
    expect(gate.check(400)).toBeUndefined();
  });

  it("a request that starts within the resume delay keeps the process stopped, and restarts the delay", () => {
    const gate = new HarvestGate(0, OPTIONS);
    gate.computeStarts(0);
    gate.computeEnds(100);
    expect(gate.computeStarts(130)).toBe(false);
    gate.computeEnds(160);
    expect(gate.check(150)).toBeUndefined();
    expect(gate.nextCheckMs()).toBe(210);
    expect(gate.check(210)).toBe("resume");
  });

  it("gives up an item stopped for abandonAfterMs once, then resumes when the backend idles", () => {
    const gate = new HarvestGate(0, OPTIONS);
    gate.computeStarts(0);
    expect(gate.nextCheckMs()).toBe(1_000);
    expect(gate.check(1_000)).toBe("abandon");
    expect(gate.nextCheckMs()).toBeUndefined();
    expect(gate.check(5_000)).toBeUndefined();
    expect(gate.isStopped).toBe(true);
    gate.computeEnds(5_000);
    expect(gate.check(5_050)).toBe("resume");
    // A new stop counts its own time.
    gate.computeStarts(6_000);
    expect(gate.check(6_999)).toBeUndefined();
    expect(gate.check(7_000)).toBe("abandon");
  });

  it("keeps a clock of the time the process may run, stopped while the process is", () => {
    const gate = new HarvestGate(1_000, OPTIONS);
    expect(gate.runningMs(1_400)).toBe(400);
    gate.computeStarts(1_400);
    gate.computeEnds(1_500);
    expect(gate.runningMs(1_540)).toBe(400);
    expect(gate.check(1_550)).toBe("resume");
    expect(gate.runningMs(1_600)).toBe(450);
  });

  it("refuses an end without a start, and bad options", () => {
    expect(() => new HarvestGate(0, OPTIONS).computeEnds(1)).toThrow(/never started/);
    expect(() => new HarvestGate(0, { resumeAfterMs: -1, abandonAfterMs: 1 })).toThrow(RangeError);
    expect(() => new HarvestGate(0, { resumeAfterMs: 0, abandonAfterMs: 0 })).toThrow(RangeError);
    expect(HARVEST_DEFAULTS.abandonAfterMs).toBe(15_000);
  });

  it("never lets the process run while a request computes, whatever the order of events", () => {
    const event = fc.oneof(fc.constant<"start">("start"), fc.constant<"end">("end"), fc.constant<"check">("check"));
    fc.assert(
      fc.property(fc.array(fc.tuple(event, fc.integer({ min: 0, max: 400 })), { maxLength: 60 }), (events) => {
        const gate = new HarvestGate(0, OPTIONS);
        let now = 0;
        let computing = 0;
        let running = true;
        let ran = 0;
        for (const [kind, gap] of events) {
          now += gap;
          if (running) ran += gap;
          if (kind === "start") {
            const stop = gate.computeStarts(now);
            expect(stop).toBe(running);
            running = false;
            computing++;
          } else if (kind === "end" && computing > 0) {
            gate.computeEnds(now);
            computing--;
          } else {
            const due = gate.nextCheckMs();
            const action = gate.check(now);
            if (action === "resume") {
              expect(computing).toBe(0);
              expect(due).toBeDefined();
              expect(now).toBeGreaterThanOrEqual(due as number);
              running = true;
            }
          }
          expect(gate.isStopped).toBe(!running);
          if (computing > 0) expect(gate.isStopped).toBe(true);
          expect(gate.runningMs(now)).toBe(ran);
        }
      }),
    );
  });
});

describe("the job a harvesting backend works for", () => {
  const job = (name: string, over: Partial<HarvestJob> = {}): HarvestJob => ({
    name,
    priority: 0,
    submittedAtMs: 0,
    maxBackends: 4,
    unclaimed: 10,
    inFlight: 0,
    ...over,
  });

  it("is the first in loan order: priority, then arrival", () => {
    expect(harvestJob([job("a", { submittedAtMs: 5 }), job("b", { submittedAtMs: 1 })])).toBe("b");
    expect(harvestJob([job("a", { submittedAtMs: 5, priority: 1 }), job("b", { submittedAtMs: 1 })])).toBe("a");
  });

  it("skips a job with as many items in flight as its maximum of backends, or with no item nobody holds", () => {
    expect(harvestJob([job("a", { inFlight: 4 }), job("b", { submittedAtMs: 9 })])).toBe("b");
    expect(harvestJob([job("a", { unclaimed: 0, inFlight: 1 }), job("b", { submittedAtMs: 9 })])).toBe("b");
    expect(harvestJob([job("a", { inFlight: 3 })])).toBe("a");
    expect(harvestJob([job("a", { unclaimed: 0 })])).toBeUndefined();
    expect(harvestJob([])).toBeUndefined();
  });
});
