/**
 * SLA and resource accounting as Swayam's evaluation measures them (Gujarati et al., Middleware'17, section 5
 * "Interpreting the figures" and section 5.4).
 *
 * SLA compliance: windows of 1000 consecutive requests slid by 10; a window complies when at least SL_min of its
 * requests finished within RT_max; the compliance frequency is the fraction of compliant windows. A failed or
 * dropped (pruned) request is a miss. Windows are those that end after a multiple of `step` requests, starting
 * with the first full window; fewer than windowSize requests give no window (frequency NaN, the metric is
 * undefined there).
 *
 * Resources: backend-seconds, the time backends spend provisioning or warm ("warm-backend-time", provisioning
 * included, section 5.4).
 */
import type { BackendPhase } from "./backend-machine.js";
import { SWAYAM_DEFAULTS } from "./parameters.js";

export interface SlaWindowOptions {
  windowSize?: number;
  step?: number;
  rtMaxMs: number;
  slMin?: number;
}

export interface SlaCompliance {
  windows: number;
  compliant: number;
  /** compliant / windows; NaN before the first full window. */
  frequency: number;
}

export class SlaWindowTracker {
  readonly windowSize: number;
  readonly step: number;
  readonly rtMaxMs: number;
  readonly slMin: number;
  /** Hits needed in a window, computed once so 0.99 * 1000 cannot round to 990.0000001. */
  private readonly hitsNeeded: number;
  private readonly ring: Uint8Array;
  private requests = 0;
  private hits = 0;
  private hitsInWindow = 0;
  private windows = 0;
  private compliant = 0;
  private slot = 0;

  constructor(options: SlaWindowOptions) {
    this.windowSize = options.windowSize ?? SWAYAM_DEFAULTS.slaWindowSize;
    this.step = options.step ?? SWAYAM_DEFAULTS.slaWindowStep;
    this.rtMaxMs = options.rtMaxMs;
    this.slMin = options.slMin ?? SWAYAM_DEFAULTS.slMin;
    if (!(this.windowSize >= 1 && this.step >= 1)) throw new RangeError("windowSize and step must be at least 1");
    this.hitsNeeded = Math.ceil(this.slMin * this.windowSize - 1e-9);
    this.ring = new Uint8Array(this.windowSize);
  }

  /** One finished request: its latency, or undefined if it failed or was dropped (a miss). O(1). */
  record(latencyMs: number | undefined): void {
    const hit = latencyMs !== undefined && latencyMs <= this.rtMaxMs ? 1 : 0;
    // requests % windowSize, kept as a cursor (the simulator records every request it completes).
    const slot = this.slot;
    if (this.requests >= this.windowSize) this.hitsInWindow -= this.ring[slot] ?? 0;
    this.ring[slot] = hit;
    this.slot = slot + 1 === this.windowSize ? 0 : slot + 1;
    this.hitsInWindow += hit;
    this.hits += hit;
    this.requests++;
    if (this.requests >= this.windowSize && (this.requests - this.windowSize) % this.step === 0) {
      this.windows++;
      if (this.hitsInWindow >= this.hitsNeeded) this.compliant++;
    }
  }

  compliance(): SlaCompliance {
    return { windows: this.windows, compliant: this.compliant, frequency: this.compliant / this.windows };
  }

  /** All requests recorded and the fraction of them within RT_max (NaN if none). */
  totals(): { requests: number; withinRtMax: number; attainment: number } {
    return { requests: this.requests, withinRtMax: this.hits, attainment: this.hits / this.requests };
  }
}

/** Phases that hold a backend's resources: everything but cold. */
export function occupiesResources(phase: BackendPhase): boolean {
  return phase !== "cold";
}

/** Backend-seconds over state intervals. O(1) per update and per total. */
export class BackendSecondsMeter {
  private readonly openSince = new Map<string, number>();
  private closedMs = 0;
  private openStartSum = 0;

  /** Reports a backend's phase at `now`; only the occupied/cold boundary matters. */
  observe(backendId: string, phase: BackendPhase, now: number): void {
    this.setOccupied(backendId, occupiesResources(phase), now);
  }

  setOccupied(backendId: string, occupied: boolean, now: number): void {
    const since = this.openSince.get(backendId);
    if (occupied && since === undefined) {
      this.openSince.set(backendId, now);
      this.openStartSum += now;
    } else if (!occupied && since !== undefined) {
      this.openSince.delete(backendId);
      this.openStartSum -= since;
      this.closedMs += now - since;
    }
  }

  /** Backend-seconds accumulated up to now, open intervals included. */
  totalSeconds(now: number): number {
    return (this.closedMs + this.openSince.size * now - this.openStartSum) / 1000;
  }

  /** Backends holding resources now. */
  get occupied(): number {
    return this.openSince.size;
  }
}
