import { backend } from "@infergrid/proto";

/** States that hold a backend's resources for a service: everything but cold (provisioning included). */
export function occupies(state: backend.BackendState | null | undefined): boolean {
  return (
    state === backend.BackendState.BACKEND_STATE_PROVISIONING ||
    state === backend.BackendState.BACKEND_STATE_WARM_IDLE ||
    state === backend.BackendState.BACKEND_STATE_BUSY ||
    state === backend.BackendState.BACKEND_STATE_DRAINING
  );
}

interface BackendSeen {
  service: string;
  occupied: boolean;
  at: number;
}

/**
 * Backend-seconds per service, observed from outside through the backends' heartbeats: a
 * backend's last reported state holds until its next report (or its draining beat), and only time
 * inside [start, end] counts. A backend that stops reporting is held for at most `staleMs` after
 * its last beat, so a crash is not billed for the rest of the run.
 *
 * Same quantity as @infergrid/swayam's BackendSecondsMeter (non-cold time, provisioning
 * included), which each backend worker keeps from its own phase transitions; this one is the
 * local cluster's view: per service, from heartbeats that may stop, clipped to the measured
 * interval.
 */
export class HeartbeatBackendSeconds {
  private readonly last = new Map<string, BackendSeen>();
  private readonly ms = new Map<string, number>();
  private start = Number.POSITIVE_INFINITY;
  private end = Number.POSITIVE_INFINITY;

  constructor(private readonly staleMs: number) {}

  /** Measurement begins: earlier time is not counted (the state known now carries over). */
  begin(at: number): void {
    this.start = at;
  }

  /** Measurement ends: later reports change nothing. */
  finish(at: number): void {
    this.end = at;
  }

  observe(backendId: string, service: string, occupied: boolean, draining: boolean, at: number): void {
    const prev = this.last.get(backendId);
    if (prev) this.accrue(prev, at);
    if (draining) this.last.delete(backendId);
    else this.last.set(backendId, { service, occupied, at });
  }

  private accrue(prev: BackendSeen, until: number): void {
    if (!prev.occupied || prev.service === "") return;
    const from = Math.max(prev.at, this.start);
    const to = Math.min(until, prev.at + this.staleMs, this.end);
    if (to > from) this.ms.set(prev.service, (this.ms.get(prev.service) ?? 0) + (to - from));
  }

  /** Backend-seconds of `service` up to `now` (open intervals included). */
  seconds(service: string, now: number): number {
    let ms = this.ms.get(service) ?? 0;
    for (const seen of this.last.values()) {
      if (seen.service !== service || !seen.occupied) continue;
      const from = Math.max(seen.at, this.start);
      const to = Math.min(now, seen.at + this.staleMs, this.end);
      if (to > from) ms += to - from;
    }
    return ms / 1000;
  }

  /** Backends that hold resources for `service` now, by their last fresh report. */
  occupiedNow(service: string, now: number): number {
    let n = 0;
    for (const seen of this.last.values()) if (seen.service === service && seen.occupied && now - seen.at <= this.staleMs) n++;
    return n;
  }
}

/**
 * Backends in use (each frontend's n, the prefix it dispatches into) from the frontends' load
 * reports: the largest n among the reports of the last `freshMs`. Frontends scale on their own,
 * and the largest prefix any of them uses is the set of backends the service is using.
 */
export class InUseTracker {
  private readonly latest = new Map<string, Map<string, { n: number; at: number }>>();
  private readonly peak = new Map<string, number>();
  private measuring = false;

  constructor(private readonly freshMs: number) {}

  begin(): void {
    this.measuring = true;
  }

  finish(): void {
    this.measuring = false;
  }

  onReport(service: string, frontendId: string, backendsInUse: number, at: number): void {
    let byFrontend = this.latest.get(service);
    if (!byFrontend) {
      byFrontend = new Map();
      this.latest.set(service, byFrontend);
    }
    byFrontend.set(frontendId, { n: backendsInUse, at });
    if (this.measuring) this.peak.set(service, Math.max(this.peak.get(service) ?? 0, this.current(service, at)));
  }

  current(service: string, now: number): number {
    let max = 0;
    for (const r of this.latest.get(service)?.values() ?? []) if (now - r.at <= this.freshMs) max = Math.max(max, r.n);
    return max;
  }

  peakOf(service: string): number {
    return this.peak.get(service) ?? 0;
  }
}
