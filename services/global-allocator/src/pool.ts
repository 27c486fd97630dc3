import { MembershipTable } from "@infergrid/control-plane";
import { backend, type control } from "@infergrid/proto";

export interface BackendInfo {
  instanceType: string;
  state: backend.BackendState;
  /** The service the backend says it serves ("" = none): what it has seen of its assignment. */
  reportedService: string;
}

export type HeartbeatVerdict =
  /** Seen for the first time (or again after it was dropped). */
  | "joined"
  /** Announced it is shutting down: leaves at once. */
  | "draining"
  | "seen"
  /** A draining beat from a backend already dropped: nothing to do. */
  | "ignored";

/**
 * What the allocator knows of the pool from heartbeats: every backend that beats is in it until
 * it falls silent for longer than the ttl or says it is draining. Pure: time comes in as `now`.
 */
export class BackendPool {
  private readonly table: MembershipTable<BackendInfo>;

  constructor(readonly ttlMs: number) {
    this.table = new MembershipTable<BackendInfo>(ttlMs);
  }

  observe(hb: control.Heartbeat, now: number): HeartbeatVerdict {
    const known = this.table.get(hb.id);
    if (hb.draining && !known) return "ignored";
    const report = hb.backend;
    this.table.observe(
      hb.id,
      hb.address,
      Number(hb.startedAtUnixMs),
      hb.draining,
      {
        instanceType: hb.instanceType,
        state: report?.state ?? backend.BackendState.BACKEND_STATE_UNSPECIFIED,
        reportedService: report?.service ?? "",
      },
      now,
    );
    if (hb.draining) return "draining";
    // A backend restarting under the same id keeps its place: its assignment is in the registry.
    return known ? "seen" : "joined";
  }

  /**
   * Puts a backend known only from the registry (after an allocator restart) in the pool as if it
   * had just beaten, so it gets a full ttl to show that it is alive before it loses its place.
   */
  seed(id: string, address: string, instanceType: string, reportedService: string, now: number): void {
    if (this.table.get(id)) return;
    this.table.observe(
      id,
      address,
      -1,
      false,
      { instanceType, state: backend.BackendState.BACKEND_STATE_UNSPECIFIED, reportedService },
      now,
    );
  }

  isLive(id: string, now: number): boolean {
    return this.table.isLive(id, now);
  }

  get(id: string) {
    return this.table.get(id);
  }

  /** Live backends, sorted by id. */
  live(now: number) {
    return this.table.live(now);
  }

  all() {
    return this.table.all();
  }

  /** Drops and returns every backend that is silent past the ttl or draining. */
  takeGone(now: number): string[] {
    const gone = this.table
      .all()
      .filter((m) => !this.table.isLive(m.id, now))
      .map((m) => m.id)
      .sort();
    for (const id of gone) this.table.remove(id);
    return gone;
  }
}
