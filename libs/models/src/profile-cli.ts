/**
 * npm run profile -- <model> [--batches 1,2,4,8] [--threads 1,2] [--runs 10] [--warmups 2] [--out path] [--no-pin]
 * Measures a catalogue model's latency over batch sizes x intra-op threads on this machine, fits Themis's
 * l(b, c), prints measured against fitted with the fit's error and the in-place resize times, and writes the
 * profile file (themisProfileFileSchema). Exit status 2 on bad arguments, 1 when the measurement fails.
 */
import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { themisProfileFileSchema } from "@infergrid/themis";
import { findOnnxModel, onnxCatalogue } from "./onnx-catalogue.js";
import { formatProfileReport, measureOnnxModel, profileFile, thisMachine } from "./profiler.js";

export interface ProfileCliIO {
  stdout(text: string): void;
  stderr(text: string): void;
  /** The runtime named in the file. */
  runtime?: string;
  now?: () => Date;
}

class UsageError extends Error {}

const USAGE = "usage: npm run profile -- <model> [--batches 1,2,4,8] [--threads 1,2] [--runs 10] [--warmups 2] [--out path] [--no-pin]";

function intList(name: string, text: string, max: number): number[] {
  const values = text.split(",").map((s) => s.trim());
  const out: number[] = [];
  for (const v of values) {
    const n = Number(v);
    if (!(/^\d+$/.test(v) && Number.isInteger(n) && n >= 1 && n <= max)) {
      throw new UsageError(`--${name}: "${v}" is not an integer from 1 to ${max} (give a comma-separated list, e.g. 1,2)`);
    }
    if (out.includes(n)) throw new UsageError(`--${name}: ${n} is listed twice`);
    out.push(n);
  }
  return out;
}

function count(name: string, text: string, min: number): number {
  const n = Number(text);
  if (!(/^\d+$/.test(text) && n >= min && n <= 10_000)) throw new UsageError(`--${name}: "${text}" is not an integer from ${min} to 10000`);
  return n;
}

export interface ProfileArgs {
  model: string;
  batches: number[];
  threads: number[];
  runs: number;
  warmups: number;
  out: string;
  pinCpus: boolean;
}

/** Defaults: batches 1,2,4,8; threads 1 up to this machine's CPUs; 10 runs after 2 warm-ups; pinned. */
export function parseProfileArgs(argv: readonly string[], cores = availableParallelism()): ProfileArgs {
  let parsed: ReturnType<typeof parse>;
  function parse() {
    return parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        batches: { type: "string" },
        threads: { type: "string" },
        runs: { type: "string" },
        warmups: { type: "string" },
        out: { type: "string" },
        "no-pin": { type: "boolean" },
      },
    });
  }
  try {
    parsed = parse();
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  const [model, ...extra] = positionals;
  if (model === undefined) throw new UsageError(`no model given (the catalogue has ${Object.keys(onnxCatalogue).join(", ")})`);
  if (extra.length > 0) throw new UsageError(`one model at a time, got ${positionals.join(", ")}`);
  const entry = findOnnxModel(model);
  if (!entry) throw new UsageError(`unknown model "${model}" (the catalogue has ${Object.keys(onnxCatalogue).join(", ")})`);
  const batches = values.batches === undefined ? [1, 2, 4, 8] : intList("batches", values.batches, 256);
  const threads = values.threads === undefined ? Array.from({ length: cores }, (_, i) => i + 1) : intList("threads", values.threads, cores);
  const points = batches.length * threads.length;
  if (points < 4) {
    throw new UsageError(
      `fitting l(b, c) needs at least 4 (batch, threads) points, ${batches.length} x ${threads.length} = ${points}: give more batches or threads`,
    );
  }
  if (threads.length === 1) {
    throw new UsageError(
      "fitting l(b, c) needs at least 2 thread counts: with one, the parts that scale with cores and those that do not cannot be told apart",
    );
  }
  return {
    model,
    batches,
    threads,
    runs: values.runs === undefined ? 10 : count("runs", values.runs, 1),
    warmups: values.warmups === undefined ? 2 : count("warmups", values.warmups, 0),
    out: values.out ?? fileURLToPath(new URL(`../generated/profiles/${model}.json`, import.meta.url)),
    pinCpus: !values["no-pin"],
  };
}

export async function main(argv: readonly string[], io: ProfileCliIO): Promise<number> {
  let args: ProfileArgs;
  try {
    args = parseProfileArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr(`profile: ${err.message}\n${USAGE}\n`);
    return 2;
  }
  // Read before the measurement pins the process to fewer CPUs than the machine has.
  const machine = thisMachine(io.runtime ?? "onnxruntime-node");
  const loadAverage = loadavg()[0] ?? 0;
  try {
    io.stderr(`profiling ${args.model}: batches ${args.batches.join(",")} x threads ${args.threads.join(",")}, ${args.runs} runs each\n`);
    const measurement = await measureOnnxModel({
      ...args,
      onPoint: (p) => io.stderr(`  threads ${p.cores} batch ${p.batch}: ${p.ms.toFixed(1)} ms\n`),
    });
    const file = profileFile(args.model, measurement, machine, io.now?.() ?? new Date(), {
      warmups: args.warmups,
      runs: args.runs,
      pinnedCpus: args.pinCpus,
      loadAverage,
    });
    // Checked before it is written, so that a file that exists is one a service spec can use.
    const valid = themisProfileFileSchema.parse(file);
    mkdirSync(path.dirname(args.out), { recursive: true });
    writeFileSync(args.out, `${JSON.stringify(valid, null, 2)}\n`);
    io.stdout(formatProfileReport(valid));
    io.stdout(`wrote ${args.out}\n`);
    return 0;
  } catch (err) {
    io.stderr(`profile: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

function isMain(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  const { env } = await import("onnxruntime-node");
  main(process.argv.slice(2), {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    runtime: `onnxruntime-node ${env.versions.node ?? "?"}`,
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`profile: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
