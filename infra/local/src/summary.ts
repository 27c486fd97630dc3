import { GLOSSARY_SOURCE, glossaryTerm, type TermColumn, type TermId } from "@infergrid/core";
import Table from "cli-table3";
import type { ServiceTotals } from "./stats.js";
import type { RestartCounts } from "./supervisor.js";
import type { SizeRow, TypedSummary } from "./typed-stats.js";

/** One service's row; its fields (the --summary-json keys) are those @infergrid/core's GLOSSARY names under each term's `local.json`. */
export interface ServiceSummary {
  service: string;
  sloMs: number;
  /** SL_min in percent, e.g. 99. */
  slaPercentile: number;
  sent: number;
  answered: number;
  failed: number;
  failedByCode: Record<string, number>;
  /** sent - answered - failed: requests that got neither an answer nor an error. Must be 0. */
  lost: number;
  /** Arrivals the load generator could not send (too many in flight); not part of `sent`. */
  notSent: number;
  p50Ms: number | null;
  p99Ms: number | null;
  meanMs: number | null;
  /** Share of finished requests answered within the SLO latency (failures are misses). */
  sloAttainment: number | null;
  /** Swayam's SLA compliance: share of windows of 1000 requests (slid by 10) meeting SL_min; null under 1000 requests. */
  slaCompliance: number | null;
  slaWindows: number;
  /** Time backends spent provisioning or warm for this service, from their heartbeats. */
  backendSeconds: number;
  /** Backends with sizes (--themis): cores x time they held, from their heartbeats (their cost). */
  coreSeconds?: number;
  peakBackendsInUse: number;
  /** Heterogeneous mode: the requests by the instance type that served them, split by query size. */
  byInstanceType?: TypedSummary;
}

export interface Summary {
  startedAt: string;
  runDir: string;
  workload: string;
  /** Seconds of load (from the first scheduled request to the last one sent). */
  loadSeconds: number;
  interrupted: boolean;
  backends: number;
  frontends: number;
  policy: string;
  maxSendLagMs: number;
  /** Processes that died and were started again by the supervisor (the CLI always writes it). */
  restarts?: RestartCounts;
  services: ServiceSummary[];
  totals: {
    sent: number;
    answered: number;
    failed: number;
    lost: number;
    notSent: number;
    backendSeconds: number;
    sloAttainment: number | null;
  };
}

const finite = (x: number): number | null => (Number.isFinite(x) ? x : null);
const round = (x: number, digits: number): number => Number(x.toFixed(digits));
const roundOrNull = (x: number, digits: number): number | null => {
  const f = finite(x);
  return f === null ? null : round(f, digits);
};

export function serviceSummary(
  service: string,
  sloMs: number,
  slMin: number,
  t: ServiceTotals,
  backendSeconds: number,
  peakBackendsInUse: number,
): ServiceSummary {
  return {
    service,
    sloMs,
    slaPercentile: round(slMin * 100, 3),
    sent: t.sent,
    answered: t.answered,
    failed: t.failed,
    failedByCode: t.failedByCode,
    lost: t.sent - t.answered - t.failed,
    notSent: t.notSent,
    p50Ms: roundOrNull(t.p50Ms, 1),
    p99Ms: roundOrNull(t.p99Ms, 1),
    meanMs: roundOrNull(t.meanMs, 1),
    sloAttainment: roundOrNull(t.attainment, 5),
    slaCompliance: roundOrNull(t.slaCompliance, 5),
    slaWindows: t.slaWindows,
    backendSeconds: round(backendSeconds, 1),
    peakBackendsInUse,
  };
}

export function totalsOf(services: readonly ServiceSummary[]): Summary["totals"] {
  const sum = (f: (s: ServiceSummary) => number) => services.reduce((a, s) => a + f(s), 0);
  const finished = sum((s) => s.answered + s.failed);
  const within = sum((s) => (s.sloAttainment ?? 0) * (s.answered + s.failed));
  return {
    sent: sum((s) => s.sent),
    answered: sum((s) => s.answered),
    failed: sum((s) => s.failed),
    lost: sum((s) => s.lost),
    notSent: sum((s) => s.notSent),
    backendSeconds: round(
      sum((s) => s.backendSeconds),
      1,
    ),
    sloAttainment: finished === 0 ? null : round(within / finished, 5),
  };
}

export const pct = (x: number | null): string => (x === null ? "-" : `${(x * 100).toFixed(x >= 0.9995 && x < 1 ? 2 : 1)}%`);
export const ms = (x: number | null): string => (x === null ? "-" : x >= 100 ? x.toFixed(0) : x.toFixed(1));

function failedCell(s: ServiceSummary): string {
  const codes = Object.entries(s.failedByCode);
  if (codes.length === 0) return String(s.failed);
  return `${s.failed} (${codes.map(([code, n]) => `${code} ${n}`).join(", ")})`;
}

/** A table without colour codes, so it reads the same in a terminal, a log file or CI. */
export function plainTable(head: string[]): Table.Table {
  return new Table({ head, style: { head: [], border: [], compact: true }, wordWrap: true });
}

/** A column of the summary table: its header, one of the glossary term's local labels, and the term (none for names). */

