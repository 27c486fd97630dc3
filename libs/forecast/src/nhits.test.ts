import { seededRandom, standardNormal } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { LastValueForecaster } from "./baselines.js";
import { forecastSteps, meanPinball, type ProbabilisticForecast, type ProbabilisticForecaster } from "./forecaster.js";
import { NHitsNetwork, type TrainingWindow } from "./nhits.js";
import { NHitsForecaster } from "./nhits-forecaster.js";

const Q = [0.1, 0.3, 0.5, 0.7, 0.9];
/** Keeps the tests' CPU low: a narrower network, one step of 8 windows per bin. */
const FAST = { network: { hidden: 24 }, stepsPerBin: 1, batchSize: 8 };

/** Mean pinball loss of the forecasts issued over `test` (online: each forecaster keeps observing). */
function onlineLoss(
  series: readonly number[],
  trainBins: number,
  forecasters: { f: ProbabilisticForecaster; read: () => ProbabilisticForecast }[],
): number[] {
  const losses = forecasters.map(() => 0);
  let n = 0;
  for (let t = 0; t < series.length; t++) {
    const issued = forecasters.map(({ f, read }) => {
      f.observe(series[t] ?? 0);
      return read();
    });
    if (t < trainBins || t + 7 >= series.length) continue;
    n++;
    issued.forEach((fc, i) => {
      for (let h = 1; h <= 7; h++) losses[i] = (losses[i] ?? 0) + meanPinball(fc, h - 1, series[t + h] ?? 0, Q) / 7;
    });
  }
  return losses.map((l) => l / n);
}

describe("NHitsNetwork", () => {
  it("back-propagates the Gaussian NLL correctly (finite-difference check)", () => {
    const random = seededRandom(5);
    const net = new NHitsNetwork({ hidden: 8, inputSize: 15, horizon: 7 }, random);
    // Move the output layers off their near-zero start so every path carries gradient.
    for (let s = 0; s < 30; s++)
      net.trainStep([{ input: Array.from({ length: 15 }, (_, i) => 50 + 3 * i), target: [60, 70, 80, 90, 95, 99, 100] }], 0.01, 1e9);
    const batch: TrainingWindow[] = Array.from({ length: 3 }, () => ({
      input: Array.from({ length: 15 }, () => 40 + 20 * random.uniform()),
      target: Array.from({ length: 7 }, () => 40 + 20 * random.uniform()),
    }));
    net.gradient(batch);
    const analytic = Float64Array.from(net.lastGradient);
    const eps = 1e-6;
    let checked = 0;
    for (let j = 0; j < net.parameterCount; j += 37) {
      const saved = net.params[j] ?? 0;
      net.params[j] = saved + eps;
      const up = net.gradient(batch);
      net.params[j] = saved - eps;
      const down = net.gradient(batch);
      net.params[j] = saved;
      const numeric = (up - down) / (2 * eps);
      expect(Math.abs(numeric - (analytic[j] ?? 0))).toBeLessThan(1e-5 + 1e-3 * Math.abs(numeric));
      checked++;
    }
    expect(checked).toBeGreaterThan(20);
  });

  it("untrained, it forecasts the latest value with a spread of about 30 %", () => {
    const net = new NHitsNetwork({}, seededRandom(1));
    const { mean, std } = net.predict(new Array(15).fill(200));
    for (const m of mean) expect(Math.abs(m - 200)).toBeLessThan(5);
    for (const s of std) expect(s / 200).toBeGreaterThan(0.25);
  });
});

