import { endianness } from "node:os";
import { MAX_INPUTS } from "@infergrid/dataplane";
import {
  type DecodedModelInfer,
  float32Entry,
  type InputEntry,
  inference,
  type openInference,
  type RoutedInferRequest,
} from "@infergrid/proto";
import { GrpcStatusError, grpc } from "@infergrid/runtime";
import { z } from "zod";

/**
 * The Open Inference Protocol (KServe's "v2" protocol, which Triton, MLServer and KServe serve), REST and gRPC,
 * converted to this system's InferRequest once, at the broker, and its answer back, so that a client written for
 * those servers calls InferGrid unchanged. A model is a service; services have no versions. Tensors are FP32, as
 * everywhere in the system: other datatypes and Triton's binary-data extension are refused by name rather than
 * converted (an INT64 token id or an FP64 value does not survive float32 unchanged).
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
/** How deep a REST tensor's `data` may nest: one level per dimension, at most the dims a tensor may have (validate.ts). */
const MAX_NESTING = 8;
const LITTLE_ENDIAN = endianness() === "LE";

export interface OpenInferenceRequest {
  /** The request as the request path carries it (its tensors written once, from their float32 bytes). */
  request: RoutedInferRequest;
  /** The outputs the client asked for, in its order (undefined: every output). */
  outputs: string[] | undefined;
}

function invalid(message: string): GrpcStatusError {
  return new GrpcStatusError(grpc.status.INVALID_ARGUMENT, message);
}

/** A readiness or metadata call for a service the registry does not hold. */
export function unknownModel(model: string): GrpcStatusError {
  return new GrpcStatusError(grpc.status.NOT_FOUND, `no model ${JSON.stringify(model)}: no service of that name is registered`);
}

/** Services have no versions: a versioned call names none of them. */
export function versionProblem(model: string, version: string): GrpcStatusError {
  return new GrpcStatusError(
    grpc.status.NOT_FOUND,
    `InferGrid's services have no versions: ask for model ${JSON.stringify(model)} without one (version ${JSON.stringify(version)} asked)`,
  );
}

/** One input as either transport gives it, its values read only once its form is checked. */
interface OpenInput {
  name: string;
  datatype: string;
  shape: readonly number[];
  /** Triton's binary-data extension (`binary_data_size`): the values are elsewhere in the body. */
  binary: boolean;
  /** The `count` values as little-endian float32 bytes (INVALID_ARGUMENT if there are not that many). */
  floatBytes: (count: number) => Uint8Array;
}

function toRequest(model: string, id: string, inputs: readonly OpenInput[], outputs: string[] | undefined): OpenInferenceRequest {
  // Counted before any is converted, with the request path's own bound and message.
  if (inputs.length > MAX_INPUTS) throw invalid(`${inputs.length} inputs, at most ${MAX_INPUTS}`);
  const entries: InputEntry[] = [];
  const names = new Set<string>();
  for (const input of inputs) {
    const name = JSON.stringify(input.name);
    if (input.name === "") throw invalid("an input has no name");
    if (names.has(input.name)) throw invalid(`input ${name} is given twice`);
    names.add(input.name);
    if (!DATATYPES.has(input.datatype)) throw invalid(`input ${name}: ${JSON.stringify(input.datatype)} is not a datatype of the protocol`);
    if (input.datatype !== "FP32")
      throw invalid(`input ${name}: datatype ${input.datatype} is not supported; InferGrid carries FP32 tensors only`);
    if (input.binary)
      throw invalid(`input ${name}: binary tensor data (Triton's binary-data extension) is not supported; send data as JSON`);
    const bad = input.shape.find((d) => !Number.isSafeInteger(d) || d < 0);
    if (bad !== undefined) throw invalid(`input ${name}: shape ${JSON.stringify(input.shape)} must be non-negative integers`);
    const count = input.shape.reduce((a, b) => a * b, 1);
    entries.push(float32Entry(input.name, input.shape, input.floatBytes(count)));
  }
  if (outputs && new Set(outputs).size !== outputs.length) throw invalid("an output is asked for twice");
  return { request: { service: model, requestId: id, deadlineUnixMs: 0, inputs: entries }, outputs };
}

