/**
 * The simulator's future event list: a binary min-heap over (time, insertion order) held in parallel typed
 * arrays, so an event is three numbers and no object or closure is allocated per event. Ties at equal times
 * pop in insertion order, which keeps runs deterministic.
 */
export class EventQueue {
  private times: Float64Array;
  private seqs: Float64Array;
  private kinds: Uint8Array;
  private as: Int32Array;
  private bs: Float64Array;
  private n = 0;
  private nextSeq = 0;
  /** Fields of the last popped event. */
  time = 0;
  kind = 0;
  a = 0;
  b = 0;

  constructor(initialCapacity = 1024) {
    this.times = new Float64Array(initialCapacity);
    this.seqs = new Float64Array(initialCapacity);
    this.kinds = new Uint8Array(initialCapacity);
    this.as = new Int32Array(initialCapacity);
    this.bs = new Float64Array(initialCapacity);
  }

  get size(): number {
    return this.n;
  }

  push(time: number, kind: number, a: number, b = 0): void {
    if (this.n === this.times.length) this.grow();
    const seq = this.nextSeq++;
    // Sift up with a hole: move parents down until the new event fits.
    let i = this.n++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const pt = this.times[p] as number;
      if (pt < time || (pt === time && (this.seqs[p] as number) < seq)) break;
      this.move(p, i);
      i = p;
    }
    this.set(i, time, seq, kind, a, b);
  }

  /** Removes the earliest event into time/kind/a/b; false when empty. */
  pop(): boolean {
    if (this.n === 0) return false;
    this.time = this.times[0] as number;
    this.kind = this.kinds[0] as number;
    this.a = this.as[0] as number;
    this.b = this.bs[0] as number;
    const last = --this.n;
    if (last === 0) return true;
    const t = this.times[last] as number;
    const s = this.seqs[last] as number;
    const k = this.kinds[last] as number;
    const a = this.as[last] as number;
    const b = this.bs[last] as number;
    let i = 0;
    const half = last >> 1;
    while (i < half) {
      let c = 2 * i + 1;
      const r = c + 1;
      if (r < last) {
        const ct = this.times[c] as number;
        const rt = this.times[r] as number;
        if (rt < ct || (rt === ct && (this.seqs[r] as number) < (this.seqs[c] as number))) c = r;
      }
      const ct = this.times[c] as number;
      if (t < ct || (t === ct && s < (this.seqs[c] as number))) break;
      this.move(c, i);
      i = c;
    }
    this.set(i, t, s, k, a, b);
    return true;
  }

  /** Time of the earliest event (Infinity when empty). */
  peekTime(): number {
    return this.n === 0 ? Number.POSITIVE_INFINITY : (this.times[0] as number);
  }

  private move(from: number, to: number): void {
    this.times[to] = this.times[from] as number;
    this.seqs[to] = this.seqs[from] as number;
    this.kinds[to] = this.kinds[from] as number;
    this.as[to] = this.as[from] as number;
    this.bs[to] = this.bs[from] as number;
  }

  private set(i: number, time: number, seq: number, kind: number, a: number, b: number): void {
    this.times[i] = time;
    this.seqs[i] = seq;
    this.kinds[i] = kind;
    this.as[i] = a;
    this.bs[i] = b;
  }

  private grow(): void {
    const cap = this.times.length * 2;
    const t = new Float64Array(cap);
    t.set(this.times);
    this.times = t;
    const s = new Float64Array(cap);
    s.set(this.seqs);
    this.seqs = s;
    const k = new Uint8Array(cap);
    k.set(this.kinds);
    this.kinds = k;
    const a = new Int32Array(cap);
    a.set(this.as);
    this.as = a;
    const b = new Float64Array(cap);
    b.set(this.bs);
    this.bs = b;
  }
}
