import { control } from "@infergrid/proto";
import type { SyntheticJob } from "@infergrid/workload";

/** Lognormal service times as scipy parameterises them: x = loc + scale * exp(shape * N(0,1)). */
export interface Profile {
  shape: number;
  locMs: number;
  scaleMs: number;
}

/** ResNet-34 on one CPU worker, as measured for the Faro evaluation (mean about 165 ms). */
export const RESNET34_PROFILE: Profile = { shape: 0.3602, locMs: 72.86, scaleMs: 86.69 };
export const RESNET34_SLO_MS = 720;

/** A lighter image classifier, about 8x faster than ResNet-34. */
export const MOBILENET_PROFILE: Profile = { shape: 0.3, locMs: 8, scaleMs: 12 };
export const MOBILENET_SLO_MS = 150;

/**
 * PaddleOCR's direction classifier runs in a few ms on one core; the estimate only sizes the
 * default load, and leaves room for the CPU that the other processes on the machine take.
 */
export const OCR_CLS_MEAN_MS_ESTIMATE = 10;
export const OCR_CLS_SLO_MS = 250;

export function lognormalMeanMs(p: Profile): number {
  return p.locMs + p.scaleMs * Math.exp((p.shape * p.shape) / 2);
}

export type InputKind = "tiny" | "ocr";

/** One service the demo registers and drives. */
export interface DemoService {
  name: string;
  /** The trace job it replays (the name in the trace file). */
  job: string;
  spec: control.ServiceSpec.$Properties;
  /** Expected service time of one request, for sizing the default load. */
  meanServiceMs: number;
  rtMaxMs: number;
  /** SL_min as a fraction, e.g. 0.99. */
  slMin: number;
  input: InputKind;
}

const PERCENTILE = 99;

function base(name: string, model: control.ModelSpec.$Properties, rtMaxMs: number): control.ServiceSpec.$Properties {
  return {
    name,
    model,
    sla: { latencyThresholdMs: rtMaxMs, percentile: PERCENTILE, burstFactor: 2 },
    minBackends: 1,
    // 0: no cap of its own, the allocator shares the pool out.
    maxBackends: 0,
    initialBackends: 2,
  };
}

export function emulatedService(name: string, job: string, profile: Profile, rtMaxMs: number, coldStartMs = 1000): DemoService {
  return {
    name,
    job,
    spec: base(name, { kind: control.ModelKind.MODEL_KIND_EMULATED, profile, coldStartMs }, rtMaxMs),
    meanServiceMs: lognormalMeanMs(profile),
    rtMaxMs,
    slMin: PERCENTILE / 100,
    input: "tiny",
  };
}

export function onnxOcrService(name: string): DemoService {
  return {
    name,
    job: name,
    spec: base(name, { kind: control.ModelKind.MODEL_KIND_ONNX, onnxModel: "ppocr-mobile-cls", intraOpThreads: 1 }, OCR_CLS_SLO_MS),
    meanServiceMs: OCR_CLS_MEAN_MS_ESTIMATE,
    rtMaxMs: OCR_CLS_SLO_MS,
    slMin: PERCENTILE / 100,
    input: "ocr",
  };
}

/** A trace job replayed as an emulated ResNet-34 service (the Faro evaluation's setting). */
export function traceJobService(name: string, job: string): DemoService {
  return emulatedService(name, job, RESNET34_PROFILE, RESNET34_SLO_MS);
}

/** Length of the synthetic workload's "day", in trace minutes: 4 wall minutes at compression 60. */
export const SYNTHETIC_DAY_MINUTES = 240;

/**
 * The built-in workload: three services whose daily peaks fall at different times, with a few
 * bursts each. Means are relative (the load is scaled to --peak-rps afterwards); mobilenet-v2
 * gets the most requests because it is the cheapest.
 */
export function syntheticDemo(onnx: boolean): { services: DemoService[]; jobs: SyntheticJob[] } {
  const shape = (name: string, meanPerMinute: number, peakMinute: number): SyntheticJob => ({
    name,
    meanPerMinute,
    diurnalAmplitude: 0.5,
    periodMinutes: SYNTHETIC_DAY_MINUTES,
    peakMinute,
    noiseCv: 0.1,
    // burstsPerDay is per 1440 minutes: 12 gives about two bursts in the 240-minute day.
    burstsPerDay: 12,
    burstMultiplier: 2.5,
    burstDecayMinutes: 4,
  });
  const services = [
    emulatedService("resnet34", "resnet34", RESNET34_PROFILE, RESNET34_SLO_MS),
    emulatedService("mobilenet-v2", "mobilenet-v2", MOBILENET_PROFILE, MOBILENET_SLO_MS, 500),
  ];
  const jobs = [shape("resnet34", 600, 120), shape("mobilenet-v2", 1800, 170)];
  if (onnx) {
    services.push(onnxOcrService("ocr-cls"));
    jobs.push(shape("ocr-cls", 600, 60));
  }
  return { services, jobs };
}
