import { ClientTokensError, readClientTokensFile } from "@infergrid/dataplane";
import { field } from "@infergrid/runtime";
import { z } from "zod";

/**
 * Why the tokens file cannot be used, or undefined. Read here as well as at start, so that a bad file stops
 * start-up with status 2 and a message naming the option, like any bad value.
 */
function tokensFileProblem(path: string): string | undefined {
  try {
    readClientTokensFile(path);
    return undefined;
  } catch (err) {
    if (err instanceof ClientTokensError) return err.message;
    throw err;
  }
}

export const brokerConfig = z.object({
  httpPort: field.port(0).describe("HTTP/JSON ingress port (0 = any free port)"),
  maxRequestBytes: field.int(4 * 1024 * 1024, 1024).describe("largest accepted request (gRPC message or HTTP body), bytes"),
  requestTimeoutMs: field.ms(30_000).describe("deadline given to a request that brings none"),
  httpReceiveTimeoutMs: field.ms(10_000).describe("an HTTP request's headers and body must arrive within this (408 after)"),
  frontendTtlMs: field.ms(3_000).describe("a frontend silent this long leaves the rotation"),
  ejectMs: field.ms(2_000).describe("how long a frontend that failed a call stays out of the rotation"),
  answerReserveMs: field.ms(10).describe("time kept before a request's deadline for the frontend's answer to travel back"),
  maxFailovers: field.int(3, 0, 16).describe("other frontends tried when one cannot be reached"),
  clientRateLimit: field
    .number(0, 0)
    .describe(
      "requests a second one client (its authenticated name, else its peer address) may send; beyond it RESOURCE_EXHAUSTED / 429 (0 = no limit)",
    ),
  clientBurst: field.int(0, 0).describe("requests one client may send at once above its rate (0 = one second's worth)"),
  clientTokensFile: field
    .optionalString()
    .superRefine((path, ctx) => {
      const problem = path === undefined ? undefined : tokensFileProblem(path);
      if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
    })
    .describe(
      "client auth: file of '<client> sha256:<hex of SHA-256 of its token>' lines; every request then needs 'authorization: Bearer <token>' (reloaded on SIGHUP; docs/security.md)",
    ),
  clientCertificates: z
    .enum(["required", "optional"])
    .default("required")
    .describe(
      "gRPC TLS on the broker's port: 'required', a client presents a certificate of the CA; 'optional', a client may come with TLS and a token alone (needs --client-tokens-file; a presented certificate still names a client only if it chains to the CA)",
    ),
  httpTls: field
    .bool(false)
    .describe(
      "serve the HTTP/JSON ingress over HTTPS with the gRPC TLS certificate and key, renewed in place as they are (needs gRPC TLS): bearer tokens never cross the wire in clear",
    ),
});

export type BrokerConfig = z.infer<typeof brokerConfig>;

/** What the options say together that none says alone; each problem names its options. */
export function brokerConfigProblems(
  config: Pick<BrokerConfig, "clientCertificates" | "clientTokensFile" | "httpTls"> & { grpcTlsCertFile?: string | undefined },
): string[] {
  const problems: string[] = [];
  const grpcTls = "gRPC TLS (--grpc-tls-cert-file, --grpc-tls-key-file, --grpc-tls-ca-file)";
  if (config.httpTls && config.grpcTlsCertFile === undefined) problems.push(`--http-tls: needs ${grpcTls}, whose certificate it serves`);
  if (config.clientCertificates === "optional") {
    if (config.grpcTlsCertFile === undefined) problems.push(`--client-certificates optional: needs ${grpcTls}`);
    // Without tokens, a client certificate is the only credential: optional, it would let anyone call.
    if (config.clientTokensFile === undefined)
      problems.push("--client-certificates optional: needs --client-tokens-file (without it, anyone who reaches the port may call)");
  }
  return problems;
}
