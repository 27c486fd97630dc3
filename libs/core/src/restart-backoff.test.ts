import { describe, expect, it } from "vitest";
import { ManualClock } from "./clock.js";
import { KUBERNETES_CRASH_LOOP_BACKOFF, RestartBackoff, type RestartBackoffOptions } from "./restart-backoff.js";

const options: RestartBackoffOptions = { initialMs: 1_000, factor: 2, maxMs: 30_000, resetAfterMs: 60_000 };

/** Crashes after `ranMs`, waits the delay it is given, restarts; returns the delays. */
function crashLoop(b: RestartBackoff, clock: ManualClock, runs: number[]): number[] {
  const delays: number[] = [];
  for (const ranMs of runs) {
    clock.advance(ranMs);
    const d = b.exited();
    if (!d.restart) throw new Error("no restart");
    delays.push(d.delayMs);
    clock.advance(d.delayMs);
    expect(b.restart()).toBe(true);
  }
  return delays;
}

describe("RestartBackoff", () => {
  it("doubles the wait from 1 s per crash in a row and holds it at the cap", () => {
    const clock = new ManualClock(5_000);
    const b = new RestartBackoff(options, clock);
    expect(crashLoop(b, clock, [100, 200, 300, 400, 500, 600, 700, 800])).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
    ]);
    expect(b.restarts).toBe(8);
    expect(b.phase).toBe("running");
  });

  it("reports how long the process ran and waits exactly the delay before restart() agrees", () => {
    const clock = new ManualClock();
    const b = new RestartBackoff(options, clock);
    clock.advance(2_500);
    expect(b.exited()).toEqual({ restart: true, delayMs: 1_000, ranMs: 2_500, reset: false });
    expect(b.phase).toBe("waiting");
    expect(b.msUntilRestart()).toBe(1_000);
    clock.advance(999);
    expect(b.msUntilRestart()).toBe(1);
    expect(b.restart()).toBe(false);
    expect(b.restarts).toBe(0);
    clock.advance(1);
    expect(b.msUntilRestart()).toBe(0);
    expect(b.restart()).toBe(true);
    // Counted once: a second call has no pending restart.
    expect(b.restart()).toBe(false);
    expect(b.restarts).toBe(1);
  });

  it("starts again from 1 s after a run of the reset time, and doubles from there", () => {
    const clock = new ManualClock();
    const b = new RestartBackoff(options, clock);
    expect(crashLoop(b, clock, [10, 10, 10, 10])).toEqual([1_000, 2_000, 4_000, 8_000]);
    // Just short of the reset time: still in the loop.
    expect(crashLoop(b, clock, [59_999])).toEqual([16_000]);
    clock.advance(60_000);
    expect(b.exited()).toMatchObject({ restart: true, delayMs: 1_000, ranMs: 60_000, reset: true });
    clock.advance(1_000);
    expect(b.restart()).toBe(true);
    expect(crashLoop(b, clock, [10, 10])).toEqual([2_000, 4_000]);
  });

  it("the first crash of a process that ran long is not a reset to report, but waits 1 s all the same", () => {
    const clock = new ManualClock();
    const b = new RestartBackoff(options, clock);
    clock.advance(3_600_000);
    expect(b.exited()).toEqual({ restart: true, delayMs: 1_000, ranMs: 3_600_000, reset: true });
  });

  it("restarts nothing once stopping: not an exit, not a restart whose wait is under way", () => {
    const clock = new ManualClock();
    const stoppedRunning = new RestartBackoff(options, clock);
    stoppedRunning.stop();
    expect(stoppedRunning.exited()).toEqual({ restart: false, reason: "stopping" });
    expect(stoppedRunning.msUntilRestart()).toBe(Number.POSITIVE_INFINITY);

    const stoppedWaiting = new RestartBackoff(options, clock);
    clock.advance(100);
    expect(stoppedWaiting.exited().restart).toBe(true);
    stoppedWaiting.stop();
    clock.advance(60_000);
    expect(stoppedWaiting.restart()).toBe(false);
    expect(stoppedWaiting.phase).toBe("stopped");
    expect(stoppedWaiting.restarts).toBe(0);
    expect(stoppedWaiting.exited()).toEqual({ restart: false, reason: "stopping" });
  });

  it("refuses an exit while no process runs, and nonsensical options", () => {
    const clock = new ManualClock();
    const b = new RestartBackoff(options, clock);
    b.exited();
    expect(() => b.exited()).toThrow(/while waiting/);
    expect(() => new RestartBackoff({ ...options, initialMs: 0 }, clock)).toThrow(RangeError);
    expect(() => new RestartBackoff({ ...options, maxMs: 500 }, clock)).toThrow(RangeError);
    expect(() => new RestartBackoff({ ...options, factor: 0.5 }, clock)).toThrow(RangeError);
  });

  it("with Kubernetes' numbers gives the kubelet's sequence: 10 s, 20 s, ... 5 min", () => {
    const clock = new ManualClock();
    const b = new RestartBackoff(KUBERNETES_CRASH_LOOP_BACKOFF, clock);
    expect(crashLoop(b, clock, [1, 1, 1, 1, 1, 1, 1])).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]);
  });
});
