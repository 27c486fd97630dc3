/**
 * Baseline probabilistic forecasters over one-minute bins, all behind the same interface as the
 * N-HiTS model so the benchmark and the predictor treat them alike:
 *  - last value (Faro's artifact forecasts "latest counts" until 15 bins exist);
 *  - Swayam's linear regression (Gujarati et al., Middleware'17, section 4.2: least squares over
 *    rate windows of the recent history), run by Swayam's own `RateHistory`, not a copy of it;
 *  - seasonal naive (the same bin one period earlier: one day on the Azure trace);
 *  - Holt (the existing `forecastRates`).
 *
 * The first three are point forecasters; their spread is empirical: the root mean square of their
 * own recent errors at each step ahead (so a biased or lagging forecaster also gets a wider band),
 * with the recent bin-to-bin variation standing in until enough errors exist, and never below the
 * Poisson noise of a count, sqrt(mean) (a flat series is not certain).
 */

import { RateHistory } from "@infergrid/swayam";
import { cleanCount, type ProbabilisticForecast, type ProbabilisticForecaster } from "./forecaster.js";
import { forecastRates } from "./holt.js";
import { BinHistory } from "./series.js";

export interface BaselineOptions {
  /** Steps ahead (Faro: 7 one-minute bins). */
  steps?: number;
  /** Bins kept (the seasonal forecaster keeps at least one period more than this). */
  memory?: number;
  /** The spread is the RMS of at most this many recent errors per step. */
  errorWindow?: number;
  /** Fewer errors than this at a step and the spread comes from the recent bin-to-bin variation. */
  minErrors?: number;
  /** Bins of recent variation used before enough errors exist (Faro's 15-bin input). */
  variationBins?: number;
  /** Spread with a single bin of history, as a fraction of it. */
  coldSpread?: number;
  /** Observations are counts per bin: the spread is at least sqrt(mean). Off for rates. */
  poissonFloor?: boolean;
}

const BASE_DEFAULTS = { steps: 7, memory: 360, errorWindow: 60, minErrors: 5, variationBins: 15, coldSpread: 0.5, poissonFloor: true };

/** RMS of recent errors per step ahead, from the point forecasts a forecaster issued. */
export class ErrorSpread {
  private readonly pending: number[][] = [];
  private readonly errors: number[][];
  private readonly sums: number[];

  constructor(
    private readonly steps: number,
    private readonly window: number,
  ) {
    this.errors = Array.from({ length: steps }, () => []);
    this.sums = new Array<number>(steps).fill(0);
  }

  /** Scores the forecasts that targeted this bin (pending[0] was issued one bin ago). */
  resolve(actual: number): void {
    for (let h = 1; h <= Math.min(this.steps, this.pending.length); h++) {
      const predicted = this.pending[this.pending.length - h]?.[h - 1];
      if (predicted === undefined) continue;
      const e = actual - predicted;
      const list = this.errors[h - 1] ?? [];
      list.push(e * e);
      this.sums[h - 1] = (this.sums[h - 1] ?? 0) + e * e;
      if (list.length > this.window) this.sums[h - 1] = (this.sums[h - 1] ?? 0) - (list.shift() ?? 0);
    }
  }

  /** Records the point forecast issued after the latest bin. */
  issue(point: readonly number[]): void {
    this.pending.push([...point]);
    if (this.pending.length > this.steps) this.pending.shift();
  }

  /** Errors recorded at step h (1-based). */
  count(h: number): number {
    return this.errors[h - 1]?.length ?? 0;
  }

  rms(h: number): number {
    const n = this.count(h);
    return n > 0 ? Math.sqrt(Math.max(0, this.sums[h - 1] ?? 0) / n) : 0;
  }
}

/** The spread of the recent bin-to-bin changes: a random walk's h-step error is sqrt(h) times it. */
export function recentVariation(history: BinHistory, bins: number, coldSpread: number): number {
  const recent = history.tail(bins);
  if (recent.length < 2) return coldSpread * (recent.at(-1) ?? 0);
  let sum = 0;
  for (let i = 1; i < recent.length; i++) sum += ((recent[i] ?? 0) - (recent[i - 1] ?? 0)) ** 2;
  return Math.sqrt(sum / (recent.length - 1));
}

/** A point forecaster with the empirical spread described above. */
export abstract class PointForecaster implements ProbabilisticForecaster {
  abstract readonly name: string;
  readonly steps: number;
  protected readonly options: Required<BaselineOptions>;
  protected readonly history: BinHistory;
  private readonly spread: ErrorSpread;
  private point: number[];

  constructor(options: BaselineOptions = {}, extraMemory = 0) {
    this.options = { ...BASE_DEFAULTS, ...options };
    this.steps = this.options.steps;
    if (!Number.isInteger(this.steps) || this.steps < 1) throw new RangeError(`steps must be a positive integer, got ${this.steps}`);
    this.history = new BinHistory(Math.max(this.options.memory, this.options.variationBins) + extraMemory);
    this.spread = new ErrorSpread(this.steps, this.options.errorWindow);
    this.point = new Array<number>(this.steps).fill(0);
  }

  get observed(): number {
    return this.history.total;
  }

  observe(value: number): void {
    const y = cleanCount(value);
    this.spread.resolve(y);
    this.history.push(y);
    this.update(y);
    this.point = this.pointForecast().map((m) => Math.max(0, m));
    this.spread.issue(this.point);
  }

