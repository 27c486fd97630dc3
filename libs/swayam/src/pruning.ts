/**
 * Swayam's optional pruning: a request that has been refused at least once and can no longer finish within
 * RT_max, even if a backend took it now, is dropped instead of retried. Under overload this is what keeps
 * the requests that can still make it inside the SLA: a late request served anyway takes a backend from one
 * that was not late yet.
 */
export function isPastSaving(nowMs: number, arrivedAtMs: number, expectedServiceMs: number, rtMaxMs: number, attempts: number): boolean {
  return attempts > 0 && nowMs - arrivedAtMs + expectedServiceMs > rtMaxMs;
}
