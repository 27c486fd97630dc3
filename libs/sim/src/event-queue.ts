/**
 * The simulator's future event list: a binary min-heap over (time, insertion order) held in parallel typed
 * arrays, so an event is three numbers and no object or closure is allocated per event. Ties at equal times
 * pop in insertion order, which keeps runs deterministic.
 *
 * Beside the heap, FIFO lanes for events pushed in time order (pushInOrder): a constant delay after the clock,
 * such as one network hop (most of a Swayam run's events), or the arrival stream, which comes in time order. A
 * lane takes its events in O(1) where the heap sifted each through its levels. pop takes the earliest head by
 * (time, insertion order), so the events come out in exactly the order one heap gives.
 */

/** Events pushed in time order: a ring of `count` events from `head`, times non-decreasing. */
class InOrderLane {
  times: Float64Array;
  seqs: Float64Array;
  kinds: Uint8Array;
  as: Int32Array;
  bs: Float64Array;
  head = 0;
  count = 0;
  last = Number.NEGATIVE_INFINITY;

  constructor(capacity: number) {
    this.times = new Float64Array(capacity);
    this.seqs = new Float64Array(capacity);
    this.kinds = new Uint8Array(capacity);
    this.as = new Int32Array(capacity);
    this.bs = new Float64Array(capacity);
  }

  /** Whether an event at `time` keeps the lane in order. */
  takes(time: number): boolean {
    return this.count === 0 || time >= this.last;
  }

  push(time: number, seq: number, kind: number, a: number, b: number): void {
    if (this.count === this.times.length) this.grow();
    const cap = this.times.length;
    let i = this.head + this.count;
    if (i >= cap) i -= cap;
    this.times[i] = time;
    this.seqs[i] = seq;
    this.kinds[i] = kind;
    this.as[i] = a;
    this.bs[i] = b;
    this.count++;
    this.last = time;
  }

  drop(): void {
    this.head = this.head + 1 === this.times.length ? 0 : this.head + 1;
    this.count--;
  }

  /** Doubles the ring, unrolled from its head. */
  private grow(): void {
    const cap = this.times.length;
    const unroll = <A extends Float64Array | Int32Array | Uint8Array>(from: A, to: A): A => {
      to.set(from.subarray(this.head));
      to.set(from.subarray(0, this.head), cap - this.head);
      return to;
    };
    this.times = unroll(this.times, new Float64Array(cap * 2));
    this.seqs = unroll(this.seqs, new Float64Array(cap * 2));
    this.kinds = unroll(this.kinds, new Uint8Array(cap * 2));
    this.as = unroll(this.as, new Int32Array(cap * 2));
    this.bs = unroll(this.bs, new Float64Array(cap * 2));
    this.head = 0;
  }
}

export class EventQueue {
  private times: Float64Array;
  private seqs: Float64Array;
  private kinds: Uint8Array;
  private as: Int32Array;
  private bs: Float64Array;
  private n = 0;
  private nextSeq = 0;
  private readonly lanes: InOrderLane[];
  /** Fields of the last popped event. */
  time = 0;
  kind = 0;
  a = 0;
  b = 0;

  /** `lanes`: how many in-order lanes pushInOrder may name (0 to lanes - 1). */
  constructor(initialCapacity = 1024, lanes = 2) {
    this.times = new Float64Array(initialCapacity);
    this.seqs = new Float64Array(initialCapacity);
    this.kinds = new Uint8Array(initialCapacity);
    this.as = new Int32Array(initialCapacity);
    this.bs = new Float64Array(initialCapacity);
    this.lanes = Array.from({ length: lanes }, () => new InOrderLane(initialCapacity));
  }

  get size(): number {
    let size = this.n;
    for (const lane of this.lanes) size += lane.count;
    return size;
  }

  /**
   * push, for an event whose time is no earlier than the previous one pushed in order to the same lane (now + a
   * constant delay, the clock never going back; or a stream in time order): it waits in that lane. One earlier
   * than the lane's last goes to the heap, so the order events come out in never depends on the caller keeping
   * the promise.
   */
  pushInOrder(time: number, kind: number, a: number, b = 0, lane = 0): void {
    const l = this.lanes[lane];
    if (l === undefined) throw new RangeError(`event queue: no lane ${lane}`);
    if (!l.takes(time)) {
      this.push(time, kind, a, b);
      return;
    }
    l.push(time, this.nextSeq++, kind, a, b);
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
    // The earliest lane head, if it comes before the heap's top.
    let from: InOrderLane | undefined;
    let bt = this.n === 0 ? Number.POSITIVE_INFINITY : (this.times[0] as number);
    let bs = this.n === 0 ? Number.POSITIVE_INFINITY : (this.seqs[0] as number);
    for (let k = 0; k < this.lanes.length; k++) {
      const l = this.lanes[k] as InOrderLane;
      if (l.count === 0) continue;
      const t = l.times[l.head] as number;
      if (t < bt || (t === bt && (l.seqs[l.head] as number) < bs)) {
        from = l;
        bt = t;
        bs = l.seqs[l.head] as number;
      }
    }
    if (from !== undefined) {
      const h = from.head;
      this.time = bt;
      this.kind = from.kinds[h] as number;
      this.a = from.as[h] as number;
      this.b = from.bs[h] as number;
      from.drop();
      return true;
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
    let t = this.n === 0 ? Number.POSITIVE_INFINITY : (this.times[0] as number);
    for (const l of this.lanes) if (l.count > 0) t = Math.min(t, l.times[l.head] as number);
    return t;
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
