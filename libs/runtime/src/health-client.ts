import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";

type CheckResponse = { status?: string | number };
type HealthClient = grpc.Client & {
  check(req: { service: string }, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: CheckResponse) => void): void;
};
const HealthClientCtor = grpc.makeGenericClientConstructor(healthService as unknown as grpc.ServiceDefinition, "Health");

/** Asks a server's standard health service whether it serves; false on any error or timeout. */
export function checkHealth(address: string, timeoutMs: number, service = ""): Promise<boolean> {
  const client = new HealthClientCtor(address, grpc.credentials.createInsecure()) as unknown as HealthClient;
  return new Promise<boolean>((resolve) => {
    client.check({ service }, { deadline: Date.now() + timeoutMs }, (err, res) => {
      client.close();
      resolve(!err && (res?.status === "SERVING" || res?.status === 1));
    });
  });
}
