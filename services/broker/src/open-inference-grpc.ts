import { type DecodedModelInfer, decodeModelInfer, OpenInferenceDefinition, type openInference } from "@infergrid/proto";
import { callSignal, GrpcStatusError, grpc, type Logger, unaryHandler } from "@infergrid/runtime";
import type { Ingress } from "./ingress.js";
import type { ModelDirectory } from "./model-directory.js";
import { fromModelInfer, toModelInfer, unknownModel, versionProblem } from "./open-inference.js";

/** A ModelInferRequest as the handler gets it: bytes that are not one reach it (INVALID_ARGUMENT, not grpc-js's INTERNAL). */
export type ModelInferInput = DecodedModelInfer | { undecodable: string };

const modelInferServing: grpc.MethodDefinition<ModelInferInput, openInference.IModelInferResponse> = {
  ...OpenInferenceDefinition.ModelInfer,
  // Never called on a server (it serializes answers, not requests).
  requestSerialize: () => {
    throw new TypeError("the broker does not send ModelInferRequests");
  },
  // FP32 values read as their bytes (proto's model-infer.ts), not as a number each.
  requestDeserialize: (bytes: Buffer): ModelInferInput => decodeModelInfer(bytes),
};

/** The Open Inference Protocol's gRPC service as the broker serves it: ModelInfer's bad bytes reach the handler. */
export const OpenInferenceServingDefinition = {
  ...OpenInferenceDefinition,
  ModelInfer: modelInferServing,
} satisfies grpc.ServiceDefinition;

/** Who a call comes from (Ingress.admit over the call's metadata and certificate); throws UNAUTHENTICATED. */
export type AdmitCall = (call: Pick<grpc.ServerUnaryCall<unknown, unknown>, "metadata" | "getPeer" | "getAuthContext">) => string;

/**
 * `inference.GRPCInferenceService` (open_inference.proto): ModelInfer down the broker's one request path, as Infer
 * goes; the server's liveness, readiness and metadata, and each model's from the registry (`models`).
 */
export function openInferenceHandlers(
  ingress: Ingress,
  models: ModelDirectory,
  admit: AdmitCall,
  serverVersion: string,
  logger: Logger,
): grpc.UntypedServiceImplementation & { ModelInfer: grpc.handleUnaryCall<ModelInferInput, openInference.IModelInferResponse> } {
  const modelInfer = unaryHandler<ModelInferInput, openInference.IModelInferResponse>(logger, async (req, call) => {
    // Authenticated before the body is looked at, as Infer is (on the direct path, before it is read).
    const client = admit(call);
    if ("undecodable" in req) {
      ingress.countRejected("grpc", grpc.status.INVALID_ARGUMENT);
      throw new GrpcStatusError(grpc.status.INVALID_ARGUMENT, req.undecodable);
    }
    try {
      ingress.permit("grpc", client, req.modelName);
    } catch (err) {
      ingress.countRejected("grpc", grpc.status.PERMISSION_DENIED);
      throw err;
    }
    // On the direct path the request's bytes go back to the pool once the call is over, and an image's values are
    // forwarded as views of them (float32Entry), as Infer forwards its entries: nothing of the request outlives
    // the call.
    let parsed: ReturnType<typeof fromModelInfer>;
    try {
      parsed = fromModelInfer(req);
    } catch (err) {
      if (err instanceof GrpcStatusError) ingress.countRejected("grpc", err.code);
      throw err;
    }
    const answer = await ingress.handle("grpc", parsed.request, call.getDeadline(), client, callSignal(call));
    return toModelInfer(answer, parsed.request.service, parsed.outputs, parsed.raw);
  });
  /** The model a readiness or metadata call names, once its caller is admitted; NOT_FOUND for none. */
  const named = (req: { name?: string | null; version?: string | null }, call: Parameters<AdmitCall>[0]): string => {
    const client = admit(call);
    const name = req.name ?? "";
    // Before the registry is asked: a client learns nothing of a service it may not call, not even whether it exists.
    ingress.permit("grpc", client, name);
    if (req.version) throw versionProblem(name, req.version);
    if (models.ready(name) === undefined) throw unknownModel(name);
    return name;
  };
  return {
    ServerLive: unaryHandler(logger, async () => ({ live: true })),
    ServerReady: unaryHandler(logger, async () => ({ ready: ingress.ready() })),
    ServerMetadata: unaryHandler(logger, async () => ({ name: "infergrid", version: serverVersion, extensions: [] })),
    ModelReady: unaryHandler<openInference.ModelReadyRequest, openInference.IModelReadyResponse>(logger, async (req, call) => ({
      ready: models.ready(named(req, call)) === true,
    })),
    ModelMetadata: unaryHandler<openInference.ModelMetadataRequest, openInference.IModelMetadataResponse>(logger, async (req, call) => {
      // Defined: `named` refused a model the registry does not hold.
      return models.metadata(named(req, call)) ?? {};
    }),
    ModelInfer: modelInfer,
  };
}