  forecast(): ProbabilisticForecast {
    const { minErrors, variationBins, coldSpread, poissonFloor } = this.options;
    const variation = recentVariation(this.history, variationBins, coldSpread);
    const std = this.point.map((m, i) => {
      const h = i + 1;
      const empirical = this.spread.count(h) >= minErrors ? this.spread.rms(h) : variation * Math.sqrt(h);
      return Math.max(empirical, poissonFloor ? Math.sqrt(m) : 0);
    });
    return { model: this.name, mean: [...this.point], std };
  }

  /** Hook for forecasters with state of their own. */
  protected update(_value: number): void {}

  /** Mean per step from the history (the newest bin is `history.back(0)`). */
  protected abstract pointForecast(): number[];
}

/** The latest bin, flat over the horizon. */
export class LastValueForecaster extends PointForecaster {
  readonly name = "last-value";

  protected pointForecast(): number[] {
    return new Array<number>(this.steps).fill(this.history.length > 0 ? this.history.back(0) : 0);
  }
}

export interface LinearRegressionOptions extends BaselineOptions {
  /** Bins per regression point (Swayam: 100 s rate windows). */
  windowBins?: number;
  /** Bins of history regressed over (Swayam: 500 s, i.e. 5 windows). */
  historyBins?: number;
}

/**
 * Swayam's predictor on bins: `RateHistory` runs in a virtual clock where one bin is one second, so
 * its rates are counts per bin. Each step's target is a whole bin, so the line is read at the bin's
 * midpoint (h - 1/2 bins ahead), as Swayam reads each window's rate at its midpoint.
 */
export class LinearRegressionForecaster extends PointForecaster {
  readonly name = "linear-regression";
  private readonly rates: RateHistory;
  private static readonly BIN_MS = 1000;

  constructor(options: LinearRegressionOptions = {}) {
    super(options);
    const windowBins = options.windowBins ?? 1;
    const historyBins = options.historyBins ?? 5;
    const bin = LinearRegressionForecaster.BIN_MS;
    this.rates = new RateHistory({ windowMs: windowBins * bin, historyMs: historyBins * bin, bucketMs: bin, minPoints: 3, origin: 0 });
  }

  protected override update(value: number): void {
    this.rates.recordArrival((this.history.total - 1) * LinearRegressionForecaster.BIN_MS, value);
  }

  protected pointForecast(): number[] {
    const bin = LinearRegressionForecaster.BIN_MS;
    // RateHistory falls back to its partial current window below minPoints: read the last bin instead.
    if (this.history.total < 3) return new Array<number>(this.steps).fill(this.history.back(0));
    const now = this.history.total * bin;
    return Array.from({ length: this.steps }, (_, i) => this.rates.predictRate(now, (i + 0.5) * bin));
  }
}

export interface SeasonalOptions extends BaselineOptions {
  /** Bins in one period (1440 = one day of minutes). */
  period: number;
}

/** The same bin one period earlier; the latest bin until a whole period has been seen. */
export class SeasonalForecaster extends PointForecaster {
  readonly name = "seasonal";
  readonly period: number;

  constructor(options: SeasonalOptions) {
    super(options, options.period + 1);
    if (!Number.isInteger(options.period) || options.period < 1)
      throw new RangeError(`period must be a positive integer, got ${options.period}`);
    this.period = options.period;
  }

  protected pointForecast(): number[] {
    const n = this.history.length;
    const last = n > 0 ? this.history.back(0) : 0;
    // Step h targets the bin h after the newest; the latest bin a whole number of periods earlier
    // is (k * period - h) bins back, k = ceil(h / period) (k = 1 unless the horizon exceeds a period).
    return Array.from({ length: this.steps }, (_, i) => {
      const h = i + 1;
      const back = Math.ceil(h / this.period) * this.period - h;
      return back >= 0 && back < n ? this.history.back(back) : last;
    });
  }
}

export interface HoltOptions {
  steps?: number;
  /** Bins the smoothing runs over (the predictor keeps 360 windows). */
  memory?: number;
  alpha?: number;
  beta?: number;
  minHistory?: number;
  /** Observations are counts per bin: the spread is at least sqrt(mean). Off for rates. */
  poissonFloor?: boolean;
}

/** The existing Holt forecaster (`forecastRates`) over the kept bins. */
export class HoltForecaster implements ProbabilisticForecaster {
  readonly name = "holt";
  private readonly history: BinHistory;
  private readonly options: HoltOptions;

  constructor(options: HoltOptions = {}) {
    this.options = options;
    this.history = new BinHistory(options.memory ?? 360);
  }

  get observed(): number {
    return this.history.total;
  }

  observe(value: number): void {
    this.history.push(cleanCount(value));
  }

  forecast(): ProbabilisticForecast {
    const f = forecastRates(this.history.tail(this.history.length), {
      steps: this.options.steps ?? 7,
      quantiles: [0.5],
      alpha: this.options.alpha,
      beta: this.options.beta,
      minHistory: this.options.minHistory,
      // One "second" per bin: the Poisson floor sqrt(rate / 1) is sqrt(count).
      windowSeconds: this.options.poissonFloor === false ? undefined : 1,
    });
    return { model: f.model === "holt" ? "holt" : "last-value", mean: f.mean, std: f.spread };
  }
}
