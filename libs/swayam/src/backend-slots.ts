/**
 * The backend's side of late binding, over its lifecycle machine (BackendMachine): requests it cannot take now
 * park with it, and each slot that frees is held for the live request parked there that must start first
 * (ParkingLot, keyed by arrival less expected service time). The
 * backend-worker service and the simulator both drive this class; what they add is only how a held slot is
 * announced and how long it waits (the worker's hold timers, the simulator's events).
 *
 * A held slot is an acquired slot: the caller either runs the request in it or gives it back with release().
 */
import type { BackendMachine, RefusalReason } from "./backend-machine.js";
import { ParkingLot } from "./parking-lot.js";

/** What became of a park: a slot is held for it now, it waits in the lot, or the backend refuses it. */
export type ParkOutcome = "held" | "parked" | Exclude<RefusalReason, "busy" | "provisioning">;

export interface BackendSlotsOptions<T> {
  /** Whether a parked request still waits (not taken elsewhere, withdrawn or timed out): dead ones are skipped. */
  isLive(item: T): boolean;
  /** The frontend that sent it (a parked request counts that frontend as seen, as any request does). */
  frontendOf(item: T): string;
  /** The service it is for, when the backend must check (undefined: the caller checked already). */
  serviceOf?(item: T): string | undefined;
}

const NONE: readonly never[] = [];

export class BackendSlots<T> {
  private readonly lot = new ParkingLot<T>();

  constructor(
    readonly machine: BackendMachine,
    private readonly options: BackendSlotsOptions<T>,
  ) {}

  /** Requests parked (live or not yet found dead). */
  get parked(): number {
    return this.lot.size;
  }

  /**
   * A park arrives (`arrivedAt`: the request's arrival on this backend's clock). A free slot is held for it at
   * once; a busy or loading backend parks it; a cold or draining one refuses it. Slots go to the parked request
   * that must start first: arrival less `serviceMs`, its expected service time here (all of a service's
   * requests share one latency target, so this is earliest deadline first; a fast instance's large queries go
   * ahead of small ones that can wait). With no service time (0) this is oldest first.
   */
  park(now: number, item: T, arrivedAt: number, serviceMs = 0): ParkOutcome {
    const res = this.machine.tryAcquire(now, this.options.frontendOf(item), this.options.serviceOf?.(item));
    if (res.accepted) return "held";
    if (res.reason === "busy" || res.reason === "provisioning") {
      this.lot.park(item, arrivedAt - Math.max(0, serviceMs));
      return "parked";
    }
    return res.reason;
  }

  /** Free slots go to the live parked requests that must start first: each one returned now holds an acquired slot. */
  serve(now: number): readonly T[] {
    if (this.lot.size === 0) return NONE;
    const held: T[] = [];
    while (this.lot.size > 0 && this.machine.hasFreeSlot()) {
      const top = this.lot.takeOldest(this.options.isLive);
      if (top === undefined) break;
      if (!this.machine.tryAcquire(now, this.options.frontendOf(top.item), this.options.serviceOf?.(top.item)).accepted) {
        this.lot.park(top.item, top.arrivedAt);
        break;
      }
      held.push(top.item);
    }
    return held;
  }

  /**
   * A slot frees: its request finished, or a held slot came back unused. Returns whether the backend went cold
   * (the end of a drain); the caller then evicts the lot, otherwise it serves it.
   */
  release(now: number): boolean {
    return this.machine.release(now);
  }

  /** The backend went cold or is draining: the live parked requests, each to be refused; the lot is emptied. */
  evict(): readonly T[] {
    if (this.lot.size === 0) return NONE;
    return this.lot.retain(() => false).filter(this.options.isLive);
  }
}
