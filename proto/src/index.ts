/**
 * The project's one typed view of proto/: generated message classes (protobufjs static module,
 * compiled at build time) and the gRPC service definitions built from them. NATS payloads and
 * gRPC messages use the same classes.
 */
import "./numbers-not-longs.js";
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";
import { infergrid, inference as openInferenceProtocol } from "./gen/messages.js";
import { executeRequestDeserialize } from "./routed.js";

export import inference = infergrid.inference.v1;
export import backend = infergrid.backend.v1;
export import control = infergrid.control.v1;
export import admin = infergrid.admin.v1;
export import consoleView = infergrid.console.v1;
export import rpc = infergrid.rpc.v1;
/** The Open Inference Protocol's messages (KServe v2; package `inference` on the wire). */
export import openInference = openInferenceProtocol;

/** The static half of a generated message class: all that encoding and decoding need. */
export interface MessageType<T, P = unknown> {
  readonly name?: string;
  create(props?: P): T;
  encode(message: P, writer?: unknown): { finish(): Uint8Array };
  decode(reader: Uint8Array, length?: number): T;
  verify(message: Record<string, unknown>): string | null;
  fromObject(object: Record<string, unknown>): T;
  toObject(message: T, options?: Record<string, unknown>): Record<string, unknown>;
}

export function encodeMessage<T, P>(type: MessageType<T, P>, message: P): Uint8Array {
  return type.encode(message).finish();
}

/** Decodes bytes, or returns an error that says what was wrong instead of throwing. */
export function decodeMessage<T, P>(type: MessageType<T, P>, bytes: Uint8Array): { ok: true; value: T } | { ok: false; error: string } {
  try {
    return { ok: true, value: type.decode(bytes) };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

function unary<Req, Res, ReqP, ResP>(
  servicePath: string,
  method: string,
  req: MessageType<Req, ReqP>,
  res: MessageType<Res, ResP>,
): MethodDefinition<ReqP, ResP> {
  return {
    path: `/${servicePath}/${method}`,
    requestStream: false,
    responseStream: false,
    originalName: method.charAt(0).toLowerCase() + method.slice(1),
    requestSerialize: (m: ReqP) => Buffer.from(req.encode(m).finish()),
    requestDeserialize: (b: Buffer) => req.decode(b) as unknown as ReqP,
    responseSerialize: (m: ResP) => Buffer.from(res.encode(m).finish()),
    responseDeserialize: (b: Buffer) => res.decode(b) as unknown as ResP,
  };
}

export const InferenceServiceDefinition = {
  Infer: unary("infergrid.inference.v1.InferenceService", "Infer", inference.InferRequest, inference.InferResponse),
} satisfies ServiceDefinition;

export const BackendServiceDefinition = {
  Execute: unary("infergrid.backend.v1.BackendService", "Execute", backend.ExecuteRequest, backend.ExecuteReply),
  WarmUp: unary("infergrid.backend.v1.BackendService", "WarmUp", backend.WarmUpRequest, backend.WarmUpReply),
  Park: unary("infergrid.backend.v1.BackendService", "Park", backend.ParkRequest, backend.ParkReply),
  Release: unary("infergrid.backend.v1.BackendService", "Release", backend.ReleaseRequest, backend.ReleaseReply),
  Resize: unary("infergrid.backend.v1.BackendService", "Resize", backend.ResizeRequest, backend.ResizeReply),
} satisfies ServiceDefinition;

/**
 * BackendService as a backend serves it: Execute's tensors decode straight into Float32Arrays
 * (`decodeExecuteRequest`; on the direct path into arrays lent for the call, `executeRequestDeserialize`), and bytes that are not an ExecuteRequest reach the handler (INVALID_ARGUMENT)
 * instead of failing in grpc-js (INTERNAL). Clients use BackendServiceDefinition; the wire is the same.
 */
export const BackendServingDefinition = {
  ...BackendServiceDefinition,
  Execute: { ...BackendServiceDefinition.Execute, requestDeserialize: executeRequestDeserialize },
} satisfies ServiceDefinition;

const oipPath = "inference.GRPCInferenceService";
/** The Open Inference Protocol's gRPC service (KServe v2), which the broker serves beside InferenceService. */
export const OpenInferenceDefinition = {
  ServerLive: unary(oipPath, "ServerLive", openInference.ServerLiveRequest, openInference.ServerLiveResponse),
  ServerReady: unary(oipPath, "ServerReady", openInference.ServerReadyRequest, openInference.ServerReadyResponse),
  ModelReady: unary(oipPath, "ModelReady", openInference.ModelReadyRequest, openInference.ModelReadyResponse),
  ServerMetadata: unary(oipPath, "ServerMetadata", openInference.ServerMetadataRequest, openInference.ServerMetadataResponse),
  ModelMetadata: unary(oipPath, "ModelMetadata", openInference.ModelMetadataRequest, openInference.ModelMetadataResponse),
  ModelInfer: unary(oipPath, "ModelInfer", openInference.ModelInferRequest, openInference.ModelInferResponse),
} satisfies ServiceDefinition;

const adminPath = "infergrid.admin.v1.AllocatorAdmin";
export const AllocatorAdminDefinition = {
  RegisterService: unary(adminPath, "RegisterService", admin.RegisterServiceRequest, admin.RegisterServiceReply),
  DeregisterService: unary(adminPath, "DeregisterService", admin.DeregisterServiceRequest, admin.DeregisterServiceReply),
  GetService: unary(adminPath, "GetService", admin.GetServiceRequest, control.ServiceEntry),
  ListServices: unary(adminPath, "ListServices", admin.ListServicesRequest, admin.ListServicesReply),
  GetClusterState: unary(adminPath, "GetClusterState", admin.GetClusterStateRequest, control.ClusterState),
  SubmitJob: unary(adminPath, "SubmitJob", admin.SubmitJobRequest, admin.SubmitJobReply),
  GetJob: unary(adminPath, "GetJob", admin.GetJobRequest, control.BestEffortJob),
  ListJobs: unary(adminPath, "ListJobs", admin.ListJobsRequest, admin.ListJobsReply),
  CancelJob: unary(adminPath, "CancelJob", admin.CancelJobRequest, control.BestEffortJob),
} satisfies ServiceDefinition;

/** A view of encoded bytes as a Buffer, without copying (protobufjs already writes Buffers in Node). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Unary calls multiplexed over one stream per peer (multiplex.proto; runtime's multiplex.ts). */
export const MultiplexDefinition = {
  Calls: {
    path: "/infergrid.rpc.v1.Multiplex/Calls",
    requestStream: true,
    responseStream: true,
    originalName: "calls",
    requestSerialize: (m: rpc.ICall) => asBuffer(rpc.Call.encode(m).finish()),
    requestDeserialize: (b: Buffer) => rpc.Call.decode(b),
    responseSerialize: (m: rpc.IOutcome) => asBuffer(rpc.Outcome.encode(m).finish()),
    responseDeserialize: (b: Buffer) => rpc.Outcome.decode(b),
  },
} satisfies ServiceDefinition;

/** Request and response property types of a method definition. */
export type RequestOf<M> = M extends MethodDefinition<infer Req, unknown> ? Req : never;
export type ResponseOf<M> = M extends MethodDefinition<unknown, infer Res> ? Res : never;
export * from "./model-infer.js";
export * from "./routed.js";
export * from "./signed-fields.js";
