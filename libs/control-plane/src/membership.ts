/**
 * Who is alive, from heartbeats: a member is live while its last heartbeat is younger than the
 * ttl and it has not announced that it is draining. Pure: time comes in as `now`.
 */
export interface Member<T> {
  id: string;
  address: string;
  lastSeen: number;
  startedAt: number;
  draining: boolean;
  info: T;
}

export class MembershipTable<T> {
  private readonly members = new Map<string, Member<T>>();

  constructor(private readonly ttlMs: number) {}

  /** Returns true when the member is new (or came back after being dropped). */
  observe(id: string, address: string, startedAt: number, draining: boolean, info: T, now: number): boolean {
    const known = this.members.get(id);
    const isNew = !known || known.startedAt !== startedAt;
    this.members.set(id, { id, address, lastSeen: now, startedAt, draining, info });
    return isNew;
  }

  remove(id: string): boolean {
    return this.members.delete(id);
  }

  get(id: string): Member<T> | undefined {
    return this.members.get(id);
  }

  isLive(id: string, now: number): boolean {
    const m = this.members.get(id);
    return m !== undefined && !m.draining && now - m.lastSeen <= this.ttlMs;
  }

  /** Live members sorted by id, so every reader sees them in the same order. */
  live(now: number): Member<T>[] {
    return [...this.members.values()].filter((m) => !m.draining && now - m.lastSeen <= this.ttlMs).sort((a, b) => a.id.localeCompare(b.id));
  }

  all(): Member<T>[] {
    return [...this.members.values()];
  }

  /** Drops members silent for longer than `forgetAfterMs`; returns them. */
  expire(now: number, forgetAfterMs = this.ttlMs): Member<T>[] {
    const gone: Member<T>[] = [];
    for (const m of this.members.values()) {
      if (now - m.lastSeen > forgetAfterMs) {
        gone.push(m);
        this.members.delete(m.id);
      }
    }
    return gone;
  }
}
