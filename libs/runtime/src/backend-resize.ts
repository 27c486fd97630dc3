import { BackendServiceDefinition, type backend } from "@infergrid/proto";
import { type grpc, type UnaryCaller, unaryCall } from "./grpc.js";
import { controlMetadata } from "./security.js";

export interface ResizeTarget {
  /** Cores for the backend's model (0 or absent: unchanged). */
  cores?: number;
  /** Batch size b (0 or absent: unchanged). */
  maxBatch?: number;
}

/**
 * Resizes a backend in place (Themis's vertical scaling) with the control token. Rejects with the gRPC error:
 * UNAUTHENTICATED (no or wrong token, or Resize disabled on that backend), INVALID_ARGUMENT naming the field
 * out of range, FAILED_PRECONDITION when its model cannot change cores.
 */
export function resizeBackend(
  client: Pick<grpc.Client, "makeUnaryRequest"> | UnaryCaller,
  token: string,
  target: ResizeTarget,
  options: { deadline?: number; signal?: AbortSignal } = {},
): Promise<backend.ResizeReply.$Properties> {
  return unaryCall(
    client,
    BackendServiceDefinition.Resize,
    { cores: target.cores ?? 0, maxBatch: target.maxBatch ?? 0 },
    { ...options, metadata: controlMetadata(token) },
  );
}
