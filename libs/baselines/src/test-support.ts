/** Building blocks of this package's tests. */
import type { Observation } from "./types.js";

/** A job's observation at rest (one ready replica, no load), with `o` on top. */
export const observation = (o: Partial<Observation>): Observation => ({
  ready: 1,
  starting: 0,
  target: 1,
  utilisation: 0,
  requestRate: 0,
  concurrency: 0,
  concurrencyShort: 0,
  ...o,
});
