/**
 * An experiment's report: a Markdown table (policies x metrics, mean and spread over seeds, plus a per-job
 * table) and a self-contained HTML page with the same tables and inline SVG plots (no script, no network at
 * view time). The plots show the first seed's run of each policy; their y-axes are sized to the data they show.
 * The terms are @infergrid/core's GLOSSARY, shared with the local cluster's summary: both reports end with it,
 * and the HTML page's table headers and plot titles link to its entries.
 */
import { GLOSSARY, GLOSSARY_SOURCE, type GlossaryTerm, type TermColumn, type TermId, termAnchor } from "@infergrid/core";
import { type ExperimentResult, settingsOf } from "./run-experiment.js";
import type { JobSettings, Profile } from "./scenario.js";
import type { RunResult } from "./simulate.js";

export interface PolicySummary {
  policy: string;
  runs: number;
  violationRate: Stat;
  /** The same without the first minute, when every autoscaler starts from its initial size and cold-starts. */
  violationRateAfterFirstMinute: Stat;
  meanJobViolationRate: Stat;
  lostUtility: Stat;
  slaCompliance: Stat;
  minSlaCompliance: Stat;
  p50Ms: Stat;
  p99Ms: Stat;
  backendHours: Stat;
  coldStarts: Stat;
  dropped: Stat;
  wallSeconds: Stat;
  cpuSeconds: Stat;
  requestsPerSec: Stat;
  requestsPerCpuSec: Stat;
  requests: number;
}

export interface Stat {
  mean: number;
  min: number;
  max: number;
}

function stat(xs: readonly number[]): Stat {
  const ok = xs.filter((x) => !Number.isNaN(x));
  if (ok.length === 0) return { mean: Number.NaN, min: Number.NaN, max: Number.NaN };
  return { mean: ok.reduce((a, b) => a + b, 0) / ok.length, min: Math.min(...ok), max: Math.max(...ok) };
}

const FIRST_MINUTE_MS = 60_000;

/** Violations over arrivals in the bins that start at or after `fromMs`, all jobs together. */
export function violationRateAfter(r: RunResult, fromMs: number): number {
  const first = Math.ceil(fromMs / r.binMs);
  let violations = 0;
  let arrivals = 0;
  for (const s of r.series) {
    for (let b = first; b < s.arrivals.length; b++) {
      violations += s.violations[b] ?? 0;
      arrivals += s.arrivals[b] ?? 0;
    }
  }
  return arrivals > 0 ? violations / arrivals : 0;
}

export function summarise(result: ExperimentResult): PolicySummary[] {
  const byPolicy = new Map<string, RunResult[]>();
  for (const r of result.runs) byPolicy.set(r.policy, [...(byPolicy.get(r.policy) ?? []), r]);
  return [...byPolicy].map(([policy, runs]) => ({
    policy,
    runs: runs.length,
    violationRate: stat(runs.map((r) => r.cluster.violationRate * 100)),
    violationRateAfterFirstMinute: stat(runs.map((r) => violationRateAfter(r, FIRST_MINUTE_MS) * 100)),
    meanJobViolationRate: stat(runs.map((r) => r.cluster.meanJobViolationRate * 100)),
    lostUtility: stat(runs.map((r) => r.cluster.lostUtility)),
    slaCompliance: stat(runs.map((r) => r.cluster.slaCompliance * 100)),
    minSlaCompliance: stat(runs.map((r) => r.cluster.minSlaCompliance * 100)),
    p50Ms: stat(runs.map((r) => r.cluster.p50Ms)),
    p99Ms: stat(runs.map((r) => r.cluster.p99Ms)),
    backendHours: stat(runs.map((r) => r.cluster.backendSeconds / 3600)),
    coldStarts: stat(runs.map((r) => r.cluster.coldStarts)),
    dropped: stat(runs.map((r) => r.cluster.dropped)),
    wallSeconds: stat(runs.map((r) => r.stats.wallMs / 1000)),
    cpuSeconds: stat(runs.map((r) => r.stats.cpuMs / 1000)),
    requestsPerSec: stat(runs.map((r) => r.stats.requestsPerSec)),
    requestsPerCpuSec: stat(runs.map((r) => r.stats.requestsPerCpuSec)),
    requests: runs[0]?.cluster.requests ?? 0,
  }));
}

