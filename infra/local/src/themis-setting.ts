/**
 * The vertical-scaling mode's setting (`--themis <model>`): Themis's latency profile l(b, c) of the model,
 * fitted with @infergrid/themis to the shared ONNX Runtime measurements (../shared/profiles/
 * measured-ort-cpu-16core.json, read by path), one emulated service that follows it (so 8-core backends run
 * on a 2-core machine), its SLO, the node's core limit, the cold start, and a load step. Nothing here
 * decides anything: it reads, fits, validates and hands the numbers on.
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { control } from "@infergrid/proto";
import { repoRoot, serviceEntry } from "@infergrid/testkit";
import { fitThemisProfile, measuredSamples, type ProfileFit, processingMs, themisProfileFileSchema } from "@infergrid/themis";
import { makeTrace } from "@infergrid/workload";
import type { DemoService } from "./catalogue.js";
import { OptionsError } from "./options.js";
import type { WorkloadPlan } from "./workload-plan.js";

/** Themis's evaluation judges every request against the SLO: a p99 target here. */
const PERCENTILE = 99;

export interface LoadStep {
  baseRps: number;
  stepRps: number;
  /** Seconds of load before the step. */
  atS: number;
  /** Seconds the step lasts; the load is back at baseRps after it. */
  forS: number;
  durationS: number;
}

export interface ThemisSettingInput {
  model: string;
  profiles: string | undefined;
  sloMs: number;
  nodeCores: number;
  coldStartMs: number;
  step: LoadStep;
}

export interface ThemisSetting {
  model: string;
  profilesFile: string;
  fit: ProfileFit;
  sloMs: number;
  nodeCores: number;
  coldStartMs: number;
  step: LoadStep;
  service: DemoService;
}

/** The default measurements: ../shared/profiles beside the repository, read where they are. */
export function defaultThemisProfilesFile(): string {
  return resolve(repoRoot, "..", "shared", "profiles", "measured-ort-cpu-16core.json");
}

/** Service names take [a-z0-9-]: mobilenet_v3_small is served as mobilenet-v3-small. */
export function themisServiceName(model: string): string {
  return model.toLowerCase().replace(/[^a-z0-9-]/g, "-");
}

