import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HeardClock } from "./heard-clock.js";
import { MembershipTable } from "./membership.js";

describe("HeardClock", () => {
  it("keeps the peers live at an outage live until heartbeats return, while a peer that alone fell silent leaves", () => {
    const ttl = 1_000;
    const heard = new HeardClock(ttl);
    const members = new MembershipTable<null>(ttl);
    const beat = (id: string, now: number) => {
      members.observe(id, `${id}:1`, 1, false, null, now);
      heard.heard(now);
    };
    const live = (now: number) => members.live(heard.at(now)).map((m) => m.id);
    // a and b beat every 250 ms; b stops at 2 s (it died), a goes on.
    for (let t = 0; t <= 4_000; t += 250) {
      beat("a", t);
      if (t <= 2_000) beat("b", t);
    }
    expect(live(4_000)).toEqual(["a"]);
    // Then nothing at all for a minute (NATS away): a stays live, and b stays gone.
    expect(live(64_000)).toEqual(["a"]);
    expect(heard.deaf(64_000)).toBe(true);
    // Heartbeats return: the clock is now again.
    beat("a", 64_100);
    expect(heard.deaf(64_100)).toBe(false);
    expect(heard.at(64_100)).toBe(64_100);
    expect(live(64_100)).toEqual(["a"]);
  });

  it("reads now while something was heard within the ttl, never later than now, and never goes back", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 5_000 }), beat: fc.boolean() }), { maxLength: 60 }),
        fc.integer({ min: 1, max: 3_000 }),
        (steps, ttl) => {
          const heard = new HeardClock(ttl);
          let now = 0;
          let last: number | undefined;
          let previous = heard.at(0);
          for (const s of steps) {
            now += s.gap;
            if (s.beat) {
              heard.heard(now);
              last = now;
            }
            const at = heard.at(now);
            expect(at).toBeLessThanOrEqual(now);
            expect(at).toBeGreaterThanOrEqual(previous);
            if (last === undefined || now - last <= ttl) expect(at).toBe(now);
            else expect(at).toBe(last + ttl);
            previous = at;
          }
        },
      ),
    );
  });
});
