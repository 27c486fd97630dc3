import { MinHeap, type Random, randomInt } from "@infergrid/core";

/**
 * Late binding for single-request backends: the requests waiting for a backend of this service, oldest first
 * (or, when the backend knows each one's service time on it, the one that must start first: BackendSlots).
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
  /**
   * Entries of the prefix a request parks at (chosen at random), not all of them: every backend that frees
   * holds its slot for the oldest request parked with it, and with the whole prefix that is the same request
   * everywhere, so all but one of those holds come back unused a round trip later. On real processes (three
   * frontends, eight backends, a step to 60 req/s) parking at the whole prefix gave back two holds for every
   * one used and stalled the service; two bounds the waste at one hold per request served.
   */
  fanout: 2,
} as const;

/** The entries of `prefix` a request parks at: `fanout` of them at random (all if there are no more). */
export function parkTargets(prefix: readonly number[], fanout: number, random: Random): number[] {
  if (prefix.length <= fanout) return prefix.slice();
  const pool = prefix.slice();
  const out: number[] = [];
  for (let k = 0; k < fanout; k++) out.push(pool.splice(randomInt(random, pool.length), 1)[0] as number);
  return out;
}

/** The `fanout` entries of the prefix that cost least for the request (ties in random order). */
export function cheapestTargets(prefix: readonly number[], fanout: number, cost: (index: number) => number, random: Random): number[] {
  const shuffled = prefix.slice();
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = randomInt(random, i + 1);
    [shuffled[i], shuffled[j]] = [shuffled[j] as number, shuffled[i] as number];
  }
  const priced = shuffled.map((index) => ({ index, c: cost(index) }));
  priced.sort((a, b) => a.c - b.c);
  return priced.slice(0, fanout).map((p) => p.index);
}

export interface Parked<T> {
  readonly item: T;
  /**
   * Its order in the lot: the request's arrival on the backend's clock (receive time minus the age it came
   * with), less its expected service time here when the backend orders by latest start.
   */
  readonly arrivedAt: number;
}

export class ParkingLot<T> {
  private readonly heap = new MinHeap<T>();

  get size(): number {
    return this.heap.size;
  }

  park(item: T, arrivedAt: number): void {
    this.heap.push(arrivedAt, item);
  }

  /** The live parked entry with the least key (the oldest); dead entries met on the way are discarded. */
  takeOldest(isLive: (item: T) => boolean): Parked<T> | undefined {
    for (;;) {
      const arrivedAt = this.heap.peekKey();
      if (arrivedAt === undefined) return undefined;
      const item = this.heap.pop() as T;
      if (isLive(item)) return { item, arrivedAt };
    }
  }

  /** Keeps only live entries (a backend going cold, or a lot grown mostly dead); returns those removed. */
  retain(isLive: (item: T) => boolean): T[] {
    const removed: T[] = [];
    for (const [arrivedAt, item] of this.heap.drain()) {
      if (isLive(item)) this.heap.push(arrivedAt, item);
      else removed.push(item);
    }
    return removed;
  }
}
