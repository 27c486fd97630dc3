import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { ParkingLot, parkTargets } from "./parking-lot.js";

describe("parkTargets", () => {
  it("picks `fanout` distinct entries of the prefix, each about equally often; all of a short prefix", () => {
    const rnd = seededRandom(5);
    const counts = new Map<number, number>();
    for (let k = 0; k < 4000; k++) {
      const t = parkTargets([3, 4, 6, 9], 2, rnd);
      expect(t).toHaveLength(2);
      expect(new Set(t).size).toBe(2);
      for (const i of t) counts.set(i, (counts.get(i) ?? 0) + 1);
    }
    expect([...counts.keys()].sort((a, b) => a - b)).toEqual([3, 4, 6, 9]);
    for (const c of counts.values()) expect(Math.abs(c - 2000)).toBeLessThan(150);
    expect(parkTargets([7, 8], 2, rnd)).toEqual([7, 8]);
    expect(parkTargets([], 2, rnd)).toEqual([]);
  });
});

describe("ParkingLot", () => {
  it("hands out the oldest request first, whatever order they parked in", () => {
    const lot = new ParkingLot<string>();
    const arrivals: [string, number][] = [
      ["c", 30],
      ["a", 10],
      ["e", 50],
      ["b", 20],
      ["d", 40],
      ["f", 5],
    ];
    for (const [id, at] of arrivals) lot.park(id, at);
    const order: string[] = [];
    for (let p = lot.takeOldest(() => true); p !== undefined; p = lot.takeOldest(() => true)) order.push(p.item);
    expect(order).toEqual(["f", "a", "b", "c", "d", "e"]);
    expect(lot.size).toBe(0);
  });

  it("skips and discards entries that no longer wait (taken elsewhere, cancelled, timed out)", () => {
    const lot = new ParkingLot<number>();
    for (let i = 0; i < 10; i++) lot.park(i, i);
    const gone = new Set([0, 1, 2, 5]);
    const live = (i: number) => !gone.has(i);
    expect(lot.takeOldest(live)?.item).toBe(3);
    expect(lot.takeOldest(live)?.item).toBe(4);
    expect(lot.takeOldest(live)?.item).toBe(6);
    expect(lot.size).toBe(3);
    expect(lot.takeOldest(() => false)).toBeUndefined();
    expect(lot.size).toBe(0);
  });

  it("retain keeps the live entries in order and returns the others", () => {
    const lot = new ParkingLot<number>();
    for (const i of [7, 3, 9, 1, 5, 8]) lot.park(i, i);
    const removed = lot.retain((i) => i % 2 === 1);
    expect(removed.sort()).toEqual([8]);
    const order: number[] = [];
    for (let p = lot.takeOldest(() => true); p !== undefined; p = lot.takeOldest(() => true)) order.push(p.item);
    expect(order).toEqual([1, 3, 5, 7, 9]);
  });

  it("orders a large random batch like a sort by arrival", () => {
    const lot = new ParkingLot<number>();
    let x = 12345;
    const times: number[] = [];
    for (let i = 0; i < 500; i++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      times.push(x);
      lot.park(i, x);
    }
    const out: number[] = [];
    for (let p = lot.takeOldest(() => true); p !== undefined; p = lot.takeOldest(() => true)) out.push(p.arrivedAt);
    expect(out).toEqual([...times].sort((a, b) => a - b));
  });
});
