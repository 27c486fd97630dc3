import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hopDeadline } from "./deadline.js";
import { SenderLag } from "./sender-lag.js";

const HOUR = 3_600_000;
/** Both clocks far from 0 (a stamp of 0 or less means none). */
const B = 10 * HOUR;

/** A call sent at `sentAt` on the sender's clock with `budget` ms left, read at `readAt` on the receiver's. */
function read(lag: SenderLag, sender: string, sentAt: number, budget: number, readAt: number): number {
  return lag.deadline(sender, B + readAt + budget, B + sentAt + budget, B + readAt) - B;
}

describe("SenderLag", () => {
  it("reads a sender whose clock is an hour off, either way, as one in step", () => {
    for (const offset of [-HOUR, 0, HOUR]) {
      const lag = new SenderLag();
      // The sender's clock reads `offset` more than the receiver's; each call takes 2 ms to arrive.
      for (let t = 1000; t < 5000; t += 100) expect(read(lag, "f", t + offset, 300, t + 2)).toBe(t + 2 + 300);
    }
  });

  it("takes from a call read late the time it waited beyond the sender's quickest transit", () => {
    const lag = new SenderLag();
    for (let t = 1000; t < 3000; t += 100) read(lag, "f", t + HOUR, 300, t + 2);
    // Sent at 3000, read at 4000 (the receiver was frozen): 998 ms beyond the quickest transit, past its 300 ms.
    const deadline = read(lag, "f", 3000 + HOUR, 300, 4000);
    expect(deadline).toBe(3000 + 2 + 300);
    expect(deadline).toBeLessThan(4000);
  });

  it("keeps each sender's lag apart", () => {
    const lag = new SenderLag();
    for (let t = 1000; t < 3000; t += 100) {
      read(lag, "ahead", t + HOUR, 300, t + 1);
      read(lag, "behind", t - HOUR, 300, t + 1);
    }
    expect(read(lag, "ahead", 3000 + HOUR, 300, 3001)).toBe(3301);
    expect(read(lag, "behind", 3000 - HOUR, 300, 3001)).toBe(3301);
    expect(lag.size).toBe(2);
  });

  it("forgets a lag after its window: a sender whose stamps jumped is read by its new lag from then on", () => {
    const lag = new SenderLag({ windowMs: 10_000 });
    for (let t = 0; t < 2000; t += 100) read(lag, "f", t, 300, t + 2);
    // The sender's stamps jump an hour back (its process restarted on a clock an hour behind): within the window
    // its calls look an hour late; after it, they are read as in step.
    expect(read(lag, "f", 3000 - HOUR, 300, 3002)).toBeLessThan(3002);
    for (let t = 3000; t < 13_000; t += 100) read(lag, "f", t - HOUR, 300, t + 2);
    expect(read(lag, "f", 13_000 - HOUR, 300, 13_002)).toBe(13_302);
  });

  it("never reads a deadline later than the gRPC timeout gives, and a stamp alone as a wall-clock time", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ dt: fc.integer({ min: 0, max: 3000 }), transit: fc.integer({ min: 0, max: 5000 }) }), {
          minLength: 1,
          maxLength: 60,
        }),
        fc.integer({ min: -2 * HOUR, max: 2 * HOUR }),
        (calls, offset) => {
          const lag = new SenderLag();
          let t = 1_000_000;
          for (const c of calls) {
            t += c.dt;
            const relative = t + c.transit + 300;
            expect(lag.deadline("f", relative, t + offset + 300, t + c.transit)).toBeLessThanOrEqual(relative);
          }
        },
      ),
    );
    const lag = new SenderLag();
    expect(lag.deadline("f", Number.POSITIVE_INFINITY, 5000, 1000, HOUR)).toBe(5000 + HOUR);
    expect(lag.deadline("f", 7000, 0, 1000)).toBe(7000);
    expect(lag.size).toBe(0);
  });

  it("remembers at most maxSenders, forgetting the one heard from least recently", () => {
    const lag = new SenderLag({ maxSenders: 2 });
    read(lag, "a", 1000, 300, 1000);
    read(lag, "b", 1000 + HOUR, 300, 1000);
    read(lag, "a", 1100, 300, 1100);
    read(lag, "c", 1100, 300, 1100);
    expect(lag.size).toBe(2);
    // "b" was forgotten: its next call sets its lag afresh (and is read as in step), where "a" is still judged.
    expect(read(lag, "b", 1200 + HOUR + 5000, 300, 1200)).toBe(1500);
    expect(read(lag, "c", 1200 - 5000, 300, 1200)).toBeLessThan(1200);
  });
});

describe("hopDeadline", () => {
  it("takes the component's own timeout when it is the earliest, in whole milliseconds", () => {
    const lag = new SenderLag();
    expect(hopDeadline(1000, 1000 + 60_000, 0, 30_000, 0, lag, "b")).toBe(31_000);
    expect(hopDeadline(1000.5, 1300.7, 0, 30_000, 0, lag, "b")).toBe(1300);
  });

  it("reads the gRPC deadline, a wall-clock time, onto a clock ahead of the wall clock", () => {
    const lag = new SenderLag();
    // This process's wall clock stepped back an hour since it started; the sender's stamps are an hour ahead of it.
    expect(hopDeadline(HOUR + 1000, 1300, HOUR + 900 + 400, 30_000, HOUR, lag, "b")).toBe(HOUR + 1300);
  });
});
