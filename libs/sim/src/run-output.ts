/**
 * What the CLI of every scenario kind that runs policies x seeds does around its runs: a progress bar on the
 * CLI's stderr, an error of the run turned into the scenario's fault, and report.md plus results.json written
 * into the output folder.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SingleBar } from "cli-progress";
import type { CliIO } from "./cli.js";
import { ScenarioError } from "./scenario.js";

/** A bar over `total` runs, started; the caller stops it. */
export function startRunBar(total: number, io: CliIO): SingleBar {
  const bar = new SingleBar({
    format: "{bar} {value}/{total} runs | {duration_formatted}",
    hideCursor: true,
    clearOnComplete: true,
    stream: io.stderr,
  });
  bar.start(total, 0);
  return bar;
}

/** A run that threw for what the scenario asks (a budget no configuration meets, a mix no type serves) is the scenario's fault, and says why. */
export function asScenarioError(file: string, err: unknown): unknown {
  return err instanceof Error && !(err instanceof ScenarioError) ? new ScenarioError(file, [err.message]) : err;
}

/** Writes report.md and results.json into `out`; returns the report's path. */
export function writeRunOutput(out: string, markdown: string, results: unknown): string {
  mkdirSync(out, { recursive: true });
  const report = join(out, "report.md");
  writeFileSync(report, markdown);
  writeFileSync(join(out, "results.json"), JSON.stringify(results, null, 1));
  return report;
}
