import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { EventQueue } from "./event-queue.js";

describe("EventQueue", () => {
  it("pops in time order, ties in insertion order, growing past its capacity", () => {
    const q = new EventQueue(4);
    const random = seededRandom(5);
    const pushed: { t: number; a: number }[] = [];
    for (let i = 0; i < 5000; i++) {
      const t = Math.floor(random.uniform() * 100);
      q.push(t, 1, i, i * 2);
      pushed.push({ t, a: i });
    }
    const expected = [...pushed].sort((x, y) => x.t - y.t || x.a - y.a);
    const got: { t: number; a: number }[] = [];
    while (q.pop()) {
      expect(q.b).toBe(q.a * 2);
      got.push({ t: q.time, a: q.a });
    }
    expect(got).toEqual(expected);
    expect(q.size).toBe(0);
    expect(q.peekTime()).toBe(Number.POSITIVE_INFINITY);
  });

  it("interleaves pushes and pops", () => {
    const q = new EventQueue();
    q.push(10, 1, 1);
    q.push(5, 1, 2);
    expect(q.pop() && q.a).toBe(2);
    q.push(7, 1, 3);
    q.push(10, 1, 4);
    expect([q.pop() && q.a, q.pop() && q.a, q.pop() && q.a]).toEqual([3, 1, 4]);
    expect(q.pop()).toBe(false);
  });
});
