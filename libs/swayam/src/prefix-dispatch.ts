/**
 * Random dispatch inside the prefix of the ordered backend list (Gujarati et al., Middleware'17, section 4.4,
 * Algorithm 1 lines 8-9, and section 4.5 RAND).
 *
 * Every frontend holds the same ordered list and uses its first n entries, so frontends that agree on n use the
 * same backends and the rest idle until they decommission. A failed (unusable) entry is skipped by the same
 * rule everywhere: the prefix is the first n *usable* entries, so it extends past failures (section 5.3: the
 * frontends "use additional warm backends"). Excluded indices (already tried for this request) stay in the
 * prefix, they just cannot be picked, so retries go to another backend.
 */
import { type Random, randomInt } from "@infergrid/core";

export type UsablePredicate = (index: number) => boolean;

/** The list indices already tried for a request: a Set, or a view of one keyed otherwise. */
export interface IndexSet {
  has(index: number): boolean;
}

/** The untried usable entries of the prefix, and where the prefix ends in the list. */
function scanPrefix(n: number, usable: UsablePredicate, excluded: IndexSet, listLength: number): { candidates: number; end: number } {
  let inPrefix = 0;
  let candidates = 0;
  let end = 0;
  for (; end < listLength && inPrefix < n; end++) {
    if (!usable(end)) continue;
    inPrefix++;
    if (!excluded.has(end)) candidates++;
  }
  return { candidates, end };
}

/**
 * Whether an entry of the prefix is still untried this round. Late binding parks a request only when none
 * is: a park fanned out to a prefix with free backends would hold a slot at every one of them until the
 * extra holds are given back, refusing the requests behind it meanwhile.
 */
export function hasUntried(n: number, usable: UsablePredicate, excluded: IndexSet, listLength: number): boolean {
  return scanPrefix(n, usable, excluded, listLength).candidates > 0;
}

/**
 * A list index chosen uniformly among the first n usable entries of a list of listLength entries, minus the
 * excluded ones; undefined if none is left. Two scans and no allocation: the simulator calls this per probe.
 */
export function pickBackend(
  n: number,
  usable: UsablePredicate,
  excluded: IndexSet,
  random: Random,
  listLength: number,
): number | undefined {
  const { candidates, end } = scanPrefix(n, usable, excluded, listLength);
  if (candidates === 0) return undefined;
  let chosen = randomInt(random, candidates);
  for (let i = 0; i < end; i++) {
    if (!usable(i) || excluded.has(i)) continue;
    if (chosen === 0) return i;
    chosen--;
  }
  return undefined;
}

/** Every entry usable: what a view without a `usable` predicate means. */
export const EVERY_ENTRY: UsablePredicate = () => true;

/** Where the prefix of the first n usable entries ends in the list (exclusive); `usable` undefined: every entry is. */
export function prefixEnd(n: number, usable: UsablePredicate | undefined, listLength: number): number {
  if (usable === undefined) return Math.max(0, Math.min(n, listLength));
  let inPrefix = 0;
  let end = 0;
  for (; end < listLength && inPrefix < n; end++) if (usable(end)) inPrefix++;
  return end;
}

/** The usable entries before `end` (prefixEnd's): the prefix's size. */
export function prefixSize(end: number, usable: UsablePredicate | undefined): number {
  if (usable === undefined) return end;
  let size = 0;
  for (let i = 0; i < end; i++) if (usable(i)) size++;
  return size;
}

/**
 * pickBackend with the excluded entries given as the first `excludedCount` of `excluded`, ascending list indices of
 * usable entries before `end` (prefixEnd's): the same entry for the same random draw, and undefined when none is
 * left. With every entry usable (`usable` undefined) it costs O(excluded), not O(prefix): the simulator's long
 * prefixes, probed entry after entry, made the scan its largest cost.
 */
export function pickOutside(
  end: number,
  usable: UsablePredicate | undefined,
  excluded: readonly number[],
  excludedCount: number,
  random: Random,
): number | undefined {
  const candidates = prefixSize(end, usable) - excludedCount;
  if (candidates <= 0) return undefined;
  let chosen = randomInt(random, candidates);
  if (usable === undefined) {
    // The chosen-th index of [0, end) once the excluded ones are skipped: each excluded index at or below it shifts it.
    for (let e = 0; e < excludedCount && (excluded[e] as number) <= chosen; e++) chosen++;
    return chosen;
  }
  let e = 0;
  for (let i = 0; i < end; i++) {
    if (!usable(i)) continue;
    if (e < excludedCount && excluded[e] === i) {
      e++;
      continue;
    }
    if (chosen === 0) return i;
    chosen--;
  }
  return undefined;
}

/**
 * List indices of the usable entries of rank fromRank..toRank-1 (0-based ranks among usable entries).
 * usableRange(0, n) is the effective prefix; usableRange(nOld, nNew) the entries to warm on a scale-out.
 */
export function usableRange(fromRank: number, toRank: number, usable: UsablePredicate, listLength: number): number[] {
  const out: number[] = [];
  let rank = 0;
  for (let i = 0; i < listLength && rank < toRank; i++) {
    if (!usable(i)) continue;
    if (rank >= fromRank) out.push(i);
    rank++;
  }
  return out;
}

/** The list indices that make up the effective prefix of size n. */
export function effectivePrefix(n: number, usable: UsablePredicate, listLength: number): number[] {
  return usableRange(0, n, usable, listLength);
}

/**
 * The entry that joins the prefix when `failed` (currently in it) becomes unusable: the first usable entry past
 * the prefix's end. Undefined if `failed` is not in the prefix or the list has no spare entry. Warm it.
 */
export function replacementFor(n: number, failed: number, usable: UsablePredicate, listLength: number): number | undefined {
  const prefix = effectivePrefix(n, usable, listLength);
  if (!prefix.includes(failed)) return undefined;
  const last = prefix[prefix.length - 1] ?? -1;
  for (let i = last + 1; i < listLength; i++) {
    if (i !== failed && usable(i)) return i;
  }
  return undefined;
}

/**
 * The untried usable entry of the prefix that costs least for this request (Kairos's matching for one
 * pending request: each request is priced on arrival at a decentralised frontend), ties broken uniformly;
 * undefined if none is left.
 */
export function pickCheapest(
  n: number,
  usable: UsablePredicate,
  excluded: IndexSet,
  cost: (index: number) => number,
  random: Random,
  listLength: number,
): number | undefined {
  let best: number | undefined;
  let bestCost = Number.POSITIVE_INFINITY;
  let ties = 0;
  let inPrefix = 0;
  for (let i = 0; i < listLength && inPrefix < n; i++) {
    if (!usable(i)) continue;
    inPrefix++;
    if (excluded.has(i)) continue;
    const c = cost(i);
    if (best === undefined || c < bestCost) {
      [best, bestCost, ties] = [i, c, 1];
    } else if (c === bestCost) {
      // Reservoir sampling over the ties: each of them ends up chosen with the same chance.
      ties++;
      if (randomInt(random, ties) === 0) best = i;
    }
  }
  return best;
}