/** Reads the measurements and fits the profile; every problem is an OptionsError naming the option (exit 2). */
export function loadThemisSetting(input: ThemisSettingInput): ThemisSetting {
  const profilesFile = resolve(input.profiles ?? defaultThemisProfilesFile());
  if (!existsSync(profilesFile)) throw new OptionsError(`--profiles: no such file: ${profilesFile}`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(profilesFile, "utf8"));
  } catch (err) {
    throw new OptionsError(`--profiles: ${profilesFile} is not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  let fit: ProfileFit;
  // A file `npm run profile` wrote on this machine names its model and carries its fit; any other file is a
  // table of measurements (the shared ones' layout) fitted here.
  const profiled = themisProfileFileSchema.safeParse(json);
  if (profiled.success) {
    const file = profiled.data;
    if (file.model !== input.model) {
      throw new OptionsError(`--profiles: ${profilesFile} is the profile of "${file.model}", not of --themis ${input.model}`);
    }
    fit = { profile: file.profile, ...file.fit, samples: file.samples.length };
  } else {
    try {
      fit = fitThemisProfile(measuredSamples(json, input.model));
    } catch (err) {
      throw new OptionsError(`--themis: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const { step } = input;
  if (step.atS + step.forS > step.durationS)
    throw new OptionsError(
      `--step-at ${step.atS} + --step-for ${step.forS} is past --duration ${step.durationS}: the step must end within the run`,
    );
  const oneCoreMs = processingMs(fit.profile, 1, 1);
  if (!(oneCoreMs < input.sloMs))
    throw new OptionsError(`--slo-ms ${input.sloMs}: a single request takes ${oneCoreMs.toFixed(0)} ms on one core by the fitted profile`);
  return {
    model: input.model,
    profilesFile,
    fit,
    sloMs: input.sloMs,
    nodeCores: input.nodeCores,
    coldStartMs: input.coldStartMs,
    step,
    service: themisService(themisServiceName(input.model), fit, input.sloMs, input.coldStartMs),
  };
}

/**
 * The one service: emulated, its time per batch l(b, c) from the fitted profile, its model load the cold
 * start. The allocator's Themis controller sizes its list (min 1, so an idle service keeps one replica);
 * the lognormal profile is only the frontends' prior: one request on one core.
 */
function themisService(name: string, fit: ProfileFit, sloMs: number, coldStartMs: number): DemoService {
  const oneCoreMs = processingMs(fit.profile, 1, 1);
  const { gamma, eps, delta, eta } = fit.profile;
  const spec: control.ServiceSpec.$Properties = {
    name,
    model: {
      kind: control.ModelKind.MODEL_KIND_EMULATED,
      profile: { shape: 0, locMs: oneCoreMs, scaleMs: 0 },
      coldStartMs,
      themis: { gamma, eps, delta, eta },
    },
    sla: { latencyThresholdMs: sloMs, percentile: PERCENTILE, burstFactor: 2 },
    minBackends: 1,
    maxBackends: 0,
    initialBackends: 1,
  };
  return { name, job: name, spec, meanServiceMs: oneCoreMs, rtMaxMs: sloMs, slMin: PERCENTILE / 100, input: "tiny" };
}

/** The step as the rate of each second of the run. */
export function stepRates(step: LoadStep): number[] {
  return Array.from({ length: Math.ceil(step.durationS) }, (_, s) =>
    s >= step.atS && s < step.atS + step.forS ? step.stepRps : step.baseRps,
  );
}

/**
 * The load: Poisson arrivals at the step's rate, as a trace of one count per "minute" replayed at one trace
 * minute per wall second (compression 60, rate scale 1: a count is requests per second).
 */
export function planThemisWorkload(setting: ThemisSetting): WorkloadPlan {
  const { step, service } = setting;
  const rates = stepRates(step);
  const source = `load step ${step.baseRps} -> ${step.stepRps} req/s at ${step.atS} s for ${step.forS} s, then ${step.baseRps} req/s`;
  const trace = makeTrace([service.name], new Map([[service.name, Float64Array.from(rates)]]), rates.length, source);
  return {
    trace,
    services: [service],
    compression: 60,
    rateScale: 1,
    peakRps: Math.max(step.baseRps, step.stepRps),
    scaling: "peak-rps",
    durationMs: step.durationS * 1000,
    description: source,
  };
}

/**
 * The allocator's Themis controller at demo speed, as the other modes shorten their time constants: the peak
 * planned for is the largest rate just observed (the predictor's 5 s windows and trend extrapolate a step far
 * beyond it), the rate now from the last 1 s load report (a step is seen on the first tick after it), K = 3
 * stable ticks instead of 10 and a 10 s scale-down delay so a step and its return fit in a minute, and 50 % of
 * the modelled throughput planned as capacity: every request here also crosses the broker, a frontend and, once
 * a backlog forms, parking on the same two cores (10-20 ms a request that l(b, c) does not count), and a
 * backlog at a backend of batch 1 drains slower than it forms once every request goes through parking.
 */
export const THEMIS_DEMO_POLICY = {
  INFERGRID_THEMIS_PEAK: "observed",
  INFERGRID_THEMIS_STABLE_TICKS: "3",
  INFERGRID_THEMIS_SCALE_DOWN_DELAY_MS: "10000",
  INFERGRID_THEMIS_MAX_UTILIZATION: "0.5",
  INFERGRID_THEMIS_RATE_WINDOW_MS: "1000",
} as const;

/** The most backends the allocator's pool may start in this mode (each a Node process on this machine). */
export const THEMIS_POOL_MAX = 6;
/** A backend out of every list this long leaves the pool (the allocator's scale-down delay, at demo speed). */
const POOL_SCALE_DOWN_DELAY_MS = 5_000;

/**
 * The allocator's environment in this mode: its local pool starts the backends (they inherit this
 * environment, so their own settings go here too, as for the typed pools), one at first, no spare; the
 * Themis controller's node core limit. The backends start at one core, with the node's limit as their
 * bound on cores.
 */
export function themisAllocatorEnv(setting: ThemisSetting, backendEnv: Record<string, string>): Record<string, string> {
  const { INFERGRID_ID: _id, ...backendOnly } = backendEnv;
  return {
    ...backendOnly,
    INFERGRID_MAX_CORES: String(setting.nodeCores),
    INFERGRID_POOL_ACTUATOR: "local",
    INFERGRID_POOL_BACKEND_ENTRY: serviceEntry("backend-worker"),
    INFERGRID_POOL_MIN_SIZE: "1",
    INFERGRID_POOL_MAX_SIZE: String(THEMIS_POOL_MAX),
    INFERGRID_POOL_HEADROOM: "0",
    INFERGRID_POOL_SCALE_DOWN_DELAY_MS: String(POOL_SCALE_DOWN_DELAY_MS),
    INFERGRID_THEMIS_NODE_CORES: String(setting.nodeCores),
    ...THEMIS_DEMO_POLICY,
  };
}
