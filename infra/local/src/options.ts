import { Command, CommanderError, InvalidArgumentError, Option } from "commander";

/**
 * swayam: the frontends' model-based n inside the allocator's static split; infergrid: the same
 * frontends inside shares the allocator's Faro loop plans from the predictor's forecasts; static:
 * n = the allocator's min_warm; fixed-peak: every service's n fixed at what its peak needs.
 */
export type ScalingPolicy = "swayam" | "infergrid" | "static" | "fixed-peak";

export interface Options {
  trace: string | undefined;
  jobs: string[] | undefined;
  topJobs: number | undefined;
  compression: number;
  peakRps: number | undefined;
  rateScale: number | undefined;
  fromMinute: number;
  minutes: number | undefined;
  durationS: number | undefined;
  backends: number;
  frontends: number;
  policy: ScalingPolicy;
  seed: number;
  idleTimeoutMs: number;
  onnx: boolean;
  summaryJson: string | undefined;
  deadlineMs: number;
  maxInFlight: number;
  logLevel: string;
  runtimeDir: string | undefined;
  /** Port of the live web console (0: any free port). */
  consolePort: number;
  /** A process that dies is started again with backoff (--no-restart: it stays down). */
  restart: boolean;
  /** --insecure: one open NATS server and plaintext gRPC instead of an identity and a certificate per process. */
  insecure: boolean;
  /** Heterogeneous mode: the Kairos model served (its scenario file gives QoS and prices), or undefined. */
  kairos: string | undefined;
  /** With --kairos: backends per instance type, in the order given. */
  types: InstanceCount[] | undefined;
  /** With --kairos: the profile table (default ../shared/profiles/kairos-aws-4types.csv beside the repository). */
  profiles: string | undefined;
  /** A best-effort job of this many items submitted beside the load (FaPES: it runs on backends inference lends); 0: none. */
  bestEffortItems: number;
  /** Backends run best-effort items in their idle time while serving (--harvest). */
  harvest: boolean;
  /** Vertical-scaling mode: the measured model whose fitted Themis profile the one service follows, or undefined. */
  themis: string | undefined;
  /** With --themis: the load before and after the step, req/s (--peak-rps is the step's rate). */
  baseRps: number;
  stepAtS: number;
  stepForS: number;
  sloMs: number;
  /** With --themis: the most cores one backend may be given (the node's). */
  nodeCores: number;
  /** With --themis: a new backend's model load (t_setup). */
  coldStartMs: number;
}

/** `--types` entry: `<instance type>=<backends>`. */
export interface InstanceCount {
  type: string;
  count: number;
}

/** Defaults of the heterogeneous mode where the trace-driven ones make no sense. */
export const KAIROS_DEFAULT_RPS = 20;
export const KAIROS_DEFAULT_DURATION_S = 30;
/**
 * Defaults of the vertical-scaling mode: a step from 3 to 20 req/s after 10 s, for 20 s, in a 50 s run. Sized for
 * ResNet-34 (71 ms a request on one core, at most about 15 req/s with the largest batch): more than one core
 * carries however it batches, and few enough requests that the broker, frontend and parking path stay well
 * within this machine's two cores.
 */
export const THEMIS_DEFAULTS = {
  baseRps: 3,
  stepRps: 20,
  stepAtS: 10,
  stepForS: 20,
  durationS: 50,
  sloMs: 1000,
  nodeCores: 8,
  coldStartMs: 10_000,
} as const;

/** A bad command line: printed with a pointer to --help, exit status 2. */
export class OptionsError extends Error {
  override readonly name = "OptionsError";
}

const int =
  (min: number, what: string, max = Number.MAX_SAFE_INTEGER) =>
  (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`must be ${what}.`);
    return n;
  };

const positiveNumber = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a number > 0.");
  return n;
};

const nonNegativeNumber = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError("must be a number >= 0.");
  return n;
};

const list = (value: string): string[] => {
  const items = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new InvalidArgumentError("must name at least one job (comma-separated).");
  if (new Set(items).size !== items.length) throw new InvalidArgumentError("names a job twice.");
  return items;
};

/** `g4dn.xlarge=2,t3.xlarge=3`: each type once, each count an integer >= 1. */
export const instanceCounts = (value: string): InstanceCount[] => {
  const entries = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (entries.length === 0)
    throw new InvalidArgumentError("must name at least one <instance type>=<backends> (e.g. g4dn.xlarge=2,t3.xlarge=3).");
  const out = entries.map((entry) => {
    const eq = entry.indexOf("=");
    const type = (eq < 0 ? entry : entry.slice(0, eq)).trim();
    const count = eq < 0 ? "" : entry.slice(eq + 1).trim();
    if (eq < 0 || type === "") throw new InvalidArgumentError(`"${entry}" is not <instance type>=<backends> (e.g. t3.xlarge=3).`);
    const n = Number(count);
    if (count === "" || !Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`"${entry}": the backends must be an integer >= 1.`);
    return { type, count: n };
  });
  const twice = out.find((e, i) => out.findIndex((f) => f.type === e.type) !== i);
  if (twice) throw new InvalidArgumentError(`names instance type ${twice.type} twice.`);
  return out;
};

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

