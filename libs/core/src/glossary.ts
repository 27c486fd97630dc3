/**
 * The terms of the simulator's report (libs/sim report.ts: report.md and report.html) and of the local
 * cluster's summary (infra/local summary.ts: the printed table and --summary-json), defined once. Each
 * definition says how the code computes the quantity and, where the simulator and the local cluster compute it
 * differently, says so. The HTML report prints every term under "Terms" with the anchor `term-<id>` and links its
 * table headers and plot titles there; the local summary ends with a legend of the terms its columns show.
 */

/** Where a term shows: the table headers or plot titles that show it, and the JSON keys that hold it. */
export interface TermUsage {
  readonly labels: readonly string[];
  /** Simulator: the keys of results.json's runs[].cluster; local cluster: of --summary-json's services[] and totals. */
  readonly json: readonly string[];
}

export interface GlossaryTerm {
  /** The anchor is `term-<id>` (termAnchor). */
  readonly id: string;
  readonly term: string;
  /** One sentence, exact about how the code computes it. */
  readonly definition: string;
  /** In the simulator's report. */
  readonly sim?: TermUsage;
  /** In the local cluster's summary. */
  readonly local?: TermUsage;
}

/** Where the definitions live, for outputs that name it. */
export const GLOSSARY_SOURCE = "libs/core/src/glossary.ts";

