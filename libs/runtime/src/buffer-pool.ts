/**
 * Reusable buffers for request bodies a hop receives and forwards. Why: V8 starts a full marking of the heap for
 * every 64 MB of memory allocated outside it, whatever the heap's own size, and a 588 KiB image allocated fresh
 * on every hop is such memory; at a few hundred images a second that is several full collections a second, half
 * of a hop's CPU (docs/results.md, "Data path"). A buffer taken here and given back is allocated once.
 *
 * Buffers come in power-of-two classes from `minBytes`; what is given back is kept while the pool holds under
 * `maxPooledBytes`, and dropped to the collector beyond that.
 */
export interface PooledBuffer {
  /** Exactly the size asked for: a view of a buffer of the class above it. */
  readonly bytes: Buffer;
  /** Gives the buffer back; nothing may read or write `bytes` after. A second call does nothing. */
  release(): void;
}

export class BufferPool {
  private readonly free = new Map<number, Buffer[]>();
  private pooledBytes = 0;
  private allocated = 0;

  constructor(
    readonly maxPooledBytes: number,
    readonly minBytes = 64 * 1024,
  ) {
    if (!(Number.isSafeInteger(maxPooledBytes) && maxPooledBytes >= 0))
      throw new RangeError("maxPooledBytes must be a non-negative integer");
    if (!(Number.isSafeInteger(minBytes) && minBytes > 0)) throw new RangeError("minBytes must be a positive integer");
  }

  /** The class (buffer size) a request of `size` bytes is served from. */
  classOf(size: number): number {
    let c = this.minBytes;
    while (c < size) c *= 2;
    return c;
  }

  take(size: number): PooledBuffer {
    if (!(Number.isSafeInteger(size) && size >= 0)) throw new RangeError(`cannot take ${size} bytes`);
    const cls = this.classOf(size);
    const list = this.free.get(cls);
    let backing = list?.pop();
    if (backing) this.pooledBytes -= cls;
    else {
      backing = Buffer.allocUnsafeSlow(cls);
      this.allocated++;
    }
    const owned = backing;
    let released = false;
    return {
      bytes: owned.subarray(0, size),
      release: () => {
        if (released) return;
        released = true;
        if (this.pooledBytes + cls > this.maxPooledBytes) return;
        this.pooledBytes += cls;
        const l = this.free.get(cls);
        if (l) l.push(owned);
        else this.free.set(cls, [owned]);
      },
    };
  }

  /** Buffers allocated because the class's free list was empty (for tests and metrics). */
  get allocations(): number {
    return this.allocated;
  }

  /** Bytes held in free lists. */
  get heldBytes(): number {
    return this.pooledBytes;
  }
}
