import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execPath } from "node:process";
import { Writable } from "node:stream";
import { OBJECTIVES, SLOW_LOOP_DEFAULTS } from "@infergrid/allocation";
import { lognormalQuantile } from "@infergrid/core";
import { DEFAULT_FORECASTER_SPEC } from "@infergrid/forecast";
import { PARK_DEFAULTS, PRUNE_BUDGET_DEFAULTS } from "@infergrid/swayam";
import { afterAll, describe, expect, it } from "vitest";
import { type CliIO, main } from "./cli.js";
import { DEFAULT_SLOW_LOOP, EXPERIMENT_NAMES, EXPERIMENTS, PAPER_SWAYAM_TIMING, RESNET34 } from "./experiments.js";
import { loadFapesScenario } from "./fapes-scenario.js";
import { loadKairosScenario, scenarioKind } from "./kairos-scenario.js";
import { defaultProfilesDir, defaultTracesDir, repoRoot } from "./paths.js";
import { POLICY_NAMES } from "./policies.js";
import { configFor, prepareExperiment } from "./run-experiment.js";
import { cutSlice, type Experiment, listScenarioFiles, loadScenario, parseScenario, ScenarioError, scenarioFromData } from "./scenario.js";
import { DEFAULT_SIM_PREDICTOR } from "./signals.js";
import { loadThemisScenario } from "./themis-scenario.js";

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "ig-scenario-"));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const MINIMAL = `
description: a minimal scenario
trace: { file: faro-10jobs-6h-per-minute.csv, minutes: 20 }
jobDefaults:
  profile: { kind: lognormal, shape: 0.3602, loc: 72.86, scale: 86.69 }
  slo: { latencyMs: 720 }
capacity: 16
policies: [infergrid, swayam]
seeds: [1]
`;

/** The problems a scenario's text has, one line each (empty when it is valid). */
function problems(text: string): string[] {
  try {
    parseScenario(text, { name: "test" });
    return [];
  } catch (err) {
    if (err instanceof ScenarioError) return [...err.problems];
    throw err;
  }
}

/** A SimConfig as JSON: policies hold closures, compared by name. */
function json(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (_k, v) =>
      typeof v === "function" ? `fn:${(v as { name: string }).name}` : ArrayBuffer.isView(v) ? Array.from(v as Float64Array) : v,
    ),
  );
}