function fmt(s: Stat, digits: number): string {
  if (Number.isNaN(s.mean)) return "n/a";
  const m = s.mean.toFixed(digits);
  if (s.max - s.min < 10 ** -digits) return m;
  return `${m} (${s.min.toFixed(digits)}-${s.max.toFixed(digits)})`;
}

const COLUMNS: [TermColumn, (p: PolicySummary) => string][] = [
  [{ text: "policy" }, (p) => p.policy],
  [{ text: "SLO violations %", term: "slo-violations" }, (p) => fmt(p.violationRate, 3)],
  [{ text: "after the first minute", term: "violations-after-first-minute" }, (p) => fmt(p.violationRateAfterFirstMinute, 3)],
  [{ text: "mean job violations %", term: "mean-job-violations" }, (p) => fmt(p.meanJobViolationRate, 3)],
  [{ text: "lost utility", term: "lost-utility" }, (p) => fmt(p.lostUtility, 3)],
  [{ text: "SLA compliance % (mean job)", term: "sla-compliance" }, (p) => fmt(p.slaCompliance, 2)],
  [{ text: "worst job SLA %", term: "sla-compliance" }, (p) => fmt(p.minSlaCompliance, 2)],
  [{ text: "p50 ms", term: "latency" }, (p) => fmt(p.p50Ms, 0)],
  [{ text: "p99 ms", term: "latency" }, (p) => fmt(p.p99Ms, 0)],
  [{ text: "backend-hours", term: "backend-seconds" }, (p) => fmt(p.backendHours, 1)],
  [{ text: "cold starts", term: "cold-starts" }, (p) => fmt(p.coldStarts, 0)],
  [{ text: "dropped", term: "dropped" }, (p) => fmt(p.dropped, 0)],
  [{ text: "wall s / run", term: "simulation-cost" }, (p) => fmt(p.wallSeconds, 1)],
  [{ text: "CPU s / run", term: "simulation-cost" }, (p) => fmt(p.cpuSeconds, 1)],
  [{ text: "requests simulated / CPU s", term: "simulation-cost" }, (p) => p.requestsPerCpuSec.mean.toFixed(0)],
];

