import { X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { grpc, identityFromSubjectAltName, requirePeerRole } from "@infergrid/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CLI_ADMIN_ID,
  CLI_CLIENT_ID,
  GRPC_CHANNEL_OPTIONS,
  makeTlsIdentities,
  poolBackendTlsEnv,
  type TlsIdentities,
} from "./tls-identities.js";

let runDir: string;
let tls: TlsIdentities;

beforeAll(() => {
  runDir = mkdtempSync(join(tmpdir(), "ig-local-tls-"));
  tls = makeTlsIdentities(runDir, [
    { id: "frontend-0", role: "frontend" },
    { id: "backend-00", role: "backend" },
    { id: "allocator", role: "allocator" },
  ]);
});

afterAll(() => rmSync(runDir, { recursive: true, force: true }));

const cert = (id: string) => new X509Certificate(readFileSync(tls.files(id).certFile));

describe("the local cluster's throwaway certificates", () => {
  it("names each process's identity, serves on loopback, and chains to the run's CA", () => {
    const ca = new X509Certificate(readFileSync(tls.caFile));
    const expected: [string, string][] = [
      ["frontend-0", "frontend"],
      ["backend-00", "backend"],
      ["allocator", "allocator"],
      ["pool-backends", "backend"],
      [CLI_CLIENT_ID, "client"],
      [CLI_ADMIN_ID, "admin"],
    ];
    for (const [id, role] of expected) {
      const c = cert(id);
      expect(identityFromSubjectAltName(c.subjectAltName), id).toEqual({ role, id });
      expect(c.checkHost("localhost"), id).toBe("localhost");
      expect(c.checkIP("127.0.0.1"), id).toBe("127.0.0.1");
      expect(c.verify(ca.publicKey), id).toBe(true);
    }
    const server = cert("nats-server");
    expect(identityFromSubjectAltName(server.subjectAltName)).toBeUndefined();
    expect(server.checkIP("127.0.0.1")).toBe("127.0.0.1");
    expect(server.verify(ca.publicKey)).toBe(true);
  });

  it("keeps keys to their owner and throws the CA's key away once every certificate is issued", () => {
    expect(statSync(tls.dir).mode & 0o077).toBe(0);
    expect(existsSync(join(tls.dir, "ca.key"))).toBe(false);
    for (const id of ["frontend-0", "backend-00", "pool-backends", CLI_CLIENT_ID, "nats-server"]) {
      expect(statSync(tls.files(id).keyFile).mode & 0o077, id).toBe(0);
    }
  });

  it("gives a process gRPC mutual TLS with peer roles and NATS over TLS, with its own certificate", () => {
    const f = tls.files("frontend-0");
    expect(tls.env("frontend-0")).toEqual({
      INFERGRID_GRPC_TLS_CERT_FILE: f.certFile,
      INFERGRID_GRPC_TLS_KEY_FILE: f.keyFile,
      INFERGRID_GRPC_TLS_CA_FILE: tls.caFile,
      INFERGRID_GRPC_TLS_SERVER_NAME: "localhost",
      INFERGRID_GRPC_PEER_ROLES: "true",
      INFERGRID_NATS_TLS_CA_FILE: tls.caFile,
      INFERGRID_NATS_TLS_CERT_FILE: f.certFile,
      INFERGRID_NATS_TLS_KEY_FILE: f.keyFile,
    });
    expect(() => tls.env("frontend-9")).toThrow(/no certificate was made for frontend-9/);
    expect(poolBackendTlsEnv(tls)).toEqual({
      INFERGRID_POOL_BACKEND_GRPC_TLS_CERT_FILE: tls.files("pool-backends").certFile,
      INFERGRID_POOL_BACKEND_GRPC_TLS_KEY_FILE: tls.files("pool-backends").keyFile,
    });
    expect(tls.natsServerTls).toContain(`cert_file: ${JSON.stringify(tls.files("nats-server").certFile)}`);
    expect(tls.natsServerTls).toContain(`ca_file: ${JSON.stringify(tls.caFile)}`);
    expect(tls.natsServerTls).toContain("verify: true");
  });

  it("refuses two members with one id", () => {
    expect(() =>
      makeTlsIdentities(join(runDir, "twice"), [
        { id: "backend-00", role: "backend" },
        { id: "backend-00", role: "frontend" },
      ]),
    ).toThrow(/two certificates for backend-00/);
    expect(() => makeTlsIdentities(join(runDir, "cli"), [{ id: CLI_CLIENT_ID, role: "frontend" }])).toThrow(/two certificates/);
  });

  it("a server with a backend's certificate, dialled by address, admits a frontend and refuses the CLI and plaintext", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on("warning", onWarning);
    const raw = (b: Buffer) => b;
    const method = {
      path: "/test.Backend/Execute",
      requestStream: false,
      responseStream: false,
      requestSerialize: raw,
      requestDeserialize: raw,
      responseSerialize: raw,
      responseDeserialize: raw,
    } as const;
    const own = tls.files("backend-00");
    const server = new grpc.Server();
    server.addService(
      { Execute: method },
      {
        Execute: requirePeerRole<Buffer, Buffer>(true, ["frontend"], "Execute", (_call, callback) => callback(null, Buffer.from("ok"))),
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        "127.0.0.1:0",
        grpc.ServerCredentials.createSsl(
          readFileSync(tls.caFile),
          [{ cert_chain: readFileSync(own.certFile), private_key: readFileSync(own.keyFile) }],
          true,
        ),
        (err, p) => (err ? reject(err) : resolve(p)),
      ),
    );
    const call = (credentials: grpc.ChannelCredentials) =>
      new Promise<string>((resolve) => {
        const client = new grpc.Client(`127.0.0.1:${port}`, credentials, GRPC_CHANNEL_OPTIONS);
        client.makeUnaryRequest(
          method.path,
          raw,
          raw,
          Buffer.from("x"),
          new grpc.Metadata(),
          { deadline: Date.now() + 5_000 },
          (err, res?: Buffer) => {
            client.close();
            resolve(err ? (grpc.status[err.code] ?? String(err.code)) : String(res));
          },
        );
      });
    try {
      expect(await call(tls.grpcCredentials("frontend-0"))).toBe("ok");
      expect(await call(tls.grpcCredentials(CLI_CLIENT_ID))).toBe("PERMISSION_DENIED");
      expect(await call(grpc.credentials.createInsecure())).toBe("UNAVAILABLE");
    } finally {
      server.forceShutdown();
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => /ServerName/.test(w))).toEqual([]);
  });
});