// ---- REST ----------------------------------------------------------------------------------------------

const parametersSchema = z.record(z.string(), z.unknown());

const restRequestSchema = z.object({
  id: z.string().optional(),
  parameters: parametersSchema.optional(),
  inputs: z.array(
    z.object({
      name: z.string().min(1, "must not be empty"),
      shape: z.array(z.number().int("must be an integer").nonnegative("must not be negative")),
      datatype: z.string(),
      parameters: parametersSchema.optional(),
      data: z.unknown().optional(),
    }),
  ),
  outputs: z.array(z.object({ name: z.string().min(1, "must not be empty"), parameters: parametersSchema.optional() })).optional(),
});

function issuePath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${String(p)}`)).join("");
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "string") return "a string";
  if (typeof value === "boolean") return "a boolean";
  return typeof value === "object" ? "an object" : typeof value;
}

/** REST `data` as the protocol allows it (flat, or nested row-major arrays), flattened in order. */
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

function counted(name: string, shape: readonly number[], count: number, got: number): void {
  if (count !== got) throw invalid(`input ${JSON.stringify(name)}: shape ${JSON.stringify(shape)} holds ${count} values, data has ${got}`);
}

/** The body of `POST /v2/models/<model>/infer` as an InferRequest for `model`; INVALID_ARGUMENT naming what is wrong. */
export function fromOpenInference(body: unknown, model: string): OpenInferenceRequest {
  const parsed = restRequestSchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue ? issuePath(issue.path) : "";
    throw invalid(`malformed inference request: ${where === "" ? "" : `${where}: `}${issue?.message ?? "not an inference request"}`);
  }
  const req = parsed.data;
  const inputs = req.inputs.map(
    (input): OpenInput => ({
      name: input.name,
      datatype: input.datatype,
      shape: input.shape,
      binary: input.parameters?.binary_data_size !== undefined,
      floatBytes: (count) => {
        if (input.data === undefined) throw invalid(`input ${JSON.stringify(input.name)}: data is missing`);
        const data = flatten(input.name, input.data);
        counted(input.name, input.shape, count, data.length);
        return fp32ToBytes(data);
      },
    }),
  );
  return toRequest(
    model,
    req.id ?? "",
    inputs,
    req.outputs?.map((o) => o.name),
  );
}

// ---- gRPC ----------------------------------------------------------------------------------------------

function fp32ToBytes(values: ArrayLike<number>): Uint8Array {
  const f32 = Float32Array.from(values);
  if (LITTLE_ENDIAN) return new Uint8Array(f32.buffer);
  const out = new Uint8Array(4 * f32.length);
  const view = new DataView(out.buffer);
  for (let i = 0; i < f32.length; i++) view.setFloat32(4 * i, f32[i] as number, true);
  return out;
}

/**
 * A ModelInferRequest (read by proto's decodeModelInfer: FP32 values as their bytes) as an InferRequest;
 * INVALID_ARGUMENT naming what is wrong, NOT_FOUND for a version. Reads every value it forwards before it returns:
 * the request's bytes may be a pooled buffer given back with the call.
 */
export function fromModelInfer(req: DecodedModelInfer): OpenInferenceRequest & { raw: boolean } {
  if (req.modelName === "") throw invalid("model_name is required");
  if (req.modelVersion !== "") throw versionProblem(req.modelName, req.modelVersion);
  const total = req.inputs.length + req.inputsBeyond;
  if (total > MAX_INPUTS) throw invalid(`${total} inputs, at most ${MAX_INPUTS}`);
  const raw = req.rawInputContents.length > 0;
  if (raw && req.rawInputContents.length !== req.inputs.length)
    throw invalid(`raw_input_contents holds ${req.rawInputContents.length} tensors for ${req.inputs.length} inputs`);
  const inputs = req.inputs.map(
    (input, i): OpenInput => ({
      name: input.name,
      datatype: input.datatype,
      shape: input.shape,
      binary: false,
      floatBytes: (count) => {
        const name = JSON.stringify(input.name);
        if (input.otherContents !== undefined)
          throw invalid(`input ${name}: its values are in ${input.otherContents}, which FP32 does not use (fp32_contents)`);
        if (raw) {
          if (input.fp32.byteLength > 0) throw invalid(`input ${name}: values both in contents and in raw_input_contents`);
          const bytes = req.rawInputContents[i] as Uint8Array;
          if (bytes.byteLength !== 4 * count)
            throw invalid(
              `input ${name}: raw_input_contents holds ${bytes.byteLength} bytes, shape ${JSON.stringify(input.shape)} of FP32 needs ${4 * count}`,
            );
          // Little-endian on the wire, as the routed entry holds them: forwarded as they are, on any host.
          return bytes;
        }
        counted(input.name, input.shape, count, input.fp32.byteLength / 4);
        return input.fp32;
      },
    }),
  );
  return { ...toRequest(req.modelName, req.id, inputs, req.outputs.length > 0 ? req.outputs : undefined), raw };
}

// ---- answers ---------------------------------------------------------------------------------------------

interface Answer {
  id: string;
  backendId: string;
  frontendId: string;
  totalMs: number;
  computeMs: number;
  attempts: number;
  outputs: { name: string; shape: number[]; data: number[] }[];
}

/** The frontend's answer (an InferResponse's bytes) with only the outputs asked for, in the order asked. */
function answerOf(encoded: Uint8Array, outputs: string[] | undefined): Answer {
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
    id: res.requestId,
    backendId: res.backendId,
    frontendId: res.frontendId,
    totalMs: res.timing?.totalMs ?? 0,
    computeMs: res.timing?.computeMs ?? 0,
    attempts: res.timing?.attempts ?? 0,
    outputs: names.map((name) => {
      const t = byName.get(name) as inference.Tensor;
      return { name, shape: t.dims.map(Number), data: t.data };
    }),
  };
}

/** The protocol's REST inference response, with what served it as parameters. */
export interface OpenInferenceResponse {
  model_name: string;
  id: string;
  parameters: { backend_id: string; frontend_id: string; total_ms: number; compute_ms: number; attempts: number };
  outputs: { name: string; shape: number[]; datatype: "FP32"; data: number[] }[];
}

/** The frontend's answer as the REST response, only `outputs` if given (INVALID_ARGUMENT for one not produced). */
export function toOpenInference(encoded: Uint8Array, model: string, outputs: string[] | undefined): OpenInferenceResponse {
  const a = answerOf(encoded, outputs);
  return {
    model_name: model,
    id: a.id,
    parameters: { backend_id: a.backendId, frontend_id: a.frontendId, total_ms: a.totalMs, compute_ms: a.computeMs, attempts: a.attempts },
    outputs: a.outputs.map((o) => ({ name: o.name, shape: o.shape, datatype: "FP32", data: o.data })),
  };
}

/** The frontend's answer as a ModelInferResponse: values raw when the request's were, else in fp32_contents. */
export function toModelInfer(
  encoded: Uint8Array,
  model: string,
  outputs: string[] | undefined,
  raw: boolean,
): openInference.IModelInferResponse {
  const a = answerOf(encoded, outputs);
  return {
    modelName: model,
    id: a.id,
    parameters: {
      backend_id: { stringParam: a.backendId },
      frontend_id: { stringParam: a.frontendId },
      total_ms: { doubleParam: a.totalMs },
      compute_ms: { doubleParam: a.computeMs },
      attempts: { int64Param: a.attempts },
    },
    outputs: a.outputs.map((o) => ({
      name: o.name,
      datatype: "FP32",
      shape: o.shape,
      ...(raw ? {} : { contents: { fp32Contents: o.data } }),
    })),
    rawOutputContents: raw ? a.outputs.map((o) => fp32ToBytes(o.data)) : [],
  };
}