function markdownTable(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

function perJobRows(result: ExperimentResult): { header: TermColumn[]; rows: string[][] } {
  const header: TermColumn[] = [
    { text: "policy" },
    { text: "job" },
    { text: "requests", term: "requests" },
    { text: "violations %", term: "slo-violations" },
    { text: "SLA compliance %", term: "sla-compliance" },
    { text: "p99 ms", term: "latency" },
    { text: "backend-hours", term: "backend-seconds" },
    { text: "cold starts", term: "cold-starts" },
  ];
  const rows: string[][] = [];
  const policies = [...new Set(result.runs.map((r) => r.policy))];
  for (const policy of policies) {
    const runs = result.runs.filter((r) => r.policy === policy);
    result.jobs.forEach((job, j) => {
      const m = (f: (r: RunResult) => number) => stat(runs.map(f));
      rows.push([
        policy,
        job,
        m((r) => r.jobs[j]?.requests ?? 0).mean.toFixed(0),
        fmt(
          m((r) => (r.jobs[j]?.violationRate ?? 0) * 100),
          3,
        ),
        fmt(
          m((r) => (r.jobs[j]?.slaCompliance ?? Number.NaN) * 100),
          2,
        ),
        fmt(
          m((r) => r.jobs[j]?.p99Ms ?? Number.NaN),
          0,
        ),
        fmt(
          m((r) => (r.jobs[j]?.backendSeconds ?? 0) / 3600),
          2,
        ),
        fmt(
          m((r) => r.jobs[j]?.coldStarts ?? 0),
          0,
        ),
      ]);
    });
  }
  return { header, rows };
}

/** A profile as a scenario gives it, in words. */
function profileText(p: Profile): string {
  switch (p.kind) {
    case "lognormal":
      return `lognormal (shape ${p.shape}, loc ${p.loc} ms, scale ${p.scale} ms)`;
    case "exponential":
      return `exponential (mean ${p.meanMs} ms)`;
    case "deterministic":
      return `constant ${p.ms} ms`;
    case "measured":
      return `measured (${p.file}, ${
        typeof p.entry === "string"
          ? p.entry
          : Object.entries(p.entry)
              .map(([k, v]) => `${k}=${v}`)
              .join(" ")
      }, fit ${p.fit})`;
  }
}

function jobText(s: JobSettings): string {
  const scale = s.rateScale === 1 ? "" : `; counts x ${s.rateScale}`;
  return `service time ${profileText(s.profile)}; SLO ${s.slo.latencyMs} ms at p${s.slo.percentile}; U = ${s.slo.burstFactor}${scale}`;
}

function setupLines(result: ExperimentResult): string[] {
  const e = result.experiment;
  const t = e.trace;
  const seeds = [...new Set(result.runs.map((r) => r.seed))];
  const c = e.cluster;
  const capacity =
    typeof e.capacity === "number"
      ? `${result.capacity} backends`
      : `${result.capacity} backends = ${e.capacity.peakSized} x the sum of the jobs' peak-sized replicas (${result.peakSized.join(" + ")})`;
  // One line when every job has the same settings, else one per job.
  const settings = result.jobs.map((job) => ({ job, text: jobText(settingsOf(e, job)) }));
  const same = settings.every((s) => s.text === settings[0]?.text);
  const m = e.metrics;
  return [
    `- trace: \`${t.file}\`${t.trigger === undefined ? "" : ` (trigger ${t.trigger})`}, minutes ${t.fromMinute}..${t.minutes === undefined ? "end" : t.fromMinute + t.minutes}, compression ${t.compression}, rate scale ${t.rateScale}, ${t.arrivals === "exact" ? "each minute's exact count spread uniformly" : "Poisson arrivals at each minute's count"}`,
    `- jobs${t.busiest === undefined ? "" : ` (the ${t.busiest} busiest over the slice)`}: ${result.jobs.join(", ")}`,
    ...(same && settings[0] !== undefined ? [`- ${settings[0].text}`] : settings.map((s) => `- ${s.job}: ${s.text}`)),
    `- cluster: ${capacity}; Swayam lists ${result.listLengths.join(", ")}; ${c.frontends} frontends deciding every ${c.autoscaleMs / 1000} s; delta ${c.retryGapMs} ms; hop ${c.hopMs} ms; cold start ${c.coldStartMs / 1000} s; T ${c.idleTimeoutMs / 1000} s; drop after ${c.dropAfterMs / 1000} s`,
    `- metrics: p99 ${m.p99}; outcomes binned by ${m.binBy} minute; ${m.queueCap === undefined ? "no queue cap" : `queues capped at ${m.queueCap}`}`,
    `- seeds: ${seeds.join(", ")}; runs: ${result.runs.length}; total wall time ${(result.wallMs / 1000).toFixed(1)} s (trace reading included)`,
  ];
}

/** Policies that are this system or its parts, Faro as published, or oracles: not baselines a user would pick. */
const NOT_BASELINES = new Set([
  "infergrid",
  "infergrid-no-prune",
  "infergrid-no-park",
  "infergrid-prune-all",
  "infergrid-no-headroom",
  "swayam",
  "swayam-park",
  "swayam-static",
  "faro-published",
  "clair-a1",
  "clair-a2",
]);

/**
 * This system's violation rate against the others': how many times lower than the best baseline a user could
 * deploy (HPA, KPA, Ray Serve, the Faro paper's baselines, a fixed allocation), than Faro as published and than
 * Swayam alone. Empty when the experiment did not run "infergrid".
 */
export function comparisonLines(summary: readonly PolicySummary[]): string[] {
  const ours = summary.find((p) => p.policy === "infergrid");
  if (!ours) return [];
  const v = ours.violationRate.mean;
  const ratio = (p: PolicySummary) => (v > 0 ? `${(p.violationRate.mean / v).toFixed(2)}x` : "inf");
  const lines = [`infergrid: ${v.toFixed(3)} % SLO violations, lost utility ${ours.lostUtility.mean.toFixed(3)}.`];
  const baselines = summary.filter((p) => !NOT_BASELINES.has(p.policy));
  const best = baselines.reduce<PolicySummary | undefined>(
    (b, p) => (!b || p.violationRate.mean < b.violationRate.mean ? p : b),
    undefined,
  );
  if (best) lines.push(`- best baseline: ${best.policy}, ${best.violationRate.mean.toFixed(3)} % (${ratio(best)} infergrid's)`);
  for (const name of ["faro-published", "swayam", "infergrid-no-prune", "infergrid-no-park"]) {
    const p = summary.find((x) => x.policy === name);
    if (p) lines.push(`- ${name}: ${p.violationRate.mean.toFixed(3)} % (${ratio(p)} infergrid's)`);
  }
  const lower = summary.filter((p) => p.policy !== "infergrid" && !p.policy.startsWith("clair") && p.violationRate.mean < v);
  lines.push(
    lower.length === 0
      ? "- no other deployable policy had fewer violations."
      : `- fewer violations than infergrid: ${lower.map((p) => `${p.policy} ${p.violationRate.mean.toFixed(3)} %`).join(", ")}.`,
  );
  return [...lines, ""];
}

export function markdownReport(result: ExperimentResult): string {
  const summary = summarise(result);
  const perJob = perJobRows(result);
  return [
    `# Simulation: ${result.experiment.name}`,
    "",
    result.experiment.description,
    "",
    ...setupLines(result),
    "",
    "Mean over seeds (min-max in parentheses when they differ); the terms are defined under Terms below.",
    "",
    markdownTable(
      COLUMNS.map(([h]) => h.text),
      summary.map((p) => COLUMNS.map(([, f]) => f(p))),
    ),
    "",
    ...comparisonLines(summary),
    "## Per job",
    "",
    markdownTable(
      perJob.header.map((h) => h.text),
      perJob.rows,
    ),
    "",
    "## Terms",
    "",
    `${TERMS_NOTE} Here the terms of this report; report.html lists the local cluster's too.`,
    "",
    ...GLOSSARY.filter((t) => "sim" in t).map((t) => `- **${t.term}** (${whereShown(t)}): ${t.definition}`),
    "",
  ].join("\n");
}

/** Where the terms come from, for both reports. */
const TERMS_NOTE = `The simulator's report and the local cluster's summary (npm start) use the same terms, defined once in ${GLOSSARY_SOURCE}.`;

/** Where a term shows, in words: "simulator: backend-hours; local cluster: backend-s". */
function whereShown(t: GlossaryTerm): string {
  const part = (name: string, labels: readonly string[] | undefined) =>
    labels === undefined ? [] : [`${name}${labels.length > 0 ? `: ${labels.join(", ")}` : ""}`];
  return [...part("simulator", t.sim?.labels), ...part("local cluster", t.local?.labels)].join("; ");
}

// ---------------------------------------------------------------- HTML and SVG

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

interface Line {
  name: string;
  values: ArrayLike<number>;
}

function escapeHtml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** The x-axis's step in minutes: 1, 2, 2.5 or 5 x 10^k, the first at or above x. */
function niceStep(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

/** Rounds away float noise (3 x 0.1 = 0.30000000000000004). */
const clean = (x: number): number => Number(x.toPrecision(12));

/** A y-axis: its ends and the values that get a tick and a grid line. */
export interface Axis {
  min: number;
  max: number;
  ticks: number[];
}

/** Headroom above the data's largest value on a linear axis. */
const HEADROOM = 1.05;

/**
 * A linear y-axis from 0 for data whose largest value is `dataMax`: its top the lowest multiple, at or above
 * dataMax plus 5 % headroom, of a step of 1, 2, 2.5 or 5 x 10^k that gives 2 to 5 steps; never above `cap`
 * while the data stays at or under it (a percentage of at most 100 %); 0 to 1 when no value is above 0.
 */
export function linearAxis(dataMax: number, cap?: number): Axis {
  const want = Number.isFinite(dataMax) && dataMax > 0 ? dataMax * HEADROOM : 0;
  if (!(want > 0)) return { min: 0, max: 1, ticks: [0, 0.25, 0.5, 0.75, 1] };
  let best: { step: number; top: number } | undefined;
  const e0 = Math.floor(Math.log10(want / 5));
  for (let e = e0; e <= e0 + 1; e++) {
    for (const m of [1, 2, 2.5, 5]) {
      const step = clean(m * 10 ** e);
      const steps = Math.ceil(clean(want / step));
      if (steps < 2 || steps > 5) continue;
      const top = clean(steps * step);
      if (best === undefined || top < best.top) best = { step, top };
    }
  }
  const { step, top: nice } = best ?? { step: want, top: want };
  const top = cap !== undefined && dataMax <= cap && nice > cap ? cap : nice;
  const ticks: number[] = [];
  for (let k = 0; clean(k * step) < top; k++) ticks.push(clean(k * step));
  ticks.push(top);
  return { min: 0, max: top, ticks };
}

/** 1, 2, 5 x 10^k at or below x (down) or at or above it (up). */
function logNice(x: number, dir: "down" | "up"): number {
  const p = 10 ** Math.floor(Math.log10(x));
  const candidates = [0.5, 1, 2, 5, 10, 20].map((m) => clean(m * p));
  return dir === "up" ? (candidates.find((c) => c >= x) as number) : (candidates.filter((c) => c <= x).pop() as number);
}

/**
 * A log10 y-axis for positive data from dataMin to dataMax: its ends 1, 2 or 5 x 10^k around the data, ticks at
 * the ends and the powers of 10 between them (and at 2 and 5 x 10^k when it spans at most two decades); 1 to 10
 * with no positive data.
 */
export function logAxis(dataMin: number, dataMax: number): Axis {
  if (!(Number.isFinite(dataMin) && Number.isFinite(dataMax) && dataMin > 0 && dataMax >= dataMin))
    return { min: 1, max: 10, ticks: [1, 10] };
  let min = logNice(dataMin, "down");
  let max = logNice(dataMax, "up");
  if (max === min) {
    min = logNice(min * 0.99, "down");
    max = logNice(max * 1.01, "up");
  }
  const dense = Math.log10(max / min) <= 2;
  const ticks = [min];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const m of dense ? [1, 2, 5] : [1]) {
      const v = clean(m * 10 ** e);
      if (v > min && v < max) ticks.push(v);
    }
  }
  ticks.push(max);
  return { min, max, ticks };
}

