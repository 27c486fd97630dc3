/**
 * The frontend's per-service autoscaling decision (Gujarati et al., Middleware'17, section 4.4, Algorithm 1
 * lines 12-19, with RegulateScaleDown; section 5.1 "reduced only if the drop in request rates is observed over
 * a longer period of time (e.g., ten minutes)").
 *
 * Scale-out is immediate: n jumps to the model's estimate and the new prefix entries get warm-up requests.
 * Scale-in is regulated. The exact rule (the paper gives only its intent):
 *  - every decision records its need (the model's n for U x predicted global rate) in a window of the last
 *    scaleInCooldown;
 *  - n shrinks only if at least scaleInCooldown has passed since the previous scale-in (or since the state was
 *    created), and then only to the largest need recorded over the last scaleInCooldown (window inclusive);
 *  - so n falls at most once per cooldown, only after the load stayed low for a whole cooldown, and never below
 *    what any estimate in that cooldown asked for: an oscillation between x and x + 1 holds n at x + 1.
 * Bounds: n <= listLength, and n >= max(1, minWarm) unless the list is shorter (n = listLength then; an empty
 * list gives 0). A list that shrinks below n cuts n at once: that is not a scale-in decision.
 */

import { SWAYAM_DEFAULTS } from "./parameters.js";
import { type UsablePredicate, usableRange } from "./prefix-dispatch.js";
import { type SizingParams, type SizingResult, sizeBackends } from "./response-time-model.js";

interface Peak {
  at: number;
  need: number;
}

export interface ScaleState {
  readonly n: number;
  /** Time of the last scale-in, or of the state's creation. */
  readonly lastScaleInAt: number;
  /** Needs over the last cooldown, times increasing and needs strictly decreasing (a sliding-max deque). */
  readonly peaks: readonly Peak[];
}

export function initialScaleState(now: number, n = 1): ScaleState {
  return { n, lastScaleInAt: now, peaks: [] };
}

export interface ScaleContext {
  now: number;
  state: ScaleState;
  /** Predicted global rate (req/s) t_setup ahead: n_F x the local prediction. */
  predictedGlobalRate: number;
  /** Burst threshold U (default 2). */
  burstFactor?: number;
  /** Warm headroom (req/s, default 0): the rate sized for is at least the predicted rate plus this. */
  headroomRate?: number;
  sizing: Omit<SizingParams, "ratePerSec" | "maxN" | "minN">;
  listLength: number;
  /** Floor from the global allocator (default 0). */
  minWarm?: number;
  scaleInCooldownMs?: number;
  /**
   * If given, warmUp holds the list indices of the usable entries of rank n_old..n_new-1 (the prefix skips
   * failed entries); otherwise the plain indices n_old..n_new-1.
   */
  usable?: UsablePredicate;
}

export type ScaleReason = "scale-out" | "scale-in" | "steady" | "cooldown" | "recent-peak" | "list-shrunk";

export interface ScaleDecision {
  n: number;
  /** 0-based list indices to send warm-up requests to. */
  warmUp: number[];
  reason: ScaleReason;
  /** What the model needs now, before regulation and the minWarm floor. */
  need: number;
  sizing: SizingResult;
}

export function decideScale(ctx: ScaleContext): { decision: ScaleDecision; state: ScaleState } {
  const { now, state, listLength } = ctx;
  const cooldown = ctx.scaleInCooldownMs ?? SWAYAM_DEFAULTS.scaleInCooldownMs;
  const floor = Math.min(Math.max(0, listLength), Math.max(1, ctx.minWarm ?? 0));
  const predicted = Math.max(0, ctx.predictedGlobalRate);
  const rate = Math.max(predicted * (ctx.burstFactor ?? SWAYAM_DEFAULTS.burstFactor), predicted + Math.max(0, ctx.headroomRate ?? 0));
  const s = ctx.sizing;
  // Every field by name, not a spread of ctx.sizing: the spread took V8's slow path (a microsecond and a half per
  // decision, the largest part of a simulated frontend's decision); the type makes a new field a compile error here.
  const params: { [K in keyof Required<SizingParams>]: SizingParams[K] } = {
    serviceTime: s.serviceTime,
    rtMaxMs: s.rtMaxMs,
    slMin: s.slMin,
    probeCostMs: s.probeCostMs,
    fixedDelayMs: s.fixedDelayMs,
    maxUtilisation: s.maxUtilisation,
    entryWeights: s.entryWeights,
    ratePerSec: rate,
    maxN: Math.max(1, listLength),
    minN: 1,
  };
  const sizing = sizeBackends(params);
  const need = Math.min(sizing.n, Math.max(0, listLength));
  const target = Math.max(need, floor);

  // A loop, not filter and its closure (that filter was 5 % of a simulated frontend's decision).
  const since = now - cooldown;
  const peaks: Peak[] = [];
  for (let i = 0; i < state.peaks.length; i++) {
    const p = state.peaks[i] as Peak;
    if (p.at >= since) peaks.push(p);
  }
  while (peaks.length > 0 && (peaks[peaks.length - 1]?.need ?? 0) <= need) peaks.pop();
  peaks.push({ at: now, need });
  // The floor is applied at decision time, not recorded, so a lowered minWarm takes effect after one cooldown.
  const windowMax = peaks[0]?.need ?? need;

  const current = Math.min(state.n, Math.max(0, listLength));
  const shrunk = current < state.n;
  let n = current;
  let lastScaleInAt = state.lastScaleInAt;
  let reason: ScaleReason = shrunk ? "list-shrunk" : "steady";
  let warmUp: number[] = [];

  if (target > current) {
    n = target;
    reason = "scale-out";
    warmUp = ctx.usable ? usableRange(current, target, ctx.usable, listLength) : range(current, target);
  } else if (target < current) {
    if (now - state.lastScaleInAt < cooldown) {
      reason = shrunk ? "list-shrunk" : "cooldown";
    } else if (windowMax >= current) {
      reason = shrunk ? "list-shrunk" : "recent-peak";
    } else {
      n = Math.max(windowMax, floor);
      lastScaleInAt = now;
      reason = "scale-in";
    }
  }

  return {
    decision: { n, warmUp, reason, need, sizing },
    state: { n, lastScaleInAt, peaks },
  };
}

function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let i = from; i < to; i++) out.push(i);
  return out;
}

/**
 * The prefix length of a service that does not autoscale (the frontends' `--scaling static`): the allocator's
 * warm floor or the spec's initial size, whichever is larger, within the list.
 */
export function staticPrefixLength(minWarm: number, initialBackends: number, listLength: number): number {
  return Math.min(listLength, Math.max(minWarm, initialBackends, 1));
}
