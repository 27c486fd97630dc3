/**
 * The list entries a request has tried in its current round: each entry's identity (what it is excluded by, since
 * the list may change under a waiting request) and the list index it had when tried (where to look for it first).
 *
 * Dispatch asks, on every attempt, which entries of the prefix were tried. Asking each prefix entry whether its
 * identity is in a set costs a look-up per entry per attempt, which dominated the simulator when prefixes were
 * long (tens of entries) and requests probed many of them; here the question is answered from the few tried
 * entries instead: each is checked at its remembered index and searched for only when the list changed there.
 * Identities are distinct within a list (an entry is one backend), so each tried entry excludes at most one index.
 * The buffers are reused: a round's entries are dropped by resetting a count.
 */
import type { UsablePredicate } from "./prefix-dispatch.js";

/** What indicesIn reads of a list (a DispatchView is one). */
export interface EntryList<K> {
  readonly listLength: number;
  key(index: number): K;
  /** Undefined: every entry is usable. */
  readonly usable?: UsablePredicate | undefined;
}

export class TriedEntries<K> {
  private readonly keys: K[] = [];
  private readonly at: number[] = [];
  private count = 0;
  /** indicesIn's answer: list indices, ascending, `found` of them. */
  readonly found: number[] = [];

  get size(): number {
    return this.count;
  }

  /** Kept in ascending order of index, so that indicesIn finds them in order while the list stays as it was. */
  add(key: K, index: number): void {
    let j = this.count++;
    while (j > 0 && (this.at[j - 1] as number) > index) {
      this.keys[j] = this.keys[j - 1] as K;
      this.at[j] = this.at[j - 1] as number;
      j--;
    }
    this.keys[j] = key;
    this.at[j] = index;
  }

  clear(): void {
    this.count = 0;
  }

  has(key: K): boolean {
    for (let i = 0; i < this.count; i++) if (this.keys[i] === key) return true;
    return false;
  }

  /**
   * Puts into `found` (ascending) the indices below `end` of the list's usable entries whose identity was tried,
   * and returns how many there are: exactly the indices i < end with list.usable(i) and list.key(i) tried.
   */
  indicesIn(end: number, list: EntryList<K>): number {
    const found = this.found;
    let m = 0;
    for (let t = 0; t < this.count; t++) {
      const k = this.keys[t] as K;
      let index = this.at[t] as number;
      if (!(index < list.listLength && list.key(index) === k)) {
        // The list changed since the entry was tried: it is elsewhere in the prefix, or not in it.
        index = end;
        for (let i = 0; i < end; i++) {
          if (list.key(i) === k) {
            index = i;
            break;
          }
        }
      }
      if (index >= end || (list.usable !== undefined && !list.usable(index))) continue;
      // Insertion into the ascending run: in place already unless the list changed under an entry.
      let j = m++;
      while (j > 0 && (found[j - 1] as number) > index) {
        found[j] = found[j - 1] as number;
        j--;
      }
      found[j] = index;
    }
    return m;
  }
}
