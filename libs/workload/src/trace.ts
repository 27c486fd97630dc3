/**
 * A workload trace: requests per minute for each job, over `minutes` consecutive minutes (minute 0 first).
 * Counts are Float64 because scaled traces carry fractional rates; the arrival generator treats them as means.
 * Helpers never mutate their input: they return a new Trace (arrays copied where they change).
 */
export interface Trace {
  readonly jobs: readonly string[];
  readonly minutes: number;
  /** One array of length `minutes` per job in `jobs`. */
  readonly counts: ReadonlyMap<string, Float64Array>;
  /** Where it came from, plus any transformation applied (e.g. scaling), for reports. */
  readonly source: string;
}

/** Builds a Trace and checks that the shape is consistent. */
export function makeTrace(jobs: readonly string[], counts: ReadonlyMap<string, Float64Array>, minutes: number, source: string): Trace {
  if (!Number.isInteger(minutes) || minutes < 0) throw new RangeError(`minutes must be a non-negative integer, got ${minutes}`);
  if (new Set(jobs).size !== jobs.length) throw new Error(`duplicate job names in ${JSON.stringify(jobs)}`);
  if (counts.size !== jobs.length) throw new Error(`counts has ${counts.size} jobs but jobs lists ${jobs.length}`);
  for (const job of jobs) {
    const series = counts.get(job);
    if (series === undefined) throw new Error(`no counts for job '${job}'`);
    if (series.length !== minutes) throw new Error(`job '${job}' has ${series.length} minutes, expected ${minutes}`);
  }
  return { jobs: [...jobs], minutes, counts, source };
}

/** The per-minute counts of one job; throws naming the known jobs if absent. */
export function jobCounts(trace: Trace, job: string): Float64Array {
  const series = trace.counts.get(job);
  if (series === undefined) throw new Error(`unknown job '${job}' in ${trace.source}; jobs: ${trace.jobs.join(", ")}`);
  return series;
}

export function totalRequests(trace: Trace, job: string): number {
  let total = 0;
  for (const c of jobCounts(trace, job)) total += c;
  return total;
}

export function peakPerMinute(trace: Trace, job: string): number {
  let peak = 0;
  for (const c of jobCounts(trace, job)) if (c > peak) peak = c;
  return peak;
}

/** Minutes [from, to) of the trace, renumbered from 0. */
export function sliceMinutes(trace: Trace, from: number, to: number = trace.minutes): Trace {
  if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || to > trace.minutes || from > to) {
    throw new RangeError(`sliceMinutes needs integers 0 <= from <= to <= ${trace.minutes}, got [${from}, ${to})`);
  }
  const counts = new Map<string, Float64Array>();
  for (const job of trace.jobs) counts.set(job, jobCounts(trace, job).slice(from, to));
  return makeTrace(trace.jobs, counts, to - from, `${trace.source} [minutes ${from}..${to - 1}]`);
}

/** The named jobs, in the order given. */
export function selectJobs(trace: Trace, names: readonly string[]): Trace {
  const counts = new Map<string, Float64Array>();
  for (const name of names) {
    if (counts.has(name)) throw new Error(`selectJobs: '${name}' listed twice`);
    counts.set(name, jobCounts(trace, name));
  }
  return makeTrace(names, counts, trace.minutes, trace.source);
}

/** The k jobs with the most requests in total, largest first (ties keep trace order). */
export function topJobs(trace: Trace, k: number): Trace {
  const ranked = trace.jobs.map((job, index) => ({ job, index, total: totalRequests(trace, job) }));
  ranked.sort((a, b) => b.total - a.total || a.index - b.index);
  return selectJobs(
    trace,
    ranked.slice(0, Math.max(0, k)).map((r) => r.job),
  );
}

export function scaleJob(trace: Trace, job: string, factor: number): Trace {
  if (!Number.isFinite(factor) || factor < 0) throw new RangeError(`scale factor must be finite and >= 0, got ${factor}`);
  const scaled = jobCounts(trace, job).map((c) => c * factor);
  const counts = new Map(trace.counts);
  counts.set(job, scaled);
  return makeTrace(trace.jobs, counts, trace.minutes, `${trace.source} [${job} x${formatFactor(factor)}]`);
}

/**
 * Scales a job so that its busiest minute has `peakPerMinute` requests: the Azure counts span
 * three orders of magnitude, so each job is fitted to the capacity of the cluster under test.
 */
export function scaleToPeak(trace: Trace, job: string, peak: number): Trace {
  if (!Number.isFinite(peak) || peak < 0) throw new RangeError(`peak must be finite and >= 0, got ${peak}`);
  const current = peakPerMinute(trace, job);
  if (current === 0) throw new RangeError(`cannot scale job '${job}' to a peak of ${peak}: it has no requests`);
  return scaleJob(trace, job, peak / current);
}

/** Renames jobs; names not mentioned are kept. The result must still have unique names. */
export function renameJobs(trace: Trace, rename: Readonly<Record<string, string>> | ((job: string) => string)): Trace {
  const mapping = typeof rename === "function" ? rename : (job: string) => (Object.hasOwn(rename, job) ? (rename[job] ?? job) : job);
  if (typeof rename !== "function") {
    for (const from of Object.keys(rename)) jobCounts(trace, from);
  }
  const jobs = trace.jobs.map(mapping);
  const seen = new Set<string>();
  for (const name of jobs) {
    if (name === "") throw new Error("renameJobs: empty job name");
    if (seen.has(name)) throw new Error(`renameJobs: two jobs would be named '${name}'`);
    seen.add(name);
  }
  const counts = new Map<string, Float64Array>();
  trace.jobs.forEach((job, i) => {
    counts.set(jobs[i] as string, jobCounts(trace, job));
  });
  return makeTrace(jobs, counts, trace.minutes, trace.source);
}

/**
 * Appends traces minute-wise (e.g. the Azure 2019 per-day files, one after another). Jobs are matched by name;
 * a job missing from one part has zero requests during that part. Job order: first appearance.
 */
export function concatTraces(parts: readonly Trace[], source?: string): Trace {
  const jobs: string[] = [];
  for (const part of parts) for (const job of part.jobs) if (!jobs.includes(job)) jobs.push(job);
  const minutes = parts.reduce((sum, part) => sum + part.minutes, 0);
  const counts = new Map<string, Float64Array>(jobs.map((job) => [job, new Float64Array(minutes)]));
  let offset = 0;
  for (const part of parts) {
    for (const job of part.jobs) counts.get(job)?.set(jobCounts(part, job), offset);
    offset += part.minutes;
  }
  return makeTrace(jobs, counts, minutes, source ?? parts.map((p) => p.source).join(" + "));
}

function formatFactor(factor: number): string {
  return Number.parseFloat(factor.toPrecision(4)).toString();
}
