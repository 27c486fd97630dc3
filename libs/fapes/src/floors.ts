/**
 * Per-service floors: what each inference service keeps out of the loans, so that a burst is met by the list it
 * hits rather than by the cluster's total. Measured on fapes-48 (docs/results.md, 2026-11-27): lending
 * everything past the slow loop's plan costs violations mostly in a few minutes where one service's load
 * doubles while its share sits at a level set minutes before (Faro's shares follow a burst only after its
 * reactive ticks, 30-70 s there); a grace period of 0 or a cold start of 0 removes little of it. A service's
 * floor is therefore the larger of
 *  - its share of the slow loop's plan, or of the loans' plan at the forecast's upper quantile (LOAN_FLOOR_PLAN)
 *    if that is larger, and
 *  - what Faro's own latency model (M/D/c, libs/faro replicasForLatency) needs for the rate its frontends
 *    report now, over one reclaim lead time: a rise the plan has not seen yet takes loans back at the next
 *    loan step instead of after the slow loop's reactive raise,
 * held for `holdMs` after it falls (as the frontends hold n through their scale-in cooldown), so that a lull of
 * a few minutes does not lend the backends the load takes back when it returns. The lists are planned with
 * each share raised to its floor (`withFloors`), so a floor is kept by the service it belongs to.
 */
import { type ForecastPlan, replicasForLatency } from "@infergrid/faro";
import { PeakWindow } from "./headroom.js";

/**
 * The forecast quantile of the loans' own plan: the slow loop plans a second set of shares at it, beside its own,
 * and a service's floor is the larger of its two shares. The slow loop plans at the forecast's median and leaves
 * what the median misses to the lists' leftover, where the frontends' burst factor and learned headroom dispatch
 * into it; lending that leftover took the burst room away (fapes-48: +0.133 points of violations against a bound of
 * 0.01). The upper plan keeps it (+0.006 points, with +11.3 points of busy utilisation; docs/results.md).
 */
export const LOAN_FLOOR_PLAN: ForecastPlan = { kind: "quantile", q: 0.9 };

/** A service's share as its floor reads it: the larger of its two plans' shares (undefined: neither planned yet). */
export function loanShare(planned: number | undefined, upper: number | undefined): number | undefined {
  return planned === undefined ? upper : upper === undefined ? planned : Math.max(planned, upper);
}

/** What the floors need to know of one service at a loan step. */
export interface ServiceLoad {
  readonly name: string;
  /** Its share of the slow loop's last plan, or of the loans' upper plan if larger (undefined: no plan yet). */
  readonly share: number | undefined;
  /** Arrival rate its frontends saw over the last lead time, req/s (undefined: not known). */
  readonly ratePerS: number | undefined;
  /** Mean service time, ms. */
  readonly serviceMs: number;
  readonly sloMs: number;
  /** The SLO's percentile, in (0, 100). */
  readonly percentile: number;
}

/** The smallest backend count whose M/D/c tail latency at `ratePerS` is within the SLO (Faro's model); 0 at no load. */
export function rateNeed(s: Pick<ServiceLoad, "ratePerS" | "serviceMs" | "sloMs" | "percentile">, maxBackends = 10_000): number {
  const rate = s.ratePerS ?? 0;
  if (!(rate > 0) || !(s.serviceMs > 0) || !(s.sloMs > 0)) return 0;
  if (!(s.percentile > 0 && s.percentile < 100)) throw new RangeError(`floors: percentile ${s.percentile} is not in (0, 100)`);
  return replicasForLatency("mdc", s.percentile, s.serviceMs / 1000, rate, s.sloMs / 1000, maxBackends) ?? maxBackends;
}

/** Per service, max(share, rateNeed) held over a window: a rise at once, a fall once it has held `holdMs`. */
export class ServiceFloors {
  private readonly windows = new Map<string, PeakWindow>();
  private last = new Map<string, number>();

  constructor(private readonly holdMs: number) {
    if (!(holdMs >= 0)) throw new RangeError("floors: holdMs >= 0 is required");
  }

  /**
   * One observation of every service; returns the floors. A service with neither a share nor a known rate is
   * left out (no floor: the caller keeps the whole cluster until the plan exists). A service that left is
   * forgotten.
   */
  observe(nowMs: number, services: readonly ServiceLoad[]): ReadonlyMap<string, number> {
    const floors = new Map<string, number>();
    for (const s of services) {
      if (s.share === undefined && s.ratePerS === undefined) continue;
      let w = this.windows.get(s.name);
      if (!w) {
        w = new PeakWindow(this.holdMs);
        this.windows.set(s.name, w);
      }
      // The share is held too, not only the rate's need: holding the rate's need alone let Faro's re-solves move a
      // service's backends away in a lull (fapes-48 seed 1: 0.049 % violations against 0.041 %).
      floors.set(s.name, w.observe(nowMs, Math.max(s.share ?? 0, rateNeed(s))));
    }
    for (const name of [...this.windows.keys()]) if (!services.some((s) => s.name === name)) this.windows.delete(name);
    this.last = floors;
    return floors;
  }

  /** The floors of the last observation. */
  get floors(): ReadonlyMap<string, number> {
    return this.last;
  }
}

/** The sum of the floors: what inference must hold before anything is lent (libs/fapes planLoans' inferenceNeed). */
export function floorsTotal(floors: ReadonlyMap<string, number>): number {
  let n = 0;
  for (const v of floors.values()) n += v;
  return n;
}

/**
 * The slow loop's shares with each raised towards its service's floor, out of the pool the shares leave over
 * (`pool` less the shares' sum): what the lists are planned with while jobs borrow. A raise never takes from
 * another service's share (on a cluster the plan fills, fapes-36, raising past the pool moved backends from
 * services at their shares to services above them and tripled the violations); when the leftover is short, one
 * backend at a time goes to the service furthest below its floor (ties by name).
 */
export function withFloors<S extends { share: number }>(
  shares: ReadonlyMap<string, S>,
  floors: ReadonlyMap<string, number>,
  pool: number,
): Map<string, S> {
  const raised = new Map<string, number>();
  let left = pool;
  for (const [name, s] of shares) {
    raised.set(name, s.share);
    left -= s.share;
  }
  const names = [...shares.keys()].sort();
  while (left > 0) {
    let pick: string | undefined;
    let gap = 0;
    for (const name of names) {
      const g = (floors.get(name) ?? 0) - (raised.get(name) ?? 0);
      if (g > gap) {
        pick = name;
        gap = g;
      }
    }
    if (pick === undefined) break;
    raised.set(pick, (raised.get(pick) ?? 0) + 1);
    left--;
  }
  const out = new Map<string, S>();
  for (const [name, s] of shares) {
    const share = raised.get(name) ?? s.share;
    out.set(name, share > s.share ? { ...s, share } : s);
  }
  return out;
}
