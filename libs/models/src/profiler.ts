/**
 * Pre-deployment profiling of a real model for Themis: its latency over batch sizes and intra-op thread
 * counts on this machine, the fit of l(b, c) to it, and the in-place resize times, as a profile file.
 */
import { arch, cpus, availableParallelism as osParallelism, platform } from "node:os";
import { fitThemisProfile, processingMs, type ThemisProfileFile } from "@infergrid/themis";
import type { OnnxCatalogueEntry } from "./onnx-catalogue.js";
import { OnnxModel } from "./onnx-model.js";
import type { TensorValue } from "./types.js";

export interface ProfileOptions {
  model: string;
  batches: readonly number[];
  /** Thread counts in the order measured; the model is resized in place from one to the next. */
  threads: readonly number[];
  runs: number;
  warmups: number;
  pinCpus: boolean;
  /** Told after each point, for progress. */
  onPoint?(point: MeasuredPoint): void;
}

export interface MeasuredPoint {
  batch: number;
  cores: number;
  /** Median of the timed runs' session time. */
  ms: number;
  minMs: number;
  maxMs: number;
}

export interface Resize {
  fromCores: number;
  toCores: number;
  ms: number;
}

export interface Measurement {
  points: MeasuredPoint[];
  resizes: Resize[];
  coldStartMs: number;
}

/** A batch of n items of the model's input shapes, with fixed finite values (the latency does not depend on them). */
export function sampleBatch(entry: OnnxCatalogueEntry, n: number): Record<string, TensorValue> {
  const inputs: Record<string, TensorValue> = {};
  for (const spec of entry.inputs) {
    const size = n * spec.itemDims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(size);
    for (let i = 0; i < size; i++) data[i] = ((i * 7919) % 255) / 255 - 0.5;
    inputs[spec.name] = { dims: [n, ...spec.itemDims], data };
  }
  return inputs;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? Number.NaN) + (sorted[mid] ?? Number.NaN)) / 2;
}

/**
 * Measures every (batch, threads) point: one model, resized in place between thread counts (each resize timed),
 * and back to the first count at the end so that the shrink is timed too. Points are measured one at a time: a
 * second process or concurrent run would measure contention, not the model.
 */
export async function measureOnnxModel(options: ProfileOptions): Promise<Measurement> {
  const [first] = options.threads;
  if (first === undefined || options.batches.length === 0)
    throw new RangeError("profiling needs at least one batch size and one thread count");
  const model = new OnnxModel({
    model: options.model,
    intraOpThreads: first,
    maxBatch: Math.max(...options.batches),
    pinCpus: options.pinCpus,
  });
  const inputs = new Map(options.batches.map((b) => [b, sampleBatch(model.entry, b)]));
  const points: MeasuredPoint[] = [];
  const resizes: Resize[] = [];
  const resizeTo = async (threads: number) => {
    const fromCores = model.cores;
    if (threads === fromCores) return;
    const { resizeMs } = await model.resize(threads);
    resizes.push({ fromCores, toCores: threads, ms: resizeMs });
  };
  const { coldStartMs } = await model.load();
  try {
    for (const threads of options.threads) {
      await resizeTo(threads);
      for (const batch of options.batches) {
        const feeds = inputs.get(batch) ?? sampleBatch(model.entry, batch);
        for (let i = 0; i < options.warmups; i++) await model.infer(feeds);
        const times: number[] = [];
        for (let i = 0; i < options.runs; i++) times.push((await model.infer(feeds)).computeMs);
        const point = { batch, cores: threads, ms: median(times), minMs: Math.min(...times), maxMs: Math.max(...times) };
        points.push(point);
        options.onPoint?.(point);
      }
    }
    await resizeTo(first);
  } finally {
    await model.unload();
  }
  return { points, resizes, coldStartMs };
}

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  platform: string;
  runtime: string;
}

export function thisMachine(runtime: string): MachineInfo {
  return { cpuModel: cpus()[0]?.model.trim() ?? "unknown", cores: osParallelism(), platform: `${platform()}-${arch()}`, runtime };
}

/** Fits l(b, c) to the medians and assembles the profile file. */
export function profileFile(
  model: string,
  measurement: Measurement,
  machine: MachineInfo,
  date: Date,
  method: { warmups: number; runs: number; pinnedCpus: boolean; loadAverage: number },
): ThemisProfileFile {
  const fit = fitThemisProfile(measurement.points.map(({ batch, cores, ms }) => ({ batch, cores, ms })));
  return {
    model,
    machine,
    date: date.toISOString(),
    profile: fit.profile,
    fit: { meanAbsPctError: fit.meanAbsPctError, maxAbsPctError: fit.maxAbsPctError, rmseMs: fit.rmseMs },
    method: { ...method, statistic: "median" },
    samples: measurement.points.map((p) => ({ ...p, fittedMs: processingMs(fit.profile, p.batch, p.cores) })),
    resizes: measurement.resizes,
  };
}

const f = (x: number, digits = 1) => x.toFixed(digits);

/** The measured and fitted table, the fit's error, the profile and the resize times, as text. */
export function formatProfileReport(file: ThemisProfileFile): string {
  const lines = [
    `${file.model} on ${file.machine.cpuModel} (${file.machine.cores} cores, ${file.machine.runtime}), ${file.date}`,
    `median of ${file.method.runs} runs after ${file.method.warmups} warm-ups${file.method.pinnedCpus ? ", process pinned to c CPUs" : ""}; load average ${f(file.method.loadAverage, 2)} at the start (above 0 means other work shared the CPUs)`,
    "",
    "threads  batch  measured ms  (min - max)        fitted ms  error %",
  ];
  for (const s of file.samples) {
    const range = `(${f(s.minMs)} - ${f(s.maxMs)})`;
    const err = ((s.fittedMs - s.ms) / s.ms) * 100;
    lines.push(
      `${String(s.cores).padStart(7)}  ${String(s.batch).padStart(5)}  ${f(s.ms).padStart(11)}  ${range.padEnd(17)}  ${f(s.fittedMs).padStart(9)}  ${(err >= 0 ? "+" : "") + f(err)}`,
    );
  }
  const p = file.profile;
  lines.push(
    "",
    `fit error: mean ${f(file.fit.meanAbsPctError * 100)} %, max ${f(file.fit.maxAbsPctError * 100)} %, rmse ${f(file.fit.rmseMs, 2)} ms`,
    `profile: l(b, c) = ${f(p.gamma, 3)}*b/c + ${f(p.eps, 3)}/c + ${f(p.delta, 3)}*b + ${f(p.eta, 3)} ms`,
  );
  for (const r of file.resizes) lines.push(`resize ${r.fromCores} -> ${r.toCores} threads in place: ${f(r.ms)} ms`);
  return `${lines.join("\n")}\n`;
}
