import { ClientCache, grpc, isServiceError, resizeBackend } from "@infergrid/runtime";
import type { BackendResizer } from "./actuator.js";

export interface GrpcBackendResizer {
  resize: BackendResizer;
  /** Closes the channels it opened. */
  close(): void;
}

/**
 * Tells backends their new size through the backend-worker's Resize RPC, with the control token as the
 * call's bearer token; one channel per backend address. An error says what the backend answered
 * (UNAUTHENTICATED for a wrong token, INVALID_ARGUMENT naming a size out of its range, ...).
 */
export function grpcBackendResizer(controlToken: string, options: { deadlineMs?: number } = {}): GrpcBackendResizer {
  const clients = new ClientCache();
  return {
    resize: async ({ address, cores, maxBatch }) => {
      try {
        const reply = await resizeBackend(
          clients.get(address),
          controlToken,
          { cores, ...(maxBatch !== undefined ? { maxBatch } : {}) },
          { deadline: Date.now() + (options.deadlineMs ?? 10_000) },
        );
        return { cores: reply.cores ?? cores, maxBatch: reply.maxBatch ?? 1, resizeMs: reply.resizeMs ?? 0 };
      } catch (err) {
        if (isServiceError(err)) throw new Error(`${grpc.status[err.code]}: ${err.details}`, { cause: err });
        throw err;
      }
    },
    close: () => clients.closeAll(),
  };
}