export function buildProgram(): Command {
  return new Command()
    .name("npm start --")
    .description(
      [
        "Starts a local InferGrid cluster (nats-server, global-allocator, predictor, backend-workers, frontends, broker), registers demo services, drives them with a trace or a synthetic workload through the broker's gRPC ingress, shows live progress and ends with a per-service summary. Ctrl-C stops the load and every process, and still prints the summary.",
        "Without --trace: a synthetic day (diurnal trend, bursts, noise) over three services: resnet34 and mobilenet-v2 (emulated, lognormal service times) and ocr-cls (a real ONNX model, ppocr-mobile-cls). With --trace: one emulated ResNet-34 service per job of a per-minute CSV or an Azure Functions 2019 file.",
      ].join("\n\n"),
    )
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  npm start",
        "  npm start -- --duration 60 --backends 8",
        "  npm start -- --trace ../shared/traces/faro-10jobs-6h-per-minute.csv --jobs serve-cluster0,serve-cluster1 --minutes 30",
        "  npm start -- --trace invocations_per_function_md.anon.d01.csv --top-jobs 5 --peak-rps 40 --summary-json out/summary.json",
        "  npm start -- --kairos dien --types g4dn.xlarge=2,t3.xlarge=3 --duration 30 --peak-rps 20",
        "  npm start -- --themis resnet34 --base-rps 3 --peak-rps 20 --step-at 10 --step-for 20 --duration 50",
        "  npm start -- --duration 60 --best-effort-items 3000",
      ].join("\n"),
    )
    .option("--trace <path>", "trace file: per-minute CSV (minute,<job>,...) or Azure Functions 2019 invocations file")
    .option("--jobs <a,b,...>", "replay only these jobs of the trace (names as in the trace)", list)
    .option(
      "--top-jobs <n>",
      "keep the n busiest jobs (raw Azure Functions files: default 10, applied while reading)",
      int(1, "an integer >= 1"),
    )
    .option("--compression <x>", "trace minutes per wall minute (60: one trace minute a second)", positiveNumber, 60)
    .option(
      "--peak-rps <r>",
      "scale the load so the whole cluster's busiest second has r req/s (default: about half the backends' capacity, at most 120)",
      positiveNumber,
    )
    .option("--rate-scale <x>", "multiply the trace's counts by x instead of fitting --peak-rps", nonNegativeNumber)
    .option("--from-minute <m>", "first trace minute replayed", int(0, "an integer >= 0"), 0)
    .option("--minutes <n>", "trace minutes replayed (default: the rest of the trace; synthetic: 240)", int(1, "an integer >= 1"))
    .option("--duration <seconds>", "stop after this many seconds of load, even if the trace goes on", positiveNumber)
    .option("--backends <n>", "backend-worker processes (the shared pool)", int(1, "an integer >= 1"), 12)
    .option("--frontends <n>", "frontend processes", int(1, "an integer >= 1"), 3)
    .addOption(
      new Option(
        "--policy <name>",
        "infergrid (model-based autoscaling inside forecast-planned shares: the system's default), swayam (the same in a static split), static (the allocator's split), fixed-peak (each service sized for its peak); default: infergrid, or swayam with --themis or --kairos",
      ).choices(["swayam", "infergrid", "static", "fixed-peak"]),
    )
    .option("--seed <n>", "seed of the synthetic trace and of the arrival times", int(0, "an integer >= 0"), 1)
    .option("--idle-timeout-ms <ms>", "T: a warm backend idle this long returns to the pool", int(0, "an integer >= 0"), 30_000)
    .option("--no-onnx", "leave out the ONNX service (ocr-cls) of the synthetic workload")
    .option("--summary-json <path>", "also write the summary as JSON to this file")
    .option("--deadline-ms <ms>", "deadline of every request", int(1, "an integer >= 1"), 10_000)
    .option(
      "--max-in-flight <n>",
      "requests outstanding at once; arrivals beyond it are counted as not sent",
      int(1, "an integer >= 1"),
      2_000,
    )
    .addOption(new Option("--log-level <level>", "services' log level (their logs go to files)").choices(LOG_LEVELS).default("warn"))
    .option("--runtime-dir <dir>", "where each run's directory of logs is made (default: .runtime/ in the repository)")
    .option("--console-port <port>", "port of the live web console (0: any free port)", int(0, "a port number (0 to 65535)", 65_535), 8090)
    .option(
      "--insecure",
      "open NATS and plaintext gRPC (for experiments); by default each process connects to NATS over TLS as its own user with its role's permissions, and gRPC is mutual TLS with peer roles, each process with a certificate from a throwaway CA made for the run (docs/security.md)",
    )
    .option(
      "--no-restart",
      "leave a process that dies down (by default it is started again after 1 s, doubling to 30 s while it keeps dying, as a Deployment would)",
    )
    .option(
      "--kairos <model>",
      `heterogeneous mode: one emulated service of this Kairos model (its QoS and prices from scenarios/kairos-<model>.yaml, its per-type latency from --profiles) on backends of the --types instance types, started by the allocator's typed pools; constant load (--peak-rps, default ${KAIROS_DEFAULT_RPS} req/s, --duration default ${KAIROS_DEFAULT_DURATION_S} s) of queries whose batch sizes follow Kairos's production mix`,
    )
    .option("--types <type=n,...>", "with --kairos: backends per instance type, e.g. g4dn.xlarge=2,t3.xlarge=3", instanceCounts)
    .option(
      "--profiles <file>",
      "with --kairos: the per-type latency table (default: ../shared/profiles/kairos-aws-4types.csv beside the repository); with --themis: the measured latencies (default: ../shared/profiles/measured-ort-cpu-16core.json) or a profile file npm run profile wrote",
    )
    .option(
      "--best-effort-items <n>",
      "submit a best-effort job of n items (batch inference with an emulated model, 40-60 ms an item) when the load starts: it runs on the backends inference lends and is reclaimed from when inference needs them; its progress is shown at the end (0: none)",
      int(0, "an integer >= 0"),
      0,
    )
    .option(
      "--harvest",
      "backends also run best-effort items in their idle time while they serve, in a second process stopped whenever a request computes (with --best-effort-items)",
    )
    .option(
      "--themis <model>",
      `vertical-scaling mode: one emulated service following Themis's latency profile of this measured model (resnet18, resnet34, mobilenet_v3_small), fitted to --profiles; the allocator's Themis controller resizes its backends in place and sizes its list, its local pool starts backends; load steps from --base-rps to --peak-rps (default ${THEMIS_DEFAULTS.baseRps} -> ${THEMIS_DEFAULTS.stepRps}) at --step-at for --step-for seconds (--duration default ${THEMIS_DEFAULTS.durationS} s)`,
    )
    .option("--base-rps <r>", "with --themis: the load before and after the step, req/s", positiveNumber, THEMIS_DEFAULTS.baseRps)
    .option("--step-at <seconds>", "with --themis: when the step begins", nonNegativeNumber, THEMIS_DEFAULTS.stepAtS)
    .option("--step-for <seconds>", "with --themis: how long the step lasts", positiveNumber, THEMIS_DEFAULTS.stepForS)
    .option("--slo-ms <ms>", "with --themis: the service's latency SLO (at p99)", positiveNumber, THEMIS_DEFAULTS.sloMs)
    .option(
      "--node-cores <n>",
      "with --themis: the most cores one backend may be given",
      int(1, "an integer >= 1"),
      THEMIS_DEFAULTS.nodeCores,
    )
    .option(
      "--cold-start-ms <ms>",
      "with --themis: a new backend's model load (t_setup)",
      int(0, "an integer >= 0"),
      THEMIS_DEFAULTS.coldStartMs,
    )
    .helpOption("-h, --help", "show this help")
    .showHelpAfterError("(run with --help for the options)")
    .allowExcessArguments(false);
}

