import { HARVEST_DEFAULTS } from "@infergrid/fapes";
import { controlTokenConfigShape, field } from "@infergrid/runtime";
import { z } from "zod";

/** The largest batch size a worker takes (--max-batch, and Resize's max_batch). */
export const MAX_BATCH_BOUND = 64;

export const backendConfig = z.object({
  instanceType: field.string("cpu-1").describe("instance type this worker reports (for the allocator)"),
  concurrency: field
    .int(1, 1, 64)
    .describe("requests executed at once, each on its own (Swayam: 1); above 1, batching (--max-batch) is off"),
  cores: field.int(1, 1, 1024).describe("cores the model runs on (Themis's c; an emulated model with a Themis profile scales by them)"),
  maxCores: field.int(16, 1, 1024).describe("this node's limit on cores: Resize accepts 1..max-cores"),
  maxBatch: field.int(1, 1, MAX_BATCH_BOUND).describe("batch size b: up to b accepted requests run as one model call"),
  batchTimeoutMs: z
    .union([z.literal(["Infinity", "inf"]).transform(() => Number.POSITIVE_INFINITY), z.coerce.number().min(0)])
    .default(0)
    .describe("how long a partial batch waits on an idle model for more requests (0: not at all; Infinity: until b)"),
  idleTimeoutMs: field.ms(300_000).describe("T: a warm backend idle this long decommissions itself"),
  tSetupMs: field.ms(10_000).describe("t_setup: window for the distinct-frontends count"),
  maxRequestBytes: field.int(16 * 1024 * 1024, 1024).describe("largest accepted request, bytes"),
  holdMs: field.ms(1_000).describe("late binding: how long a slot held for a parked request waits for its Execute"),
  onnxThreads: field.int(1, 1, 64).describe("intra-op threads for ONNX models (unless the spec says)"),
  harvest: field
    .bool(false)
    .describe(
      "harvesting: while it serves a service, run best-effort job items in its idle time, in a second process stopped (SIGSTOP) whenever a request computes",
    ),
  harvestResumeAfterMs: field
    .ms(HARVEST_DEFAULTS.resumeAfterMs)
    .describe("harvesting: idle time after the last request before the best-effort process continues"),
  harvestAbandonAfterMs: field
    .ms(HARVEST_DEFAULTS.abandonAfterMs)
    .describe("harvesting: a best-effort item stopped this long is given back for another backend to run"),
  ...controlTokenConfigShape,
});

export type BackendConfig = z.infer<typeof backendConfig>;

/**
 * What is wrong with the configured size, across fields (the schema checks each alone; the service shell
 * extends the schema, which would drop a refinement).
 */
export function sizeProblem(c: Pick<BackendConfig, "cores" | "maxCores" | "concurrency" | "maxBatch">): string | undefined {
  if (c.cores > c.maxCores) return `--cores (${c.cores}) must not exceed --max-cores (${c.maxCores})`;
  if (c.concurrency > 1 && c.maxBatch > 1) return `--max-batch ${c.maxBatch} needs --concurrency 1 (batches run one at a time)`;
  return undefined;
}
