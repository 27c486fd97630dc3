import { subjects } from "@infergrid/control-plane";
import { createForecaster, forecastQuantile, forecastRates, type ProbabilisticForecaster } from "@infergrid/forecast";
import { control } from "@infergrid/proto";
import { type Logger, type NatsConnection, publishMessage } from "@infergrid/runtime";
import type { PredictorConfig } from "./config.js";
import type { LoadWindows } from "./windows.js";

interface ServiceState {
  forecaster: ProbabilisticForecaster;
  /** The newest window index fed to the forecaster. */
  fedThrough: number;
}

/**
 * Forecasts every known service from its closed windows and publishes the result. With
 * `--model holt` each forecast is recomputed from the kept windows (the original behaviour); every
 * other model is a per-service state machine fed each closed window once, in counts per window
 * (so the Poisson floor of a count applies), and read back as rates.
 */
export class ForecastPublisher {
  private readonly stepMs: number;
  private readonly states = new Map<string, ServiceState>();
  readonly lastObserved = new Map<string, number>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly windows: LoadWindows,
    private readonly config: PredictorConfig,
    private readonly logger: Logger,
    private readonly onPublished: () => void,
    /** A time on the clock `now` is read on, as the wall clock reads it (SteadyClock.toWall): forecasts carry wall-clock stamps. */
    private readonly toWall: (ms: number) => number = (ms) => ms,
  ) {
    this.stepMs = config.stepMs > 0 ? config.stepMs : config.windowMs;
    if (config.model !== "holt" && this.stepMs !== config.windowMs) {
      throw new Error(
        `--model ${config.model} forecasts one window per step: --step-ms must be 0 or equal --window-ms (${config.windowMs})`,
      );
    }
  }

  private createForecaster(service: string): ProbabilisticForecaster {
    return createForecaster(this.config, service);
  }

  forecast(service: string, now: number): control.Forecast.$Properties | undefined {
    const rates = this.windows.rates(service, now);
    if (rates.length === 0) return undefined;
    const observed = rates.at(-1) ?? 0;
    let model: string;
    let quantiles: { quantile: number; ratePerS: number[] }[];
    if (this.config.model === "holt") {
      const f = forecastRates(rates, {
        steps: this.config.steps,
        stepWindows: this.stepMs / this.config.windowMs,
        quantiles: this.config.quantiles,
        alpha: this.config.alpha,
        beta: this.config.beta,
        minHistory: this.config.minHistory,
        windowSeconds: this.config.windowMs / 1000,
      });
      model = f.model;
      quantiles = f.quantiles.map((q) => ({ quantile: q.quantile, ratePerS: q.rates }));
    } else {
      const seconds = this.config.windowMs / 1000;
      const state = this.feed(service, rates, now, seconds);
      const f = state.forecaster.forecast();
      model = f.model;
      quantiles = this.config.quantiles.map((q) => ({ quantile: q, ratePerS: forecastQuantile(f, q).map((c) => c / seconds) }));
    }
    return {
      service,
      issuedAtUnixMs: this.toWall(now),
      stepMs: this.stepMs,
      steps: this.config.steps,
      quantiles,
      model,
      observedRatePerS: observed,
    };
  }

  /** Feeds the windows closed since the last call (rates[i] is window last - n + 1 + i). */
  private feed(service: string, rates: readonly number[], now: number, seconds: number): ServiceState {
    const last = this.windows.lastClosed(now);
    const first = last - rates.length + 1;
    let state = this.states.get(service);
    // Fed windows past the newest closed one: the clock stepped back. Waiting for it to catch up would leave the
    // forecast where it was (possibly an hour of zeros fed while the clock ran ahead): it starts afresh from the
    // windows kept.
    if (state && last < state.fedThrough) {
      this.logger.warn({ service, fedThrough: state.fedThrough, lastClosed: last }, "the clock stepped back: forecasting afresh");
      state = undefined;
    }
    if (!state) {
      state = { forecaster: this.createForecaster(service), fedThrough: first - 1 };
      this.states.set(service, state);
    }
    for (let k = Math.max(first, state.fedThrough + 1); k <= last; k++) state.forecaster.observe((rates[k - first] ?? 0) * seconds);
    state.fedThrough = Math.max(state.fedThrough, last);
    return state;
  }

  publishAll(now: number): void {
    for (const gone of this.windows.forget(now, this.config.forgetAfterMs)) {
      this.lastObserved.delete(gone);
      this.states.delete(gone);
      this.logger.info({ service: gone }, "no reports for a while: no longer forecast");
    }
    if (this.nc.isClosed()) return;
    for (const service of this.windows.serviceNames()) {
      const forecast = this.forecast(service, now);
      if (!forecast) continue;
      publishMessage(this.nc, subjects.forecast(service), control.Forecast, forecast);
      this.lastObserved.set(service, forecast.observedRatePerS ?? 0);
      this.onPublished();
    }
  }
}
