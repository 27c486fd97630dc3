/**
 * The report's HTML: plots' y-axes sized to their data, every term link landing on a glossary anchor, and the
 * glossary (@infergrid/core) printed in both reports. The runs are made up, so each test states the data it plots.
 */
import { GLOSSARY, glossaryTerm, termAnchor } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { EXPERIMENTS } from "./experiments.js";
import type { JobMetrics, JobSeries } from "./metrics.js";
import { htmlReport, linearAxis, logAxis, markdownReport } from "./report.js";
import type { ExperimentResult } from "./run-experiment.js";
import type { RunResult } from "./simulate.js";

const BINS = 20;
const JOBS = ["serve-cluster0", "serve-cluster6"];

interface Shape {
  /** Violations per bin as a % of the bin's 100 arrivals (every job alike). */
  violationsPct: (bin: number) => number;
  backends?: (bin: number) => number;
  p99?: (bin: number) => number;
}

function series(shape: Shape): JobSeries {
  const f = (g: (b: number) => number) => Float64Array.from({ length: BINS }, (_, b) => g(b));
  return {
    arrivals: f(() => 100),
    violations: f(shape.violationsPct),
    completions: f(() => 100),
    backends: f(shape.backends ?? (() => 4)),
    p99: f(shape.p99 ?? (() => 300)),
  };
}

function jobMetrics(name: string): JobMetrics {
  return {
    name,
    requests: 100 * BINS,
    completed: 100 * BINS,
    dropped: 0,
    violations: 10,
    violationRate: 0.005,
    slaCompliance: 0.9,
    slaWindows: 100,
    p50Ms: 200,
    p99Ms: 600,
    meanMs: 220,
    meanWaitMs: 20,
    backendSeconds: 3600,
    coldStarts: 3,
    utility: 0.99,
  };
}

function run(policy: string, shape: Shape): RunResult {
  return {
    policy,
    seed: 1,
    jobs: JOBS.map(jobMetrics),
    cluster: {
      requests: 200 * BINS,
      violations: 20,
      dropped: 0,
      violationRate: 0.005,
      meanJobViolationRate: 0.005,
      slaCompliance: 0.9,
      minSlaCompliance: 0.9,
      p50Ms: 200,
      p99Ms: 600,
      backendSeconds: 7200,
      coldStarts: 6,
      lostUtility: 0.02,
    },
    series: JOBS.map(() => series(shape)),
    clusterP99: series(shape).p99,
    binMs: 60_000,
    stats: { events: 1, requests: 200 * BINS, wallMs: 10, cpuMs: 10, requestsPerSec: 1, requestsPerCpuSec: 1 },
  };
}

function result(...runs: RunResult[]): ExperimentResult {
  return { experiment: EXPERIMENTS.smoke, capacity: 20, listLengths: [10, 10], peakSized: [5, 5], jobs: JOBS, runs, wallMs: 10 };
}

/** A tick label back to its number: "0.25", "1k", "2.5k", "5e-3". */
function tickValue(label: string): number {
  return label.endsWith("k") ? Number(label.slice(0, -1)) * 1000 : Number(label);
}

/** Each plot of the page by title: its y-axis ticks, bottom to top. */
function plots(html: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const svg of html.match(/<svg[\s\S]*?<\/svg>/g) ?? []) {
    const title = /class="title">([^<]*)</.exec(svg)?.[1] ?? "";
    const ticks = [...svg.matchAll(/text-anchor="end" class="tick">([^<]*)</g)].map((m) => tickValue(m[1] as string));
    out.set(title, ticks);
  }
  return out;
}

const top = (ticks: number[] | undefined): number => {
  expect(ticks, "plot found").toBeDefined();
  return Math.max(...(ticks as number[]));
};

