/**
 * The CLI's path for `kind: fapes` scenarios: validate, run every loan policy and seed with a progress bar, print
 * the table and write report.md and results.json to .runtime/sim/<name>/ (or --out).
 */
import { join, resolve } from "node:path";
import type { CliIO, Options } from "./cli.js";
import { type FapesScenarioResult, fapesMarkdown, runFapesScenario } from "./fapes-experiment.js";
import { FAPES_POLICIES, type FapesPolicy, loadFapesScenario } from "./fapes-scenario.js";
import { defaultProfilesDir, repoRoot } from "./paths.js";
import { asScenarioError, startRunBar, writeRunOutput } from "./run-output.js";
import { cutSlice } from "./scenario.js";

const isFapesPolicy = (p: string): p is FapesPolicy => (FAPES_POLICIES as readonly string[]).includes(p);

/** The description line `--list` prints. */
export function fapesDescription(file: string): string {
  return loadFapesScenario(file, defaultProfilesDir()).description;
}

export async function runFapesCli(file: string, opts: Options, io: CliIO): Promise<number> {
  const unknown = opts.policies?.find((p) => !isFapesPolicy(p));
  if (unknown !== undefined) {
    io.stderr.write(`unknown policy '${unknown}' for a fapes scenario; known: ${FAPES_POLICIES.join(", ")}\n`);
    return 2;
  }
  let scenario = loadFapesScenario(file, opts.profiles);
  scenario = {
    ...scenario,
    inference: cutSlice(scenario.inference, {
      ...(opts.fromMinute === undefined ? {} : { fromMinute: opts.fromMinute }),
      ...(opts.minutes === undefined ? {} : { minutes: opts.minutes }),
    }),
    ...(opts.policies === undefined ? {} : { policies: opts.policies.filter(isFapesPolicy) }),
    ...(opts.seeds === undefined ? {} : { seeds: opts.seeds }),
  };
  if (opts.check) {
    const j = scenario.jobs;
    io.stdout.write(
      `valid: ${scenario.name}, inference ${scenario.inference.name} under infergrid; jobs ${j.arrivalsPerHour}/h, item ${j.itemMs.toFixed(0)} ms (${j.itemSource}), ` +
        `${j.minBackends}-${j.maxBackends} backends; ${scenario.policies.length} policies x ${scenario.seeds.length} seeds\n`,
    );
    return 0;
  }
  const out = resolve(opts.out ?? join(repoRoot(), ".runtime", "sim", scenario.name));
  const bar = startRunBar(scenario.policies.length * scenario.seeds.length, io);
  let result: FapesScenarioResult;
  try {
    result = await runFapesScenario(scenario, { tracesDir: opts.traces, profilesDir: opts.profiles, onRun: (done) => bar.update(done) });
  } catch (err) {
    throw asScenarioError(file, err);
  } finally {
    bar.stop();
  }
  const markdown = fapesMarkdown(result);
  const report = writeRunOutput(out, markdown, result);
  io.stdout.write(`${markdown}\nwrote ${report}, results.json (${(result.wallMs / 1000).toFixed(1)} s)\n`);
  return 0;
}
