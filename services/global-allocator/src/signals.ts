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

export class SignalBook {
  private readonly forecasts = new Map<string, ForecastView>();
  private readonly reports = new Map<string, Report[]>();
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
    const list = (this.reports.get(r.service) ?? []).filter((x) => now - x.end <= this.keepMs);
    list.push(report);
    this.reports.set(r.service, list);
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
    for (const r of this.reports.get(service) ?? []) {
      if (r.end <= since) continue;
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
    const byFrontend = new Map<string, Report[]>();
    for (const r of this.reports.get(service) ?? []) {
      if (now - r.end > maxAgeMs || !(r.end > r.start)) continue;
      byFrontend.set(r.frontend, [...(byFrontend.get(r.frontend) ?? []), r]);
    }
    if (byFrontend.size === 0) return undefined;
    let rate = 0;
    for (const reports of byFrontend.values()) {
      reports.sort((a, b) => b.end - a.end);
      const end = reports[0]?.end ?? 0;
      let start = end;
      let arrivals = 0;
      for (const r of reports) {
        if (end - start >= spanMs && start < end) break;
        arrivals += r.arrivals;
        start = Math.min(start, r.start);
      }
      rate += (arrivals * 1000) / (end - start);
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
  }

  /** Drops reports older than the keep span (each service's list is also trimmed as it grows). */
  expire(now: number): void {
    for (const [service, list] of this.reports) {
      const kept = list.filter((r) => now - r.end <= this.keepMs);
      if (kept.length === 0) this.reports.delete(service);
      else this.reports.set(service, kept);
    }
  }
}