export const GLOSSARY = [
  {
    id: "requests",
    term: "requests",
    definition:
      "The requests offered to a job: in the simulator, the trace's arrivals inside the run, every one of which ends answered or dropped (a run goes on until no request is left); in the local cluster (sent), the requests the load generator sent through the broker, the arrivals it could not send (not sent) left out.",
    sim: { labels: ["requests", "Load: arrivals per second, per job"], json: ["requests"] },
    local: { labels: ["sent"], json: ["sent"] },
  },
  {
    id: "answered",
    term: "answered",
    definition:
      "Sent requests that got a successful reply, the only ones whose latency (from the load generator's send to the reply) enters p50 / p99; the simulator's counterpart is requests minus dropped.",
    local: { labels: ["answered"], json: ["answered"] },
  },
  {
    id: "failed",
    term: "failed",
    definition:
      "Sent requests that ended with a gRPC error, counted by status code (DEADLINE_EXCEEDED, UNAVAILABLE, ..., CANCELLED for those still in flight when the drain after the load gave up), each a miss in within SLO and SLA compliance; the simulator's counterpart is dropped.",
    local: { labels: ["failed"], json: ["failed", "failedByCode"] },
  },
  {
    id: "lost",
    term: "lost",
    definition:
      "sent - answered - failed once the load and its drain are over: requests that got neither an answer nor an error, which is a bug (the local cluster then exits with status 1); the simulator has none.",
    local: { labels: ["lost"], json: ["lost"] },
  },
  {
    id: "not-sent",
    term: "not sent",
    definition:
      "Arrivals of the workload the load generator did not send because --max-in-flight requests were already in flight; they are in no other term (not in sent, within SLO or SLA compliance) and the simulator has none.",
    local: { labels: [], json: ["notSent"] },
  },
  {
    id: "dropped",
    term: "dropped",
    definition:
      "Simulated requests that ended without an answer: not started within drop after (cluster.dropAfterMs) of their arrival, refused by a full queue (metrics.queueCap) or given up by the Swayam frontend, each an SLO violation, a miss in SLA compliance and an infinite latency for lost utility but left out of p50 / p99; the local cluster's counterpart is failed.",
    sim: { labels: ["dropped"], json: ["dropped"] },
  },
  {
    id: "slo",
    term: "SLO",
    definition:
      "A job's latency objective, a threshold in ms and a percentile (SL_min, e.g. p99): a request meets it when answered with a latency at most the threshold (arrival to answer in the simulator, simulated hops included; the load generator's send to the reply in the local cluster), and SL_min is the share of requests an SLA compliance window needs within it.",
    sim: { labels: [], json: [] },
    local: { labels: ["SLO"], json: ["sloMs", "slaPercentile"] },
  },
  {
    id: "slo-violations",
    term: "SLO violations %",
    definition:
      "100 x (requests answered later than the SLO latency + dropped requests) / requests, over all jobs of a run (per job in the per-job table and plots); the plots show it per bin, the violations counted in the bin (the bin where the answer or drop happened, or under metrics.binBy arrival the bin where the request arrived) over the bin's arrivals, so with the default binBy completion a bin where a backlog ends can exceed 100 %; the local cluster reports within SLO instead, which is 100 % minus this when no request is lost or not sent.",
    sim: {
      labels: ["SLO violations %", "violations %", "SLO violations (cluster)", "SLO violations"],
      json: ["violations", "violationRate"],
    },
  },
  {
    id: "violations-after-first-minute",
    term: "SLO violations % after the first minute",
    definition:
      "SLO violations % over the bins that start at or after minute 1 only (the violations counted in those bins, binned as in the plots, over the arrivals in those bins), leaving out the start where every autoscaler begins at its initial size and cold-starts.",
    sim: { labels: ["after the first minute"], json: [] },
  },
  {
    id: "mean-job-violations",
    term: "mean job violations %",
    definition:
      "The mean over jobs of each job's SLO violations %, every job weighing the same whatever its number of requests (Faro's \"averaged over jobs\").",
    sim: { labels: ["mean job violations %"], json: ["meanJobViolationRate"] },
  },
  {
    id: "attainment",
    term: "within SLO",
    definition:
      "SLO attainment: answered requests within the SLO latency / (answered + failed), a failure being a miss and lost and not-sent requests left out, per service (the total row weighs services by answered + failed); the simulator reports SLO violations % instead, whose denominator is every request since there each one ends answered or dropped.",
    local: { labels: ["within SLO"], json: ["sloAttainment"] },
  },
  {
    id: "sla-compliance",
    term: "SLA compliance",
    definition:
      "Swayam's metric: a job's outcomes in windows of 1000 consecutive requests slid by 10, a window complying when at least SL_min of its requests were answered within the SLO latency (a drop or failure is a miss), and the compliance the share of complying windows (none, so undefined, under 1000 requests); the simulator takes outcomes in the order they happen and its summary shows the mean over the jobs that have a window and the worst job, the local cluster takes them in send order (an outcome waits for those of the requests sent before it) and shows each service's share and number of windows.",
    sim: {
      labels: ["SLA compliance % (mean job)", "worst job SLA %", "SLA compliance %"],
      json: ["slaCompliance", "minSlaCompliance"],
    },
    local: { labels: ["SLA compliance"], json: ["slaCompliance", "slaWindows"] },
  },
  {
    id: "lost-utility",
    term: "lost utility",
    definition:
      "Faro's lost cluster utility: the sum over jobs of 1 - the job's utility, a job's utility being the mean over the bins (minutes) with outcomes of min(SLO latency / the bin's p99, 1), that p99 the ceil(0.99 n)-th smallest of the bin's n answered and dropped requests with a drop as infinite latency (to a 12 % bucket, or exact under metrics.p99 exact); 0 is best, the number of jobs the worst, and the local cluster does not compute it.",
    sim: { labels: ["lost utility"], json: ["lostUtility"] },
  },
  {
    id: "latency",
    term: "latency percentiles",
    definition:
      "The 50th and 99th percentile latencies (p50, p99; in the local cluster's JSON also the mean) of answered requests only (drops and failures left out), within 0.5 % of the nearest-rank value (libs/workload LatencyHistogram): over the whole run, all jobs together in the simulator's summary and per job in its per-job table, per service in the local cluster; the simulator's p99 plots take each bin's answered requests instead, to the upper edge of a 12 % bucket (per-job plots exact under metrics.p99 exact).",
    sim: {
      labels: ["p50 ms", "p99 ms", "p99 latency (cluster)", "p99 latency"],
      json: ["p50Ms", "p99Ms"],
    },
    local: { labels: ["p50 ms", "p99 ms"], json: ["p50Ms", "p99Ms", "meanMs"] },
  },
  {
    id: "backend-seconds",
    term: "backend-seconds",
    definition:
      "Seconds backends held resources for a job in any state but cold (provisioning during a cold start, warm idle, busy, draining: Swayam's warm-backend-time), summed over its backends: in the simulator from the cluster model's holding intervals clipped to the run, shown in hours (backend-hours = backend-seconds / 3600); in the local cluster from each backend's heartbeats, a reported state holding until the next report (for at most the stale bound after the last one), from the start of the load to the end of the drain after it.",
    sim: { labels: ["backend-hours"], json: ["backendSeconds"] },
    local: { labels: ["backend-s"], json: ["backendSeconds"] },
  },
  {
    id: "core-seconds",
    term: "core-seconds",
    definition:
      "With --themis (backends with sizes): cores x seconds held by the service's backends while provisioning or warm, from their heartbeats, from the start of the load to the end of the drain after it (their cost); the simulator does not report it in this table.",
    local: { labels: ["core-s"], json: ["coreSeconds"] },
  },
  {
    id: "backends-in-use",
    term: "backends in use",
    definition:
      "In the simulator's plots, the mean number of backends holding resources for a job over each bin (its backend-seconds in the bin over the bin's length; the cluster plot sums the jobs), so provisioning and warm idle backends count; not the local cluster's peak n, which counts the backends the frontends dispatch into.",
    sim: { labels: ["Backends in use (cluster)", "backends in use"], json: [] },
  },
  {
    id: "peak-n",
    term: "peak n",
    definition:
      "The largest n from the start of the load to the end of the drain after it, n being the prefix of a service's backend list its frontends dispatch into (the largest in the frontends' load reports of the last 2.5 s): backends dispatched to, not backends held, so it is not the simulator's backends in use (a mean of the backends held, provisioning and warm idle ones included).",
    local: { labels: ["peak n"], json: ["peakBackendsInUse"] },
  },
  {
    id: "cold-starts",
    term: "cold starts",
    definition:
      "Backends the simulated cluster started from cold for a job, counted when the start begins (each provisions for cluster.coldStartMs before it serves); the local cluster does not count them.",
    sim: { labels: ["cold starts"], json: ["coldStarts"] },
  },
  {
    id: "simulation-cost",
    term: "simulation cost",
    definition:
      "What a simulated run cost the machine: wall s / run is its elapsed time, CPU s / run the simulator process's user + system CPU time over it (the fair number on a shared machine), requests simulated / CPU s its requests over that CPU time.",
    sim: { labels: ["wall s / run", "CPU s / run", "requests simulated / CPU s"], json: [] },
  },
] as const satisfies readonly GlossaryTerm[];

export type TermId = (typeof GLOSSARY)[number]["id"];

/** A table's column: its header and the glossary term the header links to (none for names). */
export interface TermColumn {
  text: string;
  term?: TermId;
}

/** The HTML anchor of a term (its id attribute; link with `#${termAnchor(id)}`). */
export function termAnchor(id: TermId): string {
  return `term-${id}`;
}

export function glossaryTerm(id: TermId): GlossaryTerm {
  const t = GLOSSARY.find((g) => g.id === id);
  if (t === undefined) throw new Error(`no glossary term ${id}`);
  return t;
}