/**
 * A line chart as SVG; x in minutes from binMinutes, y from 0 to a top sized to the data (linearAxis: no higher than
 * `cap` while the data stays under it, 100 for a percentage) or log10 (logAxis) when logY. `term`: the glossary
 * term the title links to.
 */
export function lineChart(
  title: string,
  yLabel: string,
  lines: Line[],
  binMinutes: number,
  options: { logY?: boolean; cap?: number; term?: TermId } = {},
): string {
  const W = 560;
  const H = 240;
  const L = 56;
  const R = 12;
  const T = 24;
  const B = 36;
  const n = Math.max(0, ...lines.map((l) => l.values.length));
  const finite = lines.flatMap((l) => Array.from(l.values).filter((v) => Number.isFinite(v) && (!options.logY || v > 0)));
  const logY = options.logY === true;
  const dataMax = finite.reduce((a, v) => Math.max(a, v), Number.NEGATIVE_INFINITY);
  const dataMin = finite.reduce((a, v) => Math.min(a, v), Number.POSITIVE_INFINITY);
  const axis = logY ? logAxis(dataMin, dataMax) : linearAxis(dataMax, options.cap);
  const yMin = logY ? Math.log10(axis.min) : axis.min;
  const yMax = logY ? Math.log10(axis.max) : axis.max;
  const xOf = (i: number) => L + ((W - L - R) * i) / Math.max(1, n - 1);
  const yOf = (v: number) => {
    const y = logY ? Math.log10(v) : v;
    return T + (H - T - B) * (1 - (y - yMin) / (yMax - yMin || 1));
  };
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H + 18 * Math.ceil(lines.length / 4)}" class="chart">`);
  const titleText = `<text x="${W / 2}" y="15" text-anchor="middle" class="title">${escapeHtml(title)}</text>`;
  parts.push(options.term === undefined ? titleText : `<a href="#${termAnchor(options.term)}">${titleText}</a>`);
  // Axes and grid.
  for (const v of axis.ticks) {
    const y = yOf(v);
    parts.push(`<line x1="${L}" x2="${W - R}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" class="grid"/>`);
    parts.push(`<text x="${L - 4}" y="${(y + 4).toFixed(1)}" text-anchor="end" class="tick">${formatTick(v)}</text>`);
  }
  const totalMinutes = n * binMinutes;
  const step = niceStep(totalMinutes / 6);
  for (let m = 0; m <= totalMinutes + 1e-9; m += step) {
    const x = L + ((W - L - R) * m) / Math.max(binMinutes, totalMinutes - binMinutes);
    if (x > W - R + 1) break;
    parts.push(`<text x="${x.toFixed(1)}" y="${H - B + 14}" text-anchor="middle" class="tick">${formatTick(m)}</text>`);
  }
  parts.push(`<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle" class="tick">minutes</text>`);
  parts.push(
    `<text x="12" y="${(T + H - B) / 2}" text-anchor="middle" class="tick" transform="rotate(-90 12 ${(T + H - B) / 2})">${escapeHtml(yLabel)}</text>`,
  );
  parts.push(`<rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" class="frame"/>`);
  lines.forEach((line, k) => {
    const color = PALETTE[k % PALETTE.length] as string;
    let d = "";
    let pen = false;
    for (let i = 0; i < line.values.length; i++) {
      const v = line.values[i] as number;
      if (!Number.isFinite(v) || (logY && v <= 0)) {
        pen = false;
        continue;
      }
      d += `${pen ? "L" : "M"}${xOf(i).toFixed(1)},${yOf(v).toFixed(1)}`;
      pen = true;
    }
    parts.push(`<path d="${d}" stroke="${color}" class="line"><title>${escapeHtml(line.name)}</title></path>`);
    const lx = L + (k % 4) * 130;
    const ly = H + 4 + 18 * Math.floor(k / 4);
    parts.push(`<rect x="${lx}" y="${ly}" width="10" height="10" fill="${color}"/>`);
    parts.push(`<text x="${lx + 14}" y="${ly + 9}" class="tick">${escapeHtml(line.name)}</text>`);
  });
  parts.push("</svg>");
  return parts.join("");
}

