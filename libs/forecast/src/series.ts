/** A bounded history of bins, oldest first, with O(1) append: the forecasters' memory. */
export class BinHistory {
  private readonly buffer: Float64Array;
  private start = 0;
  private size = 0;
  /** Bins ever appended (the index of the next bin). */
  total = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    this.buffer = new Float64Array(capacity);
  }

  get length(): number {
    return this.size;
  }

  push(value: number): void {
    if (this.size < this.capacity) {
      this.buffer[(this.start + this.size) % this.capacity] = value;
      this.size++;
    } else {
      this.buffer[this.start] = value;
      this.start = (this.start + 1) % this.capacity;
    }
    this.total++;
  }

  /** The i-th kept bin, oldest first (0 <= i < length). */
  at(i: number): number {
    return this.buffer[(this.start + i) % this.capacity] ?? 0;
  }

  /** The i-th bin back from the newest (0 = the newest). */
  back(i: number): number {
    return this.at(this.size - 1 - i);
  }

  /** The last `n` bins (fewer if fewer are kept), oldest first. */
  tail(n: number): number[] {
    const k = Math.min(n, this.size);
    const out = new Array<number>(k);
    for (let i = 0; i < k; i++) out[i] = this.at(this.size - k + i);
    return out;
  }
}
