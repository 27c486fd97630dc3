import { inference } from "@infergrid/proto";
import { GrpcStatusError, grpc } from "@infergrid/runtime";
import { z } from "zod";

/**
 * The Open Inference Protocol's REST inference (KServe's "v2" protocol, which Triton, MLServer and KServe serve):
 * `POST /v2/models/<model>/infer`, converted to this system's InferRequest once, at the broker, and its answer back,
 * so that a client written for those servers calls InferGrid unchanged. A model is a service; services have no
 * versions. Tensors are FP32, as everywhere in the system; other datatypes and Triton's binary-data extension are
 * refused by name rather than converted (an INT64 token id or an FP64 value does not survive float32 unchanged).
 */

/** The protocol's datatypes (its "Tensor Data Types" table); only FP32 is carried. */
const DATATYPES = new Set([
  "BOOL",
  "UINT8",
  "UINT16",
  "UINT32",
  "UINT64",
  "INT8",
  "INT16",
  "INT32",
  "INT64",
  "FP16",
  "FP32",
  "FP64",
  "BYTES",
]);
/** How deep a tensor's `data` may nest: one level per dimension, at most the dims a tensor may have (validate.ts). */
const MAX_NESTING = 8;

const parametersSchema = z.record(z.string(), z.unknown());

const inputSchema = z.object({
  name: z.string().min(1, "must not be empty"),
  shape: z.array(z.number().int("must be an integer").nonnegative("must not be negative")),
  datatype: z.string(),
  parameters: parametersSchema.optional(),
  data: z.unknown().optional(),
});

const requestSchema = z.object({
  id: z.string().optional(),
  parameters: parametersSchema.optional(),
  inputs: z.array(inputSchema),
  outputs: z.array(z.object({ name: z.string().min(1, "must not be empty"), parameters: parametersSchema.optional() })).optional(),
});

export interface OpenInferenceRequest {
  /** The request as the request path carries it. */
  request: inference.InferRequest;
  /** The outputs the client asked for, in its order (undefined: every output). */
  outputs: string[] | undefined;
}

export interface OpenInferenceOutput {
  name: string;
  shape: number[];
  datatype: "FP32";
  data: number[];
}

/** The protocol's inference response, with what this system adds to its answers as parameters. */
export interface OpenInferenceResponse {
  model_name: string;
  id: string;
  parameters: { backend_id: string; frontend_id: string; total_ms: number; compute_ms: number; attempts: number };
  outputs: OpenInferenceOutput[];
}

function invalid(message: string): GrpcStatusError {
  return new GrpcStatusError(grpc.status.INVALID_ARGUMENT, message);
}

function issuePath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${String(p)}`)).join("");
}

/** `data` as the protocol allows it (flat, or nested row-major arrays) flattened to float32 values in order. */
function flatten(name: string, data: unknown): number[] {
  const out: number[] = [];
  const walk = (value: unknown, depth: number): void => {
    if (typeof value === "number") {
      out.push(value);
      return;
    }
    if (!Array.isArray(value)) throw invalid(`input ${JSON.stringify(name)}: data holds ${describe(value)}, not a number`);
    if (depth >= MAX_NESTING) throw invalid(`input ${JSON.stringify(name)}: data nests deeper than ${MAX_NESTING} arrays`);
    for (const v of value) walk(v, depth + 1);
  };
  walk(data, 0);
  return out;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "string") return "a string";
  if (typeof value === "boolean") return "a boolean";
  return typeof value === "object" ? "an object" : typeof value;
}

/** The body of `POST /v2/models/<model>/infer` as an InferRequest for `model`; INVALID_ARGUMENT naming what is wrong. */
export function fromOpenInference(body: unknown, model: string): OpenInferenceRequest {
  const parsed = requestSchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue ? issuePath(issue.path) : "";
    throw invalid(`malformed inference request: ${where === "" ? "" : `${where}: `}${issue?.message ?? "not an inference request"}`);
  }
  const req = parsed.data;
  const inputs: Record<string, inference.ITensor> = {};
  for (const input of req.inputs) {
    const name = JSON.stringify(input.name);
    if (Object.hasOwn(inputs, input.name)) throw invalid(`input ${name} is given twice`);
    if (!DATATYPES.has(input.datatype)) throw invalid(`input ${name}: ${JSON.stringify(input.datatype)} is not a datatype of the protocol`);
    if (input.datatype !== "FP32")
      throw invalid(`input ${name}: datatype ${input.datatype} is not supported; InferGrid carries FP32 tensors only`);
    if (input.parameters?.binary_data_size !== undefined)
      throw invalid(`input ${name}: binary tensor data (Triton's binary-data extension) is not supported; send data as JSON`);
    if (input.data === undefined) throw invalid(`input ${name}: data is missing`);
    const data = flatten(input.name, input.data);
    const count = input.shape.reduce((a, b) => a * b, 1);
    if (count !== data.length)
      throw invalid(`input ${name}: shape ${JSON.stringify(input.shape)} holds ${count} values, data has ${data.length}`);
    inputs[input.name] = { dtype: "float32", dims: input.shape, data };
  }
  const outputs = req.outputs?.map((o) => o.name);
  if (outputs && new Set(outputs).size !== outputs.length) throw invalid("an output is asked for twice");
  return {
    request: inference.InferRequest.create({ service: model, requestId: req.id ?? "", inputs }),
    outputs,
  };
}

/** An InferResponse (its bytes, as the frontend answered) as the protocol's response, only `outputs` if given. */
export function toOpenInference(encoded: Uint8Array, model: string, outputs: string[] | undefined): OpenInferenceResponse {
  const res = inference.InferResponse.decode(encoded);
  const produced = Object.entries(res.outputs);
  const byName = new Map(produced);
  const names = outputs ?? produced.map(([name]) => name);
  const missing = names.find((n) => !byName.has(n));
  if (missing !== undefined)
    throw invalid(
      `the model produced no output ${JSON.stringify(missing)} (it produced ${produced.map(([n]) => JSON.stringify(n)).join(", ") || "none"})`,
    );
  return {
    model_name: model,
    id: res.requestId,
    parameters: {
      backend_id: res.backendId,
      frontend_id: res.frontendId,
      total_ms: res.timing?.totalMs ?? 0,
      compute_ms: res.timing?.computeMs ?? 0,
      attempts: res.timing?.attempts ?? 0,
    },
    outputs: names.map((name) => {
      const t = byName.get(name) as inference.Tensor;
      return { name, shape: t.dims.map(Number), datatype: "FP32", data: t.data };
    }),
  };
}
