/**
 * The pause a request takes, on top of delta, after a whole round over the prefix found every backend
 * refusing. Backends never queue, so whoever probes first when a backend frees takes it: were every waiting
 * request to back off alike (Swayam's frontends retry after delta; ours doubled the pause per round to spare
 * a saturated or provisioning prefix), the unluckiest would wait longest and the latency tail would grow.
 * Here a young request backs off, min(maxGapMs, delta x 2^rounds), and a request older than `urgentFraction`
 * of RT_max probes every delta: waiting requests are served roughly oldest first, which keeps the tail (and
 * Swayam's pruning of late requests) down, and the probing cost stays on the few that are old.
 *
 * Measured in the simulator (faro-36, seed 1, `infergrid`): doubling up to 100 ms for every request, 1.44 %
 * SLO violations; no backoff at all, 0.65 %; this rule with a quarter of RT_max, 0.61 %.
 */
export interface RoundBackoffOptions {
  deltaMs: number;
  /** The longest pause of a young request. */
  maxGapMs: number;
  /** From this fraction of RT_max on a request is urgent and pauses no more than delta. */
  urgentFraction: number;
}

export const ROUND_BACKOFF_DEFAULTS: Omit<RoundBackoffOptions, "deltaMs"> = { maxGapMs: 100, urgentFraction: 0.25 };

export function roundBackoffMs(rounds: number, ageMs: number, rtMaxMs: number, o: RoundBackoffOptions): number {
  if (ageMs >= o.urgentFraction * rtMaxMs) return 0;
  return Math.min(o.maxGapMs, o.deltaMs * 2 ** rounds);
}
