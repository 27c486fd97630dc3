/**
 * The backend's state machine and self-decommissioning (Gujarati et al., Middleware'17, section 4.1 and
 * Fig. 3): cold -> (warm-up) -> provisioning -> warm-idle <-> busy, and warm-idle -> cold after idling T.
 * Backends scale in passively: frontends just stop sending requests to entries past their prefix and those
 * backends collect themselves. Refusals (busy, cold, provisioning) go back to the frontend, which retries
 * elsewhere. Every reply carries frontendsSeen, the gossip from which frontends learn n_F (section 4.2).
 *
 * All transitions take `now`; nothing here holds a timer. The service arms one at idleDeadline() and calls
 * checkIdle(now) when it fires.
 *
 * Choices where the paper is silent:
 *  - Only requests (accepted or refused) count a frontend as seen; warm-ups do not, since any frontend may
 *    warm a backend it will not use for long and n_F must count the frontends that carry load.
 *  - A warm-up reaching a warm-idle backend restarts its idle clock: a warm-up declares that a frontend has
 *    just put this entry in its prefix, and letting the backend go cold right then would only force a reload.
 *  - With concurrency c > 1, "busy" means at least one request in flight; requests are refused as busy only
 *    when c are in flight. The idle clock runs only with nothing in flight.
 *  - draining (the allocator reclaiming the backend) refuses new requests, lets in-flight ones finish, then
 *    goes cold; it ignores warm-ups.
 */
import { SWAYAM_DEFAULTS } from "./parameters.js";

export type BackendPhase = "cold" | "provisioning" | "warm-idle" | "busy" | "draining";
export type RefusalReason = "busy" | "cold" | "provisioning" | "draining";
export type AcquireResult = { readonly accepted: true } | { readonly accepted: false; readonly reason: RefusalReason };

// Shared results: tryAcquire runs once per probe (millions of times in a simulated day), and allocating its
// answer showed up in the simulator's profile. They are frozen, so a caller cannot change another's answer.
const ACCEPTED: AcquireResult = Object.freeze({ accepted: true });
const REFUSED: Readonly<Record<RefusalReason, AcquireResult>> = Object.freeze({
  busy: Object.freeze({ accepted: false, reason: "busy" }),
  cold: Object.freeze({ accepted: false, reason: "cold" }),
  provisioning: Object.freeze({ accepted: false, reason: "provisioning" }),
  draining: Object.freeze({ accepted: false, reason: "draining" }),
});
export type WarmUpOutcome = "started" | "already-provisioning" | "already-warm" | "draining" | "other-service";

export interface BackendStateOptions {
  /** Requests served at once (default 1, the paper's setting). */
  concurrency?: number;
  /** Idle time before self-decommissioning, T (default 300 s). */
  idleTimeoutMs?: number;
  /** Window for counting distinct frontends, t_setup (default 10 s). */
  frontendWindowMs?: number;
}

export class BackendMachine {
  private slots: number;
  readonly idleTimeoutMs: number;
  readonly frontendWindowMs: number;
  private phase: "cold" | "provisioning" | "warm" | "draining" = "cold";
  private loaded: string | undefined;
  private inFlight = 0;
  private idleSince = 0;
  /** When each frontend last sent a request: one entry per frontend, updated in place (one look-up per probe). */
  private readonly lastSeen = new Map<string, { at: number }>();
  /**
   * frontendsSeen's last answer, still exact while now - seenOldest <= window (every entry is then fresh, as the
   * oldest is); -1 once a new frontend (or an earlier time) arrives. It spares a scan of the map on every reply.
   */
  private seenCount = -1;
  private seenOldest = Number.POSITIVE_INFINITY;

  constructor(options: BackendStateOptions = {}) {
    this.slots = Math.max(1, Math.floor(options.concurrency ?? 1));
    this.idleTimeoutMs = options.idleTimeoutMs ?? SWAYAM_DEFAULTS.idleTimeoutMs;
    this.frontendWindowMs = options.frontendWindowMs ?? SWAYAM_DEFAULTS.tSetupMs;
  }

  /** Requests served at once. */
  get concurrency(): number {
    return this.slots;
  }

  /**
   * Serve up to `concurrency` requests at once from now on (in-place vertical scaling, or a new batch size).
   * A smaller size drops nothing: requests already accepted run to the end, and new ones are refused as busy
   * until fewer than the new size are in flight.
   */
  resize(concurrency: number): void {
    this.slots = Math.max(1, Math.floor(concurrency));
  }

  get state(): BackendPhase {
    if (this.phase === "warm") return this.inFlight > 0 ? "busy" : "warm-idle";
    return this.phase;
  }

  /** The service this backend is loaded with or loading (undefined when cold). */
  get service(): string | undefined {
    return this.phase === "cold" ? undefined : this.loaded;
  }

  get requestsInFlight(): number {
    return this.inFlight;
  }

