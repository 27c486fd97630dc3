/**
 * The CLI's path for `kind: kairos` scenarios: validate, run every policy and seed with a progress bar, print
 * the table and write report.md and results.json to .runtime/sim/<name>/ (or --out).
 */
import { join, resolve } from "node:path";
import type { CliIO, Options } from "./cli.js";
import { kairosMarkdown, runKairosScenario } from "./kairos-experiment.js";
import { KAIROS_POLICIES, type KairosPolicy, loadKairosScenario } from "./kairos-scenario.js";
import { defaultProfilesDir, repoRoot } from "./paths.js";
import { asScenarioError, startRunBar, writeRunOutput } from "./run-output.js";

const isKairosPolicy = (p: string): p is KairosPolicy => (KAIROS_POLICIES as readonly string[]).includes(p);

/** The description line `--list` prints. */
export function kairosDescription(file: string): string {
  return loadKairosScenario(file, defaultProfilesDir()).description;
}

export function runKairosCli(file: string, opts: Options, io: CliIO): number {
  const unsupported = (
    [
      ["--from-minute", opts.fromMinute],
      ["--minutes", opts.minutes],
    ] as const
  ).find(([, v]) => v !== undefined);
  if (unsupported !== undefined) {
    io.stderr.write(`${unsupported[0]}: a kairos scenario replays no trace (its queries are Poisson arrivals)\n`);
    return 2;
  }
  const unknown = opts.policies?.find((p) => !isKairosPolicy(p));
  if (unknown !== undefined) {
    io.stderr.write(`unknown policy '${unknown}' for a kairos scenario; known: ${KAIROS_POLICIES.join(", ")}\n`);
    return 2;
  }
  let scenario = loadKairosScenario(file, opts.profiles);
  scenario = {
    ...scenario,
    ...(opts.policies === undefined ? {} : { policies: opts.policies.filter(isKairosPolicy) }),
    ...(opts.seeds === undefined ? {} : { seeds: opts.seeds }),
  };
  if (opts.check) {
    io.stdout.write(
      `valid: ${scenario.name}, model ${scenario.model}, QoS ${scenario.qosMs} ms, budget ${scenario.budgetPerHour} USD/h, ` +
        `types ${scenario.types.map((t) => `${t.name} (${t.pricePerHour} USD/h, at most ${t.maxCount})`).join(", ")}, ` +
        `profiles ${scenario.profilesFile}; ${scenario.policies.length} policies x ${scenario.seeds.length} seeds\n`,
    );
    return 0;
  }
  const out = resolve(opts.out ?? join(repoRoot(), ".runtime", "sim", scenario.name));
  const t0 = performance.now();
  const bar = startRunBar(scenario.policies.length * scenario.seeds.length, io);
  let result: ReturnType<typeof runKairosScenario>;
  try {
    result = runKairosScenario(scenario, (done) => bar.update(done));
  } catch (err) {
    throw asScenarioError(file, err);
  } finally {
    bar.stop();
  }
  const markdown = kairosMarkdown(result);
  const { types: _types, ...scenarioData } = result.scenario;
  const report = writeRunOutput(out, markdown, { ...result, scenario: scenarioData });
  io.stdout.write(`${markdown}\nwrote ${report}, results.json (${((performance.now() - t0) / 1000).toFixed(1)} s)\n`);
  return 0;
}
