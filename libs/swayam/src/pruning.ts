/**
 * Swayam's optional pruning: a request that has been refused at least once and can no longer finish within
 * RT_max, even if a backend took it now, is dropped instead of retried. Under overload this is what keeps
 * the requests that can still make it inside the SLA: a late request served anyway takes a backend from one
 * that was not late yet.
 */
/**
 * The service time the rule assumes: this quantile of the recent compute times, not their mean. With parking a
 * backend serves the oldest request first, so under overload every request served has waited almost as long
 * as the rule allows; judged against the mean, about half of those then ran past RT_max anyway. Measured in the
 * simulator (seed 1, `infergrid`): faro-16 35.7 -> 32.4 % violations, faro-32 0.94 -> 0.84 %, faro-48 0.031 ->
 * 0.029 %; the 0.99 quantile dropped more for little gain (31.8, 0.91, 0.030 %).
 */
export const PRUNE_SERVICE_QUANTILE = 0.9;

export function isPastSaving(nowMs: number, arrivedAtMs: number, expectedServiceMs: number, rtMaxMs: number, attempts: number): boolean {
  return attempts > 0 && nowMs - arrivedAtMs + expectedServiceMs > rtMaxMs;
}

/**
 * A quantile of the last `capacity` samples (a frontend's recent compute times, for isPastSaving). Re-sorted
 * only every `capacity / 8` new samples, so recording stays O(1) on the request path.
 */
export class RecentQuantile {
  private readonly samples: number[] = [];
  private cursor = 0;
  private sinceSort = 0;
  private cached: number | undefined;

  constructor(
    private readonly q: number,
    private readonly capacity = 512,
  ) {}

  record(value: number): void {
    if (!Number.isFinite(value) || value < 0) return;
    if (this.samples.length < this.capacity) this.samples.push(value);
    else {
      this.samples[this.cursor] = value;
      this.cursor = (this.cursor + 1) % this.capacity;
    }
    this.sinceSort += 1;
  }

  /** The quantile of the recent samples; 0 before the first. */
  value(): number {
    if (this.samples.length === 0) return 0;
    if (this.cached === undefined || this.sinceSort >= Math.max(1, this.capacity / 8)) {
      const sorted = [...this.samples].sort((a, b) => a - b);
      this.cached = sorted[Math.min(sorted.length - 1, Math.ceil(this.q * sorted.length) - 1)] ?? 0;
      this.sinceSort = 0;
    }
    return this.cached;
  }
}

/**
 * Which late requests pruning may drop:
 *  - "always": every one (Swayam's pruning);
 *  - "tail": only while the window's drops stay within its SLO tail (1 - SL_min of its requests), so that a
 *    window whose percentile can still be met keeps it; past that budget a late request is served late;
 *  - "tail-or-lost": within the tail, and also once the window has dropped more than its tail (its percentile
 *    is lost to drops already, and one more drop changes nothing), so an overloaded window sheds its late
 *    requests for the others' sake.
 */
export type PruneBudgetMode = "always" | "tail" | "tail-or-lost";

export interface PruneBudgetSettings {
  readonly mode: PruneBudgetMode;
  /** The window an SLO's percentile is judged over (Faro: each minute's p99). */
  readonly windowMs: number;
  /**
   * A request older than this many latency thresholds is dropped whatever the budget: served that late it would
   * hold its window's percentile at more than this many thresholds (utility under 1 / lateCap) and delay the
   * requests behind it, so past it dropping costs the window little more than serving.
   */
  readonly lateCap: number;
}

/**
 * This system's default (the frontends' `--prune-budget`): measured on Faro's trace in the simulator (seed 1,
 * docs/results.md), "tail-or-lost" with lateCap 2 against Swayam's "always", violations % and lost utility:
 * faro-36 0.73 / 0.20 against 0.28 / 0.33; faro-16 50.2 / 5.75 against 42.4 / 6.13 (both with Faro-Sum at
 * the 0.5 quantile). Without the cap (faro-36: 1.30 / 0.20) late requests delayed the ones behind them;
 * lateCap 1.5 lost more utility (0.57 / 0.23).
 */
export const PRUNE_BUDGET_DEFAULTS: PruneBudgetSettings = { mode: "tail-or-lost", windowMs: 60_000, lateCap: 2 };

/**
 * One frontend's pruning budget for one service, per window of time (a minute by default). A window's percentile
 * counts a dropped request as an infinite latency: once more than its tail (1 - SL_min of its requests) is
 * dropped the window has missed its SLO outright, while a request served late only raises its percentile by
 * its lateness. The budget estimates the window's requests as the larger of those seen so far in it and those
 * of the window before. Each frontend keeps its own (frontends do not talk to each other): each sees its share
 * of the requests, so budgets kept apart add up to at most the service's.
 */
export class PruneBudget {
  private window = Number.NaN;
  private arrivals = 0;
  private previous = 0;
  private drops = 0;

  constructor(
    /** 1 - SL_min, in [0, 1). */
    private readonly tail: number,
    private readonly settings: PruneBudgetSettings = PRUNE_BUDGET_DEFAULTS,
  ) {
    if (!(tail >= 0 && tail < 1)) throw new RangeError(`tail must be in [0, 1), got ${tail}`);
    if (!(settings.windowMs > 0)) throw new RangeError(`windowMs must be > 0, got ${settings.windowMs}`);
    if (!(settings.lateCap >= 1)) throw new RangeError(`lateCap must be >= 1, got ${settings.lateCap}`);
  }

  recordArrival(now: number): void {
    this.roll(now);
    this.arrivals += 1;
  }

  /** A request of this frontend ended without an answer (pruned, or given up at its deadline). */
  recordDrop(now: number): void {
    this.roll(now);
    this.drops += 1;
  }

  /** Whether a late request `ageMs` old may be dropped now, for a service whose latency threshold is `rtMaxMs`. */
  allows(now: number, ageMs: number, rtMaxMs: number): boolean {
    const s = this.settings;
    if (s.mode === "always" || ageMs > s.lateCap * rtMaxMs) return true;
    this.roll(now);
    const budget = this.tail * Math.max(this.arrivals, this.previous);
    if (this.drops + 1 <= budget) return true;
    return s.mode === "tail-or-lost" && this.drops > budget;
  }

  private roll(now: number): void {
    const w = Math.floor(now / this.settings.windowMs);
    if (w === this.window) return;
    this.previous = w === this.window + 1 ? this.arrivals : 0;
    this.arrivals = 0;
    this.drops = 0;
    this.window = w;
  }
}