interface RawOptions {
  trace?: string;
  jobs?: string[];
  topJobs?: number;
  compression: number;
  peakRps?: number;
  rateScale?: number;
  fromMinute: number;
  minutes?: number;
  duration?: number;
  backends: number;
  frontends: number;
  policy?: ScalingPolicy;
  seed: number;
  idleTimeoutMs: number;
  onnx: boolean;
  summaryJson?: string;
  deadlineMs: number;
  maxInFlight: number;
  logLevel: string;
  runtimeDir?: string;
  consolePort: number;
  restart: boolean;
  insecure?: boolean;
  kairos?: string;
  types?: InstanceCount[];
  profiles?: string;
  themis?: string;
  bestEffortItems: number;
  harvest?: boolean;
  baseRps: number;
  stepAt: number;
  stepFor: number;
  sloMs: number;
  nodeCores: number;
  coldStartMs: number;
}

/** Options that belong to trace replay or to a homogeneous pool, which the heterogeneous mode does not take. */
const NOT_WITH_KAIROS = [
  "--trace",
  "--jobs",
  "--top-jobs",
  "--rate-scale",
  "--from-minute",
  "--minutes",
  "--compression",
  "--backends",
  "--no-onnx",
];
/** The vertical-scaling mode's own options: meaningless without --themis. */
const THEMIS_ONLY = ["--base-rps", "--step-at", "--step-for", "--slo-ms", "--node-cores", "--cold-start-ms"];

