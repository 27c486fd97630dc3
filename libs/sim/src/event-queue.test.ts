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

  it("gives the order one heap gives when events also go through in-order lanes, promise kept or not", () => {
    const random = seededRandom(11);
    const mixed = new EventQueue(2);
    const heap = new EventQueue(2);
    const popped: number[][] = [[], []];
    let now = 0;
    for (let i = 0; i < 20_000; i++) {
      const r = random.uniform();
      if (r < 0.35 && (mixed.size > 0 || heap.size > 0)) {
        // Pop one from each: the same event, and the clock moves to it.
        expect(mixed.pop()).toBe(heap.pop());
        expect([mixed.time, mixed.kind, mixed.a, mixed.b]).toEqual([heap.time, heap.kind, heap.a, heap.b]);
        now = mixed.time;
        popped[0]?.push(mixed.a);
        continue;
      }
      // Hops (often tied), a few broken promises (earlier than the lane's last), a second lane further ahead
      // (a stream in time order, tied with the hops now and then), and ordinary events.
      const hop =
        r < 0.7 ? 0.5 : r < 0.75 ? -0.25 : r < 0.8 ? 0.5 * Math.floor(random.uniform() * 8) : 1 + Math.floor(random.uniform() * 20);
      const t = now + hop;
      if (r < 0.75) mixed.pushInOrder(t, 2, i, i / 2);
      else if (r < 0.8) mixed.pushInOrder(t, 2, i, i / 2, 1);
      else mixed.push(t, 2, i, i / 2);
      heap.push(t, 2, i, i / 2);
    }
    while (heap.size > 0) {
      expect(mixed.pop() && heap.pop()).toBe(true);
      expect([mixed.time, mixed.a]).toEqual([heap.time, heap.a]);
    }
    expect(mixed.pop()).toBe(false);
    expect((popped[0]?.length ?? 0) > 5000).toBe(true);
  });

  it("refuses a lane it does not have", () => {
    expect(() => new EventQueue(4, 1).pushInOrder(1, 1, 1, 0, 1)).toThrow(RangeError);
  });
});
