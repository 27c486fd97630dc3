import { serviceNameProblem } from "@infergrid/control-plane";
import { inputShapes, type RoutedInferRequest, type TensorShape } from "@infergrid/proto";
import { firstNonFinite } from "./finite-values.js";

const MAX_DIMS = 8;
/**
 * Inputs a request may carry. Models take a handful; a request of 100,000 tiny tensors under the size cap
 * costs every hop a map of 100,000 entries and a backend seconds of decoding, paid by the other clients.
 */
export const MAX_INPUTS = 64;
/**
 * Values a request may carry across all its inputs: 16 MiB of float32, a batch of 27 images of 224x224x3. At
 * the default --max-request-bytes (4 MiB) the byte cap binds first; this one bounds the decoding and the
 * model's work when an operator raises that cap.
 */
export const MAX_ELEMENTS = 4 * 1024 * 1024;

/**
 * A tensor's form, checked without its values: known dtype, at most MAX_DIMS non-negative integer dims spanning
 * at most MAX_ELEMENTS (zeros aside: an empty tensor of dims [1e15, 0] would claim a batch of 1e15, which the
 * frontend prices and an emulated backend sleeps for), and exactly as many values as the dims say. The broker and
 * the frontend check this much on the bytes they forward.
 */
export function shapeProblem(name: string, t: TensorShape | null | undefined): string | undefined {
  if (!t) return `input ${JSON.stringify(name)} is empty`;
  if (t.dtype && t.dtype !== "float32")
    return `input ${JSON.stringify(name)}: dtype ${JSON.stringify(t.dtype)} is not supported (float32 only)`;
  const dims = t.dims;
  if (dims.length > MAX_DIMS) return `input ${JSON.stringify(name)}: ${dims.length} dims, at most ${MAX_DIMS}`;
  let count = 1;
  let span = 1;
  for (const n of dims) {
    if (!Number.isInteger(n) || n < 0)
      return `input ${JSON.stringify(name)}: dims must be non-negative integers, got ${JSON.stringify(dims)}`;
    count *= n;
    span *= Math.max(1, n);
    if (span > MAX_ELEMENTS)
      return `input ${JSON.stringify(name)}: dims ${JSON.stringify(dims)} span more than ${MAX_ELEMENTS} values (zeros aside)`;
  }
  if (dims.length > 0 && count !== t.values)
    return `input ${JSON.stringify(name)}: dims ${JSON.stringify(dims)} need ${count} values, got ${t.values}`;
  return undefined;
}

function nameProblem(name: string): string | undefined {
  return name.length === 0 || name.length > 128 ? "input names must be 1 to 128 characters" : undefined;
}

/** A tensor with its values: as generated code or a client builds it, or as the backend decodes it (Float32Array). */
export interface TensorInput {
  dtype?: string | null;
  dims?: number[] | null;
  data?: ArrayLike<number> | null;
}

/** The whole tensor: its form, and every value finite. Only the backend, which decodes the values, checks this. */
export function tensorProblem(name: string, t: TensorInput | null | undefined): string | undefined {
  if (!t) return shapeProblem(name, t);
  const data: ArrayLike<number> = t.data ?? [];
  const shape = shapeProblem(name, { dtype: t.dtype ?? "", dims: (t.dims ?? []).map(Number), values: data.length });
  if (shape) return shape;
  const bad = firstNonFinite(data);
  return bad < 0 ? undefined : `input ${JSON.stringify(name)}: value ${bad} is not a finite number`;
}

function tooManyInputs(n: number): string | undefined {
  return n > MAX_INPUTS ? `${n} inputs, at most ${MAX_INPUTS}` : undefined;
}

function tooManyValues(n: number): string | undefined {
  return n > MAX_ELEMENTS ? `${n} values in all inputs, at most ${MAX_ELEMENTS}` : undefined;
}

export function inputsProblem(inputs: Record<string, TensorInput | null> | null | undefined): string | undefined {
  const many = tooManyInputs(Object.keys(inputs ?? {}).length);
  if (many) return many;
  let values = 0;
  for (const [name, t] of Object.entries(inputs ?? {})) {
    const p = nameProblem(name) ?? tensorProblem(name, t);
    if (p) return p;
    values += t?.data?.length ?? 0;
  }
  return tooManyValues(values);
}

function headerProblem(service: string, requestId: string, deadlineUnixMs: number): string | undefined {
  if (!service) return "service is required";
  if (serviceNameProblem(service)) return `service ${JSON.stringify(service)} is not a valid service name`;
  if (requestId.length > 128) return "request_id is longer than 128 characters";
  if (!Number.isFinite(deadlineUnixMs) || deadlineUnixMs < 0) return "deadline_unix_ms must be a non-negative Unix time in milliseconds";
  return undefined;
}

/**
 * A request on its way through the broker or the frontend: its header, and each input's form read from the
 * bytes (values are checked where they are decoded, at the backend). Returns the problem, or the input shapes.
 */
export function routedRequestProblem(req: RoutedInferRequest): { problem: string } | { shapes: Map<string, TensorShape | null> } {
  if (req.undecodable) return { problem: req.undecodable };
  const header = headerProblem(req.service, req.requestId, req.deadlineUnixMs);
  if (header) return { problem: header };
  // Counted before anything is read: entries on the wire, duplicates included.
  const many = tooManyInputs(req.inputs.length + (req.inputsBeyond ?? 0));
  if (many) return { problem: many };
  const read = inputShapes(req.inputs);
  if (!read.ok) return { problem: read.error };
  let values = 0;
  for (const [name, shape] of read.shapes) {
    const p = nameProblem(name) ?? shapeProblem(name, shape);
    if (p) return { problem: p };
    values += shape?.values ?? 0;
  }
  const heavy = tooManyValues(values);
  return heavy ? { problem: heavy } : { shapes: read.shapes };
}
