/**
 * Late binding for single-request backends: the requests waiting for a backend of this service, oldest first.
 *
 * Swayam's backends never queue: a refused request probes the prefix again after delta, and a backend that frees
 * goes to whichever request probes it first. That is random order of service among the waiting requests, whose
 * waiting-time tail is far longer than first-come-first-served: on the same five warm backends (faro trace,
 * serve-cluster4, 3 seeds) random probing missed the SLO for 0.44-0.47 % of requests, a central FIFO queue for
 * 0.014-0.026 %. Parking keeps the backends queue-free and the frontends independent, and still serves the
 * oldest request first: a refused request parks at every backend of its prefix at once; a backend that frees
 * (or is free when the park arrives) holds its slot for the oldest request parked with it and tells that
 * request's frontend; the first backend to do so gets the request, and the frontend releases the others.
 *
 * Ages, not arrival times, cross the network: a backend orders by its own receive time minus the age the
 * frontend sent, so clocks need not agree. Entries are dropped lazily: `isLive` decides, when the backend
 * looks, whether a parked request still waits (not taken elsewhere, not timed out, not cancelled).
 */
export const PARK_DEFAULTS = {
  /**
   * How long a park round lasts before the request probes its prefix again. A backend that joined the prefix
   * meanwhile holds none of its parks, and its cold start is seconds, so a tenth of a second costs it little.
   */
  windowMs: 100,
} as const;

export interface Parked<T> {
  readonly item: T;
  /** The request's arrival on the backend's clock (receive time minus the age it came with). */
  readonly arrivedAt: number;
}

export class ParkingLot<T> {
  private readonly heap: Parked<T>[] = [];

  get size(): number {
    return this.heap.length;
  }

  park(item: T, arrivedAt: number): void {
    const heap = this.heap;
    heap.push({ item, arrivedAt });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** The oldest parked entry that is still live; dead entries met on the way are discarded. */
  takeOldest(isLive: (item: T) => boolean): Parked<T> | undefined {
    while (this.heap.length > 0) {
      const top = this.popTop();
      if (isLive(top.item)) return top;
    }
    return undefined;
  }

  /** Keeps only live entries (a backend going cold, or a lot grown mostly dead); returns those removed. */
  retain(isLive: (item: T) => boolean): T[] {
    const kept: Parked<T>[] = [];
    const removed: T[] = [];
    for (const p of this.heap) {
      if (isLive(p.item)) kept.push(p);
      else removed.push(p.item);
    }
    this.heap.length = 0;
    for (const p of kept) this.park(p.item, p.arrivedAt);
    return removed;
  }

  private popTop(): Parked<T> {
    const heap = this.heap;
    const top = heap[0] as Parked<T>;
    const last = heap.pop() as Parked<T>;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && this.before(l, m)) m = l;
        if (r < heap.length && this.before(r, m)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }

  private before(a: number, b: number): boolean {
    return (this.heap[a] as Parked<T>).arrivedAt < (this.heap[b] as Parked<T>).arrivedAt;
  }

  private swap(a: number, b: number): void {
    const h = this.heap;
    const t = h[a] as Parked<T>;
    h[a] = h[b] as Parked<T>;
    h[b] = t;
  }
}
