/**
 * Where a request's time goes on the full path, from the services' own duration histograms
 * (infergrid_broker_request_duration_seconds: from the broker having the request to its answer;
 * infergrid_frontend_request_duration_seconds: the same at the frontend), read before and after a window:
 * the means over the window, differenced into what each stretch of the path adds.
 */

/** A histogram's sum (s) and count over every label set, from Prometheus text exposition. */
export interface HistogramTotals {
  sum: number;
  count: number;
}

export function histogramTotals(text: string, name: string): HistogramTotals {
  const totals = { sum: 0, count: 0 };
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    if (!Number.isFinite(value)) continue;
    if (m[1] === `${name}_sum`) totals.sum += value;
    else if (m[1] === `${name}_count`) totals.count += value;
  }
  return totals;
}

/** The mean (ms) of what a histogram recorded between two readings; NaN when it recorded nothing. */
export function meanMsBetween(before: HistogramTotals, after: HistogramTotals): number {
  const n = after.count - before.count;
  return n > 0 ? ((after.sum - before.sum) * 1000) / n : Number.NaN;
}

export interface HopTimes {
  /** From the client's call to the broker having the whole request, and from its answer back to the client. */
  toBroker: number;
  /** From the broker having it to the frontend having it, and back. */
  brokerToFrontend: number;
  /** At the frontend and beyond: dispatch, the backend, the answer back to the frontend. */
  frontendAndBackend: number;
}

/** Splits the client's mean latency by the broker's and the frontend's means (all ms). */
export function hopTimes(clientMeanMs: number, brokerMeanMs: number, frontendMeanMs: number): HopTimes {
  return {
    toBroker: clientMeanMs - brokerMeanMs,
    brokerToFrontend: brokerMeanMs - frontendMeanMs,
    frontendAndBackend: frontendMeanMs,
  };
}
