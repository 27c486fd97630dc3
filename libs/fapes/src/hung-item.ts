/**
 * When a best-effort item has hung. A job's items run one model on inputs of one shape, so they take about the
 * same time; one that has computed many times longer than the job's items do is not going to end. Without a
 * bound, a hung model call held its backend, its item (the runner's keep-alive extends the item's ack wait) and
 * the job's progress for good. The floor keeps a first item, timed only by its model's nominal figure, from
 * being taken for hung on a slower machine.
 */
export const HUNG_ITEM_FACTOR = 20;
export const HUNG_ITEM_FLOOR_MS = 60_000;

/** How long an item may compute before it counts as hung, given how long this job's items take (ms). */
export function hungItemLimitMs(expectedMs: number): number {
  const scaled = Number.isFinite(expectedMs) && expectedMs > 0 ? HUNG_ITEM_FACTOR * expectedMs : 0;
  return Math.max(HUNG_ITEM_FLOOR_MS, scaled);
}
