import { DEFAULT_FORECASTER_SPEC, FORECASTER_MODELS, type ForecasterModel } from "@infergrid/forecast";
import { field } from "@infergrid/runtime";
import { z } from "zod";

const quantileList = z
  .string()
  .transform((s, ctx) => {
    const qs = s.split(",").map((x) => Number(x.trim()));
    if (qs.length === 0 || qs.some((q) => !(q > 0 && q < 1))) {
      ctx.addIssue({ code: "custom", message: "quantiles must be numbers in (0, 1), comma-separated" });
      return z.NEVER;
    }
    return [...new Set(qs)].sort((a, b) => a - b);
  })
  // 0.6: the quantile Faro's allocator plans for (artifact), so it is always published.
  .default([0.5, 0.6, 0.9, 0.99]);

/** Forecasters the predictor can run per service (libs/forecast). */
export const MODELS = FORECASTER_MODELS;
export type ModelName = ForecasterModel;

export const predictorConfig = z.object({
  windowMs: field.int(10_000, 100).describe("arrivals are summed over fixed windows of this length (bucketed by a report's window end)"),
  periodMs: field.ms(0).describe("forecasts are published this often (0 = once per window)"),
  latenessMs: field.ms(1_000).describe("a window is closed (and forecast from) this long after it ends, so late reports still count"),
  steps: field.int(DEFAULT_FORECASTER_SPEC.steps, 1, 1000).describe("forecast horizon in steps"),
  stepMs: field.ms(0).describe("length of a forecast step (0 = the window)"),
  quantiles: quantileList.describe("forecast quantiles, comma-separated, each in (0, 1)"),
  historyWindows: field.int(360, 2).describe("windows of history kept per service"),
  alpha: field.number(DEFAULT_FORECASTER_SPEC.alpha, 0.01, 1).describe("level smoothing of the forecaster"),
  beta: field.number(DEFAULT_FORECASTER_SPEC.beta, 0, 1).describe("trend smoothing of the forecaster (0 = no trend)"),
  minHistory: field
    .int(DEFAULT_FORECASTER_SPEC.minHistory, 2)
    .describe("holt: with fewer closed windows the forecast is the latest rate with a wide spread"),
  // nhits is the default: lowest pinball loss on the training data of `npm run bench:predictor`
  // (Faro trace minutes 0..239 and Azure minutes 0..2879; see libs/forecast/README.md).
  model: z
    .enum(MODELS)
    .default(DEFAULT_FORECASTER_SPEC.model)
    .describe(`forecaster: ${MODELS.join(", ")} (nhits: online N-HiTS with a Gaussian head, with fallbacks)`),
  warmupWindows: field
    .int(DEFAULT_FORECASTER_SPEC.warmupWindows, 1)
    .describe("nhits: the latest rate until this many closed windows (Faro: 15), then Holt until the network has trained"),
  seasonWindows: field
    .int(DEFAULT_FORECASTER_SPEC.seasonWindows, 1)
    .describe("seasonal: windows in one season (1440 = one day of one-minute windows)"),
  seed: field
    .int(DEFAULT_FORECASTER_SPEC.seed)
    .describe("nhits: seed of the initial weights and training batches (a service's seed also mixes in its name)"),
  forgetAfterMs: field.ms(300_000).describe("a service with no report for this long is no longer forecast"),
});

export type PredictorConfig = z.infer<typeof predictorConfig>;
