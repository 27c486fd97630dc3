import { describe, expect, it } from "vitest";
import { MembershipTable } from "./membership.js";

describe("MembershipTable", () => {
  it("keeps a member live until its ttl passes, then expires it", () => {
    const t = new MembershipTable<null>(3000);
    expect(t.observe("b", "h:2", 1, false, null, 0)).toBe(true);
    expect(t.observe("a", "h:1", 1, false, null, 500)).toBe(true);
    expect(t.observe("a", "h:1", 1, false, null, 1000)).toBe(false);
    expect(t.live(3000).map((m) => m.id)).toEqual(["a", "b"]);
    expect(t.live(3001).map((m) => m.id)).toEqual(["a"]);
    expect(t.expire(4001).map((m) => m.id)).toEqual(["b", "a"]);
    expect(t.all()).toHaveLength(0);
  });

  it("takes a draining member out at once and sees a restart as new", () => {
    const t = new MembershipTable<null>(3000);
    t.observe("a", "h:1", 1, false, null, 0);
    t.observe("a", "h:1", 1, true, null, 10);
    expect(t.isLive("a", 10)).toBe(false);
    expect(t.observe("a", "h:1", 2, false, null, 20)).toBe(true);
    expect(t.isLive("a", 20)).toBe(true);
  });
});
