import { describe, expect, it } from "vitest";
import { HoltForecaster, LastValueForecaster, LinearRegressionForecaster, type PointForecaster, SeasonalForecaster } from "./baselines.js";
import type { ProbabilisticForecaster } from "./forecaster.js";

const feed = <F extends ProbabilisticForecaster>(f: F, series: readonly number[]): F => {
  for (const y of series) f.observe(y);
  return f;
};
const round = (xs: readonly number[]) => xs.map((x) => Math.round(x * 1e6) / 1e6);
const constant = new Array<number>(20).fill(10);
const ramp = Array.from({ length: 20 }, (_, t) => 5 + 2 * t); // 5 .. 43
const seasonal = Array.from({ length: 20 }, (_, t) => [1, 2, 3, 4][t % 4] ?? 0);

describe("last value", () => {
  it("constant: the level, certain but for the Poisson floor sqrt(mean)", () => {
    const f = feed(new LastValueForecaster(), constant).forecast();
    expect(f.model).toBe("last-value");
    expect(f.mean).toEqual(new Array(7).fill(10));
    for (const s of f.std) expect(s).toBeCloseTo(Math.sqrt(10), 12);
    const noFloor = feed(new LastValueForecaster({ poissonFloor: false }), constant).forecast();
    expect(noFloor.std).toEqual(new Array(7).fill(0));
  });

  it("ramp: flat at the last value; the spread is its own RMS error per step, 2h", () => {
    const f = feed(new LastValueForecaster({ poissonFloor: false }), ramp).forecast();
    expect(f.mean).toEqual(new Array(7).fill(43));
    expect(round(f.std)).toEqual([2, 4, 6, 8, 10, 12, 14]);
  });

  it("short history: the spread of the recent bin-to-bin changes, growing with sqrt(h); one bin: half of it", () => {
    const f = feed(new LastValueForecaster({ poissonFloor: false }), [10, 12, 10]).forecast();
    expect(f.mean[0]).toBe(10);
    expect(f.std[0]).toBeCloseTo(2, 12);
    expect(f.std[3]).toBeCloseTo(4, 12);
    const one = feed(new LastValueForecaster({ poissonFloor: false, steps: 2 }), [8]).forecast();
    expect(one.std).toEqual([4, 4 * Math.SQRT2]);
    const none = new LastValueForecaster({ steps: 3 }).forecast();
    expect(none.mean).toEqual([0, 0, 0]);
    expect(none.std).toEqual([0, 0, 0]);
  });

  it("reads negative and non-finite counts as 0", () => {
    const f = feed(new LastValueForecaster({ steps: 1 }), [5, Number.NaN]).forecast();
    expect(f.mean).toEqual([0]);
  });
});

describe("Swayam's linear regression (RateHistory on one-bin windows)", () => {
  it("ramp: continues the line exactly, each step read at the middle of its bin", () => {
    // The last 5 errors per step: forecasts issued once 5 bins were in the regression.
    const f = feed(new LinearRegressionForecaster({ poissonFloor: false, errorWindow: 5 }), ramp).forecast();
    expect(f.model).toBe("linear-regression");
    expect(round(f.mean)).toEqual([45, 47, 49, 51, 53, 55, 57]);
    expect(round(f.std)).toEqual(new Array(7).fill(0));
  });

  it("constant: the level; a falling ramp is clamped at 0; fewer than 3 bins: the last one", () => {
    expect(round(feed(new LinearRegressionForecaster(), constant).forecast().mean)).toEqual(new Array(7).fill(10));
    const falling = feed(new LinearRegressionForecaster({ steps: 4 }), [40, 30, 20, 10]).forecast();
    expect(round(falling.mean)).toEqual([0, 0, 0, 0]);
    expect(feed(new LinearRegressionForecaster({ steps: 2 }), [3, 9]).forecast().mean).toEqual([9, 9]);
  });

  it("regresses over the last `historyBins` bins only (Swayam: 500 s of 100 s windows = 5 points)", () => {
    // Old bins far off the line do not matter once they leave the 5-bin history.
    const f = feed(new LinearRegressionForecaster({ steps: 2, poissonFloor: false }), [1000, 1000, 10, 12, 14, 16, 18]).forecast();
    expect(round(f.mean)).toEqual([20, 22]);
  });
});

describe("seasonal", () => {
  it("the same bin one period earlier (several periods for steps beyond one period), exact on a periodic series", () => {
    const f = feed(new SeasonalForecaster({ period: 4, poissonFloor: false, errorWindow: 10 }), seasonal).forecast();
    expect(f.model).toBe("seasonal");
    expect(f.mean).toEqual([1, 2, 3, 4, 1, 2, 3]);
    expect(round(f.std)).toEqual(new Array(7).fill(0));
  });

  it("before a whole period has been seen: the last bin for the steps it cannot look up", () => {
    const f = feed(new SeasonalForecaster({ period: 4, steps: 4, poissonFloor: false }), [5, 6]).forecast();
    // Step 1 targets bin 2, a period earlier is bin -2 (unseen): last value; step 3 targets bin 4 -> bin 0.
    expect(f.mean).toEqual([6, 6, 5, 6]);
  });

  it("constant and ramp: level, and the ramp lags by one period (its errors set the spread)", () => {
    expect(feed(new SeasonalForecaster({ period: 5 }), constant).forecast().mean).toEqual(new Array(7).fill(10));
    const r: PointForecaster = feed(new SeasonalForecaster({ period: 5, steps: 2, poissonFloor: false, errorWindow: 10 }), ramp);
    const f = r.forecast();
    // Bin 20 one period (5) earlier is bin 15 = 35; the ramp rose 2 x 5 = 10 since: every error is 10.
    expect(f.mean).toEqual([35, 37]);
    expect(round(f.std)).toEqual([10, 10]);
  });
});

describe("Holt (the existing forecastRates behind the interface)", () => {
  it("constant and ramp", () => {
    const c = feed(new HoltForecaster(), constant).forecast();
    expect(c.model).toBe("holt");
    expect(round(c.mean)).toEqual(new Array(7).fill(10));
    expect(c.std[0]).toBeCloseTo(Math.sqrt(10), 9);
    const r = feed(new HoltForecaster({ poissonFloor: false }), ramp).forecast();
    expect(round(r.mean)).toEqual([45, 47, 49, 51, 53, 55, 57]);
    expect(feed(new HoltForecaster(), [4, 6]).forecast().model).toBe("last-value");
  });
});
