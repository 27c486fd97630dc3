/**
 * An experiment's report: a Markdown table (policies x metrics, mean and spread over seeds, plus a per-job
 * table) and a self-contained HTML page with the same tables and inline SVG plots (no script, no network at
 * view time). The plots show the first seed's run of each policy.
 */
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

const COLUMNS: [string, (p: PolicySummary) => string][] = [
  ["policy", (p) => p.policy],
  ["SLO violations %", (p) => fmt(p.violationRate, 3)],
  ["after the first minute", (p) => fmt(p.violationRateAfterFirstMinute, 3)],
  ["mean job violations %", (p) => fmt(p.meanJobViolationRate, 3)],
  ["lost utility", (p) => fmt(p.lostUtility, 3)],
  ["SLA compliance % (mean job)", (p) => fmt(p.slaCompliance, 2)],
  ["worst job SLA %", (p) => fmt(p.minSlaCompliance, 2)],
  ["p50 ms", (p) => fmt(p.p50Ms, 0)],
  ["p99 ms", (p) => fmt(p.p99Ms, 0)],
  ["backend-hours", (p) => fmt(p.backendHours, 1)],
  ["cold starts", (p) => fmt(p.coldStarts, 0)],
  ["dropped", (p) => fmt(p.dropped, 0)],
  ["wall s / run", (p) => fmt(p.wallSeconds, 1)],
  ["CPU s / run", (p) => fmt(p.cpuSeconds, 1)],
  ["requests simulated / CPU s", (p) => p.requestsPerCpuSec.mean.toFixed(0)],
];

function markdownTable(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

function perJobRows(result: ExperimentResult): { header: string[]; rows: string[][] } {
  const header = ["policy", "job", "requests", "violations %", "SLA compliance %", "p99 ms", "backend-hours", "cold starts"];
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
    `- trace: \`${t.file}\`${t.trigger === undefined ? "" : ` (trigger ${t.trigger})`}, minutes ${t.fromMinute}..${t.minutes === undefined ? "end" : t.fromMinute + t.minutes}, compression ${t.compression}, rate scale ${t.rateScale}`,
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
    "Mean over seeds (min-max in parentheses when they differ). Violations: requests over the SLO plus dropped ones;",
    "SLA compliance: Swayam's metric (windows of 1000 requests slid by 10 meeting the percentile), mean over jobs.",
    "Lost utility: Faro's, summed over jobs (each job at most 1): a job's utility is the mean over minutes of",
    "min(SLO / that minute's p99, 1), a dropped request counting as infinite latency.",
    "",
    markdownTable(
      COLUMNS.map(([h]) => h),
      summary.map((p) => COLUMNS.map(([, f]) => f(p))),
    ),
    "",
    ...comparisonLines(summary),
    "## Per job",
    "",
    markdownTable(perJob.header, perJob.rows),
    "",
  ].join("\n");
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

function niceMax(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

/** A line chart as SVG; x in minutes from binMinutes, y linear from 0 (or log10 when logY). */
export function lineChart(title: string, yLabel: string, lines: Line[], binMinutes: number, options: { logY?: boolean } = {}): string {
  const W = 560;
  const H = 240;
  const L = 56;
  const R = 12;
  const T = 24;
  const B = 36;
  const n = Math.max(0, ...lines.map((l) => l.values.length));
  const finite = lines.flatMap((l) => Array.from(l.values).filter((v) => Number.isFinite(v) && (!options.logY || v > 0)));
  const logY = options.logY === true;
  const yMaxRaw = finite.length > 0 ? Math.max(...finite) : 1;
  const yMinLog = logY ? Math.floor(Math.log10(Math.max(1e-9, Math.min(...finite, yMaxRaw)))) : 0;
  const yMax = logY ? Math.ceil(Math.log10(Math.max(yMaxRaw, 10 ** (yMinLog + 1)))) : niceMax(yMaxRaw);
  const yMin = logY ? yMinLog : 0;
  const xOf = (i: number) => L + ((W - L - R) * i) / Math.max(1, n - 1);
  const yOf = (v: number) => {
    const y = logY ? Math.log10(v) : v;
    return T + (H - T - B) * (1 - (y - yMin) / (yMax - yMin || 1));
  };
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H + 18 * Math.ceil(lines.length / 4)}" class="chart">`);
  parts.push(`<text x="${W / 2}" y="15" text-anchor="middle" class="title">${escapeHtml(title)}</text>`);
  // Axes and grid.
  const ticks = logY ? Array.from({ length: yMax - yMin + 1 }, (_, i) => 10 ** (yMin + i)) : [0, 0.25, 0.5, 0.75, 1].map((f) => f * yMax);
  for (const v of ticks) {
    const y = yOf(v);
    parts.push(`<line x1="${L}" x2="${W - R}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" class="grid"/>`);
    parts.push(`<text x="${L - 4}" y="${(y + 4).toFixed(1)}" text-anchor="end" class="tick">${formatTick(v)}</text>`);
  }
  const totalMinutes = n * binMinutes;
  const step = niceMax(totalMinutes / 6);
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

function htmlTable(header: string[], rows: string[][]): string {
  return `<table><thead><tr>${header.map((h) => `<th>${escapeHtml(h)}</th>`).join("")}</tr></thead><tbody>${rows
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
      ),
    );
  }
  charts.push(
    lineChart(
      "Backends in use (cluster)",
      "backends",
      runs.map((r) => ({ name: r.policy, values: sumSeries(r.series.map((s) => s.backends)) })),
      binMinutes,
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
    ),
  );
  charts.push(
    lineChart(
      "p99 latency (cluster)",
      "ms (log)",
      runs.map((r) => ({ name: r.policy, values: r.clusterP99 })),
      binMinutes,
      { logY: true },
    ),
  );
  const jobCharts = result.jobs.map((job, j) => {
    const backends = lineChart(
      `${job}: backends in use`,
      "backends",
      runs.map((r) => ({ name: r.policy, values: r.series[j]?.backends ?? [] })),
      binMinutes,
    );
    const violations = lineChart(
      `${job}: SLO violations`,
      "% of requests",
      runs.map((r) => ({ name: r.policy, values: ratio(r.series[j]?.violations ?? [], r.series[j]?.arrivals ?? [], 100) })),
      binMinutes,
    );
    const p99 = lineChart(
      `${job}: p99 latency`,
      "ms (log)",
      runs.map((r) => ({ name: r.policy, values: r.series[j]?.p99 ?? [] })),
      binMinutes,
      { logY: true },
    );
    return `<h3>${escapeHtml(job)}</h3><div class="row">${backends}${violations}${p99}</div>`;
  });
  const css = `body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px;margin:8px 0 24px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left}
.row{display:flex;flex-wrap:wrap;gap:12px}.chart{width:560px;height:auto}.title{font-size:13px;font-weight:600}
.tick{font-size:10px;fill:#444}.grid{stroke:#eee}.frame{fill:none;stroke:#999}.line{fill:none;stroke-width:1.3}`;
  return `<!doctype html><html><head><meta charset="utf-8"><title>Simulation: ${escapeHtml(result.experiment.name)}</title><style>${css}</style></head><body>
<h1>Simulation: ${escapeHtml(result.experiment.name)}</h1>
<p>${escapeHtml(result.experiment.description)}</p>
<ul>${setupLines(result)
    .map((l) => `<li>${escapeHtml(l.replace(/^- /, "").replace(/`/g, ""))}</li>`)
    .join("")}</ul>
<h2>Summary</h2>
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
</body></html>
`;
}
