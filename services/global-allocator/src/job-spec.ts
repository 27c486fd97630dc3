import { serviceNameProblem } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { GrpcStatusError, grpc } from "@infergrid/runtime";
import { normalizeModel } from "./spec.js";

/** Items a job may have: its record and consumer stay small enough to read in one go. */
export const MAX_JOB_ITEMS = 1_000_000;
/** Inputs per item: a batch an ONNX model and the emulated ones can take. */
export const MAX_ITEM_BATCH = 256;
/** Priorities are small integers so that an operator can reason about them. */
export const MAX_JOB_PRIORITY = 1000;

const invalid = (message: string) => new GrpcStatusError(grpc.status.INVALID_ARGUMENT, message);
const isCount = (x: number, lo: number, hi: number) => Number.isInteger(x) && x >= lo && x <= hi;

/**
 * Checks a best-effort job's spec strictly and fills in its defaults (the only place they are applied): a bad
 * spec is INVALID_ARGUMENT naming the field.
 */
export function normalizeJobSpec(spec: control.BestEffortJobSpec.$Properties | null | undefined): control.BestEffortJobSpec {
  if (!spec) throw invalid("spec is required");
  const name = spec.name ?? "";
  const nameProblem = serviceNameProblem(name);
  if (nameProblem) throw invalid(`spec.name: ${nameProblem}`);
  const model = normalizeModel(spec.model);
  const items = spec.items ?? 0;
  if (!isCount(items, 1, MAX_JOB_ITEMS)) throw invalid(`spec.items must be an integer in [1, ${MAX_JOB_ITEMS}] (got ${items})`);
  const itemBatch = spec.itemBatch || 1;
  if (!isCount(itemBatch, 1, MAX_ITEM_BATCH))
    throw invalid(`spec.item_batch must be an integer in [1, ${MAX_ITEM_BATCH}] (got ${itemBatch})`);
  const minBackends = spec.minBackends || 1;
  const maxBackends = spec.maxBackends || items;
  if (!isCount(minBackends, 1, items)) throw invalid(`spec.min_backends must be in [1, items = ${items}] (got ${minBackends})`);
  if (!(maxBackends >= minBackends)) throw invalid(`spec.max_backends (${maxBackends}) must be >= spec.min_backends (${minBackends})`);
  const priority = spec.priority ?? 0;
  if (!isCount(priority, -MAX_JOB_PRIORITY, MAX_JOB_PRIORITY))
    throw invalid(`spec.priority must be an integer in [-${MAX_JOB_PRIORITY}, ${MAX_JOB_PRIORITY}] (got ${priority})`);
  return control.BestEffortJobSpec.create({
    name,
    model,
    items,
    itemBatch,
    minBackends,
    maxBackends: Math.min(maxBackends, items),
    priority,
    seed: Number(spec.seed ?? 0),
  });
}

/** Same spec, field for field. */
export function sameJobSpec(a: control.BestEffortJobSpec.$Properties, b: control.BestEffortJobSpec.$Properties): boolean {
  const x = control.BestEffortJobSpec.encode(a).finish();
  const y = control.BestEffortJobSpec.encode(b).finish();
  return x.length === y.length && x.every((v, i) => v === y[i]);
}
