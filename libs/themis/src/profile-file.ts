/**
 * A Themis profile measured on a machine (`npm run profile -- <model>`): the fitted l(b, c), how well it fits,
 * the measurements it was fitted to and the in-place resize times, with the machine and date that make it
 * reproducible. A service spec can name such a file; this schema is where it enters.
 */
import { z } from "zod";
import { themisProfileSchema } from "./latency-profile.js";

const positiveInt = z.number().int().positive();
const ms = z.number().finite().nonnegative();

export const themisProfileFileSchema = z.strictObject({
  /** The catalogue name of the model measured. */
  model: z.string().min(1),
  machine: z.strictObject({
    cpuModel: z.string(),
    /** CPUs the process could use. */
    cores: positiveInt,
    platform: z.string(),
    /** The runtime measured (e.g. "onnxruntime-node 1.30.0"). */
    runtime: z.string(),
  }),
  /** ISO 8601 time of the measurement. */
  date: z.iso.datetime(),
  /** l(b, c) in ms, c = intra-op threads (and the CPUs the process was pinned to, where it was). */
  profile: themisProfileSchema,
  fit: z.strictObject({
    meanAbsPctError: z.number().finite().nonnegative(),
    maxAbsPctError: z.number().finite().nonnegative(),
    rmseMs: ms,
  }),
  /** How each point was measured: warm-up runs discarded, then `runs` timed runs. */
  method: z.strictObject({
    warmups: z.number().int().nonnegative(),
    runs: positiveInt,
    statistic: z.literal("median"),
    pinnedCpus: z.boolean(),
    /** The machine's 1-minute load average when the run started: other work on the same CPUs inflates every point. */
    loadAverage: z.number().finite().nonnegative(),
  }),
  samples: z
    .array(
      z.strictObject({
        batch: positiveInt,
        cores: positiveInt,
        /** The statistic over the timed runs: what the fit used. */
        ms: z.number().finite().positive(),
        minMs: z.number().finite().positive(),
        maxMs: z.number().finite().positive(),
        fittedMs: ms,
      }),
    )
    .min(4),
  /** Each in-place resize made while profiling: from `fromCores` to `toCores`, until the new size served. */
  resizes: z.array(z.strictObject({ fromCores: positiveInt, toCores: positiveInt, ms })),
});

export type ThemisProfileFile = z.infer<typeof themisProfileFileSchema>;

/** Parses a profile file's JSON text; the error names the file and each bad field. */
export function parseThemisProfileFile(text: string, source = "profile file"): ThemisProfileFile {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  const parsed = themisProfileFileSchema.safeParse(json);
  if (!parsed.success) throw new Error(`${source}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
