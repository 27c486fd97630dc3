/**
 * The forecasters a deployment can choose by name, built the one way both the predictor service and the
 * simulator build them, so the simulator forecasts with the predictor's exact configuration.
 */
import { HoltForecaster, LastValueForecaster, LinearRegressionForecaster, SeasonalForecaster } from "./baselines.js";
import type { ProbabilisticForecaster } from "./forecaster.js";
import { NHitsForecaster } from "./nhits-forecaster.js";

export const FORECASTER_MODELS = ["nhits", "holt", "last-value", "linear-regression", "seasonal"] as const;
export type ForecasterModel = (typeof FORECASTER_MODELS)[number];

export interface ForecasterSpec {
  model: ForecasterModel;
  /** Forecast horizon in steps (Faro: 7). */
  steps: number;
  /** nhits: the latest value until this many closed bins (Faro: 15), then Holt until the network has trained. */
  warmupWindows: number;
  /** Holt's level and trend smoothing, and the bins below which it forecasts the latest value. */
  alpha: number;
  beta: number;
  minHistory: number;
  /** seasonal: bins in one season. */
  seasonWindows: number;
  /** nhits: seed of the weights and batches; mixed with the service's name so each service differs. */
  seed: number;
}

/** The predictor service's defaults (services/predictor config). */
export const DEFAULT_FORECASTER_SPEC: ForecasterSpec = {
  model: "nhits",
  steps: 7,
  warmupWindows: 15,
  alpha: 0.5,
  beta: 0.3,
  minHistory: 3,
  seasonWindows: 1440,
  seed: 1,
};

/** A small stable hash, so each service's network starts from its own seed, the same on every run. */
export function nameHash(name: string): number {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return h >>> 0;
}

export function createForecaster(spec: ForecasterSpec, service: string): ProbabilisticForecaster {
  const steps = spec.steps;
  switch (spec.model) {
    case "nhits":
      return new NHitsForecaster({
        steps,
        seed: (spec.seed + nameHash(service)) | 0,
        lastValueUntil: spec.warmupWindows,
        holt: { alpha: spec.alpha, beta: spec.beta, minHistory: spec.minHistory },
      });
    case "last-value":
      return new LastValueForecaster({ steps });
    case "linear-regression":
      return new LinearRegressionForecaster({ steps });
    case "seasonal":
      return new SeasonalForecaster({ steps, period: spec.seasonWindows });
    case "holt":
      return new HoltForecaster({ steps, alpha: spec.alpha, beta: spec.beta, minHistory: spec.minHistory });
  }
}
