import { control } from "@infergrid/proto";
import { createLogger, type NatsConnection } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { type PredictorConfig, predictorConfig } from "./config.js";
import { ForecastPublisher } from "./publisher.js";
import { LoadWindows } from "./windows.js";

const W = 1000;
/** forecast() never touches NATS: a stand-in connection is enough. */
const nc = { isClosed: () => true } as unknown as NatsConnection;
const logger = createLogger("test", "publisher-test", "silent");

function setup(overrides: Partial<PredictorConfig>) {
  const config: PredictorConfig = { ...predictorConfig.parse({}), windowMs: W, latenessMs: 0, ...overrides };
  const windows = new LoadWindows(W, config.historyWindows, 0);
  const publisher = new ForecastPublisher(nc, windows, config, logger, () => {});
  let t = 0;
  /** One closed window with `count` arrivals, then the forecast published right after it. */
  const step = (count: number) => {
    t += W;
    windows.add(
      control.LoadReport.create({ service: "svc", frontendId: "f", windowStartUnixMs: t - W, windowEndUnixMs: t, arrivals: count }),
      t,
    );
    return publisher.forecast("svc", t + 1);
  };
  return { config, step };
}

describe("ForecastPublisher", () => {
  it("publishes the planning quantile 0.6 by default, with nhits as the default model", () => {
    const config = predictorConfig.parse({});
    expect(config.model).toBe("nhits");
    expect(config.quantiles).toEqual([0.5, 0.6, 0.9, 0.99]);
  });

  it("nhits: walks the ladder (last value, Holt) as windows close, and keeps the message shape", () => {
    const { step } = setup({ model: "nhits", steps: 7 });
    const models: string[] = [];
    let last: ReturnType<typeof step>;
    // The first window is partial (never counted), so window k has 10 + (k % 5) arrivals.
    for (let k = 0; k < 30; k++) {
      last = step(10 + (k % 5));
      if (last) models.push(last.model ?? "");
    }
    expect(models.slice(0, 14).every((m) => m === "last-value")).toBe(true);
    expect(models.at(-1)).toBe("holt");
    const f = last;
    expect(f?.steps).toBe(7);
    expect(f?.quantiles?.map((q) => q.quantile)).toEqual([0.5, 0.6, 0.9, 0.99]);
    for (const q of f?.quantiles ?? []) {
      expect(q.ratePerS).toHaveLength(7);
      // Rates per second of a 10-14 per 1 s window.
      for (const r of q.ratePerS ?? []) expect(r).toBeGreaterThanOrEqual(0);
      expect(q.ratePerS?.[0]).toBeLessThan(40);
    }
    const p = f?.quantiles?.map((q) => q.ratePerS?.[0] ?? 0) ?? [];
    for (let i = 1; i < p.length; i++) expect(p[i]).toBeGreaterThanOrEqual(p[i - 1] ?? 0);
  });

  it("every model forecasts; stateful ones see each window once however often they are read", () => {
    for (const model of ["last-value", "linear-regression", "seasonal", "holt"] as const) {
      const { step } = setup({ model, steps: 3, seasonWindows: 4 });
      let f: ReturnType<typeof step>;
      for (let k = 0; k < 12; k++) f = step(20);
      expect(f?.quantiles?.find((q) => q.quantile === 0.5)?.ratePerS).toEqual([20, 20, 20]);
    }
  });

  it("a clock that ran ahead and stepped back: the forecast follows the windows again at once", () => {
    const config: PredictorConfig = { ...predictorConfig.parse({}), windowMs: W, latenessMs: 0, model: "nhits", steps: 1 };
    const windows = new LoadWindows(W, config.historyWindows, 0);
    const publisher = new ForecastPublisher(nc, windows, config, logger, () => {});
    const add = (t: number, count: number) =>
      windows.add(
        control.LoadReport.create({ service: "svc", frontendId: "f", windowStartUnixMs: t - W, windowEndUnixMs: t, arrivals: count }),
        t,
      );
    let t = 0;
    for (let k = 0; k < 20; k++) {
      t += W;
      add(t, 10);
      publisher.forecast("svc", t + 1);
    }
    // One read with the clock an hour ahead: an hour of windows nobody reported in, fed as zeros.
    publisher.forecast("svc", t + 3_600_000);
    // The clock is right again, and the load rises to 1000 a window.
    let f: ReturnType<typeof publisher.forecast>;
    for (let k = 0; k < 5; k++) {
      t += W;
      add(t, 1000);
      f = publisher.forecast("svc", t + 1);
    }
    expect(f?.observedRatePerS).toBe(1000);
    expect(f?.quantiles?.find((q) => q.quantile === 0.5)?.ratePerS?.[0]).toBeGreaterThan(500);
  });

  it("refuses a step length other than the window for the per-window models", () => {
    expect(() => setup({ model: "nhits", stepMs: 2 * W })).toThrow(/step-ms/);
  });
});
