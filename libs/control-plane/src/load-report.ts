import { control } from "@infergrid/proto";
import { type Logger, LogThrottle, type NatsConnection, type Subscription, subscribeMessages } from "@infergrid/runtime";
import { HEARTBEAT_MAX_SKEW_MS, type HeartbeatVerifier } from "./heartbeat-signature.js";
import { serviceNameProblem, subjects } from "./subjects.js";

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

/** (frontend, service) pairs a gate remembers at most: far above a deployment's frontends times services. */
export const MAX_GATED_PAIRS = 100_000;

/**
 * Which load reports a reader may count (the predictor sums their arrivals, the allocator plans from their rates).
 * Without a verifier, every report: NATS lets any frontend publish on every service's subject, so only with
 * --signed-heartbeats can a reader tell who sent one. With it, a report must be sealed by the frontend it names
 * (HeartbeatVerifier.loadReportProblem), and its window must end after the last one counted from that frontend for
 * that service: the same report twice would count its arrivals twice. A frontend whose clock steps back loses its
 * reports until its windows pass the last one counted (at most HEARTBEAT_MAX_SKEW_MS: older ones are refused as
 * stale anyway).
 */
export class LoadReportGate {
  private readonly lastEnd = new Map<string, number>();

  constructor(
    private readonly verifier?: Pick<HeartbeatVerifier, "loadReportProblem">,
    private readonly now: () => number = Date.now,
    private readonly maxPairs = MAX_GATED_PAIRS,
  ) {}

  /** Why `report` (decoded from `raw`, the bytes that came) must not be counted; undefined if it may. */
  problem(report: control.LoadReport, raw: Uint8Array): string | undefined {
    if (!this.verifier) return undefined;
    // The name is checked before it is remembered (a sealed report with a megabyte of name must not be kept), and
    // not repeated in the reason, which is logged.
    const problem =
      this.verifier.loadReportProblem(report, raw) ??
      (serviceNameProblem(report.service) === undefined ? undefined : "its service name is not one a service may have");
    if (problem) return problem;
    const key = `${report.frontendId}\u0000${report.service}`;
    const end = Number(report.windowEndUnixMs);
    const last = this.lastEnd.get(key);
    if (last !== undefined && !(end > last))
      return `its window ends at ${end}, not after the last one counted from this frontend (${last})`;
    if (last === undefined && this.lastEnd.size >= this.maxPairs) this.forgetStale();
    // Full of fresh pairs (frontends inventing services): the newest pair is not remembered, so only its repeats pass.
    if (last !== undefined || this.lastEnd.size < this.maxPairs) this.lastEnd.set(key, end);
    return undefined;
  }

  /** Pairs whose last window is older than a report may be: a repeat of it is refused as stale anyway. */
  private forgetStale(): void {
    const before = this.now() - HEARTBEAT_MAX_SKEW_MS;
    for (const [key, end] of this.lastEnd) if (end < before) this.lastEnd.delete(key);
  }
}

const refusedReportLines = new LogThrottle();

/**
 * Subscribes to every service's load reports, handing on those the gate lets through (LoadReportGate, with the
 * --signed-heartbeats verifier if given). A refused one is counted through `onRefused` and logged (at most 5
 * lines per frontend in 10 s).
 */
export function subscribeLoadReports(
  nc: NatsConnection,
  logger: Logger,
  handle: (report: control.LoadReport) => void,
  options: { verifier?: HeartbeatVerifier | undefined; onGarbled?: (subject: string) => void; onRefused?: (problem: string) => void } = {},
): Subscription {
  const gate = new LoadReportGate(options.verifier);
  return subscribeMessages(
    nc,
    subjects.allLoad,
    control.LoadReport,
    logger,
    (report, subject, data) => {
      const problem = gate.problem(report, data);
      if (problem === undefined) return handle(report);
      options.onRefused?.(problem);
      const { write, suppressed } = refusedReportLines.admit(report.frontendId, Date.now());
      if (write)
        logger.warn({ subject, frontend: report.frontendId, problem, ...(suppressed > 0 ? { suppressed } : {}) }, "dropped a load report");
    },
    options.onGarbled ? { onGarbled: options.onGarbled } : {},
  );
}