describe("plot axes follow the data", () => {
  it("violations of at most 3 % give a violations axis of a few %, not 100 or 200 %", () => {
    const html = htmlReport(
      result(run("a", { violationsPct: (b) => (b % 4) * 1 }), run("b", { violationsPct: (b) => (b === 7 ? 3 : 0.5) })),
    );
    const p = plots(html);
    for (const title of ["SLO violations (cluster)", "serve-cluster0: SLO violations", "serve-cluster6: SLO violations"]) {
      const t = top(p.get(title));
      expect(t, title).toBeGreaterThanOrEqual(3);
      expect(t, title).toBeLessThanOrEqual(5);
      expect(p.get(title)?.[0], title).toBe(0);
    }
  });

  it("a bin above 100 % (a backlog ending in a bin with fewer arrivals) is shown, with an axis just above it", () => {
    const p = plots(htmlReport(result(run("a", { violationsPct: (b) => (b === 1 ? 113.5 : 20) }))));
    const t = top(p.get("serve-cluster0: SLO violations"));
    expect(t).toBeGreaterThan(113.5);
    expect(t).toBeLessThan(150);
  });

  it("percentages under 100 % never get an axis above 100 %", () => {
    const p = plots(htmlReport(result(run("a", { violationsPct: (b) => (b === 3 ? 98 : 10) }))));
    expect(top(p.get("SLO violations (cluster)"))).toBe(100);
  });

  it("no violations at all: a 0 to 1 % axis", () => {
    const p = plots(htmlReport(result(run("a", { violationsPct: () => 0 }))));
    expect(p.get("SLO violations (cluster)")).toEqual([0, 0.25, 0.5, 0.75, 1]);
  });

  it("backends and load axes end just above their largest value", () => {
    const p = plots(htmlReport(result(run("a", { violationsPct: () => 1, backends: (b) => (b === 5 ? 10.76 : 3) }))));
    const t = top(p.get("serve-cluster0: backends in use"));
    expect(t).toBeGreaterThanOrEqual(10.76);
    expect(t).toBeLessThanOrEqual(13);
    // Two jobs of 10.76 at most: the cluster's peak is 21.52.
    const c = top(p.get("Backends in use (cluster)"));
    expect(c).toBeGreaterThanOrEqual(21.52);
    expect(c).toBeLessThanOrEqual(30);
    // 100 arrivals a minute: 1.67 req/s.
    const load = top(p.get("Load: arrivals per second, per job"));
    expect(load).toBeGreaterThanOrEqual(100 / 60);
    expect(load).toBeLessThanOrEqual(2.5);
  });

  it("a log p99 axis spans the data to the next 1, 2 or 5 x 10^k, not whole decades beyond it", () => {
    const p = plots(htmlReport(result(run("a", { violationsPct: () => 1, p99: (b) => (b === 2 ? 11_220 : 282) }))));
    const ticks = p.get("serve-cluster0: p99 latency") as number[];
    expect(Math.min(...ticks)).toBe(200);
    expect(top(ticks)).toBe(20_000);
  });

  it("linearAxis: the top at or above the data plus headroom, at most 1.4 times the data, ticks from 0 up to it", () => {
    for (let x = 0.001; x < 1e6; x *= 1.37) {
      const a = linearAxis(x);
      expect(a.max, String(x)).toBeGreaterThanOrEqual(x * 1.05 - 1e-9);
      expect(a.max, String(x)).toBeLessThanOrEqual(x * 1.4);
      expect(a.ticks[0]).toBe(0);
      expect(a.ticks.at(-1)).toBe(a.max);
      expect(a.ticks.length).toBeGreaterThanOrEqual(3);
      expect(a.ticks.length).toBeLessThanOrEqual(6);
      for (let i = 1; i < a.ticks.length; i++) expect(a.ticks[i] as number).toBeGreaterThan(a.ticks[i - 1] as number);
      if (x <= 100) expect(linearAxis(x, 100).max).toBeLessThanOrEqual(100);
    }
    expect(linearAxis(0).max).toBe(1);
    expect(linearAxis(Number.NaN).max).toBe(1);
  });

  it("logAxis: ends around the data, a single value widened, no data 1 to 10", () => {
    expect(logAxis(282, 11_220)).toMatchObject({ min: 200, max: 20_000 });
    expect(logAxis(1000, 1000)).toMatchObject({ min: 500, max: 2000 });
    expect(logAxis(Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY)).toEqual({ min: 1, max: 10, ticks: [1, 10] });
  });
});

describe("terms", () => {
  const html = htmlReport(result(run("a", { violationsPct: () => 1 })));

  it("every link of the page lands on an anchor, and every glossary term has exactly one", () => {
    const ids = [...html.matchAll(/ id="([^"]+)"/g)].map((m) => m[1]);
    const links = [...html.matchAll(/href="#([^"]+)"/g)].map((m) => m[1] as string);
    expect(links.length).toBeGreaterThan(20);
    for (const l of links) expect(ids, l).toContain(l);
    for (const t of GLOSSARY)
      expect(
        ids.filter((id) => id === termAnchor(t.id)),
        t.id,
      ).toHaveLength(1);
  });

  it("the tables' headers and the plots' titles link to their terms", () => {
    expect(html).toContain(`<th><a href="#term-slo-violations">SLO violations %</a></th>`);
    expect(html).toContain(`<th><a href="#term-backend-seconds">backend-hours</a></th>`);
    expect(html).toMatch(/<a href="#term-slo-violations"><text [^>]*class="title">SLO violations \(cluster\)<\/text><\/a>/);
    expect(html).toMatch(/<a href="#term-latency"><text [^>]*class="title">serve-cluster0: p99 latency<\/text><\/a>/);
    // Every header but the names links somewhere.
    const unlinked = [...html.matchAll(/<th>([^<]*)<\/th>/g)].map((m) => m[1]);
    expect(new Set(unlinked)).toEqual(new Set(["policy", "job"]));
  });

  it("each linked header is one of its term's simulator labels", () => {
    for (const m of html.matchAll(/<th><a href="#term-([^"]+)">([^<]*)<\/a><\/th>/g)) {
      const term = GLOSSARY.find((t) => t.id === m[1]);
      expect(term && "sim" in term ? term.sim.labels : [], m[1]).toContain(m[2]);
    }
  });

  it("the glossary section holds every definition; the Markdown report the simulator's", () => {
    for (const t of GLOSSARY) expect(html).toContain(t.definition.replace(/"/g, "&quot;"));
    const md = markdownReport(result(run("a", { violationsPct: () => 1 })));
    expect(md).toContain("## Terms");
    expect(md).toContain(glossaryTerm("lost-utility").definition);
    expect(md).toContain(glossaryTerm("slo-violations").definition);
    expect(md).not.toContain(glossaryTerm("peak-n").definition);
  });
});
