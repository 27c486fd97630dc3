import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { ConfigError } from "./config.js";
import { createClient, grpc, startGrpcServer, unaryCall } from "./grpc.js";
import { createLogger } from "./logger.js";
import { bearerTokenMatches, controlMetadata, grpcTlsCredentials, resolveControlToken, resolveSecurity } from "./security.js";

const dir = mkdtempSync(join(tmpdir(), "runtime-security-"));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe("resolveSecurity: a configured auth mode without its secret refuses to start", () => {
  it("keeps the default: no auth, no TLS", () => {
    expect(resolveSecurity({})).toEqual({ nats: {}, grpc: undefined });
  });

  it("takes user and password inline or from a file (a mounted Secret), trailing newline dropped", () => {
    expect(resolveSecurity({ natsUser: "u", natsPass: "p" }).nats).toEqual({ user: "u", pass: "p" });
    expect(resolveSecurity({ natsUser: "u", natsPassFile: file("pass", "s3cret\n") }).nats).toEqual({ user: "u", pass: "s3cret" });
    expect(resolveSecurity({ natsTokenFile: file("token", "tok") }).nats).toEqual({ token: "tok" });
  });

  it("refuses a user name that is not one subject token: it names the user's inbox", () => {
    for (const user of ["team.backend", "a*", "a b", ">"])
      expect(() => resolveSecurity({ natsUser: user, natsPass: "p" }), user).toThrow(/is not a NATS subject token/);
  });

  it("refuses a user without a password, naming the options and never a value", () => {
    expect(() => resolveSecurity({ natsUser: "svc-account" })).toThrow(ConfigError);
    expect(() => resolveSecurity({ natsUser: "svc-account" })).toThrow(
      /--nats-user \/ INFERGRID_NATS_USER is set but its password is missing/,
    );
  });

  it("refuses a secret file that is missing or empty, without printing any secret", () => {
    let message = "";
    try {
      resolveSecurity({ natsUser: "u", natsPassFile: join(dir, "nope") });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/--nats-pass-file \/ INFERGRID_NATS_PASS_FILE: cannot read .*nope \(ENOENT\)/);
    expect(() => resolveSecurity({ natsUser: "u", natsPassFile: file("empty", "\n") })).toThrow(/is empty/);
  });

  it("refuses contradictions: both inline and file, a password without a user, half a TLS pair", () => {
    expect(() => resolveSecurity({ natsUser: "u", natsPass: "p", natsPassFile: file("p2", "p") })).toThrow(/give one, not both/);
    expect(() => resolveSecurity({ natsPass: "p" })).toThrow(/without --nats-user/);
    expect(() => resolveSecurity({ natsTlsCertFile: file("c", "x") })).toThrow(/go together/);
    expect(() => resolveSecurity({ grpcTlsCertFile: file("c2", "x") })).toThrow(/gRPC TLS needs/);
    expect(() => resolveSecurity({ natsTlsCaFile: join(dir, "missing-ca.pem") })).toThrow(/--nats-tls-ca-file.*ENOENT/);
  });
});

