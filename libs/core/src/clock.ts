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
