import { describe, expect, it } from "vitest";
import { MinHeap } from "./min-heap.js";
import { seededRandom } from "./random.js";

describe("MinHeap", () => {
  it("pops in key order, interleaved with pushes, against a sort (2,000 random operations)", () => {
    const rnd = seededRandom(3);
    const heap = new MinHeap<string>();
    const mirror: number[] = [];
    for (let op = 0; op < 2000; op++) {
      if (mirror.length > 0 && rnd.uniform() < 0.4) {
        mirror.sort((a, b) => a - b);
        const k = mirror.shift() as number;
        expect(heap.peekKey()).toBe(k);
        expect(heap.pop()).toBe(`v${k}`);
      } else {
        const k = Math.floor(rnd.uniform() * 1e6);
        heap.push(k, `v${k}`);
        mirror.push(k);
      }
      expect(heap.size).toBe(mirror.length);
    }
  });

  it("is empty-safe, and drain hands back every pair and empties it", () => {
    const heap = new MinHeap<number>();
    expect(heap.pop()).toBeUndefined();
    expect(heap.peekKey()).toBeUndefined();
    for (const k of [5, 1, 4, 2, 3]) heap.push(k, k * 10);
    const pairs = heap.drain().sort((a, b) => a[0] - b[0]);
    expect(pairs).toEqual([
      [1, 10],
      [2, 20],
      [3, 30],
      [4, 40],
      [5, 50],
    ]);
    expect(heap.size).toBe(0);
    expect(heap.pop()).toBeUndefined();
  });
});