  /** Whether a request would be accepted now: warm, with fewer than `concurrency` in flight. */
  hasFreeSlot(): boolean {
    return this.phase === "warm" && this.inFlight < this.slots;
  }

  /** Idempotent: starts loading only from cold. The caller starts the load when startLoad is true. */
  warmUp(now: number, service: string): { startLoad: boolean; outcome: WarmUpOutcome } {
    if (this.phase === "cold") {
      this.phase = "provisioning";
      this.loaded = service;
      return { startLoad: true, outcome: "started" };
    }
    if (this.phase === "draining") return { startLoad: false, outcome: "draining" };
    if (this.loaded !== service) return { startLoad: false, outcome: "other-service" };
    if (this.phase === "provisioning") return { startLoad: false, outcome: "already-provisioning" };
    if (this.inFlight === 0) this.idleSince = now;
    return { startLoad: false, outcome: "already-warm" };
  }

  /** The model finished loading. Returns whether it became warm (a stale completion is ignored). */
  loadFinished(now: number): boolean {
    if (this.phase !== "provisioning") return false;
    this.phase = "warm";
    this.inFlight = 0;
    this.idleSince = now;
    return true;
  }

  /** The load failed: back to cold, so the next warm-up retries it. */
  loadFailed(_now: number): boolean {
    if (this.phase !== "provisioning") return false;
    this.phase = "cold";
    this.loaded = undefined;
    return true;
  }

  /**
   * A request from frontendId. The frontend counts as seen even when refused: it is sending load to this
   * service. With `service`, a request for another service is refused as cold (this backend holds no copy).
   */
  tryAcquire(now: number, frontendId: string, service?: string): AcquireResult {
    const seen = this.lastSeen.get(frontendId);
    if (seen === undefined) {
      this.lastSeen.set(frontendId, { at: now });
      this.seenCount = -1;
    } else {
      seen.at = now;
      if (now < this.seenOldest) this.seenCount = -1;
    }
    switch (this.phase) {
      case "cold":
        return REFUSED.cold;
      case "provisioning":
        return service !== undefined && service !== this.loaded ? REFUSED.cold : REFUSED.provisioning;
      case "draining":
        return REFUSED.draining;
      case "warm":
        if (service !== undefined && service !== this.loaded) return REFUSED.cold;
        if (this.inFlight >= this.slots) return REFUSED.busy;
        this.inFlight++;
        return ACCEPTED;
    }
  }

  /** An accepted request finished (or failed). Returns whether the backend went cold (end of a drain). */
  release(now: number): boolean {
    if (this.inFlight === 0) return false;
    this.inFlight--;
    if (this.inFlight > 0) return false;
    if (this.phase === "draining") {
      this.goCold();
      return true;
    }
    this.idleSince = now;
    return false;
  }

  /** Distinct frontends that sent requests within the last window (inclusive), reported on every reply. */
  frontendsSeen(now: number): number {
    // The same test as the scan's, applied to the oldest entry: if it holds there, it holds for every entry
    // (now - at only shrinks as at grows), so the scan would count them all and delete none.
    if (this.seenCount >= 0 && now - this.seenOldest <= this.frontendWindowMs) return this.seenCount;
    let count = 0;
    let oldest = Number.POSITIVE_INFINITY;
    for (const [id, seen] of this.lastSeen) {
      const at = seen.at;
      if (now - at <= this.frontendWindowMs) {
        count++;
        if (at < oldest) oldest = at;
      } else this.lastSeen.delete(id);
    }
    this.seenCount = count;
    this.seenOldest = oldest;
    return count;
  }

  /**
   * True exactly once: when the backend has idled at least T while warm-idle. It is cold from this call on, so
   * no request can be accepted until the next warm-up (the check and the transition are one step).
   */
  checkIdle(now: number): boolean {
    if (this.phase !== "warm" || this.inFlight > 0) return false;
    // The same sum idleDeadline() returns, so a check scheduled at the deadline always fires
    // (now - idleSince < T can be true at now = idleSince + T in floating point).
    if (now < this.idleSince + this.idleTimeoutMs) return false;
    this.goCold();
    return true;
  }

  /** When checkIdle will next return true if nothing happens; undefined unless warm-idle. */
  idleDeadline(): number | undefined {
    if (this.phase !== "warm" || this.inFlight > 0) return undefined;
    return this.idleSince + this.idleTimeoutMs;
  }

  /** The allocator reclaims this backend. Returns whether it is cold now (otherwise after the last release). */
  drain(_now: number): boolean {
    if (this.phase === "cold") return true;
    if (this.phase === "warm" && this.inFlight > 0) {
      this.phase = "draining";
      return false;
    }
    if (this.phase === "draining") return false;
    this.goCold();
    return true;
  }

  private goCold(): void {
    this.phase = "cold";
    this.loaded = undefined;
    this.inFlight = 0;
  }
}
