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
  .default([0.5, 0.9, 0.99]);

export const predictorConfig = z.object({
  windowMs: field.int(10_000, 100).describe("arrivals are summed over fixed windows of this length (bucketed by a report's window end)"),
  periodMs: field.ms(0).describe("forecasts are published this often (0 = once per window)"),
  latenessMs: field.ms(1_000).describe("a window is closed (and forecast from) this long after it ends, so late reports still count"),
  steps: field.int(7, 1, 1000).describe("forecast horizon in steps"),
  stepMs: field.ms(0).describe("length of a forecast step (0 = the window)"),
  quantiles: quantileList.describe("forecast quantiles, comma-separated, each in (0, 1)"),
  historyWindows: field.int(360, 2).describe("windows of history kept per service"),
  alpha: field.number(0.5, 0.01, 1).describe("level smoothing of the forecaster"),
  beta: field.number(0.3, 0, 1).describe("trend smoothing of the forecaster (0 = no trend)"),
  minHistory: field.int(3, 2).describe("with fewer closed windows the forecast is the latest rate with a wide spread"),
  forgetAfterMs: field.ms(300_000).describe("a service with no report for this long is no longer forecast"),
});

export type PredictorConfig = z.infer<typeof predictorConfig>;
