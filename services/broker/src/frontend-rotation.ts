/** Services with a cursor of their own; beyond this the least recently used cursor is dropped. */
const MAX_CURSORS = 4096;

/**
 * Round robin over the live frontends, skipping any that failed a call in the last `ejectMs`.
 * Uniform spreading is what makes each frontend's share of a service's load 1/n_F (Swayam,
 * section 3), so the rotation ignores everything but liveness, and each service has its own
 * cursor: with one shared cursor, the services' interleaving decides which frontend gets which of
 * a service's requests, and each frontend's count of a service's arrivals becomes noisier than the
 * 1/n_F share its rate estimate assumes (the simulator's fidelity check showed the extra backends
 * this costs). Pure: `now` comes in.
 */
export class FrontendRotation {
  private readonly cursors = new Map<string, number>();
  private readonly ejectedUntil = new Map<string, number>();

  constructor(private readonly ejectMs: number) {}

  eject(id: string, now: number): void {
    this.ejectedUntil.set(id, now + this.ejectMs);
  }

  /**
   * The next frontend for `service` from `live` (sorted ids) not in `exclude`; ejected ones only
   * if nothing else is left.
   */
  next(live: readonly string[], exclude: ReadonlySet<string>, now: number, service = ""): string | undefined {
    const candidates = live.filter((id) => !exclude.has(id));
    if (candidates.length === 0) return undefined;
    const healthy = candidates.filter((id) => (this.ejectedUntil.get(id) ?? 0) <= now);
    const pool = healthy.length > 0 ? healthy : candidates;
    const cursor = this.cursors.get(service) ?? 0;
    const pick = pool[cursor % pool.length];
    // Re-inserted on every use, so the map's first key is the least recently used.
    this.cursors.delete(service);
    this.cursors.set(service, (cursor + 1) % 1_000_000_007);
    if (this.cursors.size > MAX_CURSORS) {
      const oldest = this.cursors.keys().next().value;
      if (oldest !== undefined) this.cursors.delete(oldest);
    }
    return pick;
  }

  forgetExcept(live: readonly string[]): void {
    const keep = new Set(live);
    for (const id of this.ejectedUntil.keys()) if (!keep.has(id)) this.ejectedUntil.delete(id);
  }
}