/** The summary table's columns; core-s only when some service's backends have sizes (--themis). */
export function summaryColumns(sized: boolean): TermColumn[] {
  return [
    { text: "service" },
    { text: "sent", term: "requests" },
    { text: "answered", term: "answered" },
    { text: "failed", term: "failed" },
    { text: "lost", term: "lost" },
    { text: "p50 ms", term: "latency" },
    { text: "p99 ms", term: "latency" },
    { text: "SLO", term: "slo" },
    { text: "within SLO", term: "attainment" },
    { text: "SLA compliance", term: "sla-compliance" },
    { text: "backend-s", term: "backend-seconds" },
    ...(sized ? [{ text: "core-s", term: "core-seconds" } as const] : []),
    { text: "peak n", term: "peak-n" },
  ];
}

/**
 * The summary's last line: the glossary terms it shows, each with its column headers where they differ from the
 * term's name, and where the terms are defined (the same module the simulator's report prints under Terms).
 */
export function termsLegend(shown: readonly TermId[], headers: readonly TermColumn[] = []): string {
  const names = [...new Set(shown)].map((id) => {
    const t = glossaryTerm(id);
    const other = headers.filter((c) => c.term === id && c.text !== t.term).map((c) => c.text);
    return other.length === 0 ? t.term : `${t.term} (${other.join(", ")})`;
  });
  return `terms: ${names.join(", ")}; defined in ${GLOSSARY_SOURCE} (npm run sim's report.html lists them under Terms)`;
}

export function renderSummary(summary: Summary): string {
  const sized = summary.services.some((s) => s.coreSeconds !== undefined);
  const columns = summaryColumns(sized);
  const table = plainTable(columns.map((c) => c.text));
  for (const s of summary.services) {
    table.push([
      s.service,
      s.sent,
      s.answered,
      failedCell(s),
      s.lost,
      ms(s.p50Ms),
      ms(s.p99Ms),
      `${s.sloMs} ms @p${s.slaPercentile}`,
      pct(s.sloAttainment),
      s.slaCompliance === null ? `- (${s.sent < 1000 ? "<1000 req" : "no window"})` : `${pct(s.slaCompliance)} of ${s.slaWindows}`,
      s.backendSeconds.toFixed(1),
      ...(sized ? [s.coreSeconds === undefined ? "-" : s.coreSeconds.toFixed(1)] : []),
      s.peakBackendsInUse,
    ]);
  }
  const t = summary.totals;
  const coreSeconds = summary.services.reduce((a, s) => a + (s.coreSeconds ?? 0), 0);
  table.push([
    "total",
    t.sent,
    t.answered,
    t.failed,
    t.lost,
    "",
    "",
    "",
    pct(t.sloAttainment),
    "",
    t.backendSeconds.toFixed(1),
    ...(sized ? [coreSeconds.toFixed(1)] : []),
    "",
  ]);
  const notes: string[] = [];
  if (t.notSent > 0) notes.push(`${t.notSent} arrivals were not sent: more than the allowed requests were in flight (--max-in-flight).`);
  if (t.lost > 0) notes.push(`${t.lost} requests got neither an answer nor an error: that is a bug.`);
  if (summary.maxSendLagMs > 100)
    notes.push(`requests went out up to ${summary.maxSendLagMs.toFixed(0)} ms after their scheduled time (busy CPU).`);
  for (const s of summary.services) if (s.byInstanceType) notes.push(renderTyped(s.service, s.byInstanceType));
  if (summary.restarts) notes.push(describeRestarts(summary.restarts));
  const head = `Summary: ${summary.loadSeconds.toFixed(1)} s of load${summary.interrupted ? " (interrupted)" : ""}, ${summary.workload}; ${summary.backends} backends, ${summary.frontends} frontend${summary.frontends === 1 ? "" : "s"}, policy ${summary.policy}`;
  const shown = columns.flatMap((c) => (c.term === undefined ? [] : [c.term]));
  const legend = termsLegend(t.notSent > 0 ? [...shown, "not-sent"] : shown, columns);
  return [head, table.toString(), ...notes, legend].join("\n");
}

/** The summary's line on restarts: how many, and of which processes. */
export function describeRestarts(r: RestartCounts): string {
  const by = Object.entries(r.byProcess).map(([name, n]) => `${name} ${n}`);
  const restarts = by.length === 0 ? "restarts: 0" : `restarts: ${r.total} (${by.join(", ")})`;
  return r.notRestarted.length === 0 ? restarts : `${restarts}; died and left down (--no-restart): ${r.notRestarted.join(", ")}`;
}

const served = (r: SizeRow): string => (r.answered === 0 ? "0" : `${r.answered} (${pct(r.share)})`);
const latencies = (r: SizeRow): string => (r.answered === 0 ? "-" : `${ms(r.p50Ms)} / ${ms(r.p99Ms)}`);

/** One heterogeneous service: per instance type, the share of its requests, their latency, and by query size. */
export function renderTyped(service: string, t: TypedSummary): string {
  const table = plainTable([
    "instance type",
    "backends",
    "USD/h",
    "served (share)",
    "p50 / p99 ms",
    "small served (share of small)",
    "small p50 / p99",
    "large served (share of large)",
    "large p50 / p99",
  ]);
  for (const r of t.types) {
    table.push([
      r.instanceType === t.baseType ? `${r.instanceType} (base)` : r.instanceType,
      r.backends,
      r.pricePerHour.toFixed(4),
      served(r),
      latencies(r),
      served(r.small),
      latencies(r.small),
      served(r.large),
      latencies(r.large),
    ]);
  }
  const classes = `small: ${t.small.answered} answered, ${t.small.failed} failed; large: ${t.large.answered} answered, ${t.large.failed} failed`;
  return [`\n${service} by instance type: ${t.largeRule}`, table.toString(), classes].join("\n");
}
