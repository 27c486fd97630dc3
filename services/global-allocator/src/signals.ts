import type { TickOutcomes } from "@infergrid/allocation";
import { loadWindowProblem, serviceNameProblem } from "@infergrid/control-plane";
import type { control } from "@infergrid/proto";

/** A forecast as the allocator plans from it: rates per step for each published quantile. */
export interface ForecastView {
  issuedAt: number;
  stepMs: number;
  observedRatePerS: number;
  quantiles: { quantile: number; ratePerS: number[] }[];
  model: string;
}

/** What the frontends saw of one service over a span of time, summed over frontends. */
export type OutcomeTotals = TickOutcomes;

interface Report {
  frontend: string;
  start: number;
  end: number;
  arrivals: number;
  completed: number;
  failed: number;
  withinSlo: number;
  serviceTimeMeanMs: number;
}

const finite = (x: unknown): number => (typeof x === "number" && Number.isFinite(x) && x >= 0 ? x : Number.NaN);

/**
 * The allocator's inputs from the data plane: the predictor's latest forecast per service and the
 * frontends' load reports (each frontend reports its own share; sums are the service's totals).
 * Malformed messages are refused with a reason, never half-applied. Pure: time comes in as `now`.
 */
/** Query sizes kept per service for Kairos's configuration search (Kairos monitors its last 10,000 queries). */
export const KEPT_BATCHES = 10_000;
/**
 * Bounds on what load reports can make the book hold: services (far above a deployment's; the predictor's bound
 * too), frontends per service, and reports per frontend and service (a frontend reporting every 100 ms over the
 * allocator's 5-minute keep span sends 3,000). A frontend inventing services or flooding reports costs at most these.
 */
export const MAX_SIGNAL_SERVICES = 1024;
export const MAX_FRONTENDS_PER_SERVICE = 4096;
export const MAX_REPORTS_PER_FRONTEND = 4096;

export class SignalBook {
  private readonly forecasts = new Map<string, ForecastView>();
  /**
   * Per service, per frontend, its reports in the order they came. Kept apart per frontend so that a report costs
   * its own frontend's few hundred, not every frontend's (one list per service cost 0.1 ms a report at 100 frontends,
   * and each rate read sorted every frontend's reports again).
   */
  private readonly reports = new Map<string, Map<string, Report[]>>();
  /** Per service, the last KEPT_BATCHES reported batch sizes (a ring). */
  private readonly batchRings = new Map<string, { sizes: number[]; cursor: number }>();

  constructor(private readonly keepMs: number) {}

  /** `shiftMs` carries the predictor's wall-clock stamps onto the allocator's clock (SteadyClock.wallOffset). */
  onForecast(f: control.Forecast, shiftMs = 0): string | undefined {
    const problem = serviceNameProblem(f.service);
    if (problem) return problem;
    const stepMs = Number(f.stepMs);
    const quantiles = f.quantiles.map((q) => ({ quantile: Number(q.quantile ?? Number.NaN), ratePerS: (q.ratePerS ?? []).map(finite) }));
    if (!(stepMs > 0)) return `forecast step ${stepMs} ms must be positive`;
    if (quantiles.length === 0) return "forecast has no quantiles";
    if (quantiles.some((q) => !(q.quantile > 0 && q.quantile < 1) || q.ratePerS.length === 0 || q.ratePerS.some(Number.isNaN))) {
      return "forecast quantiles must be in (0, 1) with non-negative finite rates";
    }
    this.forecasts.set(f.service, {
      issuedAt: Number(f.issuedAtUnixMs) + shiftMs,
      stepMs,
      observedRatePerS: Number.isFinite(f.observedRatePerS) ? Math.max(0, f.observedRatePerS) : 0,
      quantiles: quantiles.sort((a, b) => a.quantile - b.quantile),
      model: f.model,
    });
    return undefined;
  }