describe("scenario schema", () => {
  it("fills every default once, from the papers' and the allocator's values", () => {
    const e = parseScenario(MINIMAL, { name: "minimal" });
    expect(e.name).toBe("minimal");
    expect(e.trace).toEqual({
      file: "faro-10jobs-6h-per-minute.csv",
      fromMinute: 0,
      minutes: 20,
      compression: 1,
      rateScale: 1,
      arrivals: "poisson",
    });
    expect(e.jobDefaults).toEqual({
      rateScale: 1,
      profile: { kind: "lognormal", ...RESNET34 },
      slo: { latencyMs: 720, percentile: 99, burstFactor: 2 },
    });
    expect(e.perJob).toEqual({});
    expect(e.startAtOnePerJob).toBe(false);
    expect(e.cluster).toEqual({
      frontends: 8,
      autoscaleMs: 10_000,
      hopMs: 0.5,
      coldStartMs: 10_000,
      idleTimeoutMs: 300_000,
      dropAfterMs: 10_000,
      retryGapMs: 5,
      binMs: 60_000,
    });
    expect(e.swayam).toEqual({ listLengths: "peak-sized", minWarm: 1, bootstrap: 1, timing: PAPER_SWAYAM_TIMING });
    expect(e.policyOptions.park).toEqual({ windowMs: PARK_DEFAULTS.windowMs });
    expect(e.policyOptions.slowLoop).toEqual({
      objective: SLOW_LOOP_DEFAULTS.objective,
      solvePeriodMs: SLOW_LOOP_DEFAULTS.solvePeriodMs,
      reactiveTicks: SLOW_LOOP_DEFAULTS.reactiveTicks,
      tickMs: SLOW_LOOP_DEFAULTS.reactiveTickMs,
      plan: SLOW_LOOP_DEFAULTS.planQuantile,
      coldStartMs: 10_000,
      predictor: { ...DEFAULT_SIM_PREDICTOR, forecaster: DEFAULT_FORECASTER_SPEC },
    });
    expect(e.metrics).toEqual({ p99: "bucketed", binBy: "completion" });
  });

  it("takes the defaults that follow other fields from them: bins from the compression, the planned cold start from the cluster's", () => {
    const e = parseScenario(`${MINIMAL}cluster: { coldStartMs: 1000 }\n`.replace("minutes: 20", "minutes: 20, compression: 10"), {
      name: "x",
    });
    expect(e.cluster.binMs).toBe(6000);
    expect(e.policyOptions.slowLoop.coldStartMs).toBe(1000);
  });

  it("keeps a job's settings as its own property whatever its name", () => {
    const e = parseScenario(`${MINIMAL}jobs: [__proto__, { name: constructor, rateScale: 2 }]\n`, { name: "x" });
    expect(Object.keys(e.perJob)).toEqual(["__proto__", "constructor"]);
    expect(Object.getPrototypeOf(e.perJob)).toBe(Object.prototype);
    expect(Object.values(e.perJob).map((j) => j.rateScale)).toEqual([1, 2]);
  });

  it("gives each job listed by name its own settings over jobDefaults, field by field for the SLO", () => {
    const e = parseScenario(
      `${MINIMAL}jobs:
  - serve-cluster0
  - { name: serve-cluster6, rateScale: 0.5, slo: { latencyMs: 500 }, profile: { kind: deterministic, ms: 100 } }
`,
      { name: "x" },
    );
    expect(e.trace.jobs).toEqual(["serve-cluster0", "serve-cluster6"]);
    expect(e.perJob["serve-cluster0"]).toEqual(e.jobDefaults);
    expect(e.perJob["serve-cluster6"]).toEqual({
      rateScale: 0.5,
      profile: { kind: "deterministic", ms: 100 },
      slo: { latencyMs: 500, percentile: 99, burstFactor: 2 },
    });
  });

  it("refuses sizes the simulator cannot hold (they ran out of memory or hung), naming the field", () => {
    expect(problems(MINIMAL.replace("capacity: 16", "capacity: 5000"))).toEqual(["capacity: expected an integer in [1, 4096]"]);
    expect(problems(`${MINIMAL}cluster: { frontends: 100000000 }\n`)).toEqual(["cluster.frontends: expected an integer in [1, 1024]"]);
    expect(problems(`${MINIMAL}cluster: { retryGapMs: 0.000001 }\n`)).toEqual([
      "cluster.retryGapMs: dropAfterMs / retryGapMs = 10000000000 retries of one request; at most 10000",
    ]);
    expect(problems(`${MINIMAL}swayam: { listLengths: [5000, 1] }\n`)[0]).toMatch(/^swayam\.listLengths/);
    expect(problems(MINIMAL.replace("capacity: 16", "capacity: 4096"))).toEqual([]);
  });

  it("reads JSON as well as YAML", () => {
    const data = {
      description: "a minimal scenario",
      trace: { file: "faro-10jobs-6h-per-minute.csv", minutes: 20 },
      jobDefaults: { profile: { kind: "lognormal", shape: 0.3602, loc: 72.86, scale: 86.69 }, slo: { latencyMs: 720 } },
      capacity: 16,
      policies: ["infergrid", "swayam"],
      seeds: [1],
    };
    expect(parseScenario(JSON.stringify(data, null, 2), { name: "x" })).toEqual(parseScenario(MINIMAL, { name: "x" }));
  });

  it("names the bad field by its path", () => {
    const bad = `${MINIMAL}jobs:
  - serve-cluster0
  - serve-cluster1
  - { name: serve-cluster6, slo: { latencyMs: -5 } }
`;
    expect(problems(bad)).toEqual(["jobs[2].slo.latencyMs: expected a positive number"]);
    expect(problems(MINIMAL.replace("latencyMs: 720", "latencyMs: fast"))).toEqual([
      "jobDefaults.slo.latencyMs: expected a positive number",
    ]);
    expect(problems(MINIMAL.replace("capacity: 16", "capacity: { peakSized: 0 }"))).toEqual([
      "capacity.peakSized: expected a positive number",
    ]);
    expect(problems(MINIMAL.replace("capacity: 16", "capacity: lots"))).toEqual([
      "capacity: expected a number of backends or { peakSized: factor }",
    ]);
    expect(problems(MINIMAL.replace("seeds: [1]", "seeds: [1, 1.5]"))).toEqual(["seeds[1]: expected an integer >= 0"]);
    expect(problems(MINIMAL.replace("slo: { latencyMs: 720 }", "slo: { latencyMs: 720, percentile: 0.99 }"))).toEqual([
      "jobDefaults.slo.percentile: expected a percent in [50, 100) (99 for p99)",
    ]);
  });

  it("names unknown fields, unknown policies, bad profile kinds and missing fields", () => {
    expect(problems(`${MINIMAL}clusterr: { frontends: 3 }\n`)).toEqual(["clusterr: unknown field"]);
    expect(problems(`${MINIMAL}cluster: { frontend: 3 }\n`)).toEqual(["cluster.frontend: unknown field"]);
    expect(problems(MINIMAL.replace("[infergrid, swayam]", "[infergrid, swayarn]"))).toEqual([
      `policies[1]: unknown policy "swayarn"; known: ${POLICY_NAMES.join(", ")}`,
    ]);
    expect(problems(MINIMAL.replace("kind: lognormal", "kind: gamma"))).toEqual([
      "jobDefaults.profile.kind: expected kind: lognormal, exponential, deterministic or measured",
    ]);
    expect(problems(MINIMAL.replace("capacity: 16\n", ""))).toEqual(["capacity: required"]);
    expect(problems(MINIMAL.replace("slo: { latencyMs: 720 }", "slo: {}"))).toEqual([
      "jobDefaults.slo.latencyMs: required when the jobs are not listed by name",
    ]);
    expect(problems(MINIMAL.replace("[infergrid, swayam]", "[swayam, swayam]"))).toEqual(["policies[1]: swayam is listed twice"]);
    expect(problems(`${MINIMAL}jobs: [a, b]\nswayam: { listLengths: [1, 2, 3] }\n`)).toEqual(["swayam.listLengths: 3 entries for 2 jobs"]);
  });

  it("accepts the metrics' definitions (Faro's: exact p99, binned by arrival, a queue cap) and rejects unknown ones", () => {
    expect(problems(`${MINIMAL}metrics: { p99: exact, binBy: arrival, queueCap: 50 }\n`)).toEqual([]);
    expect(problems(`${MINIMAL}metrics: { p99: median }\n`)).toEqual(['metrics.p99: expected "bucketed" or "exact"']);
    expect(problems(`${MINIMAL}metrics: { binBy: start }\n`)).toEqual(['metrics.binBy: expected "completion" or "arrival"']);
    expect(problems(`${MINIMAL}metrics: { queueCap: 0 }\n`)[0]).toMatch(/^metrics\.queueCap: /);
    expect(problems(`${MINIMAL}metrics: { p99: bucketed, binBy: completion, queueCap: none }\n`)).toEqual([]);
  });

  it("accepts how a minute's count becomes arrivals (Poisson or the exact count) and rejects anything else", () => {
    expect(problems(MINIMAL.replace("minutes: 20 }", "minutes: 20, arrivals: exact }"))).toEqual([]);
    expect(problems(MINIMAL.replace("minutes: 20 }", "minutes: 20, arrivals: poisson }"))).toEqual([]);
    expect(problems(MINIMAL.replace("minutes: 20 }", "minutes: 20, arrivals: uniform }"))).toEqual([
      'trace.arrivals: expected "poisson" or "exact"',
    ]);
  });

  it("reports YAML syntax errors with their line", () => {
    expect(problems("description: x\ntrace: { file: a.csv\n")).toEqual([
      "Flow map in block collection must be sufficiently indented and end with a } at line 3, column 1",
    ]);
    expect(problems("description: x\ndescription: y\n")).toEqual(["Map keys must be unique at line 2, column 1"]);
  });

  it("cuts the slice only inside the scenario's own", () => {
    const e = parseScenario(MINIMAL.replace("minutes: 20", "fromMinute: 100, minutes: 50"), { name: "x" });
    expect(cutSlice(e, { minutes: 10 }).trace).toMatchObject({ fromMinute: 100, minutes: 10 });
    expect(cutSlice(e, { fromMinute: 120 }).trace).toMatchObject({ fromMinute: 120, minutes: 30 });
    expect(() => cutSlice(e, { fromMinute: 150 })).toThrow(/outside the scenario's slice \[100, 150\)/);
    expect(() => cutSlice(e, { fromMinute: 140, minutes: 11 })).toThrow(/reach past the scenario's slice/);
    expect(cutSlice(e, {})).toBe(e);
  });
});

describe("the scenarios in scenarios/", () => {
  it("every file validates, and every name the code uses has one", () => {
    const files = listScenarioFiles();
    expect(files.map((f) => f.name)).toEqual(expect.arrayContaining([...EXPERIMENT_NAMES]));
    for (const { file } of files) {
      if (scenarioKind(file) === "kairos") expect(() => loadKairosScenario(file, defaultProfilesDir()), file).not.toThrow();
      else if (scenarioKind(file) === "themis")
        expect(() => loadThemisScenario(file, defaultProfilesDir(), defaultTracesDir()), file).not.toThrow();
      else if (scenarioKind(file) === "fapes") expect(() => loadFapesScenario(file, defaultProfilesDir()), file).not.toThrow();
      else expect(() => loadScenario(file), file).not.toThrow();
    }
    for (const name of EXPERIMENT_NAMES) expect(EXPERIMENTS[name].name).toBe(name);
  });

  it("every simulation scenario's slice lies inside its trace and its size inside the simulator's limits", async () => {
    const files = listScenarioFiles().filter(({ file }) => scenarioKind(file) === undefined);
    expect(files.length).toBeGreaterThan(5);
    for (const { file } of files) await expect(prepareExperiment(loadScenario(file)), file).resolves.toBeDefined();
  });

  it("azure-d08-d09 replays days 8 and 9 only (minutes 0-2879), never the hold-out", () => {
    const e = EXPERIMENTS["azure-d08-d09"];
    expect(e.trace.file).toBe("azure-functions-2019-12fn-days8-12-per-minute.csv");
    expect(e.trace.fromMinute).toBe(0);
    expect(e.trace.minutes).toBe(2880);
  });

  it("smoke's configuration is the one its TypeScript definition gave (experiments.ts before scenario files)", async () => {
    const p = await prepareExperiment(EXPERIMENTS.smoke);
    const config = configFor(p, "infergrid", 1);
    expect(json(config.jobs)).toEqual(
      ["serve-cluster0", "serve-cluster6"].map((name) => ({
        name,
        serviceTime: { kind: "lognormal", dist: RESNET34 },
        sloMs: 720,
        slMin: 0.99,
        burstFactor: 2,
      })),
    );
    expect(config).toMatchObject({
      capacity: 16,
      durationMs: 20 * 60_000,
      hopMs: 0.5,
      coldStartMs: 10_000,
      idleTimeoutMs: 60_000,
      dropAfterMs: 10_000,
      binMs: 60_000,
    });
    const { allocate: _a, ...swayam } = config.swayam;
    expect(json(swayam)).toEqual(
      json({
        frontends: 3,
        autoscaleMs: 10_000,
        retryGapMs: 5,
        ...PAPER_SWAYAM_TIMING,
        listLengths: [10, 6],
        minWarm: [1, 1],
        bootstrap: [1, 1],
        prune: true,
        pruneBudget: PRUNE_BUDGET_DEFAULTS,
        learnedHeadroom: true,
        park: { windowMs: PARK_DEFAULTS.windowMs },
        slowLoop: { ...DEFAULT_SLOW_LOOP, controller: { coldStartMs: 10_000, ...DEFAULT_SLOW_LOOP.controller } },
      }),
    );
    expect(config.swayam.slowLoop?.controller.objective).toEqual(OBJECTIVES[SLOW_LOOP_DEFAULTS.objective]);
  });

  it("a scenario equal to a named one, spelled differently (JSON, defaults left out), gives the same configuration for every policy", async () => {
    const same = scenarioFromData(
      {
        description: "smoke, spelled out",
        trace: { file: "faro-10jobs-6h-per-minute.csv", minutes: 20 },
        jobs: ["serve-cluster0", { name: "serve-cluster6", slo: { percentile: 99 } }],
        jobDefaults: { profile: { kind: "lognormal", shape: 0.3602, loc: 72.86, scale: 86.69 }, slo: { latencyMs: 720 } },
        capacity: { peakSized: 2 },
        cluster: { frontends: 3, idleTimeoutMs: 60_000 },
        policies: EXPERIMENTS.smoke.policies,
        seeds: [1],
      },
      { name: "smoke-json" },
    );
    const [a, b] = await Promise.all([prepareExperiment(EXPERIMENTS.smoke), prepareExperiment(same)]);
    for (const policy of EXPERIMENTS.smoke.policies) expect(json(configFor(b, policy, 1)), policy).toEqual(json(configFor(a, policy, 1)));
  });
});

describe("preparing a scenario", () => {
  /** A tiny per-minute trace: "late" is quiet for the first 10 minutes and then the busiest by far. */
  function tinyTrace(dir: string): void {
    const rows = ["minute,steady,late,small"];
    for (let m = 0; m < 20; m++) rows.push(`${m},30,${m < 10 ? 0 : 600},${m < 10 ? 5 : 1}`);
    writeFileSync(join(dir, "tiny.csv"), `${rows.join("\n")}\n`);
  }

  function scenario(dir: string, extra: string): Experiment {
    const text = `description: tiny
trace: { file: tiny.csv, minutes: 10 }
jobDefaults: { profile: { kind: deterministic, ms: 100 }, slo: { latencyMs: 500 } }
capacity: 10
policies: [swayam]
seeds: [1]
${extra}`;
    writeFileSync(join(dir, "tiny.yaml"), text);
    return loadScenario(join(dir, "tiny.yaml"));
  }

  it("finds the trace beside the scenario and ranks the busiest over the slice only", async () => {
    const dir = tempDir();
    tinyTrace(dir);
    const p = await prepareExperiment(scenario(dir, "jobs: { busiest: 2 }\n"), "/nonexistent");
    // Over the whole file "late" is the busiest; over minutes 0-9 it has no request at all.
    expect(p.trace.jobs).toEqual(["steady", "small"]);
    expect(p.trace.minutes).toBe(10);
  });

  it("applies a job's own rate scale on top of the trace's", async () => {
    const dir = tempDir();
    tinyTrace(dir);
    const e = scenario(dir, "jobs: [steady, { name: small, rateScale: 4 }]\n");
    const p = await prepareExperiment({ ...e, trace: { ...e.trace, rateScale: 0.5 } }, "/nonexistent");
    expect(p.policyContext.peakRatePerSec).toEqual([(30 * 0.5) / 60, (5 * 4 * 0.5) / 60]);
  });

  it("caps each per-job autoscaler at its job's share, or at the whole cluster with perJobMaxReplicas: cluster", async () => {
    const dir = tempDir();
    tinyTrace(dir);
    const shared = await prepareExperiment(scenario(dir, "jobs: [steady, small]\n"), "/nonexistent");
    expect(shared.experiment.perJobMaxReplicas).toBe("share");
    const caps = shared.policyContext.maxReplicas ?? [];
    expect(caps.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(10);
    expect(Math.max(...caps)).toBeLessThan(10);
    const whole = await prepareExperiment(scenario(dir, "jobs: [steady, small]\nperJobMaxReplicas: cluster\n"), "/nonexistent");
    expect(whole.policyContext.maxReplicas).toEqual([10, 10]);
    expect(problems(`${MINIMAL}perJobMaxReplicas: all\n`)).toEqual(['perJobMaxReplicas: expected "share" or "cluster"']);
  });

  it("says which job is not in the trace and which file is missing", async () => {
    const dir = tempDir();
    tinyTrace(dir);
    await expect(prepareExperiment(scenario(dir, "jobs: [steady, nope]\n"), "/nonexistent")).rejects.toThrow(
      /jobs\[1\]: no column "nope" in tiny\.csv/,
    );
    const e = scenario(dir, "");
    await expect(prepareExperiment({ ...e, trace: { ...e.trace, file: "missing.csv" } }, "/nonexistent")).rejects.toThrow(
      /trace\.file: trace not found: missing\.csv/,
    );
  });

  it("refuses a slice past the trace's end and runs too large to hold, naming the field (no longer cut short, out of memory or hung)", async () => {
    const dir = tempDir();
    tinyTrace(dir);
    const e = scenario(dir, "");
    const refused = async (x: Experiment) => {
      try {
        await prepareExperiment(x, "/nonexistent");
      } catch (err) {
        if (err instanceof ScenarioError) return err.problems.join("\n");
        throw err;
      }
      return "accepted";
    };
    expect(await refused({ ...e, trace: { ...e.trace, minutes: 30 } })).toMatch(
      /^trace\.minutes: 30 minutes from minute 0 .*reach past the end of tiny\.csv \(20 minutes\)/,
    );
    expect(await refused({ ...e, trace: { ...e.trace, fromMinute: 15, minutes: 5 } })).toBe("accepted");
    expect(await refused({ ...e, capacity: { peakSized: 1e308 } })).toMatch(
      /^capacity\.peakSized: 1e\+308 x \d+ peak-sized replicas = .* backends; at most 4096/,
    );
    expect(await refused({ ...e, trace: { ...e.trace, rateScale: 1e12 } })).toMatch(
      /^trace\.rateScale: the slice holds about .* requests .*; at most 100,000,000/,
    );
    expect(await refused({ ...e, cluster: { ...e.cluster, binMs: 1e-6 } })).toMatch(/^cluster\.binMs: 0\.000001 ms gives .* bins/);
    expect(await refused({ ...e, cluster: { ...e.cluster, autoscaleMs: 1e-6 } })).toMatch(
      /^cluster\.autoscaleMs: .* ticks over the run; at most 10,000,000/,
    );
  });

  it("fits a measured profile from a JSON entry (p50 and p99) or a CSV row", async () => {
    const dir = tempDir();
    tinyTrace(dir);
    writeFileSync(join(dir, "lat.json"), JSON.stringify({ models: { m: { cpu: { "1c_b1": { p50: 100, p99: 200, mean: 110 } } } } }));
    writeFileSync(join(dir, "lat.csv"), "type,model,batch,mean_ms,p50_ms,p99_ms\na,x,10,2.5,2,4\na,x,20,5,4,9\n");
    const e = scenario(
      dir,
      `jobs:
  - { name: steady, profile: { kind: measured, file: lat.json, entry: models.m.cpu.1c_b1 } }
  - { name: small, profile: { kind: measured, file: lat.csv, entry: { type: a, batch: 20 } } }
  - { name: late, profile: { kind: measured, file: lat.csv, entry: { type: a, batch: 10 }, fit: p50 } }
`,
    );
    const p = await prepareExperiment(e, "/nonexistent", "/nonexistent");
    const [steady, small, late] = p.jobs.map((j) => j.serviceTime);
    if (steady?.kind !== "lognormal" || small?.kind !== "lognormal") throw new Error("expected lognormal fits");
    expect(steady.dist.scale).toBe(100);
    expect(lognormalQuantile(steady.dist, 0.99)).toBeCloseTo(200, 6);
    expect(lognormalQuantile(small.dist, 0.5)).toBeCloseTo(4, 9);
    expect(lognormalQuantile(small.dist, 0.99)).toBeCloseTo(9, 6);
    expect(late).toEqual({ kind: "deterministic", ms: 2 });
    await expect(
      prepareExperiment(
        {
          ...e,
          perJob: {
            ...e.perJob,
            steady: {
              ...(e.perJob.steady as Experiment["perJob"][string]),
              profile: { kind: "measured", file: "lat.json", entry: "models.m.gpu", fit: "lognormal" },
            },
          },
        },
        "/x",
        "/x",
      ),
    ).rejects.toThrow(/no entry models\.m\.gpu/);
  });
});

describe("the CLI on a bad scenario", () => {
  const capture = () => {
    let out = "";
    let err = "";
    const stderr = new Writable({
      write(chunk: Buffer | string, _encoding, done) {
        err += chunk.toString();
        done();
      },
    });
    const io: CliIO = { stdout: { write: (s: string) => (out += s) }, stderr };
    return { io, text: () => ({ out, err }) };
  };

  it("exits 2 with the field's path and no stack trace", async () => {
    const dir = tempDir();
    const file = join(dir, "bad.yaml");
    writeFileSync(file, MINIMAL.replace("latencyMs: 720", "latencyMs: -1"));
    const c = capture();
    expect(await main(["--scenario", file], c.io)).toBe(2);
    expect(c.text().err).toContain("jobDefaults.slo.latencyMs: expected a positive number");
    expect(c.text().err).not.toMatch(/\n\s+at /);
  });

  it("exits 2 on an unknown scenario name, a cut outside the slice, and a bad option", async () => {
    for (const args of [["no-such-scenario"], ["smoke", "--from-minute", "30"], ["smoke", "--workers", "zero"]]) {
      const c = capture();
      expect(await main(args, c.io), args.join(" ")).toBe(2);
      expect(c.text().err.length).toBeGreaterThan(0);
    }
  });

  it('exits 2 on a seed or policy list with an empty entry or one listed twice (1,,2 ran seed 0; "," ran no policy)', async () => {
    const cases: [string[], RegExp][] = [
      [["smoke", "--seeds", "1,,2"], /seeds: an empty entry in "1,,2"/],
      [["smoke", "--seeds", "1,1"], /seeds: 1 is listed twice/],
      [["smoke", "--seeds", "1,0x10"], /got "0x10"/],
      [["smoke", "--policies", ","], /policies: an empty entry/],
      [["smoke", "--policies", "swayam,swayam"], /policies: swayam is listed twice/],
    ];
    for (const [args, message] of cases) {
      const c = capture();
      expect(await main([...args, "--check"], c.io), args.join(" ")).toBe(2);
      expect(c.text().err, args.join(" ")).toMatch(message);
    }
  });

  it("lists the scenarios with their descriptions", async () => {
    const c = capture();
    expect(await main(["--list"], c.io)).toBe(0);
    for (const name of EXPERIMENT_NAMES) expect(c.text().out).toMatch(new RegExp(`^${name} +\\S`, "m"));
  });

  it("as a process (the built CLI): exit status 2 and the message on stderr", () => {
    const cli = join(repoRoot(), "libs", "sim", "dist", "cli.js");
    if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npx tsc -b)`);
    const file = join(tempDir(), "bad.json");
    writeFileSync(file, JSON.stringify({ description: "no trace, no capacity", trace: "smoke", policies: ["swayam"], seeds: [1] }));
    const r = spawnSync(execPath, [cli, "--scenario", file], { encoding: "utf8" });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("trace: expected an object, got string");
    expect(r.stderr).toContain("capacity: required");
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
