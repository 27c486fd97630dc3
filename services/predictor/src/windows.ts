import { loadWindowProblem, serviceNameProblem } from "@infergrid/control-plane";
import type { control } from "@infergrid/proto";

export type AddOutcome = "accepted" | "invalid" | "too_old" | "too_many_services";

/**
 * Services it keeps windows (and a forecaster) for: far above any deployment's, and a bound on what reports
 * naming invented services cost (each one's forecaster trains at every window).
 */
export const MAX_FORECAST_SERVICES = 1024;

interface ServiceWindows {
  /** Window index -> first arrivals summed over every frontend. */
  buckets: Map<number, number>;
  /** The window the first report fell in: only partly observed, so never part of the series. */
  firstWindow: number;
  lastReportAt: number;
}

/**
 * Per-service arrivals summed across frontends into fixed windows. Frontends report at their own
 * moments, so a report counts in the window its window_end falls in, and a window is read only
 * once it is closed (a little after its end), when the late reports are in. Pure: `now` comes in.
 */
export class LoadWindows {
  private readonly services = new Map<string, ServiceWindows>();

  constructor(
    readonly windowMs: number,
    private readonly historyWindows: number,
    private readonly latenessMs: number,
    private readonly maxServices = MAX_FORECAST_SERVICES,
  ) {}

  /** Window k covers (k*W, (k+1)*W]: a report ending on a boundary belongs to the window before it. */
  windowOf(endUnixMs: number): number {
    return Math.floor((endUnixMs - 1) / this.windowMs);
  }

  /** The newest window that is closed at `now`. */
  lastClosed(now: number): number {
    return this.windowOf(now - this.latenessMs + 1) - 1;
  }

  /**
   * `shiftMs` carries the frontend's wall-clock window onto the clock `now` is read on (SteadyClock.wallOffset in
   * main.ts): the windows are kept on a clock a step of the wall clock does not move.
   */
  add(report: control.LoadReport, now: number, shiftMs = 0): AddOutcome {
    const end = Number(report.windowEndUnixMs) + shiftMs;
    const arrivals = Number(report.arrivals);
    if (serviceNameProblem(report.service) || loadWindowProblem(report, now - shiftMs) || !Number.isFinite(arrivals) || arrivals < 0)
      return "invalid";
    const k = this.windowOf(end);
    if (k <= this.lastClosed(now) - this.historyWindows) return "too_old";
    let s = this.services.get(report.service);
    if (!s) {
      if (this.services.size >= this.maxServices) return "too_many_services";
      s = { buckets: new Map(), firstWindow: k, lastReportAt: now };
      this.services.set(report.service, s);
    }
    s.lastReportAt = now;
    s.buckets.set(k, (s.buckets.get(k) ?? 0) + arrivals);
    const oldest = this.lastClosed(now) - this.historyWindows;
    for (const key of s.buckets.keys()) if (key <= oldest) s.buckets.delete(key);
    return "accepted";
  }

  serviceNames(): string[] {
    return [...this.services.keys()].sort();
  }

  /**
   * Rates (per second) of the closed windows, oldest first, from the window after the first report on (the
   * predictor, or the service, started somewhere inside that one, and a partial window would read as a spurious
   * ramp). Every frontend reports every registered service at every period, its quiet ones with no arrivals, so a
   * window nobody reported in is one the predictor did not hear (NATS away), not one without load: it carries the
   * rate of the window before it (read as zero, an outage of a minute fed the forecaster a minute without load,
   * and the allocator shrank the services after it).
   */
  rates(service: string, now: number): number[] {
    const s = this.services.get(service);
    if (!s) return [];
    const last = this.lastClosed(now);
    const first = Math.max(s.firstWindow + 1, last - this.historyWindows + 1);
    const seconds = this.windowMs / 1000;
    let carried = 0;
    let newestBefore = Number.NEGATIVE_INFINITY;
    for (const [k, count] of s.buckets)
      if (k < first && k > s.firstWindow && k > newestBefore) {
        newestBefore = k;
        carried = count / seconds;
      }
    const out: number[] = [];
    for (let k = first; k <= last; k++) {
      const count = s.buckets.get(k);
      if (count !== undefined) carried = count / seconds;
      out.push(carried);
    }
    return out;
  }

  /** Drops services no frontend has reported on for `afterMs`; returns their names. */
  forget(now: number, afterMs: number): string[] {
    const gone = [...this.services].filter(([, s]) => now - s.lastReportAt > afterMs).map(([n]) => n);
    for (const n of gone) this.services.delete(n);
    return gone;
  }
}
