import { type HeartbeatVerifier, subjects, subscribeHeartbeats, subscribeLoadReports } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { type Logger, LogThrottle, type NatsConnection, type Subscription, subscribeMessages } from "@infergrid/runtime";
import type { Allocator } from "./allocator.js";
import type { SignalBook } from "./signals.js";

/**
 * Feeds the allocator from NATS: heartbeats of every role and backend heartbeats; and the signal
 * book (what the slow loop plans from): forecasts and the frontends' load reports.
 *
 * Not the pool events: they are the allocator's own announcements. A backend that decommissions itself
 * beats at once, and its heartbeat (signed, with --signed-heartbeats) saying cold with no service is what
 * returns it (Allocator.onBackendHeartbeat): an unsigned event naming a backend would let any backend take
 * any other out of its list.
 */
export function collect(
  nc: NatsConnection,
  allocator: Allocator,
  signals: SignalBook,
  logger: Logger,
  onGarbled: () => void,
  /**
   * The allocator's clock, and how far it is ahead of this host's wall clock (SteadyClock): forecasts and load
   * reports carry their senders' wall-clock times, which are carried onto it.
   */
  clock: { now(): number; wallOffset(): number },
  /** --signed-heartbeats: only heartbeats signed by their member's certificate, load reports by their frontend's. */
  verifier?: HeartbeatVerifier,
  /** Each load report's fate, for the operator's counter. */
  onLoadReport: (outcome: "accepted" | "invalid" | "refused") => void = () => {},
): Subscription[] {
  const now = () => clock.now();
  const log = logger.child({ component: "collector" });
  // At most 5 lines per kind in 10 s, names cut short: a peer sending bad messages fast (or with a megabyte of
  // service name, which the reason quotes) must not flood the log.
  const lines = new LogThrottle();
  const short = (s: string) => (s.length > 200 ? `${s.slice(0, 200)}... (${s.length} characters)` : s);
  const refused = (what: string, service: string, problem: string | undefined) => {
    if (!problem) return;
    const { write, suppressed } = lines.admit(what, Date.now());
    if (write)
      log.warn({ service: short(service), problem: short(problem), ...(suppressed > 0 ? { suppressed } : {}) }, `ignored a ${what}`);
  };
  return [
    subscribeMessages(
      nc,
      subjects.allForecasts,
      control.Forecast,
      log,
      (f) => refused("forecast", f.service, signals.onForecast(f, clock.wallOffset())),
      {
        onGarbled,
      },
    ),
    subscribeLoadReports(
      nc,
      log,
      (r) => {
        const problem = signals.onLoadReport(r, now(), clock.wallOffset());
        onLoadReport(problem === undefined ? "accepted" : "invalid");
        refused("load report", r.service, problem);
      },
      { onGarbled, verifier, onRefused: () => onLoadReport("refused") },
    ),
    subscribeHeartbeats(nc, subjects.heartbeatsOf("backend"), log, (hb) => allocator.onBackendHeartbeat(hb, now()), {
      onGarbled,
      verifier,
    }),
    subscribeHeartbeats(nc, subjects.allHeartbeats, log, (hb) => allocator.onMemberHeartbeat(hb, now()), { onGarbled, verifier }),
  ];
}
