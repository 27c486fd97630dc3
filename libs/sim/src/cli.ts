#!/usr/bin/env node
/**
 * `npm run sim -- <experiment>`: runs a named experiment (experiments.ts) with a progress bar and writes
 * report.md, report.html and results.json to .runtime/sim/<experiment>/ (or --out).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { SingleBar } from "cli-progress";
import { Command, InvalidArgumentError } from "commander";
import { EXPERIMENTS, type ExperimentName, isExperimentName } from "./experiments.js";
import { runExperimentInProcesses } from "./parallel.js";
import { isPolicyName, POLICY_NAMES, type PolicyName } from "./policies.js";
import { htmlReport, markdownReport } from "./report.js";
import { defaultTracesDir, repoRoot, runExperiment } from "./run-experiment.js";
import type { RunResult } from "./simulate.js";

// biome-ignore lint/style/noRestrictedGlobals: the CLI entry point is the one place in libs/sim that talks to the process (argv, streams, exit code).
const proc = process;

const policyList = (value: string): PolicyName[] => {
  const names = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const n of names) if (!isPolicyName(n)) throw new InvalidArgumentError(`unknown policy '${n}'; known: ${POLICY_NAMES.join(", ")}`);
  return names as PolicyName[];
};

const seedList = (value: string): number[] => {
  const seeds = value.split(",").map((s) => Number(s.trim()));
  if (seeds.length === 0 || seeds.some((s) => !Number.isInteger(s) || s < 0))
    throw new InvalidArgumentError("seeds are integers >= 0, comma-separated");
  return seeds;
};

const workerCount = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("workers is an integer >= 1");
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

async function main(): Promise<number> {
  const program = new Command()
    .name("npm run sim --")
    .description(
      `Runs a named simulation experiment and writes its report (Markdown, HTML with plots, JSON).\nExperiments: ${Object.keys(EXPERIMENTS).join(", ")}`,
    )
    .argument("[experiment]", "experiment name")
    .option("--out <dir>", "output folder (default: .runtime/sim/<experiment>/ under the repository root)")
    .option("--policies <a,b>", "run only these policies", policyList)
    .option("--seeds <1,2>", "run only these seeds", seedList)
    .option("--traces <dir>", "folder holding the trace files", defaultTracesDir())
    .option("--workers <n>", "run this many simulations at once, each in its own process (same results, less wall time)", workerCount, 1)
    .option("--list", "list the experiments and exit")
    .showHelpAfterError("(run with --help for the options)");
  program.parse(proc.argv);
  const opts = program.opts<{ out?: string; policies?: PolicyName[]; seeds?: number[]; traces: string; workers: number; list?: boolean }>();
  const name = program.args[0];
  if (opts.list || name === undefined) {
    for (const e of Object.values(EXPERIMENTS)) proc.stdout.write(`${e.name.padEnd(14)} ${e.description}\n`);
    return name === undefined && !opts.list ? 2 : 0;
  }
  if (!isExperimentName(name)) {
    proc.stderr.write(`unknown experiment '${name}'; known: ${Object.keys(EXPERIMENTS).join(", ")}\n`);
    return 2;
  }
  const experiment = EXPERIMENTS[name as ExperimentName];
  const out = resolve(opts.out ?? join(repoRoot(), ".runtime", "sim", experiment.name));
  const bar = new SingleBar({
    format: "{bar} {percentage}% | run {run}/{runs} {policy} seed {seed} | {duration_formatted}",
    hideCursor: true,
    clearOnComplete: true,
    stream: proc.stderr,
  });
  const policies = opts.policies ?? experiment.policies;
  const seeds = opts.seeds ?? experiment.seeds;
  const totalRuns = policies.length * seeds.length;
  let current = 0;
  bar.start(totalRuns * 1000, 0, { run: 0, runs: totalRuns, policy: "", seed: "" });
  const result =
    opts.workers > 1
      ? await runExperimentInProcesses(name as ExperimentName, {
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
  bar.stop();
  for (const r of result.runs) proc.stdout.write(`${line(r)}\n`);
  mkdirSync(out, { recursive: true });
  const markdown = markdownReport(result);
  writeFileSync(join(out, "report.md"), markdown);
  writeFileSync(join(out, "report.html"), htmlReport(result));
  writeFileSync(
    join(out, "results.json"),
    JSON.stringify(result, (_k, v) => (ArrayBuffer.isView(v) ? Array.from(v as Float64Array) : v)),
  );
  proc.stdout.write(`\n${markdown.split("\n## Per job")[0]}\n`);
  proc.stdout.write(`wrote ${join(out, "report.md")}, report.html, results.json (${(result.wallMs / 1000).toFixed(1)} s)\n`);
  return 0;
}

main().then(
  (code) => {
    proc.exitCode = code;
  },
  (err: unknown) => {
    proc.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    proc.exitCode = 1;
  },
);