describe("NHitsForecaster", () => {
  it("learns a clean seasonal signal online: pinball loss well under last value's", () => {
    const random = seededRandom(11);
    const series = Array.from({ length: 600 }, (_, t) =>
      Math.max(0, 200 + 120 * Math.sin((2 * Math.PI * t) / 12) + 5 * standardNormal(random)),
    );
    const model = new NHitsForecaster({ ...FAST, seed: 3 });
    const last = new LastValueForecaster();
    const [m, l] = onlineLoss(series, 450, [
      { f: model, read: () => model.rawForecast() },
      { f: last, read: () => last.forecast() },
    ]);
    expect(m).toBeLessThan(0.5 * (l ?? 0));
    expect(model.forecast().model).toBe("nhits");
  });

  it("learns a repeating ramp (sawtooth) better than last value", () => {
    const series = Array.from({ length: 600 }, (_, t) => 20 + 8 * (t % 10));
    const model = new NHitsForecaster({ ...FAST, seed: 4 });
    const last = new LastValueForecaster();
    const [m, l] = onlineLoss(series, 450, [
      { f: model, read: () => model.rawForecast() },
      { f: last, read: () => last.forecast() },
    ]);
    expect(m).toBeLessThan(0.6 * (l ?? 0));
  });

  it("quantiles are ordered and non-negative, also for a series near zero", () => {
    const random = seededRandom(2);
    const model = new NHitsForecaster({ ...FAST, seed: 1 });
    for (let t = 0; t < 150; t++) model.observe(Math.floor(3 * random.uniform()));
    const rows = forecastSteps(model.rawForecast(), [0.01, 0.1, 0.5, 0.6, 0.9, 0.99]);
    for (const row of rows) {
      for (const v of row) expect(v).toBeGreaterThanOrEqual(0);
      for (let k = 1; k < row.length; k++) expect(row[k]).toBeGreaterThanOrEqual(row[k - 1] ?? 0);
    }
  });

  it("is deterministic for a seed", () => {
    const run = (seed: number) => {
      const f = new NHitsForecaster({ ...FAST, seed });
      for (let t = 0; t < 80; t++) f.observe(100 + 30 * Math.sin(t / 3) + (t % 7));
      return f.rawForecast();
    };
    expect(run(9)).toEqual(run(9));
    expect(run(9).mean).not.toEqual(run(10).mean);
  });

  it("hands out the forecast of the latest bin as computed then, in copies a caller may change", () => {
    const f = new NHitsForecaster({ ...FAST, minTrainSteps: 5 });
    for (let t = 0; t < 40; t++) f.observe(100 + 30 * Math.sin(t / 3) + (t % 7));
    const first = f.rawForecast();
    const fresh = f.network.predict([...Array(15)].map((_, i) => 100 + 30 * Math.sin((25 + i) / 3) + ((25 + i) % 7)));
    expect(first.mean).toEqual(fresh.mean);
    first.mean[0] = -1;
    expect(f.rawForecast().mean[0]).toBe(fresh.mean[0]);
  });

  it("fallback ladder: last value below 15 bins, Holt until trained, then the network", () => {
    const f = new NHitsForecaster({ ...FAST, minTrainSteps: 20 });
    const series = Array.from({ length: 100 }, (_, t) => 100 + 60 * Math.sin((2 * Math.PI * t) / 10));
    const seen: { model: string; steps: number }[] = [];
    for (const y of series) {
      f.observe(y);
      seen.push({ model: f.forecast().model, steps: f.trainedSteps });
    }
    expect(seen.slice(0, 14).every((s) => s.model === "last-value")).toBe(true);
    // Training starts once a whole 15 + 7 bin window exists (the 22nd bin).
    expect(seen[20]?.steps).toBe(0);
    expect(seen[21]?.steps).toBeGreaterThan(0);
    const untrained = seen.slice(14).filter((s) => s.steps < 20);
    expect(untrained.length).toBeGreaterThan(7);
    expect(untrained.every((s) => s.model === "holt")).toBe(true);
    expect(seen.at(-1)?.model).toBe("nhits");
  });

  it("guard: a network worse than Holt (here never trained, on a clean ramp Holt follows exactly) falls back to Holt", () => {
    const f = new NHitsForecaster({ ...FAST, learningRate: 0, minTrainSteps: 5 });
    for (let t = 0; t < 80; t++) f.observe(50 + 3 * t);
    expect(f.trainedSteps).toBeGreaterThan(5);
    expect(f.guardLosses.model).toBeGreaterThan(f.guardLosses.holt);
    expect(f.forecast().model).toBe("holt");
    expect(f.rawForecast().model).toBe("nhits");
  });
});
