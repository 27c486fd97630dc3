import { seededRandom } from "@infergrid/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hasUntried, pickBackend, pickOutside, prefixEnd, prefixSize } from "./prefix-dispatch.js";
import { TriedEntries } from "./tried-entries.js";

/** A list of distinct backend numbers, a prefix length, a usable mask (or none: all usable), tried backends, and
 * where each was tried (its index then, possibly stale: the list may have changed since). */
const scene = fc
  .record({
    list: fc.uniqueArray(fc.integer({ min: 0, max: 40 }), { maxLength: 30 }),
    n: fc.integer({ min: 0, max: 35 }),
    mask: fc.option(fc.array(fc.boolean(), { minLength: 30, maxLength: 30 }), { nil: undefined }),
    tried: fc.uniqueArray(fc.integer({ min: 0, max: 40 }), { maxLength: 12 }),
    staleAt: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 12, maxLength: 12 }),
    seed: fc.integer({ min: 1, max: 1_000_000 }),
  })
  .map((s) => {
    const usable = s.mask === undefined ? undefined : (i: number) => s.mask?.[i] === true;
    const view = { listLength: s.list.length, key: (i: number) => s.list[i] as number, usable };
    const entries = new TriedEntries<number>();
    s.tried.forEach((b, t) => {
      const now = s.list.indexOf(b);
      entries.add(b, now >= 0 && t % 3 !== 0 ? now : (s.staleAt[t] as number));
    });
    return { ...s, usable, view, entries, triedSet: new Set(s.tried) };
  });

describe("TriedEntries", () => {
  it("finds exactly the usable prefix entries whose backend was tried, ascending, wherever it was tried", () => {
    fc.assert(
      fc.property(scene, ({ list, n, usable, view, entries, triedSet }) => {
        const end = prefixEnd(n, usable, list.length);
        const m = entries.indicesIn(end, view);
        const expected: number[] = [];
        for (let i = 0; i < end; i++) if ((usable?.(i) ?? true) && triedSet.has(list[i] as number)) expected.push(i);
        expect(entries.found.slice(0, m)).toEqual(expected);
      }),
    );
  });

  it("is reused: clear forgets the round, has and size follow", () => {
    const t = new TriedEntries<string>();
    t.add("a", 0);
    t.add("b", 3);
    expect(t.size).toBe(2);
    expect(t.has("b")).toBe(true);
    t.clear();
    expect(t.size).toBe(0);
    expect(t.has("a")).toBe(false);
    t.add("c", 1);
    expect(t.indicesIn(2, { listLength: 2, key: (i) => ["x", "c"][i] as string })).toBe(1);
    expect(t.found[0]).toBe(1);
  });
});

describe("pickOutside", () => {
  it("picks what pickBackend picks over the same prefix and exclusions, drawing the same numbers", () => {
    fc.assert(
      fc.property(scene, ({ list, n, usable, view, entries, triedSet, seed }) => {
        const end = prefixEnd(n, usable, list.length);
        const m = entries.indicesIn(end, view);
        const excluded = { has: (i: number) => triedSet.has(list[i] as number) };
        const a = seededRandom(seed);
        const b = seededRandom(seed);
        const picked = pickOutside(end, usable, entries.found, m, a);
        expect(picked).toBe(pickBackend(n, usable ?? (() => true), excluded, b, list.length));
        expect(a.uniform()).toBe(b.uniform());
        expect(prefixSize(end, usable) > m).toBe(hasUntried(n, usable ?? (() => true), excluded, list.length));
      }),
    );
  });
});
