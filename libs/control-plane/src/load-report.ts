import type { control } from "@infergrid/proto";
import { HEARTBEAT_MAX_SKEW_MS } from "./heartbeat-signature.js";

/**
 * What is wrong with a load report's window, for its readers (the allocator, the predictor): undefined when
 * nothing is. A window that ends in the future (past the clock skew heartbeats are allowed) would never age
 * out of a reader's memory and would be counted again at every tick, and one that ends before it starts has
 * no rate.
 */
export function loadWindowProblem(r: Pick<control.LoadReport, "windowStartUnixMs" | "windowEndUnixMs">, now: number): string | undefined {
  const start = Number(r.windowStartUnixMs);
  const end = Number(r.windowEndUnixMs);
  if (!(Number.isFinite(start) && start >= 0 && Number.isFinite(end) && end > 0)) return "load report has no window";
  if (end < start) return `load report's window ends (${end}) before it starts (${start})`;
  if (end > now + HEARTBEAT_MAX_SKEW_MS)
    return `load report's window ends ${end - now} ms in the future (more than the ${HEARTBEAT_MAX_SKEW_MS} ms of clock skew allowed)`;
  return undefined;
}