describe("gRPC over TLS", () => {
  const haveOpenssl = (() => {
    try {
      execFileSync("openssl", ["version"]);
      return true;
    } catch {
      return false;
    }
  })();

  it.skipIf(!haveOpenssl)("serves and calls with mutual TLS, checked against a service name; a plaintext client is refused", async () => {
    // A throwaway CA and one certificate for the name every peer presents.
    const ca = join(dir, "ca");
    const sh = (args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
    sh([
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=test-ca",
      "-keyout",
      `${ca}.key`,
      "-out",
      `${ca}.pem`,
    ]);
    sh(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=infergrid.internal", "-keyout", "peer.key", "-out", "peer.csr"]);
    writeFileSync(join(dir, "ext.cnf"), "subjectAltName=DNS:infergrid.internal\n");
    sh([
      "x509",
      "-req",
      "-in",
      "peer.csr",
      "-CA",
      `${ca}.pem`,
      "-CAkey",
      `${ca}.key`,
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      "ext.cnf",
      "-out",
      "peer.pem",
    ]);
    const security = resolveSecurity({
      grpcTlsCertFile: join(dir, "peer.pem"),
      grpcTlsKeyFile: join(dir, "peer.key"),
      grpcTlsCaFile: `${ca}.pem`,
      grpcTlsServerName: "infergrid.internal",
    });
    const creds = grpcTlsCredentials(security.grpc!);
    const server = await startGrpcServer({ host: "127.0.0.1", port: 0, credentials: creds.server, register: () => undefined });
    server.health.setStatus("", "SERVING");
    const check = {
      path: "/grpc.health.v1.Health/Check",
      requestStream: false,
      responseStream: false,
      requestSerialize: () => Buffer.alloc(0),
      requestDeserialize: () => ({}),
      responseSerialize: () => Buffer.alloc(0),
      responseDeserialize: (b: Buffer) => b,
    } satisfies grpc.MethodDefinition<object, Buffer>;
    const tlsClient = new grpc.Client(server.address, creds.client, creds.channelOptions);
    const reply = await unaryCall(tlsClient, check, {}, { deadline: Date.now() + 5000 });
    expect(reply[1]).toBe(1); // status = SERVING
    const plain = createClient(server.address);
    await expect(unaryCall(plain, check, {}, { deadline: Date.now() + 2000 })).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    tlsClient.close();
    plain.close();
    await server.shutdown(100);
  });
});

describe("the logger never prints secrets", () => {
  it("redacts passwords and tokens at the top level, in objects and in a config logged whole", () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    });
    const logger = createLogger("t", "t-1", "info", sink);
    logger.info({ natsPass: "hunter2", token: "tok-9" }, "top level");
    logger.info({ nats: { user: "u", pass: "hunter2" } }, "nested");
    logger.info({ ctx: { config: { natsPass: "hunter2", natsToken: "tok-9" } } }, "config");
    logger.info({ controlToken: "tok-9", config: { controlToken: "tok-9" }, ctx: { config: { controlToken: "tok-9" } } }, "control");
    const out = lines.join("");
    expect(lines).toHaveLength(4);
    expect(out).not.toContain("hunter2");
    expect(out).not.toContain("tok-9");
    expect(out).toContain("[redacted]");
  });
});

describe("control token", () => {
  it("comes inline or from a file (trailing newline dropped); none configured is undefined; both is an error", () => {
    expect(resolveControlToken({})).toBeUndefined();
    expect(resolveControlToken({ controlToken: "abc" })).toBe("abc");
    expect(resolveControlToken({ controlTokenFile: file("control", "xyz\n") })).toBe("xyz");
    expect(() => resolveControlToken({ controlToken: "a", controlTokenFile: file("control2", "b") })).toThrow(
      /--control-token \/ INFERGRID_CONTROL_TOKEN and --control-token-file/,
    );
    expect(() => resolveControlToken({ controlTokenFile: file("empty", "") })).toThrow(/is empty/);
  });

  it("matches only the exact bearer token", () => {
    const md = (value?: string) => {
      const m = new grpc.Metadata();
      if (value !== undefined) m.set("authorization", value);
      return m;
    };
    expect(bearerTokenMatches(controlMetadata("s3cret"), "s3cret")).toBe(true);
    expect(bearerTokenMatches(md("Bearer s3cret"), "s3cret")).toBe(true);
    expect(bearerTokenMatches(md(), "s3cret")).toBe(false);
    expect(bearerTokenMatches(md("Bearer s3cre"), "s3cret")).toBe(false);
    expect(bearerTokenMatches(md("Bearer s3cretX"), "s3cret")).toBe(false);
    expect(bearerTokenMatches(md("s3cret"), "s3cret")).toBe(false);
    expect(bearerTokenMatches(md("Basic s3cret"), "s3cret")).toBe(false);
    const two = md("Bearer s3cret");
    two.add("authorization", "Bearer other");
    expect(bearerTokenMatches(two, "s3cret")).toBe(false);
  });
});
