import {
  jobCounts,
  makeTrace,
  renameJobs,
  replayDurationMs,
  selectJobs,
  sliceMinutes,
  syntheticTrace,
  type Trace,
  topJobs,
} from "@infergrid/workload";
import { type DemoService, SYNTHETIC_DAY_MINUTES, syntheticDemo, traceJobService } from "./catalogue.js";
import { uniqueServiceNames } from "./names.js";
import { KAIROS_DEFAULT_DURATION_S, KAIROS_DEFAULT_RPS, type Options, OptionsError } from "./options.js";

/** The default load keeps each service's busiest second at this share of its backends' capacity. */
export const AUTO_UTILISATION = 0.5;
/** ... and the whole cluster at most at this rate, which one 2-core machine serves with room to spare. */
export const AUTO_PEAK_CAP_RPS = 120;

export interface WorkloadPlan {
  /** Jobs renamed to their service names, sliced to the replayed minutes (minute 0 = the first). */
  trace: Trace;
  services: DemoService[];
  compression: number;
  rateScale: number;
  /** Busiest wall second of the whole cluster after scaling, req/s (a per-minute mean). */
  peakRps: number;
  /** Where rateScale came from, for the banner. */
  scaling: "rate-scale" | "peak-rps" | "auto";
  /** Wall time of the load: the replay, capped by --duration. */
  durationMs: number;
  description: string;
}

/** Requests per minute of all jobs together, per minute. */
export function totalPerMinute(trace: Trace): Float64Array {
  const total = new Float64Array(trace.minutes);
  for (const job of trace.jobs) {
    const counts = jobCounts(trace, job);
    for (let m = 0; m < trace.minutes; m++) total[m] = (total[m] ?? 0) + (counts[m] ?? 0);
  }
  return total;
}

function maxOf(values: ArrayLike<number>): number {
  let max = 0;
  for (let i = 0; i < values.length; i++) max = Math.max(max, values[i] ?? 0);
  return max;
}

/**
 * rateScale so that the busiest minute of all jobs together runs at `peakRps` on the wall clock:
 * wall rate = count * rateScale * compression / 60 (see libs/workload ReplayOptions).
 */
export function rateScaleForPeak(trace: Trace, peakRps: number, compression: number): number {
  const peakPerMinute = maxOf(totalPerMinute(trace));
  if (peakPerMinute === 0) return 0;
  return (peakRps * 60) / (compression * peakPerMinute);
}

export function clusterPeakRps(trace: Trace, rateScale: number, compression: number): number {
  return (maxOf(totalPerMinute(trace)) * rateScale * compression) / 60;
}

/**
 * The default cluster peak: the allocator's static policy gives each service an equal share of
 * the pool, so each service's busiest minute must stay within AUTO_UTILISATION of what its share
 * serves (backends / mean service time); the tightest service sets the scale. Capped for the CPU.
 */
export function autoPeakRps(trace: Trace, services: readonly DemoService[], backends: number): number {
  const perService = Math.max(1, Math.floor(backends / Math.max(1, services.length)));
  const totalPeak = maxOf(totalPerMinute(trace));
  if (totalPeak === 0) return 0;
  // s converts a count per trace minute to req/s on the wall clock; find the largest allowed.
  let s = Number.POSITIVE_INFINITY;
  for (const svc of services) {
    const peak = maxOf(jobCounts(trace, svc.name));
    if (peak === 0) continue;
    const capacityRps = (perService * 1000) / svc.meanServiceMs;
    s = Math.min(s, (AUTO_UTILISATION * capacityRps) / peak);
  }
  if (!Number.isFinite(s)) return 0;
  return Math.min(AUTO_PEAK_CAP_RPS, totalPeak * s);
}

/** Finds each requested job by its name in the trace, or failing that by its sanitised name. */
export function resolveJobs(trace: Trace, wanted: readonly string[] | undefined, names: Map<string, string>): string[] {
  if (wanted === undefined) return [...trace.jobs];
  const bySanitised = new Map([...names].map(([job, name]) => [name, job]));
  const unknown: string[] = [];
  const out = wanted.map((w) => {
    const job = trace.jobs.includes(w) ? w : bySanitised.get(w);
    if (job === undefined) unknown.push(w);
    return job ?? w;
  });
  if (unknown.length > 0) {
    const shown = trace.jobs.slice(0, 20).join(", ") + (trace.jobs.length > 20 ? `, ... (${trace.jobs.length} in all)` : "");
    throw new OptionsError(`--jobs: no job ${unknown.map((u) => JSON.stringify(u)).join(", ")} in ${trace.source}; jobs: ${shown}`);
  }
  if (new Set(out).size !== out.length) throw new OptionsError("--jobs names the same job twice");
  return out;
}

