import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceServiceDefinition, OpenInferenceDefinition } from "@infergrid/proto";
import { grpc, isServiceError, unaryCall } from "@infergrid/runtime";
import { eventually, makeCa, makeCert, repoRoot, type ServiceProcess, serviceEntry } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatedSpec, infer, registerService, startCluster, type TestCluster } from "./process-cluster.js";

/**
 * Client auth at the broker on real processes (NATS, allocator, a backend, a frontend, the broker started with
 * --client-tokens-file and a per-client rate limit): tokens are made with the client-token CLI; a request
 * without a token, or with a wrong one, is refused UNAUTHENTICATED / 401 and reaches neither frontend nor
 * backend; a valid token is answered; each client has its own rate bucket; the file is reloaded on SIGHUP; a
 * bad file stops the broker at start with status 2, naming the line.
 */
let cluster: TestCluster;
let dir = "";
const tokensFile = () => join(dir, "client-tokens");

/** A token from the CLI: the token on stdout, the tokens file's line on stderr. */
function makeToken(name: string, services?: string): { token: string; line: string } {
  const args = [join(repoRoot, "services/broker/dist/client-token.js"), name, ...(services === undefined ? [] : ["--services", services])];
  const r = spawnSync(process.execPath, args, { encoding: "utf8" });
  expect(r.status).toBe(0);
  const token = r.stdout.trim();
  const line = r.stderr.trim().split("\n").pop() ?? "";
  expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(line).toMatch(new RegExp(`^${name} sha256:[0-9a-f]{64}${services === undefined ? "" : ` services=${services}`}$`));
  return { token, line };
}

/** Written whole, then renamed over the file: the broker never reads half a file. */
function writeTokens(lines: string[]): void {
  writeFileSync(`${tokensFile()}.tmp`, `# clients of the test broker\n${lines.join("\n")}\n`);
  renameSync(`${tokensFile()}.tmp`, tokensFile());
}

const bearer = (token: string) => {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  return md;
};

let alpha = { token: "", line: "" };
let beta = { token: "", line: "" };
/** Clients limited by the tokens file: gamma to svc, epsilon to another service. */
let gamma = { token: "", line: "" };
let epsilon = { token: "", line: "" };

/** The gRPC status of one Infer through the broker (OK or the error's). */
async function grpcCode(metadata?: grpc.Metadata): Promise<grpc.status> {
  try {
    await infer(cluster, { service: "svc" }, 5_000, metadata);
    return grpc.status.OK;
  } catch (err) {
    if (!isServiceError(err)) throw err;
    return err.code;
  }
}

