import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SteadyClock } from "./clock.js";

/** A host's two clocks: the wall clock can be stepped, the monotonic one only moves on. */
function host(wallAt0: number) {
  let mono = 5_000.25;
  let step = 0;
  return {
    wall: () => Math.floor(wallAt0 + mono + step),
    mono: () => mono,
    advance: (ms: number) => {
      mono += ms;
    },
    stepWall: (ms: number) => {
      step += ms;
    },
  };
}

describe("SteadyClock", () => {
  it("reads the wall clock until it steps, then keeps moving on by the elapsed time alone", () => {
    const h = host(1_700_000_000_000);
    const clock = new SteadyClock(h.wall, h.mono);
    expect(clock.now()).toBe(h.wall());
    h.advance(1_000);
    expect(clock.now()).toBe(h.wall());
    expect(clock.wallOffset()).toBe(0);
    const before = clock.now();
    h.stepWall(-3_600_000);
    h.advance(2_000);
    // An interval measured across the step is the time that passed, not minus an hour.
    expect(clock.now() - before).toBe(2_000);
    expect(clock.wallOffset()).toBe(3_600_000);
    // A peer's timestamp read off a wall clock that agrees with this host's stepped one.
    expect(clock.fromWall(h.wall())).toBe(clock.now());
    // A deadline on this clock goes out as the stepped wall clock reads it, and comes back unchanged.
    const deadline = clock.now() + 500;
    expect(clock.toWall(deadline)).toBe(h.wall() + 500);
    expect(clock.fromWall(clock.toWall(deadline))).toBe(deadline);
  });

  it("never goes back and gives whole milliseconds, whatever the wall clock does", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ advance: fc.double({ min: 0, max: 1e6, noNaN: true }), step: fc.integer({ min: -1e9, max: 1e9 }) }), {
          maxLength: 50,
        }),
        (moves) => {
          const h = host(1_700_000_000_000);
          const clock = new SteadyClock(h.wall, h.mono);
          let last = clock.now();
          for (const m of moves) {
            h.stepWall(m.step);
            h.advance(m.advance);
            const t = clock.now();
            expect(Number.isInteger(t)).toBe(true);
            expect(t).toBeGreaterThanOrEqual(last);
            last = t;
          }
        },
      ),
    );
  });
});