/**
 * Checks that span options; each problem names the options involved. `given` holds the options given on
 * the command line (as `--name`), for those whose default cannot be told from an explicit value.
 */
export function crossCheck(o: Options, given: ReadonlySet<string> = new Set()): string[] {
  const problems: string[] = [];
  if (o.themis !== undefined) {
    const clash = [...NOT_WITH_KAIROS, "--kairos", "--types"].filter((name) => given.has(name));
    if (clash.length > 0)
      problems.push(
        `--themis cannot be combined with ${clash.join(", ")} (the allocator's pool starts the backends; the load is the step)`,
      );
    if (o.policy !== "swayam" && o.policy !== "static")
      problems.push(`--themis takes --policy swayam or static, not ${o.policy} (the allocator's Themis controller sizes the service)`);
    return problems;
  }
  const themisOnly = THEMIS_ONLY.filter((name) => given.has(name));
  if (themisOnly.length > 0) problems.push(`${themisOnly.join(", ")} need${themisOnly.length === 1 ? "s" : ""} --themis <model>`);
  if (o.kairos !== undefined) {
    if (o.types === undefined) problems.push("--kairos needs --types (backends per instance type, e.g. --types g4dn.xlarge=2,t3.xlarge=3)");
    const clash = NOT_WITH_KAIROS.filter((name) => given.has(name));
    if (clash.length > 0)
      problems.push(
        `--kairos cannot be combined with ${clash.join(", ")} (--types gives the backends; the load is --peak-rps for --duration)`,
      );
    if (o.policy === "fixed-peak" || o.policy === "infergrid")
      problems.push(`--kairos takes --policy swayam or static, not ${o.policy} (the pool is fixed by --types)`);
    return problems;
  }
  if (o.types !== undefined) problems.push("--types needs --kairos <model>");
  if (o.profiles !== undefined) problems.push("--profiles needs --kairos <model> or --themis <model>");
  if (o.peakRps !== undefined && o.rateScale !== undefined) problems.push("--peak-rps and --rate-scale cannot both be given");
  if (o.trace === undefined && o.jobs !== undefined) problems.push("--jobs needs --trace (the synthetic workload has fixed services)");
  if (o.trace === undefined && o.topJobs !== undefined) problems.push("--top-jobs needs --trace");
  if (o.trace !== undefined && !o.onnx) problems.push("--no-onnx only applies to the synthetic workload (a trace's services are emulated)");
  return problems;
}

/**
 * Parses argv (without node and the script). `--help` and `--version` print and throw a
 * CommanderError with exitCode 0; anything wrong throws OptionsError or CommanderError with a
 * message meant for the user.
 */
export function parseOptions(argv: readonly string[], output?: { writeOut(s: string): void; writeErr(s: string): void }): Options {
  const program = buildProgram().exitOverride();
  if (output) program.configureOutput(output);
  program.parse([...argv], { from: "user" });
  const raw = program.opts<RawOptions>();
  const options: Options = {
    trace: raw.trace,
    jobs: raw.jobs,
    topJobs: raw.topJobs,
    compression: raw.compression,
    peakRps: raw.peakRps,
    rateScale: raw.rateScale,
    fromMinute: raw.fromMinute,
    minutes: raw.minutes,
    durationS: raw.duration,
    backends: raw.backends,
    frontends: raw.frontends,
    // The system's default where it applies; Themis and Kairos size their one service without the slow loop.
    policy: raw.policy ?? (raw.themis !== undefined || raw.kairos !== undefined ? "swayam" : "infergrid"),
    seed: raw.seed,
    idleTimeoutMs: raw.idleTimeoutMs,
    onnx: raw.onnx,
    summaryJson: raw.summaryJson,
    deadlineMs: raw.deadlineMs,
    maxInFlight: raw.maxInFlight,
    logLevel: raw.logLevel,
    runtimeDir: raw.runtimeDir,
    consolePort: raw.consolePort,
    restart: raw.restart,
    insecure: raw.insecure ?? false,
    kairos: raw.kairos,
    types: raw.types,
    profiles: raw.profiles,
    themis: raw.themis,
    bestEffortItems: raw.bestEffortItems,
    harvest: raw.harvest ?? false,
    baseRps: raw.baseRps,
    stepAtS: raw.stepAt,
    stepForS: raw.stepFor,
    sloMs: raw.sloMs,
    nodeCores: raw.nodeCores,
    coldStartMs: raw.coldStartMs,
  };
  const given = new Set(
    program.options.filter((opt) => program.getOptionValueSource(opt.attributeName()) === "cli").map((opt) => opt.long ?? ""),
  );
  const problems = crossCheck(options, given);
  if (problems.length > 0) throw new OptionsError(problems.join("\n"));
  return options;
}

export { CommanderError };
