#!/usr/bin/env node
/**
 * `npm run sim -- <scenario>`: runs a scenario (scenarios/<name>.yaml, or any file with --scenario) with a
 * progress bar and writes report.md, report.html and results.json to .runtime/sim/<name>/ (or --out).
 * Exit status: 0 done; 2 a bad scenario or bad options (the message says which field); 1 anything else.
 */
import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { extname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { SingleBar } from "cli-progress";
import { Command, CommanderError, InvalidArgumentError } from "commander";
import { isExperimentName } from "./experiments.js";
import { fapesDescription, runFapesCli } from "./fapes-cli.js";
import { kairosDescription, runKairosCli } from "./kairos-cli.js";
import { scenarioKind } from "./kairos-scenario.js";
import { runExperimentInProcesses } from "./parallel.js";
import { defaultProfilesDir, defaultTracesDir, repoRoot } from "./paths.js";
import { isPolicyName, POLICY_NAMES, type PolicyName } from "./policies.js";
import { htmlReport, markdownReport } from "./report.js";
import { type ExperimentResult, prepareExperiment, runExperiment } from "./run-experiment.js";
import { cutSlice, type Experiment, listScenarioFiles, loadScenario, ScenarioError, scenarioFile } from "./scenario.js";
import type { RunResult } from "./simulate.js";
import { runThemisCli, themisDescription } from "./themis-cli.js";

// biome-ignore lint/style/noRestrictedGlobals: the CLI entry point is the one place in libs/sim that talks to the process (argv, streams, exit code).
const proc = process;

/** Where the CLI writes; tests pass their own. */
export interface CliIO {
  stdout: { write(text: string): unknown };
  stderr: NodeJS.WritableStream;
}

/** A comma-separated list with no empty entry and none twice ("1,,2" once ran seed 0, "," no policy at all). */
const commaList = (value: string, what: string): string[] => {
  const items = value.split(",").map((s) => s.trim());
  if (items.some((s) => s === "")) throw new InvalidArgumentError(`${what}: an empty entry in ${JSON.stringify(value)}`);
  const twice = items.find((s, i) => items.indexOf(s) !== i);
  if (twice !== undefined) throw new InvalidArgumentError(`${what}: ${twice} is listed twice`);
  return items;
};

/** Policy names as given; which are known depends on the scenario's kind, so run() checks them. */
const policyList = (value: string): string[] => commaList(value, "policies");

const seedList = (value: string): number[] => {
  const items = commaList(value, "seeds");
  const bad = items.find((s) => !/^\d+$/.test(s) || !Number.isSafeInteger(Number(s)));
  if (bad !== undefined) throw new InvalidArgumentError(`seeds are integers >= 0, comma-separated; got ${JSON.stringify(bad)}`);
  return items.map(Number);
};

const integerAtLeast = (min: number, what: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${what} is an integer >= ${min}`);
  return n;
};

function line(r: RunResult): string {
  const c = r.cluster;
  return [
    `${r.policy.padEnd(16)} seed ${r.seed}`,
    `violations ${(c.violationRate * 100).toFixed(3)} %`,
    `SLA ${(c.slaCompliance * 100).toFixed(2)} %`,
    `p99 ${c.p99Ms.toFixed(0)} ms`,
    `${(c.backendSeconds / 3600).toFixed(1)} backend-h`,
    `${r.stats.requests} requests in ${(r.stats.wallMs / 1000).toFixed(1)} s wall, ${(r.stats.cpuMs / 1000).toFixed(1)} s CPU = ${r.stats.requestsPerCpuSec.toFixed(0)} req/CPU-s simulated`,
  ].join("  ");
}

function listScenarios(io: CliIO): void {
  for (const { name, file } of listScenarioFiles()) {
    let text: string;
    try {
      const kind = scenarioKind(file);
      text =
        kind === "kairos"
          ? kairosDescription(file)
          : kind === "themis"
            ? themisDescription(file)
            : kind === "fapes"
              ? fapesDescription(file)
              : loadScenario(file).description;
    } catch (err) {
      text = `(invalid: ${err instanceof ScenarioError ? err.problems[0] : String(err)})`;
    }
    io.stdout.write(`${name.padEnd(16)} ${text}\n`);
  }
}

/** A positional argument that looks like a file is a scenario file; otherwise a name in scenarios/. */
function isPath(arg: string): boolean {
  return arg.includes("/") || [".yaml", ".yml", ".json"].includes(extname(arg));
}

export interface Options {
  scenario?: string;
  out?: string;
  policies?: string[];
  seeds?: number[];
  traces: string;
  profiles: string;
  workers: number;
  fromMinute?: number;
  minutes?: number;
  list?: boolean;
  check?: boolean;
}

export async function main(args: readonly string[], io: CliIO = { stdout: proc.stdout, stderr: proc.stderr }): Promise<number> {
  const program = new Command()
    .name("npm run sim --")
    .description(
      "Runs a simulation scenario and writes its report (Markdown, HTML with plots, JSON).\n" +
        "A scenario is a YAML or JSON file (libs/sim/README.md): a name runs scenarios/<name>.yaml, a path any file.",
    )
    .argument("[scenario]", "a scenario's name in scenarios/ (faro-36) or its file (path/to/x.yaml)")
    .option("--scenario <file>", "the scenario file (YAML or JSON)")
    .option("--out <dir>", "output folder (default: .runtime/sim/<scenario>/ under the repository root)")
    .option("--policies <a,b>", "run only these policies", policyList)
    .option("--seeds <1,2>", "run only these seeds", seedList)
    .option("--from-minute <m>", "start at this trace minute, inside the scenario's slice", integerAtLeast(0, "--from-minute"))
    .option("--minutes <n>", "replay this many trace minutes, inside the scenario's slice", integerAtLeast(1, "--minutes"))
    .option("--traces <dir>", "folder holding the trace files (those not beside the scenario)", defaultTracesDir())
    .option("--profiles <dir>", "folder holding the measured profiles (those not beside the scenario)", defaultProfilesDir())
    .option(
      "--workers <n>",
      "run this many simulations at once, each in its own process (same results, less wall time)",
      integerAtLeast(1, "workers"),
      1,
    )
    .option("--check", "validate the scenario, read its trace and profiles, print the jobs and the cluster, and exit")
    .option("--list", "list the scenarios in scenarios/ and exit")
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .showHelpAfterError("(run with --help for the options)");
  try {
    program.parse(args as string[], { from: "user" });
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    throw err;
  }
  const opts = program.opts<Options>();
  const positional = program.args[0];
  if (opts.list || (positional === undefined && opts.scenario === undefined)) {
    listScenarios(io);
    return opts.list ? 0 : 2;
  }
  if (positional !== undefined && opts.scenario !== undefined) {
    io.stderr.write(`give the scenario once: '${positional}' or --scenario ${opts.scenario}\n`);
    return 2;
  }
  try {
    return await run(positional, opts, io);
  } catch (err) {
    if (err instanceof ScenarioError) {
      io.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

async function run(positional: string | undefined, opts: Options, io: CliIO): Promise<number> {
  let experiment: Experiment;
  let named: string | undefined;
  let file: string;
  if (opts.scenario !== undefined || (positional !== undefined && isPath(positional))) {
    file = (opts.scenario ?? positional) as string;
  } else {
    const name = positional as string;
    const found = scenarioFile(name);
    if (found === undefined) {
      const known = listScenarioFiles().map((s) => s.name);
      io.stderr.write(`unknown scenario '${name}' (no scenarios/${name}.yaml); known: ${known.join(", ")}\n`);
      return 2;
    }
    file = found;
    named = name;
  }
  if (scenarioKind(file) === "kairos") return runKairosCli(file, opts, io);
  if (scenarioKind(file) === "themis") return runThemisCli(file, opts, io);
  if (scenarioKind(file) === "fapes") return runFapesCli(file, opts, io);
  experiment = loadScenario(file);
  const unknownPolicy = opts.policies?.find((p) => !isPolicyName(p));
  if (unknownPolicy !== undefined) {
    io.stderr.write(`unknown policy '${unknownPolicy}'; known: ${POLICY_NAMES.join(", ")}\n`);
    return 2;
  }
  experiment = cutSlice(experiment, {
    ...(opts.fromMinute === undefined ? {} : { fromMinute: opts.fromMinute }),
    ...(opts.minutes === undefined ? {} : { minutes: opts.minutes }),
  });
  const policies = (opts.policies as PolicyName[] | undefined) ?? experiment.policies;
  const seeds = opts.seeds ?? experiment.seeds;

  if (opts.check) {
    const p = await prepareExperiment(experiment, opts.traces, opts.profiles);
    io.stdout.write(`${JSON.stringify(experiment, null, 2)}\n`);
    io.stdout.write(
      `\nvalid: ${p.jobs.length} jobs (${p.trace.jobs.join(", ")}); ${p.trace.minutes} trace minutes = ${(p.durationMs / 60_000).toFixed(1)} simulated minutes; ` +
        `capacity ${p.capacity}; Swayam lists ${p.listLengths.join(", ")}; peak-sized ${p.peakSized.join(", ")}; ` +
        `${policies.length} policies x ${seeds.length} seeds\n`,
    );
    return 0;
  }

  // The worker processes (parallel.ts, run-worker.ts) load a scenario by its name in scenarios/, as written.
  const workerName = named !== undefined && isExperimentName(named) ? named : undefined;
  if (
    opts.workers > 1 &&
    (workerName === undefined || opts.fromMinute !== undefined || opts.minutes !== undefined || opts.profiles !== defaultProfilesDir())
  ) {
    io.stderr.write(
      "--workers > 1 runs a scenario of scenarios/ listed in EXPERIMENT_NAMES (experiments.ts), as written: " +
        "not a --scenario file, --from-minute, --minutes or --profiles (the worker processes load the scenario by name); use --workers 1\n",
    );
    return 2;
  }

  const out = resolve(opts.out ?? join(repoRoot(), ".runtime", "sim", experiment.name));
  const bar = new SingleBar({
    format: "{bar} {percentage}% | run {run}/{runs} {policy} seed {seed} | {duration_formatted}",
    hideCursor: true,
    clearOnComplete: true,
    stream: io.stderr,
  });
  const totalRuns = policies.length * seeds.length;
  let current = 0;
  bar.start(totalRuns * 1000, 0, { run: 0, runs: totalRuns, policy: "", seed: "" });
  let result: ExperimentResult;
  try {
    result =
      opts.workers > 1 && workerName !== undefined
        ? await runExperimentInProcesses(workerName, {
            tracesDir: opts.traces,
            workers: opts.workers,
            policies,
            seeds,
            hooks: {
              onRunEnd: (r) => bar.update({ run: ++current, policy: r.policy, seed: r.seed }),
              onTotalProgress: (fraction) => bar.update(Math.round(fraction * totalRuns * 1000)),
            },
          })
        : await runExperiment(experiment, {
            tracesDir: opts.traces,
            profilesDir: opts.profiles,
            policies,
            seeds,
            hooks: {
              onRunStart: (policy, seed, index) => {
                current = index;
                bar.update(index * 1000, { run: index + 1, policy, seed });
              },
              onProgress: (fraction) => bar.update(Math.round((current + fraction) * 1000)),
              onRunEnd: () => bar.update((current + 1) * 1000),
            },
          });
  } finally {
    bar.stop();
  }
  for (const r of result.runs) io.stdout.write(`${line(r)}\n`);
  mkdirSync(out, { recursive: true });
  const markdown = markdownReport(result);
  writeFileSync(join(out, "report.md"), markdown);
  writeFileSync(join(out, "report.html"), htmlReport(result));
  writeFileSync(
    join(out, "results.json"),
    JSON.stringify(result, (_k, v) => (ArrayBuffer.isView(v) ? Array.from(v as Float64Array) : v)),
  );
  io.stdout.write(`\n${markdown.split("\n## Per job")[0]}\n`);
  io.stdout.write(`wrote ${join(out, "report.md")}, report.html, results.json (${(result.wallMs / 1000).toFixed(1)} s)\n`);
  return 0;
}

/** Run when this module is the program (node libs/sim/dist/cli.js, the infergrid-sim bin), not when imported. */
function isEntryPoint(): boolean {
  const script = proc.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main(proc.argv.slice(2)).then(
    (code) => {
      proc.exitCode = code;
    },
    (err: unknown) => {
      proc.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      proc.exitCode = 1;
    },
  );
}
