/** Time in milliseconds. Policies take a Clock (or `now` directly) instead of reading the wall clock. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to: for tests and the simulator. */
export class ManualClock implements Clock {
  constructor(private current = 0) {}
  now(): number {
    return this.current;
  }
  set(ms: number): void {
    if (ms < this.current) throw new RangeError(`ManualClock cannot go back from ${this.current} to ${ms}`);
    this.current = ms;
  }
  advance(ms: number): void {
    this.set(this.current + ms);
  }
}

/**
 * The wall clock as it read when this clock was made, moved on since by the monotonic clock. A step of the wall
 * clock (an NTP correction, `date -s`) does not move it, so intervals measured on it hold across one: on the wall
 * clock, a step back of an hour kept every silent peer live and every deadline unreached for that hour. Readings
 * are whole milliseconds (they go into int64 fields). `fromWall` carries a peer's wall-clock timestamp onto it: the
 * two differ by how far this host's wall clock has stepped since.
 */
export class SteadyClock implements Clock {
  private readonly origin: number;
  constructor(
    private readonly wall: () => number = Date.now,
    private readonly monotonic: () => number = () => performance.now(),
  ) {
    this.origin = wall() - monotonic();
  }
  now(): number {
    return Math.floor(this.origin + this.monotonic());
  }
  /** How far this clock is ahead of the wall clock now: 0 until the wall clock steps. */
  wallOffset(): number {
    return this.now() - this.wall();
  }
  /** A wall-clock timestamp (a peer's) on this clock. */
  fromWall(ms: number): number {
    return ms + this.wallOffset();
  }
  /** A time on this clock as the wall clock reads it now: what a peer, or grpc-js's deadlines, expect. */
  toWall(ms: number): number {
    return ms - this.wallOffset();
  }
}