function formatTick(v: number): string {
  if (v === 0) return "0";
  if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(v % 1000 === 0 ? 0 : 1)}k`;
  if (Math.abs(v) < 0.01) return v.toExponential(0);
  return Number.parseFloat(v.toPrecision(3)).toString();
}

function htmlTable(header: TermColumn[], rows: string[][]): string {
  const th = (h: TermColumn) =>
    h.term === undefined ? `<th>${escapeHtml(h.text)}</th>` : `<th><a href="#${termAnchor(h.term)}">${escapeHtml(h.text)}</a></th>`;
  return `<table><thead><tr>${header.map(th).join("")}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(c)}</td>`).join("")}</tr>`)
    .join("")}</tbody></table>`;
}

function sumSeries(runs: readonly ArrayLike<number>[]): Float64Array {
  const n = Math.max(0, ...runs.map((r) => r.length));
  const out = new Float64Array(n);
  for (const r of runs) for (let i = 0; i < r.length; i++) out[i] = (out[i] ?? 0) + (r[i] as number);
  return out;
}

function ratio(a: ArrayLike<number>, b: ArrayLike<number>, scale: number): Float64Array {
  return Float64Array.from({ length: a.length }, (_, i) =>
    (b[i] as number) > 0 ? ((a[i] as number) / (b[i] as number)) * scale : Number.NaN,
  );
}

export function htmlReport(result: ExperimentResult): string {
  const summary = summarise(result);
  const perJob = perJobRows(result);
  const firstSeed = result.runs[0]?.seed;
  const runs = result.runs.filter((r) => r.seed === firstSeed);
  const binMs = runs[0]?.binMs ?? 60_000;
  const binMinutes = binMs / 60_000;
  const perSec = 1000 / binMs;
  const charts: string[] = [];
  const first = runs[0];
  if (first) {
    charts.push(
      lineChart(
        "Load: arrivals per second, per job",
        "req/s",
        result.jobs.map((job, j) => ({ name: job, values: Float64Array.from(first.series[j]?.arrivals ?? [], (x) => x * perSec) })),
        binMinutes,
        { term: "requests" },
      ),
    );
  }
  charts.push(
    lineChart(
      "Backends in use (cluster)",
      "backends",
      runs.map((r) => ({ name: r.policy, values: sumSeries(r.series.map((s) => s.backends)) })),
      binMinutes,
      { term: "backends-in-use" },
    ),
  );
  charts.push(
    lineChart(
      "SLO violations (cluster)",
      "% of requests",
      runs.map((r) => ({
        name: r.policy,
        values: ratio(sumSeries(r.series.map((s) => s.violations)), sumSeries(r.series.map((s) => s.arrivals)), 100),
      })),
      binMinutes,
      { cap: 100, term: "slo-violations" },
    ),
  );
  charts.push(
    lineChart(
      "p99 latency (cluster)",
      "ms (log)",
      runs.map((r) => ({ name: r.policy, values: r.clusterP99 })),
      binMinutes,
      { logY: true, term: "latency" },
    ),
  );
  const jobCharts = result.jobs.map((job, j) => {
    const backends = lineChart(
      `${job}: backends in use`,
      "backends",
      runs.map((r) => ({ name: r.policy, values: r.series[j]?.backends ?? [] })),
      binMinutes,
      { term: "backends-in-use" },
    );
    const violations = lineChart(
      `${job}: SLO violations`,
      "% of requests",
      runs.map((r) => ({ name: r.policy, values: ratio(r.series[j]?.violations ?? [], r.series[j]?.arrivals ?? [], 100) })),
      binMinutes,
      { cap: 100, term: "slo-violations" },
    );
    const p99 = lineChart(
      `${job}: p99 latency`,
      "ms (log)",
      runs.map((r) => ({ name: r.policy, values: r.series[j]?.p99 ?? [] })),
      binMinutes,
      { logY: true, term: "latency" },
    );
    return `<h3>${escapeHtml(job)}</h3><div class="row">${backends}${violations}${p99}</div>`;
  });
  const css = `body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px;margin:8px 0 24px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left}
