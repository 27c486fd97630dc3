/**
 * The simulator's future event list: a binary min-heap over (time, insertion order) held in parallel typed
 * arrays, so an event is three numbers and no object or closure is allocated per event. Ties at equal times
 * pop in insertion order, which keeps runs deterministic.
 *
 * Beside the heap, a FIFO for events pushed in time order (pushInOrder: a constant delay after the clock, such as
 * one network hop): most of a Swayam run's events are hops, and a FIFO takes them in O(1) where the heap sifted
 * each through its levels. pop takes the earlier of the two heads by (time, insertion order), so the events come
 * out in exactly the order one heap gives.
 */
export class EventQueue {
  private times: Float64Array;
  private seqs: Float64Array;
  private kinds: Uint8Array;
  private as: Int32Array;
  private bs: Float64Array;
  private n = 0;
  private nextSeq = 0;
  /** The in-order FIFO: a ring of `fifoCount` events from `fifoHead`, times non-decreasing. */
  private fTimes: Float64Array;
  private fSeqs: Float64Array;
  private fKinds: Uint8Array;
  private fAs: Int32Array;
  private fBs: Float64Array;
  private fifoHead = 0;
  private fifoCount = 0;
  private fifoLast = Number.NEGATIVE_INFINITY;
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
    this.fTimes = new Float64Array(initialCapacity);
    this.fSeqs = new Float64Array(initialCapacity);
    this.fKinds = new Uint8Array(initialCapacity);
    this.fAs = new Int32Array(initialCapacity);
    this.fBs = new Float64Array(initialCapacity);
  }

  get size(): number {
    return this.n + this.fifoCount;
  }

  /**
   * push, for an event whose time is no earlier than the previous pushInOrder's (now + a constant delay, the clock
   * never going back): it waits in the FIFO. One earlier than the FIFO's last goes to the heap, so the order events
   * come out in never depends on the caller keeping the promise.
   */
  pushInOrder(time: number, kind: number, a: number, b = 0): void {
    if (this.fifoCount > 0 && !(time >= this.fifoLast)) {
      this.push(time, kind, a, b);
      return;
    }
    if (this.fifoCount === this.fTimes.length) this.growFifo();
    const cap = this.fTimes.length;
    let i = this.fifoHead + this.fifoCount;
    if (i >= cap) i -= cap;
    this.fTimes[i] = time;
    this.fSeqs[i] = this.nextSeq++;
    this.fKinds[i] = kind;
    this.fAs[i] = a;
    this.fBs[i] = b;
    this.fifoCount++;
    this.fifoLast = time;
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
    if (this.fifoCount > 0) {
      const h = this.fifoHead;
      const ft = this.fTimes[h] as number;
      const ht = this.n === 0 ? Number.POSITIVE_INFINITY : (this.times[0] as number);
      if (ft < ht || (ft === ht && (this.fSeqs[h] as number) < (this.seqs[0] as number))) {
        this.time = ft;
        this.kind = this.fKinds[h] as number;
        this.a = this.fAs[h] as number;
        this.b = this.fBs[h] as number;
        this.fifoHead = h + 1 === this.fTimes.length ? 0 : h + 1;
        this.fifoCount--;
        return true;
      }
    }
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
    const heap = this.n === 0 ? Number.POSITIVE_INFINITY : (this.times[0] as number);
    return this.fifoCount === 0 ? heap : Math.min(heap, this.fTimes[this.fifoHead] as number);
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

  /** Doubles the FIFO's ring, unrolled from its head. */
  private growFifo(): void {
    const cap = this.fTimes.length;
    const order = (from: Float64Array | Int32Array | Uint8Array, to: Float64Array | Int32Array | Uint8Array) => {
      to.set(from.subarray(this.fifoHead));
      to.set(from.subarray(0, this.fifoHead), cap - this.fifoHead);
    };
    const t = new Float64Array(cap * 2);
    order(this.fTimes, t);
    this.fTimes = t;
    const s = new Float64Array(cap * 2);
    order(this.fSeqs, s);
    this.fSeqs = s;
    const k = new Uint8Array(cap * 2);
    order(this.fKinds, k);
    this.fKinds = k;
    const a = new Int32Array(cap * 2);
    order(this.fAs, a);
    this.fAs = a;
    const b = new Float64Array(cap * 2);
    order(this.fBs, b);
    this.fBs = b;
    this.fifoHead = 0;
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
