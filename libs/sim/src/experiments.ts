/**
 * The named experiments are the scenario files in scenarios/ at the repository root (scenario.ts reads and
 * validates them): `npm run sim -- faro-36` runs scenarios/faro-36.yaml. This module keeps the names the
 * simulator's own code and tests refer to (EXPERIMENTS.smoke, the worker processes of --workers), each loaded
 * from its file on first use, and re-exports the constants the scenario schema's defaults come from.
 */
import { type Experiment, loadScenario, ScenarioError, scenarioFile } from "./scenario.js";

export {
  DEFAULT_SLOW_LOOP,
  type Experiment,
  PAPER_SWAYAM_TIMING,
  RESNET34,
  type SwayamTiming,
} from "./scenario.js";

/** The scenario files shipped in scenarios/ that code refers to by name (a test checks each exists and validates). */
export const EXPERIMENT_NAMES = [
  "faro-6h",
  "faro-16",
  "faro-32",
  "faro-36",
  "faro-48",
  "faro-table7-16",
  "faro-table7-32",
  "faro-table7-36",
  "smoke",
  "local-mirror",
  "azure-d08-d09",
] as const;

export type ExperimentName = (typeof EXPERIMENT_NAMES)[number];

export function isExperimentName(s: string): s is ExperimentName {
  return (EXPERIMENT_NAMES as readonly string[]).includes(s);
}

/** scenarios/<name>.yaml, validated. Throws ScenarioError. */
export function loadNamedScenario(name: string): Experiment {
  const file = scenarioFile(name);
  if (file === undefined) throw new ScenarioError(name, [`no scenario named ${JSON.stringify(name)} in scenarios/ (try --list)`]);
  return loadScenario(file);
}

const loaded = new Map<ExperimentName, Experiment>();

/** The named scenarios, each read from its file the first time it is used. */
export const EXPERIMENTS: Readonly<Record<ExperimentName, Experiment>> = Object.defineProperties(
  {} as Record<ExperimentName, Experiment>,
  Object.fromEntries(
    EXPERIMENT_NAMES.map((name) => [
      name,
      {
        enumerable: true,
        get(): Experiment {
          let e = loaded.get(name);
          if (e === undefined) {
            e = loadNamedScenario(name);
            loaded.set(name, e);
          }
          return e;
        },
      },
    ]),
  ),
);
