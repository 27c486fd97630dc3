import { subjects } from "@infergrid/control-plane";
import { forecastRates } from "@infergrid/forecast";
import { control } from "@infergrid/proto";
import { type Logger, type NatsConnection, publishMessage } from "@infergrid/runtime";
import type { PredictorConfig } from "./config.js";
import type { LoadWindows } from "./windows.js";

/** Forecasts every known service from its closed windows and publishes the result. */
export class ForecastPublisher {
  private readonly stepMs: number;
  readonly lastObserved = new Map<string, number>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly windows: LoadWindows,
    private readonly config: PredictorConfig,
    private readonly logger: Logger,
    private readonly onPublished: () => void,
  ) {
    this.stepMs = config.stepMs > 0 ? config.stepMs : config.windowMs;
  }

  forecast(service: string, now: number): control.Forecast.$Properties | undefined {
    const rates = this.windows.rates(service, now);
    if (rates.length === 0) return undefined;
    const f = forecastRates(rates, {
      steps: this.config.steps,
      stepWindows: this.stepMs / this.config.windowMs,
      quantiles: this.config.quantiles,
      alpha: this.config.alpha,
      beta: this.config.beta,
      minHistory: this.config.minHistory,
      windowSeconds: this.config.windowMs / 1000,
    });
    return {
      service,
      issuedAtUnixMs: now,
      stepMs: this.stepMs,
      steps: this.config.steps,
      quantiles: f.quantiles.map((q) => ({ quantile: q.quantile, ratePerS: q.rates })),
      model: f.model,
      observedRatePerS: f.observed,
    };
  }

  publishAll(now: number): void {
    for (const gone of this.windows.forget(now, this.config.forgetAfterMs)) {
      this.lastObserved.delete(gone);
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
