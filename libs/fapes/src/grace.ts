/**
 * What a loaned backend does with the item it is running when it is reclaimed (FaPES: a preStop hook with a
 * 15 s grace period). The item is finished when it is expected to end within the grace period, abandoned at
 * once when it is not (waiting would only delay inference), and abandoned at the end of the grace period if it
 * runs late. An abandoned item was never recorded as done, so the job does it again elsewhere, once.
 */

/** FaPES's grace period, ms. */
export const FAPES_GRACE_MS = 15_000;

export type ReclaimedItem =
  /** Keep running it; abandon it if it is not done by `deadlineMs`. */
  | { readonly action: "finish"; readonly deadlineMs: number }
  /** Stop it now and give the backend back. */
  | { readonly action: "abandon" };

/**
 * @param startedMs when the item started
 * @param expectedMs how long items of this job take (the job's recent mean, or its model's)
 * @param reclaimedMs when the reclaim reached the backend
 */
export function reclaimedItem(startedMs: number, expectedMs: number, reclaimedMs: number, graceMs: number): ReclaimedItem {
  const deadlineMs = reclaimedMs + Math.max(0, graceMs);
  if (!(expectedMs >= 0) || startedMs + expectedMs > deadlineMs) return { action: "abandon" };
  return { action: "finish", deadlineMs };
}
