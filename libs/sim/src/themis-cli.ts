/**
 * The CLI's path for `kind: themis` scenarios: validate, run every policy and seed with a progress bar, print
 * the table and write report.md and results.json to .runtime/sim/<name>/ (or --out).
 */
import { join, resolve } from "node:path";
import { POLICY_NAMES, type PolicyName } from "@infergrid/themis";
import type { CliIO, Options } from "./cli.js";
import { defaultProfilesDir, defaultTracesDir, repoRoot } from "./paths.js";
import { asScenarioError, startRunBar, writeRunOutput } from "./run-output.js";
import { ScenarioError } from "./scenario.js";
import { runThemisScenario, type ThemisScenarioResult, themisMarkdown, themisWorkload } from "./themis-experiment.js";
import { loadThemisScenario, type ThemisScenario } from "./themis-scenario.js";

const isThemisPolicy = (p: string): p is PolicyName => (POLICY_NAMES as readonly string[]).includes(p);

/** The description line `--list` prints. */
export function themisDescription(file: string): string {
  return loadThemisScenario(file, defaultProfilesDir(), defaultTracesDir()).description;
}

/** --from-minute and --minutes cut a trace load inside its slice. */
function cut(file: string, s: ThemisScenario, opts: Options): ThemisScenario {
  if (opts.fromMinute === undefined && opts.minutes === undefined) return s;
  const load = s.load;
  if (load.kind !== "trace") throw new ScenarioError(file, ["--from-minute, --minutes: this scenario's load is rate steps, not a trace"]);
  const end = load.fromMinute + load.minutes;
  const from = opts.fromMinute ?? load.fromMinute;
  if (from < load.fromMinute || from >= end) {
    throw new ScenarioError(file, [`--from-minute ${from}: outside the scenario's minutes ${load.fromMinute}-${end - 1}`]);
  }
  const minutes = opts.minutes ?? end - from;
  if (from + minutes > end)
    throw new ScenarioError(file, [
      `--minutes ${minutes}: minutes ${from}-${from + minutes - 1} reach past the scenario's minutes ${load.fromMinute}-${end - 1}`,
    ]);
  return { ...s, load: { ...load, fromMinute: from, minutes } };
}

export async function runThemisCli(file: string, opts: Options, io: CliIO): Promise<number> {
  const unknown = opts.policies?.find((p) => !isThemisPolicy(p));
  if (unknown !== undefined) {
    io.stderr.write(`unknown policy '${unknown}' for a themis scenario; known: ${POLICY_NAMES.join(", ")}\n`);
    return 2;
  }
  let scenario = cut(file, loadThemisScenario(file, opts.profiles, opts.traces), opts);
  scenario = {
    ...scenario,
    ...(opts.policies === undefined ? {} : { policies: opts.policies.filter(isThemisPolicy) }),
    ...(opts.seeds === undefined ? {} : { seeds: opts.seeds }),
  };
  const p = scenario.profile;
  if (opts.check) {
    // Reads the trace, so that --check finds a job it lacks or a slice past its end.
    await themisWorkload(scenario);
    const load =
      scenario.load.kind === "steps"
        ? `steps ${scenario.load.steps.map((x) => `${x.ratePerS}/s until ${x.untilMs / 1000} s`).join(", ")}`
        : `trace ${scenario.traceFile}, ${scenario.load.job}, minutes ${scenario.load.fromMinute}-${scenario.load.fromMinute + scenario.load.minutes - 1}, peak ${scenario.load.peakPerS}/s`;
    io.stdout.write(
      `valid: ${scenario.name}, ${scenario.model} l(b, c) = ${p.gamma.toFixed(2)} b/c + ${p.eps.toFixed(2)}/c + ${p.delta.toFixed(2)} b + ${p.eta.toFixed(2)} ms ` +
        `(mean error ${(scenario.fitError * 100).toFixed(1)} %), SLO ${scenario.sloMs} ms, ${scenario.maxCores} cores, batch <= ${scenario.maxBatch}, ` +
        `cold start ${scenario.coldStartMs} ms; ${load}; ${scenario.policies.length} policies x ${scenario.seeds.length} seeds\n`,
    );
    return 0;
  }
  const out = resolve(opts.out ?? join(repoRoot(), ".runtime", "sim", scenario.name));
  const bar = startRunBar(scenario.policies.length * scenario.seeds.length, io);
  let result: ThemisScenarioResult;
  try {
    // A steps load is short: its report shows what each policy did, tick by tick.
    result = await runThemisScenario(scenario, { timeline: scenario.load.kind === "steps", onRun: (done) => bar.update(done) });
  } catch (err) {
    throw asScenarioError(file, err);
  } finally {
    bar.stop();
  }
  const markdown = themisMarkdown(result);
  const report = writeRunOutput(out, markdown, result);
  io.stdout.write(
    `${markdown.split("\n## What each policy did")[0]}\nwrote ${report}, results.json (${(result.wallMs / 1000).toFixed(1)} s)\n`,
  );
  return 0;
}
