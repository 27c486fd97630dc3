import { makeTrace, type Trace } from "@infergrid/workload";
import { describe, expect, it } from "vitest";
import { lognormalMeanMs, RESNET34_PROFILE, traceJobService } from "./catalogue.js";
import { type Options, OptionsError } from "./options.js";
import {
  AUTO_PEAK_CAP_RPS,
  autoPeakRps,
  clusterPeakRps,
  planKairosWorkload,
  planWorkload,
  rateScaleForPeak,
  totalPerMinute,
} from "./workload-plan.js";

const base: Options = {
  trace: "t.csv",
  jobs: undefined,
  topJobs: undefined,
  compression: 60,
  peakRps: undefined,
  rateScale: undefined,
  fromMinute: 0,
  minutes: undefined,
  durationS: undefined,
  backends: 12,
  frontends: 3,
  policy: "swayam",
  seed: 1,
  idleTimeoutMs: 30_000,
  onnx: true,
  summaryJson: undefined,
  deadlineMs: 10_000,
  maxInFlight: 2_000,
  logLevel: "warn",
  runtimeDir: undefined,
  consolePort: 0,
  insecure: false,
  restart: true,
  kairos: undefined,
  types: undefined,
  profiles: undefined,
  themis: undefined,
  bestEffortItems: 0,
  harvest: false,
  baseRps: 5,
  stepAtS: 10,
  stepForS: 20,
  sloMs: 1000,
  nodeCores: 8,
  coldStartMs: 10_000,
};

function trace(series: Record<string, number[]>): Trace {
  const jobs = Object.keys(series);
  const minutes = series[jobs[0] ?? ""]?.length ?? 0;
  return makeTrace(jobs, new Map(jobs.map((j) => [j, Float64Array.from(series[j] ?? [])])), minutes, "test.csv");
}

const t3 = trace({ "Job A": [60, 120, 30, 0], job_b: [60, 0, 90, 30], c: [0, 0, 0, 0] });

describe("rate scaling", () => {
  it("fits the whole cluster's busiest minute to --peak-rps on the wall clock", () => {
    expect([...totalPerMinute(t3)]).toEqual([120, 120, 120, 30]);
    // compression 60: one trace minute per second; 120 requests in the busiest minute -> 120 req/s unscaled.
    expect(rateScaleForPeak(t3, 30, 60)).toBeCloseTo(0.25);
    expect(clusterPeakRps(t3, 0.25, 60)).toBeCloseTo(30);
    // Real time: 120 requests a minute is 2 req/s, so 30 req/s needs x15.
    expect(rateScaleForPeak(t3, 30, 1)).toBeCloseTo(15);
    expect(clusterPeakRps(t3, 15, 1)).toBeCloseTo(30);
  });

  it("an empty slice scales to nothing instead of dividing by zero", () => {
    expect(rateScaleForPeak(trace({ a: [0, 0] }), 50, 60)).toBe(0);
  });

  it("auto: each service's busiest minute at half the capacity of its equal share of backends, capped", () => {
    const plan = planWorkload({ ...base, backends: 4 }, trace({ a: [60, 120], b: [30, 30] }));
    // 4 backends / 2 services = 2 each; ResNet-34 mean ~165 ms -> 2 * 1000/165 = 12.1 req/s; half: 6.05 req/s for a's peak.
    const capacity = (2 * 1000) / lognormalMeanMs(RESNET34_PROFILE);
    const aPeakRps = 0.5 * capacity;
    expect(plan.scaling).toBe("auto");
    // Minute 1 is the cluster's busiest: a = 120, b = 30, so the cluster peak is 150/120 of a's.
    expect(plan.peakRps).toBeCloseTo((aPeakRps * 150) / 120, 6);
    const big = trace({ a: [100], b: [100] });
    const services = [
      { ...traceJobService("a", "a"), meanServiceMs: 1 },
      { ...traceJobService("b", "b"), meanServiceMs: 1 },
    ];
    expect(autoPeakRps(big, services, 100)).toBe(AUTO_PEAK_CAP_RPS);
  });

  it("--rate-scale is used as given", () => {
    const plan = planWorkload({ ...base, rateScale: 0.5 }, t3);
    expect(plan.scaling).toBe("rate-scale");
    expect(plan.rateScale).toBe(0.5);
    expect(plan.peakRps).toBeCloseTo(60);
  });
});

