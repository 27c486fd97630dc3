import { backend } from "@infergrid/proto";

interface Tracked {
  state: backend.BackendState;
  frontendsSeen: number;
  reportedAt: number;
  failedUntil: number;
}

/**
 * What this frontend knows of each backend: its last reported state and whether it failed a
 * call recently. A failed backend is skipped for a cooldown; every frontend applies the same
 * rule, so their prefixes extend past it the same way.
 */
export class BackendTracker {
  private readonly backends = new Map<string, Tracked>();

  constructor(private readonly failCooldownMs: number) {}

  private entry(id: string): Tracked {
    let t = this.backends.get(id);
    if (!t) {
      t = { state: backend.BackendState.BACKEND_STATE_UNSPECIFIED, frontendsSeen: 0, reportedAt: 0, failedUntil: 0 };
      this.backends.set(id, t);
    }
    return t;
  }

  report(id: string, report: backend.BackendReport.$Properties | null | undefined, now: number): void {
    if (!report) return;
    const t = this.entry(id);
    t.state = report.state ?? backend.BackendState.BACKEND_STATE_UNSPECIFIED;
    t.frontendsSeen = report.frontendsSeen ?? 0;
    t.reportedAt = now;
    t.failedUntil = 0;
  }

  markFailed(id: string, now: number): void {
    this.entry(id).failedUntil = now + this.failCooldownMs;
  }

  usable(id: string, now: number): boolean {
    return (this.backends.get(id)?.failedUntil ?? 0) <= now;
  }

  state(id: string): backend.BackendState {
    return this.backends.get(id)?.state ?? backend.BackendState.BACKEND_STATE_UNSPECIFIED;
  }

  forgetExcept(ids: Iterable<string>): void {
    const keep = new Set(ids);
    for (const id of this.backends.keys()) if (!keep.has(id)) this.backends.delete(id);
  }
}
