/**
 * Global load from local information: the frontend count n_F (Gujarati et al., Middleware'17, section 4.2).
 *
 * The broker spreads requests uniformly, so lambda = n_F * lambda_i. Backends piggyback on every reply the
 * number of distinct frontends that sent them requests in the last t_setup; a frontend keeps the freshest
 * report per backend. The paper does not say how to aggregate the reports; we take the maximum of the reports
 * fresher than a window (default t_setup), at least 1, because:
 *  - a backend near the end of the prefix gets few requests and may have missed some frontends, so any single
 *    report can only undercount; the maximum is the best lower bound on the truth;
 *  - overestimating n_F over-provisions a little for at most ~2 t_setup after a frontend fails (the paper's
 *    stated, accepted behaviour, section 5.3), while underestimating it under-provisions and violates the SLA;
 *  - stale reports are dropped so that a failed frontend disappears once every backend's window has moved on.
 */
import { SWAYAM_DEFAULTS } from "./parameters.js";

interface Report {
  frontendsSeen: number;
  at: number;
}

export interface FrontendCountOptions {
  /** Reports older than this are ignored (ms, default t_setup = 10 s). */
  freshnessMs?: number;
}

export class FrontendCountEstimator {
  private readonly reports = new Map<string, Report>();
  readonly freshnessMs: number;

  constructor(options: FrontendCountOptions = {}) {
    this.freshnessMs = options.freshnessMs ?? SWAYAM_DEFAULTS.tSetupMs;
  }

  /** Keeps the freshest report per backend (replies may arrive out of order). */
  observe(backendId: string, frontendsSeen: number, now: number): void {
    const previous = this.reports.get(backendId);
    if (previous === undefined) {
      this.reports.set(backendId, { frontendsSeen, at: now });
      return;
    }
    if (previous.at > now) return;
    // In place: one report per reply, and a fresh object each time was garbage the simulator paid for.
    previous.frontendsSeen = frontendsSeen;
    previous.at = now;
  }

  /** Conservative n_F: the max over reports with now - at <= freshness, at least 1. */
  estimate(now: number): number {
    let best = 1;
    for (const r of this.reports.values()) {
      if (now - r.at <= this.freshnessMs && r.frontendsSeen > best) best = r.frontendsSeen;
    }
    return best;
  }

  forget(backendId: string): void {
    this.reports.delete(backendId);
  }

  /** Drops stale reports so memory stays bounded by the backends heard from recently. */
  prune(now: number): void {
    // forEach, not for-of: no [id, report] pair per entry at every decision.
    this.reports.forEach((r, id) => {
      if (now - r.at > this.freshnessMs) this.reports.delete(id);
    });
  }

  get size(): number {
    return this.reports.size;
  }
}
