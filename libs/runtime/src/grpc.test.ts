import { describe, expect, it } from "vitest";
import { GrpcStatusError, grpc, unaryHandler } from "./grpc.js";
import { createLogger } from "./logger.js";

const logger = createLogger("test", "grpc", "silent");

/** Runs a unary handler as grpc-js does: one call, one callback. */
function answer(handler: grpc.handleUnaryCall<string, string>): Promise<{ err: Partial<grpc.StatusObject> | null; value?: string }> {
  return new Promise((resolve) => {
    const call = { request: "ping" } as grpc.ServerUnaryCall<string, string>;
    handler(call, (err, value) => resolve({ err: err as Partial<grpc.StatusObject> | null, ...(value ? { value } : {}) }));
  });
}

describe("unaryHandler", () => {
  it("answers with the handler's result, or with the status it was refused with", async () => {
    expect(await answer(unaryHandler(logger, async (req: string) => `${req}-pong`))).toEqual({ err: null, value: "ping-pong" });
    const refused = await answer(
      unaryHandler<string, string>(logger, async () => {
        throw new GrpcStatusError(grpc.status.NOT_FOUND, "no such job");
      }),
    );
    expect(refused.err).toMatchObject({ code: grpc.status.NOT_FOUND, details: "no such job" });
  });

  it("a handler that throws before returning its promise is refused with its own status, not UNKNOWN", async () => {
    const handler = unaryHandler<string, string>(logger, () => {
      throw new GrpcStatusError(grpc.status.FAILED_PRECONDITION, "best-effort jobs are off in this allocator (--loans off)");
    });
    const { err } = await answer(handler);
    expect(err).toMatchObject({
      code: grpc.status.FAILED_PRECONDITION,
      details: "best-effort jobs are off in this allocator (--loans off)",
    });
  });
});
