/**
 * Binary min-heap of values by a numeric key, keys and values in parallel arrays. Ties leave in no
 * particular order.
 */
export class MinHeap<T> {
  private readonly keys: number[] = [];
  private readonly vals: T[] = [];

  get size(): number {
    return this.keys.length;
  }

  push(key: number, value: T): void {
    const keys = this.keys;
    const vals = this.vals;
    keys.push(key);
    vals.push(value);
    let i = keys.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (keys[p]! <= keys[i]!) break;
      this.swap(p, i);
      i = p;
    }
  }

  /** The smallest key, or undefined when empty. */
  peekKey(): number | undefined {
    return this.keys[0];
  }

  /** Removes and returns the value with the smallest key, or undefined when empty. */
  pop(): T | undefined {
    const keys = this.keys;
    const vals = this.vals;
    if (keys.length === 0) return undefined;
    const top = vals[0] as T;
    const lk = keys.pop() as number;
    const lv = vals.pop() as T;
    if (keys.length > 0) {
      keys[0] = lk;
      vals[0] = lv;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < keys.length && keys[l]! < keys[m]!) m = l;
        if (r < keys.length && keys[r]! < keys[m]!) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }

  /** Empties the heap and returns its (key, value) pairs, in no particular order. */
  drain(): [number, T][] {
    const out = this.keys.map((k, i): [number, T] => [k, this.vals[i] as T]);
    this.keys.length = 0;
    this.vals.length = 0;
    return out;
  }

  private swap(a: number, b: number): void {
    const keys = this.keys;
    const vals = this.vals;
    const k = keys[a]!;
    keys[a] = keys[b]!;
    keys[b] = k;
    const v = vals[a] as T;
    vals[a] = vals[b] as T;
    vals[b] = v;
  }
}
