/**
 * The time at which a reader judges its peers' heartbeats. While it hears any of them, that is now. Once it has
 * heard none for `ttlMs` (NATS is away, or the reader's connection to it), it stops a ttl past the last heartbeat
 * heard: the peers live then stay live until heartbeats return, instead of all leaving at once. What the
 * silence says is that the messages stopped, not that every peer died; a call to a dead one still fails and
 * ejects it. Pure: time comes in as `now`.
 */
export class HeardClock {
  private lastHeard: number | undefined;

  constructor(private readonly ttlMs: number) {
    if (!(ttlMs > 0)) throw new RangeError(`ttlMs must be > 0, got ${ttlMs}`);
  }

  /** A heartbeat arrived at `now`. */
  heard(now: number): void {
    this.lastHeard = Math.max(this.lastHeard ?? now, now);
  }

  /** When to judge heartbeats at: `now`, or a ttl past the last one heard while none comes. */
  at(now: number): number {
    return this.lastHeard === undefined ? now : Math.min(now, this.lastHeard + this.ttlMs);
  }

  /** Whether nothing has been heard for a ttl (after something was). */
  deaf(now: number): boolean {
    return this.silentMs(now) > this.ttlMs;
  }

  /** How long since the last heartbeat heard (0 before the first). */
  silentMs(now: number): number {
    return this.lastHeard === undefined ? 0 : now - this.lastHeard;
  }
}
