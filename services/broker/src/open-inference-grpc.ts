import { decodeRoutedInfer, inference, OpenInferenceDefinition, openInference } from "@infergrid/proto";
import { callSignal, GrpcStatusError, grpc, type Logger, unaryHandler } from "@infergrid/runtime";
import type { Ingress } from "./ingress.js";
import { fromModelInfer, toModelInfer } from "./open-inference.js";

/** A ModelInferRequest as the handler gets it: bytes that are not one reach it (INVALID_ARGUMENT, not grpc-js's INTERNAL). */
type ModelInferInput = openInference.ModelInferRequest | { undecodable: string };

/** The Open Inference Protocol's gRPC service as the broker serves it: ModelInfer's bad bytes reach the handler. */
export const OpenInferenceServingDefinition = {
  ...OpenInferenceDefinition,
  ModelInfer: {
    ...OpenInferenceDefinition.ModelInfer,
    requestDeserialize: (bytes: Buffer): ModelInferInput => {
      try {
        return openInference.ModelInferRequest.decode(bytes);
      } catch (err) {
        return { undecodable: `not a ModelInferRequest: ${err instanceof Error ? err.message : String(err)}` };
      }
    },
  },
} satisfies grpc.ServiceDefinition;

/** Who a call comes from (Ingress.admit over the call's metadata and certificate); throws UNAUTHENTICATED. */
export type AdmitCall = (call: Pick<grpc.ServerUnaryCall<unknown, unknown>, "metadata" | "getPeer" | "getAuthContext">) => string;

/**
 * `inference.GRPCInferenceService` (open_inference.proto): ModelInfer down the broker's one request path, as Infer
 * goes; the server's liveness, readiness and metadata answered by the broker. A model's readiness and metadata
 * live in the registry, which the broker does not read: those two are UNIMPLEMENTED, with where to look instead.
 */
export function openInferenceHandlers(
  ingress: Ingress,
  admit: AdmitCall,
  serverVersion: string,
  logger: Logger,
): grpc.UntypedServiceImplementation {
  const modelInfer = unaryHandler<ModelInferInput, openInference.IModelInferResponse>(logger, async (req, call) => {
    // Authenticated before the body is looked at, as Infer is.
    const client = admit(call);
    if ("undecodable" in req) {
      ingress.countRejected("grpc", grpc.status.INVALID_ARGUMENT);
      throw new GrpcStatusError(grpc.status.INVALID_ARGUMENT, req.undecodable);
    }
    let parsed: ReturnType<typeof fromModelInfer>;
    try {
      parsed = fromModelInfer(req);
    } catch (err) {
      if (err instanceof GrpcStatusError) ingress.countRejected("grpc", err.code);
      throw err;
    }
    const routed = decodeRoutedInfer(inference.InferRequest.encode(parsed.request).finish());
    const answer = await ingress.handle("grpc", routed, call.getDeadline(), client, callSignal(call));
    return toModelInfer(answer, parsed.request.service, parsed.outputs, parsed.raw);
  });
  const unimplemented = (what: string) =>
    unaryHandler<unknown, never>(logger, async () => {
      throw new GrpcStatusError(
        grpc.status.UNIMPLEMENTED,
        `${what} is not served by the broker: a service's spec and backends are in the allocator's admin API (infergrid.admin.v1.AllocatorAdmin/GetService)`,
      );
    });
  return {
    ServerLive: unaryHandler(logger, async () => ({ live: true })),
    ServerReady: unaryHandler(logger, async () => ({ ready: ingress.ready() })),
    ServerMetadata: unaryHandler(logger, async () => ({ name: "infergrid", version: serverVersion, extensions: [] })),
    ModelReady: unimplemented("a model's readiness"),
    ModelMetadata: unimplemented("a model's metadata"),
    ModelInfer: modelInfer,
  };
}