function httpInfer(headers: Record<string, string>, body: string = JSON.stringify({ service: "svc" })): Promise<Response> {
  return fetch(`${cluster.httpUrl}/v1/infer`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
}

/** Sum of a counter's series on a process's /metrics (optionally only the series whose labels include `having`). */
async function counter(p: ServiceProcess, name: string, having = ""): Promise<number> {
  const text = await (await fetch(`http://${p.ready.metricsAddress}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) && line.includes(having)) total += Number(line.split(" ").pop());
  }
  return total;
}

/** What reached the frontend and the backend: Infer calls the frontend answered, Execute calls the backend ran. */
async function reachedPastBroker(): Promise<{ frontend: number; backend: number }> {
  const [f, b] = [cluster.frontends[0], cluster.backends[0]];
  if (!f || !b) throw new Error("no frontend or backend");
  return {
    frontend: await counter(f, "infergrid_frontend_requests_total"),
    backend: await counter(b, "infergrid_backend_requests_total"),
  };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("client auth at the broker", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "infergrid-client-auth-"));
    alpha = makeToken("alpha");
    beta = makeToken("beta");
    gamma = makeToken("gamma", "svc");
    epsilon = makeToken("epsilon", "ocr,asr");
    writeTokens([alpha.line, beta.line, gamma.line, epsilon.line]);
    cluster = await startCluster({
      backends: 1,
      frontends: 1,
      brokerEnv: {
        INFERGRID_CLIENT_TOKENS_FILE: tokensFile(),
        INFERGRID_CLIENT_RATE_LIMIT: "5",
        INFERGRID_CLIENT_BURST: "10",
      },
    });
    await registerService(cluster, emulatedSpec("svc", { initialBackends: 1 }));
    await eventually("svc to serve", () => infer(cluster, { service: "svc" }, 2_000, bearer(alpha.token)), 30_000, 300);
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("refuses requests without a token or with a wrong one, over gRPC and HTTP, before they reach a frontend or a backend", async () => {
    const before = await reachedPastBroker();
    const refusedBefore = await counter(cluster.broker, "infergrid_broker_unauthenticated_total");

    const wrong = makeToken("alpha").token; // well-formed, of a known name, in no file
    const grpcCodes = [
      await grpcCode(),
      await grpcCode(bearer(wrong)),
      await grpcCode(bearer(alpha.line.split("sha256:")[1] ?? "")), // the stored hash is not a token
      await grpcCode(new grpc.Metadata()), // an empty header set
    ];
    const basic = new grpc.Metadata();
    basic.set("authorization", `Basic ${alpha.token}`);
    grpcCodes.push(await grpcCode(basic));
    expect(grpcCodes).toEqual(Array(5).fill(grpc.status.UNAUTHENTICATED));

    const missing = await httpInfer({});
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="infergrid"');
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe("UNAUTHENTICATED");
    const bad = await httpInfer({ authorization: `Bearer ${wrong}` });
    expect(bad.status).toBe(401);
    expect(bad.headers.get("www-authenticate")).toBe('Bearer realm="infergrid", error="invalid_token"');
    expect(((await bad.json()) as { error: { code: string; message: string } }).error).toEqual({
      code: "UNAUTHENTICATED",
      message: "unknown client token",
    });
    // Refused before the body is read: not JSON, or over --max-request-bytes (4 MiB), the answer is still 401.
    expect((await httpInfer({}, "{not json")).status).toBe(401);
    expect((await httpInfer({ authorization: "Bearer nope" }, "x".repeat(5 * 1024 * 1024))).status).toBe(401);
    // The per-service route too.
    const routed = await fetch(`${cluster.httpUrl}/v1/services/svc/infer`, { method: "POST", body: "{}" });
    expect(routed.status).toBe(401);
    // The Open Inference Protocol's route too, in its own error body.
    const open = await fetch(`${cluster.httpUrl}/v2/models/svc/infer`, { method: "POST", body: "{}" });
    expect(open.status).toBe(401);
    expect(open.headers.get("www-authenticate")).toBe('Bearer realm="infergrid"');
    expect(await open.json()).toEqual({ error: "this broker needs a client token: authorization: Bearer <token>" });

    const refused = 5 + 6;
    expect((await counter(cluster.broker, "infergrid_broker_unauthenticated_total")) - refusedBefore).toBe(refused);
    expect(await reachedPastBroker()).toEqual(before);

    // The counters do move for a request that authenticates: the check above could have failed.
    expect(await grpcCode(bearer(alpha.token))).toBe(grpc.status.OK);
    const ok = await httpInfer({ authorization: `Bearer ${beta.token}` });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { backendId: string }).backendId).toBeTruthy();
    const after = await reachedPastBroker();
    expect(after.frontend - before.frontend).toBe(2);
    expect(after.backend - before.backend).toBe(2);
  });

  it("refuses a client a service outside its services= list, PERMISSION_DENIED / 403, before it reaches a frontend", async () => {
    const before = await reachedPastBroker();
    const forbiddenBefore = await counter(cluster.broker, "infergrid_broker_forbidden_total");
    const auth = { authorization: `Bearer ${epsilon.token}` };
    expect(await grpcCode(bearer(epsilon.token))).toBe(grpc.status.PERMISSION_DENIED);
    const http = await httpInfer(auth);
    expect(http.status).toBe(403);
    expect(((await http.json()) as { error: unknown }).error).toEqual({
      code: "PERMISSION_DENIED",
      message: 'client epsilon may not call service "svc"',
    });
    expect((await fetch(`${cluster.httpUrl}/v1/services/svc/infer`, { method: "POST", headers: auth, body: "{}" })).status).toBe(403);
    // The Open Inference Protocol's inference, and the model's readiness and metadata: not even whether it exists.
    const open = await fetch(`${cluster.httpUrl}/v2/models/svc/infer`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ inputs: [{ name: "x", shape: [1, 1], datatype: "FP32", data: [1] }] }),
    });
    expect(open.status).toBe(403);
    expect(await open.json()).toEqual({ error: 'client epsilon may not call service "svc"' });
    expect((await fetch(`${cluster.httpUrl}/v2/models/svc/ready`, { headers: auth })).status).toBe(403);
    expect((await fetch(`${cluster.httpUrl}/v2/models/svc`, { headers: auth })).status).toBe(403);
    expect((await fetch(`${cluster.httpUrl}/v2/models/no-such-model`, { headers: auth })).status).toBe(403);
    // And the Open Inference Protocol over gRPC.
    const oip = async <Req, Res>(method: grpc.MethodDefinition<Req, Res>, request: Req, token: string): Promise<grpc.status> => {
      try {
        await unaryCall(cluster.brokerClient, method, request, { deadline: Date.now() + 5_000, metadata: bearer(token) });
        return grpc.status.OK;
      } catch (err) {
        if (!isServiceError(err)) throw err;
        return err.code;
      }
    };
    const modelInfer = { modelName: "svc", inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], contents: { fp32Contents: [1] } }] };
    expect([
      await oip(OpenInferenceDefinition.ModelInfer, modelInfer, epsilon.token),
      await oip(OpenInferenceDefinition.ModelReady, { name: "svc" }, epsilon.token),
      await oip(OpenInferenceDefinition.ModelMetadata, { name: "no-such-model" }, epsilon.token),
    ]).toEqual(Array(3).fill(grpc.status.PERMISSION_DENIED));
    expect((await counter(cluster.broker, "infergrid_broker_forbidden_total")) - forbiddenBefore).toBe(10);
    expect(await reachedPastBroker()).toEqual(before);
    expect(cluster.broker.logs.some((l) => l.msg === "refused a call to a service its client may not call" && l.client === "epsilon")).toBe(
      true,
    );

    // A client whose list holds the service is answered, as is one with no list; the counters move for them.
    expect(await grpcCode(bearer(gamma.token))).toBe(grpc.status.OK);
    expect((await httpInfer({ authorization: `Bearer ${gamma.token}` })).status).toBe(200);
    expect((await fetch(`${cluster.httpUrl}/v2/models/svc/ready`, { headers: { authorization: `Bearer ${gamma.token}` } })).status).toBe(
      200,
    );
    expect((await fetch(`${cluster.httpUrl}/v2/models/no-such-model`, { headers: { authorization: `Bearer ${beta.token}` } })).status).toBe(
      404,
    );
    expect(await oip(OpenInferenceDefinition.ModelInfer, modelInfer, gamma.token)).toBe(grpc.status.OK);
    const after = await reachedPastBroker();
    expect(after.frontend - before.frontend).toBe(3);
    expect(after.backend - before.backend).toBe(3);
  });

  it("keeps one rate bucket per client: a client over its rate does not use up another's", async () => {
    await pause(2_500); // both buckets full again (burst 10 at 5/s)
    const burst = (token: string) => Promise.all(Array.from({ length: 25 }, () => grpcCode(bearer(token))));
    const okOf = (codes: grpc.status[]) => codes.filter((c) => c === grpc.status.OK).length;
    const first = await burst(alpha.token);
    // beta right after alpha, from the same address: keyed by peer address it would find the bucket empty.
    const second = await burst(beta.token);
    for (const codes of [first, second]) {
      expect(okOf(codes)).toBeGreaterThanOrEqual(10);
      expect(okOf(codes)).toBeLessThanOrEqual(13); // the burst and what the rate refilled while they went out
      expect(codes.filter((c) => c !== grpc.status.OK).every((c) => c === grpc.status.RESOURCE_EXHAUSTED)).toBe(true);
    }
    // Unauthenticated requests take no token from anyone's bucket (they never get that far).
    await pause(2_500);
    await Promise.all(Array.from({ length: 30 }, () => grpcCode()));
    expect(okOf(await burst(alpha.token))).toBeGreaterThanOrEqual(10);
  });

  it("reloads the tokens file on SIGHUP, and keeps the tokens in use when the new file is bad", async () => {
    await pause(2_500);
    const rotated = makeToken("alpha");
    writeTokens([rotated.line, beta.line]);
    process.kill(cluster.broker.pid, "SIGHUP");
    await cluster.broker.waitForLog((l) => l.msg === "client tokens reloaded", 5_000);
    expect(await grpcCode(bearer(alpha.token))).toBe(grpc.status.UNAUTHENTICATED);
    expect(await grpcCode(bearer(rotated.token))).toBe(grpc.status.OK);

    writeTokens([rotated.line, "gamma not-a-hash"]);
    process.kill(cluster.broker.pid, "SIGHUP");
    const error = await cluster.broker.waitForLog((l) => l.msg?.startsWith("client tokens file not reloaded") === true, 5_000);
    expect(String(error.problem)).toContain(`${tokensFile()} line 3`);
    expect(await grpcCode(bearer(rotated.token))).toBe(grpc.status.OK);
    expect(await grpcCode(bearer(beta.token))).toBe(grpc.status.OK);
    expect(cluster.broker.isRunning()).toBe(true);
  });

  it("a broker whose tokens file is bad refuses to start, naming the line (and never echoing a token)", () => {
    const secret = makeToken("x").token;
    writeFileSync(join(dir, "bad-tokens"), `alpha ${alpha.line.split(" ")[1]}\nbeta ${secret}\n`);
    const r = spawnSync(process.execPath, [serviceEntry("broker")], {
      env: { ...process.env, INFERGRID_CLIENT_TOKENS_FILE: join(dir, "bad-tokens") },
      encoding: "utf8",
      timeout: 15_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("--client-tokens-file / INFERGRID_CLIENT_TOKENS_FILE");
    expect(r.stderr).toContain(`${join(dir, "bad-tokens")} line 2`);
    expect(r.stderr + r.stdout).not.toContain(secret);
  });
});

/**
 * With gRPC TLS: a client certificate naming spiffe://infergrid/client/<name> authenticates without a token; a
 * certificate of another role does not; a presented token still decides. With --client-certificates required (the
 * default) a client without a certificate of the CA cannot connect; with optional it connects on TLS alone, and a
 * certificate that does not chain to the CA names no one.
 */
describe.each(["required", "optional"] as const)("client auth at the broker over gRPC TLS, client certificates %s", (mode) => {
  const SERVER_NAME = "infergrid.internal";
  let tlsDir = "";
  let tlsCluster: TestCluster;
  const at = (name: string) => join(tlsDir, name);
  const channel = { "grpc.ssl_target_name_override": SERVER_NAME };
  const creds = (name: string) =>
    grpc.credentials.createSsl(readFileSync(at("ca.pem")), readFileSync(at(`${name}.key`)), readFileSync(at(`${name}.pem`)));

  /** One Infer through the broker over a channel with these credentials: OK or the error's code. */
  async function callWith(credentials: grpc.ChannelCredentials, metadata?: grpc.Metadata): Promise<grpc.status> {
    const client = new grpc.Client(tlsCluster.broker.ready.grpcAddress ?? "", credentials, channel);
    try {
      await unaryCall(client, InferenceServiceDefinition.Infer, { service: "svc" }, { deadline: Date.now() + 5_000, metadata });
      return grpc.status.OK;
    } catch (err) {
      if (!isServiceError(err)) throw err;
      return err.code;
    } finally {
      client.close();
    }
  }
  const callAs = (certificate: string, metadata?: grpc.Metadata) => callWith(creds(certificate), metadata);

  let delta = { token: "", line: "" };

  beforeAll(async () => {
    tlsDir = mkdtempSync(join(tmpdir(), "infergrid-client-auth-tls-"));
    makeCa(tlsDir, "ca");
    makeCert(tlsDir, "svc", "ca", `IP:127.0.0.1,DNS:${SERVER_NAME}`);
    makeCert(tlsDir, "carol", "ca", `IP:127.0.0.1,URI:spiffe://infergrid/client/carol`);
    makeCert(tlsDir, "admin", "ca", `IP:127.0.0.1,URI:spiffe://infergrid/admin/admin`);
    makeCert(tlsDir, "plain", "ca", `IP:127.0.0.1`);
    // Another CA's certificate with the same client identity as carol's.
    makeCa(tlsDir, "other-ca");
    makeCert(tlsDir, "mallory", "other-ca", `IP:127.0.0.1,URI:spiffe://infergrid/client/carol`);
    delta = makeToken("delta");
    writeFileSync(at("client-tokens"), `${delta.line}\n`);
    tlsCluster = await startCluster({
      backends: 1,
      frontends: 1,
      env: {
        INFERGRID_GRPC_TLS_CERT_FILE: at("svc.pem"),
        INFERGRID_GRPC_TLS_KEY_FILE: at("svc.key"),
        INFERGRID_GRPC_TLS_CA_FILE: at("ca.pem"),
        INFERGRID_GRPC_TLS_SERVER_NAME: SERVER_NAME,
      },
      brokerEnv: { INFERGRID_CLIENT_TOKENS_FILE: at("client-tokens"), INFERGRID_CLIENT_CERTIFICATES: mode },
      grpcClient: { credentials: creds("admin"), options: channel },
    });
    await registerService(tlsCluster, emulatedSpec("svc", { initialBackends: 1 }));
    await eventually("svc to serve", async () => expect(await callAs("carol")).toBe(grpc.status.OK), 30_000, 300);
  }, 90_000);

  afterAll(async () => {
    await tlsCluster?.stop();
    if (tlsDir) rmSync(tlsDir, { recursive: true, force: true });
  });

  it("admits a client certificate without a token, and nothing else without one", async () => {
    expect(await callAs("carol")).toBe(grpc.status.OK);
    expect(await callAs("admin")).toBe(grpc.status.UNAUTHENTICATED);
    expect(await callAs("plain")).toBe(grpc.status.UNAUTHENTICATED);
    expect(await callAs("plain", bearer(delta.token))).toBe(grpc.status.OK);
    // What is presented is checked: a wrong token is refused even with a client certificate.
    expect(await callAs("carol", bearer(makeToken("carol").token))).toBe(grpc.status.UNAUTHENTICATED);
  });

  it(`${mode === "required" ? "refuses the connection of" : "admits on a token alone"} a client without a certificate of the CA`, async () => {
    const noCertificate = grpc.credentials.createSsl(readFileSync(at("ca.pem")));
    const otherCa = grpc.credentials.createSsl(
      readFileSync(at("ca.pem")),
      readFileSync(at("mallory.key")),
      readFileSync(at("mallory.pem")),
    );
    const codes = {
      noCertificate: await callWith(noCertificate),
      noCertificateWithToken: await callWith(noCertificate, bearer(delta.token)),
      otherCa: await callWith(otherCa),
      otherCaWithToken: await callWith(otherCa, bearer(delta.token)),
      plaintext: await callWith(grpc.credentials.createInsecure(), bearer(delta.token)),
    };
    if (mode === "required")
      expect(codes).toEqual({
        noCertificate: grpc.status.UNAVAILABLE,
        noCertificateWithToken: grpc.status.UNAVAILABLE,
        otherCa: grpc.status.UNAVAILABLE,
        otherCaWithToken: grpc.status.UNAVAILABLE,
        plaintext: grpc.status.UNAVAILABLE,
      });
    else
      expect(codes).toEqual({
        noCertificate: grpc.status.UNAUTHENTICATED,
        noCertificateWithToken: grpc.status.OK,
        // Connected, but its certificate names no one: carol's identity is not taken from another CA.
        otherCa: grpc.status.UNAUTHENTICATED,
        otherCaWithToken: grpc.status.OK,
        plaintext: grpc.status.UNAVAILABLE,
      });
  });
});

describe("--client-certificates optional, --http-tls", () => {
  it("refuse to start without gRPC TLS or without a tokens file, naming the options", () => {
    const r = spawnSync(process.execPath, [serviceEntry("broker")], {
      env: {
        ...process.env,
        INFERGRID_CLIENT_CERTIFICATES: "optional",
        INFERGRID_HTTP_TLS: "true",
        INFERGRID_NATS_URL: "nats://127.0.0.1:1",
      },
      encoding: "utf8",
      timeout: 15_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("--client-certificates optional: needs gRPC TLS");
    expect(r.stderr).toContain("--client-certificates optional: needs --client-tokens-file");
    expect(r.stderr).toContain("--http-tls: needs gRPC TLS");
  });
});
