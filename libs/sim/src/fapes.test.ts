import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { FapesRunStats } from "./fapes-cluster.js";
import { jobArrivals } from "./fapes-cluster.js";
import { loanMode, runFapesOne, runFapesScenario } from "./fapes-experiment.js";
import { loadFapesScenario } from "./fapes-scenario.js";
import { defaultProfilesDir, scenariosDir } from "./paths.js";
import { prepareExperiment, runOne } from "./run-experiment.js";
import { ScenarioError, scenarioFile } from "./scenario.js";

const dir = mkdtempSync(join(tmpdir(), "ig-fapes-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tiny = () => loadFapesScenario(scenarioFile("fapes-tiny") as string, defaultProfilesDir());

/** Writes a fapes scenario over smoke.yaml and returns its problems (none: []). */
function problemsOf(jobs: Record<string, unknown>, extra: Record<string, unknown> = {}): readonly string[] {
  const file = join(dir, `s${Math.random().toString(36).slice(2)}.json`);
  const data = {
    kind: "fapes",
    description: "test",
    inference: { scenario: join(scenariosDir(), "smoke.yaml") },
    jobs: {
      arrivalsPerHour: 10,
      items: { kind: "uniform", min: 1, max: 5 },
      itemMs: { kind: "deterministic", ms: 1000 },
      maxBackends: 2,
      ...jobs,
    },
    ...extra,
  };
  writeFileSync(file, JSON.stringify(data));
  try {
    loadFapesScenario(file, defaultProfilesDir());
    return [];
  } catch (err) {
    if (err instanceof ScenarioError) return err.problems;
    throw err;
  }
}

describe("fapes scenarios", () => {
  it("accepts a valid scenario and names the path of a bad field", () => {
    expect(problemsOf({})).toEqual([]);
    expect(problemsOf({ maxBackends: -1 }).join("\n")).toMatch(/^jobs\.maxBackends:/m);
    expect(problemsOf({ items: { kind: "lognormal", median: 10, sigma: 1 } }).join("\n")).toMatch(/^jobs\.items\.max:/m);
    expect(problemsOf({ speed: 2 })).toEqual(["jobs.speed: unknown field"]);
    expect(problemsOf({}, { policies: ["fapes", "greedy"] }).join("\n")).toMatch(/^policies\[1\]:/m);
    expect(problemsOf({ minBackends: 3 }).join("\n")).toMatch(/^jobs\.minBackends: 3 is above jobs\.maxBackends 2/m);
    expect(problemsOf({}, { inference: { scenario: "nowhere.yaml" } }).join("\n")).toMatch(/^inference\.scenario:/m);
    expect(problemsOf({}, { inference: { scenario: join(scenariosDir(), "smoke.yaml"), capacity: 0 } }).join("\n")).toMatch(
      /^inference\.capacity:/m,
    );
  });

  it("runs the inference on another capacity when asked", () => {
    const tight = loadFapesScenario(scenarioFile("fapes-azure-d08-28") as string, defaultProfilesDir());
    const full = loadFapesScenario(scenarioFile("fapes-azure-d08") as string, defaultProfilesDir());
    expect(tight.inference.capacity).toBe(28);
    expect(full.inference.capacity).toBe(100);
    expect(tight.inference.trace).toEqual(full.inference.trace);
  });

  it("draws the same job stream for a seed, whatever the policy", () => {
    const s = tiny();
    expect(jobArrivals(s.jobs, 1_200_000, 1)).toEqual(jobArrivals(s.jobs, 1_200_000, 1));
    expect(jobArrivals(s.jobs, 1_200_000, 1)).not.toEqual(jobArrivals(s.jobs, 1_200_000, 2));
  });
});

describe("a tiny fapes run", () => {
  it("keeps the books: nothing redone, loans never in a list, utilisation within [0, 1], dedicated never preempts", async () => {
    const s = tiny();
    const r = await runFapesScenario(s);
    expect(r.runs.map((x) => x.policy)).toEqual(s.policies);
    for (const run of r.runs) {
      const what = `${run.policy} seed ${run.seed}`;
      expect(run.loans.itemsRedone, what).toBe(0);
      // Loans and lists are checked disjoint at every loan step and every return (the run throws otherwise).
      if (run.policy !== "no-loan") expect(run.loans.invariantChecks, what).toBeGreaterThan(0);
      expect(run.usefulUtilisation, what).toBeLessThanOrEqual(run.busyUtilisation + 1e-9);
      for (const u of [run.busyUtilisation, run.usefulUtilisation, run.allocatedUtilisation]) {
        expect(u, what).toBeGreaterThanOrEqual(0);
        expect(u, what).toBeLessThanOrEqual(1);
      }
      for (const j of run.loans.jobs) {
        // Done with every item, or not done (waiting or running) with some left.
        if (j.doneAtMs !== undefined) expect(j.itemsDone, `${what} ${j.name}`).toBe(j.items);
        else expect(j.itemsDone, `${what} ${j.name}`).toBeLessThan(j.items);
        if (j.startedAtMs === undefined) expect(j.itemsDone).toBe(0);
      }
    }
    const by = (p: string) => r.runs.find((x) => x.policy === p);
    expect(by("dedicated")?.loans.preemptions).toBe(0);
    expect(by("no-loan")?.loans.itemsDone).toBe(0);
    // Some loan is taken back here, so the grace-period rule runs.
    expect(r.runs.some((x) => x.loans.reclaimed > 0)).toBe(true);
    // The policies that lend past the plan do run jobs here (infergrid-in-use keeps what the frontends use: on
    // smoke's two busy services nothing is left over).
    for (const p of ["one-way-random", "fapes", "infergrid"]) expect(by(p)?.loans.itemsDone, p).toBeGreaterThan(0);
    // Harvesting runs items in warm backends' idle time, stops them for inference's requests, gives some up.
    const harvest = by("infergrid-harvest")?.loans;
    expect(harvest?.harvestItemsDone).toBeGreaterThan(0);
    expect(harvest?.harvestStops).toBeGreaterThan(0);
    expect(harvest?.itemsDone).toBeGreaterThan(by("infergrid")?.loans.itemsDone ?? 0);
    for (const p of s.policies.filter((x) => x !== "infergrid-harvest")) expect(by(p)?.loans.harvestStops, p).toBe(0);
  });

  it("a harvest policy needs the scenario's harvest settings, named by path", () => {
    expect(problemsOf({}, { policies: ["infergrid-harvest"] }).join("\n")).toMatch(/^jobs\.harvest: required by policy/m);
    expect(problemsOf({ harvest: { pauseMs: 1 } }, { policies: ["infergrid-harvest"] })).toEqual([]);
    expect(problemsOf({ harvest: { pauseMs: -1 } }).join("\n")).toMatch(/^jobs\.harvest\.pauseMs:/m);
    expect(problemsOf({ harvest: { pauseMs: 1, abandonAfterMs: 0 } }).join("\n")).toMatch(/^jobs\.harvest\.abandonAfterMs:/m);
  });

  it("a stop costs inference what the scenario says: a second's stop makes requests late", async () => {
    const s = tiny();
    const p = await prepareExperiment(s.inference);
    const jobs = jobArrivals(s.jobs, p.durationMs, 1);
    const run = (pauseMs: number) =>
      runFapesOne(
        p,
        s,
        jobs,
        loanMode("infergrid-harvest", p.capacity, { ...s.jobs, harvest: { pauseMs, resumeAfterMs: 50, abandonAfterMs: 15_000 } }),
        1,
      );
    const free = run(0);
    // A second's stop is beyond the SLO (720 ms): each stopped request is late.
    const costly = run(1_000);
    const stats = (r: ReturnType<typeof run>) => r.loans as FapesRunStats;
    expect(stats(free).harvestStops).toBeGreaterThan(0);
    expect(stats(costly).itemsRedone).toBe(0);
    expect(costly.result.cluster.violations).toBeGreaterThan(free.result.cluster.violations);
  });

  it("without jobs, a run is today's infergrid run exactly", async () => {
    const s = tiny();
    const p = await prepareExperiment({ ...s.inference, trace: { ...s.inference.trace, minutes: 8 } });
    const today = runOne(p, "infergrid", 1);
    const strip = (x: typeof today) =>
      JSON.stringify({
        jobs: x.jobs,
        cluster: x.cluster,
        series: x.series.map((q) => Object.values(q).map((a) => Array.from(a as Float64Array))),
      });
    for (const mode of [
      { kind: "observe" } as const,
      { kind: "loan", need: "plan-in-use-headroom", strategy: "fewest-preemptions" } as const,
      // The floors shape the lists only while jobs borrow: with none, the plan alone, as today.
      { kind: "loan", need: "floors", strategy: "fewest-preemptions", control: true, holdMs: 300_000 } as const,
    ]) {
      const { result } = runFapesOne(p, s, [], mode, 1);
      expect(strip(result), mode.kind === "loan" ? mode.need : mode.kind).toBe(strip(today));
    }
  });
});
