import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { effectivePrefix, hasUntried, pickBackend, pickCheapest, replacementFor, usableRange } from "./prefix-dispatch.js";

const all = () => true;
const none: ReadonlySet<number> = new Set();

describe("hasUntried", () => {
  it("is true while an entry of the (usable) prefix is untried, false once all have been", () => {
    expect(hasUntried(3, all, new Set([0, 1]), 10)).toBe(true);
    expect(hasUntried(3, all, new Set([0, 1, 2]), 10)).toBe(false);
    // Entry 1 is unusable, so the prefix of 3 reaches index 3.
    const usable = (i: number) => i !== 1;
    expect(hasUntried(3, usable, new Set([0, 2]), 10)).toBe(true);
    expect(hasUntried(3, usable, new Set([0, 2, 3]), 10)).toBe(false);
    expect(hasUntried(3, all, none, 0)).toBe(false);
  });
});

describe("pickBackend", () => {
  it("picks uniformly inside the first n entries", () => {
    const random = seededRandom(1);
    const counts = new Array<number>(10).fill(0);
    const draws = 40_000;
    for (let i = 0; i < draws; i++) {
      const b = pickBackend(4, all, none, random, 10);
      expect(b).toBeDefined();
      counts[b ?? 0] = (counts[b ?? 0] ?? 0) + 1;
    }
    // Each of 0..3 gets 1/4 (sd of a count ~ 87); nothing beyond the prefix.
    for (let i = 0; i < 4; i++) expect(Math.abs((counts[i] ?? 0) - draws / 4)).toBeLessThan(450);
    expect(counts.slice(4).every((c) => c === 0)).toBe(true);
  });

  it("skips unusable entries, so the prefix extends past failures", () => {
    const failed = new Set([1, 2]);
    const usable = (i: number) => !failed.has(i);
    const random = seededRandom(2);
    const seen = new Set<number>();
    for (let i = 0; i < 2_000; i++) seen.add(pickBackend(3, usable, none, random, 10) ?? -1);
    expect([...seen].sort()).toEqual([0, 3, 4]);
  });

  it("excludes already-tried entries without shrinking the prefix, and ends with undefined", () => {
    const random = seededRandom(3);
    const tried = new Set<number>();
    for (let i = 0; i < 3; i++) {
      const b = pickBackend(3, all, tried, random, 10);
      expect(b).toBeDefined();
      expect(b).toBeLessThan(3);
      expect(tried.has(b ?? -1)).toBe(false);
      tried.add(b ?? -1);
    }
    expect(pickBackend(3, all, tried, random, 10)).toBeUndefined();
  });

  it("stops at the end of the list", () => {
    const random = seededRandom(4);
    expect(pickBackend(5, (i) => i !== 0, none, random, 2)).toBe(1);
    expect(pickBackend(5, () => false, none, random, 10)).toBeUndefined();
    expect(pickBackend(0, all, none, random, 10)).toBeUndefined();
  });
});

describe("prefix helpers", () => {
  const usable = (i: number) => i !== 1 && i !== 4;

  it("effectivePrefix and usableRange give list indices by usable rank", () => {
    expect(effectivePrefix(3, usable, 10)).toEqual([0, 2, 3]);
    // Scale-out from 3 to 5: warm ranks 3 and 4, i.e. list entries 5 and 6.
    expect(usableRange(3, 5, usable, 10)).toEqual([5, 6]);
    expect(usableRange(3, 20, usable, 7)).toEqual([5, 6]);
  });

  it("replacementFor names the entry that joins the prefix when one fails", () => {
    // Prefix of 3 over [0, 2, 3]; 2 fails: the next usable entry past 3 is 5 (4 is down too).
    expect(replacementFor(3, 2, usable, 10)).toBe(5);
    expect(replacementFor(3, 7, usable, 10)).toBeUndefined(); // not in the prefix
    expect(replacementFor(3, 2, usable, 4)).toBeUndefined(); // no spare entry
  });
});

describe("pickCheapest", () => {
  it("picks the least-cost untried usable entry of the prefix, and spreads ties evenly", () => {
    const costs = [5, 3, 3, 1, 0];
    const counts = [0, 0, 0, 0, 0];
    const random = seededRandom(11);
    // n = 3: the prefix is 0, 1, 2 (entry 3 and 4 are cheaper but outside it).
    for (let k = 0; k < 2000; k++) {
      const i = pickCheapest(
        3,
        () => true,
        { has: () => false },
        (c) => costs[c] as number,
        random,
        5,
      ) as number;
      counts[i] = (counts[i] as number) + 1;
    }
    expect(counts[0]).toBe(0);
    expect((counts[3] as number) + (counts[4] as number)).toBe(0);
    expect(Math.abs((counts[1] as number) - (counts[2] as number))).toBeLessThan(200);
    expect(
      pickCheapest(
        3,
        () => true,
        { has: (i) => i !== 0 },
        (i) => costs[i] as number,
        random,
        5,
      ),
    ).toBe(0);
    expect(
      pickCheapest(
        3,
        () => true,
        { has: () => true },
        (i) => costs[i] as number,
        random,
        5,
      ),
    ).toBeUndefined();
  });
});
