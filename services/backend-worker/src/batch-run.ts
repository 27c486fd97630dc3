import { EmulatedModel, type InferResult, InvalidModelInputError, type ModelRuntime, type TensorValue } from "@infergrid/models";

/** One request's answer from a batch: its result, or the error that request (alone) ends with. */
export type BatchAnswer = InferResult | Error;

type Inputs = Record<string, TensorValue>;

/** A request's inputs laid out for stacking: the same names in the same order, each [rows, ...item]. */
interface Layout {
  names: string[];
  itemDims: Map<string, number[]>;
}

function sizeOf(dims: readonly number[]): number {
  return dims.reduce((a, d) => a * d, 1);
}

/** The rows of a request whose every input is [rows, ...itemDims] with consistent data; undefined otherwise. */
function rowsOf(inputs: Inputs, layout: Layout): number | undefined {
  const names = Object.keys(inputs).sort();
  if (names.length === 0 || names.join("\0") !== layout.names.join("\0")) return undefined;
  let rows: number | undefined;
  for (const name of names) {
    const t = inputs[name];
    const item = layout.itemDims.get(name);
    if (!t || !item || t.dims.length !== item.length + 1 || !t.dims.every((d) => Number.isInteger(d) && d >= 0)) return undefined;
    if (!t.dims.slice(1).every((d, i) => d === item[i])) return undefined;
    if (t.data.length !== sizeOf(t.dims)) return undefined;
    const r = t.dims[0] ?? 0;
    if (rows !== undefined && r !== rows) return undefined;
    rows = r;
  }
  return rows !== undefined && rows > 0 ? rows : undefined;
}

/**
 * The requests' inputs stacked along the batch dimension, with each request's rows; undefined when they cannot
 * be (names, item shapes or row counts differ, or a tensor's data does not match its dims).
 */
export function stackInputs(batch: readonly Inputs[]): { inputs: Inputs; rows: number[] } | undefined {
  const first = batch[0];
  if (first === undefined) return undefined;
  const names = Object.keys(first).sort();
  const layout: Layout = { names, itemDims: new Map(names.map((n) => [n, (first[n]?.dims ?? []).slice(1)])) };
  const rows: number[] = [];
  for (const inputs of batch) {
    const r = rowsOf(inputs, layout);
    if (r === undefined) return undefined;
    rows.push(r);
  }
  const total = rows.reduce((a, r) => a + r, 0);
  const inputs: Inputs = {};
  for (const name of names) {
    const item = layout.itemDims.get(name) ?? [];
    const data = new Float32Array(total * sizeOf(item));
    let at = 0;
    for (const request of batch) {
      const t = request[name] as TensorValue;
      data.set(t.data, at);
      at += t.data.length;
    }
    inputs[name] = { dims: [total, ...item], data };
  }
  return { inputs, rows };
}

/**
 * Each request's own outputs, cut from the batch's along the first dimension by its rows; undefined when an
 * output is not batch-major (its first dimension is not the batch's rows, or its data does not match its dims).
 */
export function splitOutputs(outputs: Record<string, TensorValue>, rows: readonly number[]): Record<string, TensorValue>[] | undefined {
  const total = rows.reduce((a, r) => a + r, 0);
  const parts: Record<string, TensorValue>[] = rows.map(() => ({}));
  for (const [name, t] of Object.entries(outputs)) {
    if (t.dims[0] !== total || t.data.length !== sizeOf(t.dims)) return undefined;
    const item = t.dims.slice(1);
    const per = sizeOf(item);
    let at = 0;
    rows.forEach((r, i) => {
      const part = parts[i] as Record<string, TensorValue>;
      part[name] = { dims: [r, ...item], data: Float32Array.from(t.data.slice(at, at + r * per)) };
      at += r * per;
    });
  }
  return parts;
}

/** Each request on its own, one after another: every one gets its own result or error. */
async function oneByOne(runtime: ModelRuntime, batch: readonly Inputs[]): Promise<BatchAnswer[]> {
  const answers: BatchAnswer[] = [];
  for (const inputs of batch) {
    try {
      answers.push(await runtime.infer(inputs));
    } catch (err) {
      answers.push(err instanceof Error ? err : new Error(String(err)));
    }
  }
  return answers;
}

/**
 * Runs a batch as one model call and answers each request from it. An emulated model serves the batch in one
 * sleep of its batch time. A real model gets the inputs stacked along the batch dimension and each request its
 * own rows of the outputs; when they cannot be stacked, the model refuses the stack (for example beyond its
 * largest batch), or its outputs are not batch-major, the requests run one by one instead, so each still gets
 * exactly its own answer. A single request runs as it always has. Throws only when the whole batch failed.
 */
export async function runBatch(runtime: ModelRuntime, batch: readonly Inputs[]): Promise<BatchAnswer[]> {
  if (batch.length === 1) return [await runtime.infer(batch[0] as Inputs)];
  if (runtime instanceof EmulatedModel) return runtime.inferBatch(batch);
  const stacked = stackInputs(batch);
  if (stacked === undefined) return oneByOne(runtime, batch);
  let result: InferResult;
  try {
    result = await runtime.infer(stacked.inputs);
  } catch (err) {
    if (err instanceof InvalidModelInputError) return oneByOne(runtime, batch);
    throw err;
  }
  const parts = splitOutputs(result.outputs, stacked.rows);
  if (parts === undefined) return oneByOne(runtime, batch);
  return parts.map((outputs) => ({ outputs, computeMs: result.computeMs }));
}
