import type * as grpc from "@grpc/grpc-js";

const bytes = (b: Buffer) => b;

/** A unary method whose request and answer are the bytes themselves (tests, probes). */
export function bytesMethod(path: string): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: bytes,
    requestDeserialize: bytes,
    responseSerialize: bytes,
    responseDeserialize: bytes,
  };
}