function slice(trace: Trace, options: Options): Trace {
  if (options.fromMinute >= trace.minutes) {
    throw new OptionsError(`--from-minute ${options.fromMinute} is past the end of ${trace.source} (${trace.minutes} minutes)`);
  }
  const to = options.minutes === undefined ? trace.minutes : options.fromMinute + options.minutes;
  if (to > trace.minutes) {
    throw new OptionsError(
      `--from-minute ${options.fromMinute} --minutes ${options.minutes} goes past the end of ${trace.source} (${trace.minutes} minutes)`,
    );
  }
  return sliceMinutes(trace, options.fromMinute, to);
}

function finish(trace: Trace, services: DemoService[], options: Options, description: string): WorkloadPlan {
  if (options.backends < services.length) {
    throw new OptionsError(
      `--backends ${options.backends} is fewer than the ${services.length} services: each service needs at least one backend (give --backends >= ${services.length}${options.trace ? " or fewer --jobs" : ""})`,
    );
  }
  let rateScale: number;
  let scaling: WorkloadPlan["scaling"];
  if (options.rateScale !== undefined) {
    rateScale = options.rateScale;
    scaling = "rate-scale";
  } else {
    const peak = options.peakRps ?? autoPeakRps(trace, services, options.backends);
    rateScale = rateScaleForPeak(trace, peak, options.compression);
    scaling = options.peakRps === undefined ? "auto" : "peak-rps";
  }
  const replayMs = replayDurationMs(trace, { compression: options.compression });
  const durationMs = options.durationS === undefined ? replayMs : Math.min(replayMs, options.durationS * 1000);
  return {
    trace,
    services,
    compression: options.compression,
    rateScale,
    peakRps: clusterPeakRps(trace, rateScale, options.compression),
    scaling,
    durationMs,
    description,
  };
}

/** The last minute the synthetic workload generates up to: a year of minutes. */
export const SYNTHETIC_MAX_MINUTES = 525_600;

/** The built-in synthetic workload, or a read trace turned into services; throws OptionsError on a bad slice or job. */
export function planWorkload(options: Options, readTrace?: Trace): WorkloadPlan {
  if (readTrace === undefined) {
    const { services, jobs } = syntheticDemo(options.onnx);
    const minutes = options.fromMinute + (options.minutes ?? SYNTHETIC_DAY_MINUTES);
    // Every minute up to the last one replayed is generated (--from-minute 1e12 threw a RangeError).
    if (minutes > SYNTHETIC_MAX_MINUTES)
      throw new OptionsError(
        `--from-minute ${options.fromMinute}${options.minutes === undefined ? "" : ` --minutes ${options.minutes}`}: the synthetic workload reaches minute ${SYNTHETIC_MAX_MINUTES} at most (a year); give --trace for longer`,
      );
    const full = syntheticTrace({ jobs, minutes, seed: options.seed, source: `synthetic day (seed ${options.seed})` });
    return finish(slice(full, options), services, options, full.source);
  }
  let trace = readTrace;
  if (options.topJobs !== undefined && trace.jobs.length > options.topJobs) trace = topJobs(trace, options.topJobs);
  const names = uniqueServiceNames(trace.jobs);
  const jobs = resolveJobs(trace, options.jobs, names);
  trace = renameJobs(selectJobs(trace, jobs), (job) => names.get(job) ?? job);
  const services = jobs.map((job) => traceJobService(names.get(job) ?? job, job));
  return finish(slice(trace, options), services, options, trace.source);
}

/**
 * The heterogeneous mode's load: one service at a constant --peak-rps (Poisson arrivals) for --duration,
 * as a trace of one count per minute replayed at one trace minute per wall second.
 */
export function planKairosWorkload(options: Options, service: DemoService): WorkloadPlan {
  const rps = options.peakRps ?? KAIROS_DEFAULT_RPS;
  const durationS = options.durationS ?? KAIROS_DEFAULT_DURATION_S;
  const minutes = Math.ceil(durationS);
  const source = `constant ${rps} req/s of Kairos's production query mix`;
  const trace = makeTrace([service.name], new Map([[service.name, new Float64Array(minutes).fill(1)]]), minutes, source);
  const compression = 60;
  return {
    trace,
    services: [service],
    compression,
    rateScale: rateScaleForPeak(trace, rps, compression),
    peakRps: rps,
    scaling: "peak-rps",
    durationMs: durationS * 1000,
    description: source,
  };
}