  /**
   * `shiftMs` carries the frontend's wall-clock window onto the allocator's clock `now` (SteadyClock.wallOffset):
   * the window is checked against this host's wall clock, and kept and aged on the allocator's.
   */
  onLoadReport(r: control.LoadReport, now: number, shiftMs = 0): string | undefined {
    const problem = serviceNameProblem(r.service) ?? loadWindowProblem(r, now - shiftMs);
    if (problem) return problem;
    const report: Report = {
      frontend: r.frontendId,
      start: Number(r.windowStartUnixMs) + shiftMs,
      end: Number(r.windowEndUnixMs) + shiftMs,
      arrivals: finite(Number(r.arrivals)),
      completed: finite(Number(r.completed)),
      failed: finite(Number(r.failed)),
      withinSlo: finite(Number(r.withinSlo)),
      serviceTimeMeanMs: finite(r.serviceTimeMeanMs),
    };
    if (Object.values(report).some((v) => typeof v === "number" && Number.isNaN(v)) || !(report.end > 0))
      return "load report has a missing or negative count";
    if (report.withinSlo > report.completed) return "load report has more requests within the SLO than completed";
    const batches = (r.batches ?? []).map(Number);
    if (batches.some((b) => !(Number.isInteger(b) && b >= 1))) return "load report has a batch size that is not a positive integer";
    let byFrontend = this.reports.get(r.service);
    if (!byFrontend) {
      if (this.reports.size >= MAX_SIGNAL_SERVICES) return `load reports are kept for at most ${MAX_SIGNAL_SERVICES} services`;
      byFrontend = new Map();
      this.reports.set(r.service, byFrontend);
    }
    let list = byFrontend.get(report.frontend);
    if (!list) {
      if (byFrontend.size >= MAX_FRONTENDS_PER_SERVICE)
        return `load reports are kept from at most ${MAX_FRONTENDS_PER_SERVICE} frontends per service`;
      list = [];
      byFrontend.set(report.frontend, list);
    }
    list.push(report);
    // Reports come in order, so the stale ones are at the front (one out of order waits for expire()).
    let stale = 0;
    while (stale < list.length && now - (list[stale] as Report).end > this.keepMs) stale++;
    if (list.length - stale > MAX_REPORTS_PER_FRONTEND) stale = list.length - MAX_REPORTS_PER_FRONTEND;
    if (stale > 0) list.splice(0, stale);
    const ring = this.batchRings.get(r.service) ?? { sizes: [], cursor: 0 };
    for (const b of batches) {
      if (ring.sizes.length < KEPT_BATCHES) ring.sizes.push(b);
      else {
        ring.sizes[ring.cursor] = b;
        ring.cursor = (ring.cursor + 1) % KEPT_BATCHES;
      }
    }
    this.batchRings.set(r.service, ring);
    return undefined;
  }

  /** The service's last reported batch sizes (up to KEPT_BATCHES, in no particular order). */
  batches(service: string): readonly number[] {
    return this.batchRings.get(service)?.sizes ?? [];
  }

  /** The latest forecast, if issued within `maxAgeMs`. */
  forecast(service: string, now: number, maxAgeMs: number): ForecastView | undefined {
    const f = this.forecasts.get(service);
    return f && now - f.issuedAt <= maxAgeMs ? f : undefined;
  }

  /** Totals of the reports whose window ended after `since`. */
  outcomes(service: string, since: number): OutcomeTotals {
    const t = { arrivals: 0, completed: 0, failed: 0, withinSlo: 0, serviceTimeMeanMs: 0 };
    let weighted = 0;
    // Newest first, up to the first that ended by `since` (a frontend's reports come in order: latestRatePerS).
    for (const list of this.reports.get(service)?.values() ?? [])
      for (let i = list.length - 1; i >= 0; i--) {
        const r = list[i] as Report;
        if (r.end <= since) break;
        t.arrivals += r.arrivals;
        t.completed += r.completed;
        t.failed += r.failed;
        t.withinSlo += r.withinSlo;
        weighted += r.serviceTimeMeanMs * r.completed;
      }
    t.serviceTimeMeanMs = t.completed > 0 ? weighted / t.completed : 0;
    return t;
  }

  /**
   * The service's arrival rate now, req/s: per frontend, its latest windows (ended within `maxAgeMs`), newest
   * first until they span `spanMs` (at least the latest one), their arrivals over their span; summed over
   * frontends (each reports its own share). Undefined with no fresh window.
   */
  latestRatePerS(service: string, now: number, maxAgeMs: number, spanMs = 0): number | undefined {
    let rate: number | undefined;
    const reports: Report[] = [];
    for (const list of this.reports.get(service)?.values() ?? []) {
      reports.length = 0;
      // Newest first, up to the first one too old: a frontend's reports come in the order it sent them (one NATS
      // connection), so the fresh ones are at the end.
      for (let i = list.length - 1; i >= 0; i--) {
        const r = list[i] as Report;
        if (now - r.end > maxAgeMs) break;
        if (r.end > r.start) reports.push(r);
      }
      if (reports.length === 0) continue;
      reports.sort((a, b) => b.end - a.end);
      const end = reports[0]?.end ?? 0;
      let start = end;
      let arrivals = 0;
      for (const r of reports) {
        if (end - start >= spanMs && start < end) break;
        arrivals += r.arrivals;
        start = Math.min(start, r.start);
      }
      rate = (rate ?? 0) + (arrivals * 1000) / (end - start);
    }
    return rate;
  }

  /** Services that reported or were forecast recently. */
  services(): string[] {
    return [...new Set([...this.forecasts.keys(), ...this.reports.keys()])].sort();
  }

  forget(service: string): void {
    this.forecasts.delete(service);
    this.reports.delete(service);
    this.batchRings.delete(service);
  }

  /** Drops reports older than the keep span (each service's list is also trimmed as it grows). */
  expire(now: number): void {
    for (const [service, byFrontend] of this.reports) {
      for (const [frontend, list] of byFrontend) {
        const kept = list.filter((r) => now - r.end <= this.keepMs);
        if (kept.length === 0) byFrontend.delete(frontend);
        else byFrontend.set(frontend, kept);
      }
      if (byFrontend.size === 0) this.reports.delete(service);
    }
  }
}