describe("planWorkload with a trace", () => {
  it("makes one ResNet-34 service per job, with valid names", () => {
    const plan = planWorkload({ ...base, peakRps: 10 }, t3);
    expect(plan.services.map((s) => [s.job, s.name])).toEqual([
      ["Job A", "job-a"],
      ["job_b", "job-b"],
      ["c", "c"],
    ]);
    expect(plan.trace.jobs).toEqual(["job-a", "job-b", "c"]);
    const spec = plan.services[0]?.spec;
    expect(spec?.model?.profile).toEqual({ shape: 0.3602, locMs: 72.86, scaleMs: 86.69 });
    expect(spec?.sla).toMatchObject({ latencyThresholdMs: 720, percentile: 99 });
    expect(plan.peakRps).toBeCloseTo(10);
  });

  it("--jobs selects by trace name or by service name, in the order given", () => {
    const plan = planWorkload({ ...base, jobs: ["job-b", "Job A"] }, t3);
    expect(plan.services.map((s) => s.name)).toEqual(["job-b", "job-a"]);
    expect(() => planWorkload({ ...base, jobs: ["nope"] }, t3)).toThrow(/--jobs: no job "nope" in test.csv; jobs: Job A, job_b, c/);
    expect(() => planWorkload({ ...base, jobs: ["job_b", "job-b"] }, t3)).toThrow(/same job twice/);
  });

  it("--top-jobs keeps the busiest", () => {
    const plan = planWorkload({ ...base, topJobs: 1 }, t3);
    expect(plan.services.map((s) => s.job)).toEqual(["Job A"]);
  });

  it("--from-minute/--minutes slice; --duration caps the wall time", () => {
    const plan = planWorkload({ ...base, fromMinute: 1, minutes: 2, compression: 60 }, t3);
    expect(plan.trace.minutes).toBe(2);
    expect(plan.durationMs).toBe(2_000);
    expect(planWorkload({ ...base, compression: 30 }, t3).durationMs).toBe(8_000);
    expect(planWorkload({ ...base, durationS: 1.5 }, t3).durationMs).toBe(1_500);
    expect(() => planWorkload({ ...base, fromMinute: 4 }, t3)).toThrow(/--from-minute 4 is past the end of test.csv \(4 minutes\)/);
    expect(() => planWorkload({ ...base, fromMinute: 2, minutes: 3 }, t3)).toThrow(/goes past the end/);
  });

  it("needs a backend per service", () => {
    expect(() => planWorkload({ ...base, backends: 2 }, t3)).toThrow(OptionsError);
    expect(() => planWorkload({ ...base, backends: 2 }, t3)).toThrow(/--backends 2 is fewer than the 3 services/);
  });
});

describe("planWorkload, synthetic", () => {
  it("three services (one ONNX) over a 240-minute day, deterministic for a seed", () => {
    const o = { ...base, trace: undefined };
    const plan = planWorkload(o);
    expect(plan.services.map((s) => [s.name, s.input])).toEqual([
      ["resnet34", "tiny"],
      ["mobilenet-v2", "tiny"],
      ["ocr-cls", "ocr"],
    ]);
    expect(plan.services[2]?.spec.model).toMatchObject({ onnxModel: "ppocr-mobile-cls" });
    expect(plan.trace.minutes).toBe(240);
    expect(plan.durationMs).toBe(240_000);
    expect(plan.peakRps).toBeGreaterThan(0);
    expect(plan.peakRps).toBeLessThanOrEqual(AUTO_PEAK_CAP_RPS);
    expect([...totalPerMinute(planWorkload(o).trace)]).toEqual([...totalPerMinute(plan.trace)]);
    expect([...totalPerMinute(planWorkload({ ...o, seed: 2 }).trace)]).not.toEqual([...totalPerMinute(plan.trace)]);
    expect(planWorkload({ ...o, onnx: false }).services.map((s) => s.name)).toEqual(["resnet34", "mobilenet-v2"]);
    expect(planWorkload({ ...o, minutes: 10, durationS: 5 }).durationMs).toBe(5_000);
  });

  it("refuses a slice past a year of synthetic minutes with the options' names (1e12 threw a RangeError)", () => {
    const o = { ...base, trace: undefined };
    expect(() => planWorkload({ ...o, fromMinute: 1e12 })).toThrow(OptionsError);
    expect(() => planWorkload({ ...o, fromMinute: 1e12 })).toThrow(
      /--from-minute 1000000000000: the synthetic workload reaches minute 525600 at most/,
    );
    expect(() => planWorkload({ ...o, fromMinute: 525_000, minutes: 1000 })).toThrow(/--minutes 1000/);
  });

  it("the heterogeneous mode's load: a constant rate for the duration, one trace minute a second", () => {
    const service = traceJobService("dien", "dien");
    const plan = planKairosWorkload({ ...base, trace: undefined, peakRps: 15, durationS: 12 }, service);
    expect(plan.services).toEqual([service]);
    expect(plan.trace.minutes).toBe(12);
    expect(plan.compression).toBe(60);
    expect(plan.durationMs).toBe(12_000);
    expect(plan.peakRps).toBe(15);
    expect(clusterPeakRps(plan.trace, plan.rateScale, plan.compression)).toBeCloseTo(15, 9);
    const defaults = planKairosWorkload({ ...base, trace: undefined }, service);
    expect([defaults.peakRps, defaults.durationMs]).toEqual([20, 30_000]);
  });
});