.row{display:flex;flex-wrap:wrap;gap:12px}.chart{width:560px;height:auto}.title{font-size:13px;font-weight:600}
.tick{font-size:10px;fill:#444}.grid{stroke:#eee}.frame{fill:none;stroke:#999}.line{fill:none;stroke-width:1.3}
a{color:#1a4f8b}a .title{fill:#1a4f8b;text-decoration:underline}th a{color:inherit}dt{font-weight:600;margin-top:8px}
dd{margin:2px 0 0 16px;max-width:60em}.where{color:#666;font-size:90%}`;
  return `<!doctype html><html><head><meta charset="utf-8"><title>Simulation: ${escapeHtml(result.experiment.name)}</title><style>${css}</style></head><body>
<h1>Simulation: ${escapeHtml(result.experiment.name)}</h1>
<p>${escapeHtml(result.experiment.description)}</p>
<ul>${setupLines(result)
    .map((l) => `<li>${escapeHtml(l.replace(/^- /, "").replace(/`/g, ""))}</li>`)
    .join("")}</ul>
<h2>Summary</h2>
<p>Headers and plot titles link to their definitions under <a href="#terms">Terms</a>.</p>
${htmlTable(
  COLUMNS.map(([h]) => h),
  summary.map((p) => COLUMNS.map(([, f]) => f(p))),
)}
<h2>Over time (seed ${firstSeed ?? "n/a"})</h2>
<div class="row">${charts.join("")}</div>
<h2>Per job (seed ${firstSeed ?? "n/a"})</h2>
${jobCharts.join("\n")}
<h2>Per job, all seeds</h2>
${htmlTable(perJob.header, perJob.rows)}
${glossaryHtml()}
</body></html>
`;
}

/** Every glossary term with its anchor: the simulator's and the local cluster's, so each reads the other's. */
function glossaryHtml(): string {
  const entries = GLOSSARY.map(
    (t) =>
      `<dt id="${termAnchor(t.id)}">${escapeHtml(t.term)} <span class="where">(${escapeHtml(whereShown(t))})</span></dt><dd>${escapeHtml(t.definition)}</dd>`,
  );
  return `<h2 id="terms">Terms</h2>\n<p>${escapeHtml(TERMS_NOTE)}</p>\n<dl>${entries.join("\n")}</dl>`;
}
