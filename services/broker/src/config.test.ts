import { describe, expect, it } from "vitest";
import { brokerConfigProblems } from "./config.js";

describe("brokerConfigProblems", () => {
  const base = { clientCertificates: "required", clientTokensFile: undefined, httpTls: false } as const;

  it("has none at the defaults, nor with TLS, tokens and both options on", () => {
    expect(brokerConfigProblems(base)).toEqual([]);
    expect(
      brokerConfigProblems({ clientCertificates: "optional", clientTokensFile: "/t", httpTls: true, grpcTlsCertFile: "/c.pem" }),
    ).toEqual([]);
  });

  it("refuses optional client certificates without gRPC TLS or without a tokens file, and HTTPS without gRPC TLS", () => {
    expect(brokerConfigProblems({ ...base, clientCertificates: "optional", grpcTlsCertFile: "/c.pem" })).toEqual([
      "--client-certificates optional: needs --client-tokens-file (without it, anyone who reaches the port may call)",
    ]);
    expect(brokerConfigProblems({ ...base, clientCertificates: "optional", clientTokensFile: "/t" })).toEqual([
      "--client-certificates optional: needs gRPC TLS (--grpc-tls-cert-file, --grpc-tls-key-file, --grpc-tls-ca-file)",
    ]);
    expect(brokerConfigProblems({ ...base, httpTls: true })).toEqual([
      "--http-tls: needs gRPC TLS (--grpc-tls-cert-file, --grpc-tls-key-file, --grpc-tls-ca-file), whose certificate it serves",
    ]);
  });
});
