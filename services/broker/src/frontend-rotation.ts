/**
 * Round robin over the live frontends, skipping any that failed a call in the last `ejectMs`.
 * Uniform spreading is what makes each frontend's share of the load 1/n_F (Swayam, section 3),
 * so the rotation ignores everything but liveness. Pure: `now` comes in.
 */
export class FrontendRotation {
  private cursor = 0;
  private readonly ejectedUntil = new Map<string, number>();

  constructor(private readonly ejectMs: number) {}

  eject(id: string, now: number): void {
    this.ejectedUntil.set(id, now + this.ejectMs);
  }

  /** The next frontend from `live` (sorted ids) not in `exclude`; ejected ones only if nothing else is left. */
  next(live: readonly string[], exclude: ReadonlySet<string>, now: number): string | undefined {
    const candidates = live.filter((id) => !exclude.has(id));
    if (candidates.length === 0) return undefined;
    const healthy = candidates.filter((id) => (this.ejectedUntil.get(id) ?? 0) <= now);
    const pool = healthy.length > 0 ? healthy : candidates;
    const pick = pool[this.cursor % pool.length];
    this.cursor = (this.cursor + 1) % 1_000_000_007;
    return pick;
  }

  forgetExcept(live: readonly string[]): void {
    const keep = new Set(live);
    for (const id of this.ejectedUntil.keys()) if (!keep.has(id)) this.ejectedUntil.delete(id);
  }
}
