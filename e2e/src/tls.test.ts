import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes, X509Certificate } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { connect as tlsConnect } from "node:tls";
import { InferenceServiceDefinition } from "@infergrid/proto";
import { grpc, unaryCall } from "@infergrid/runtime";
import { makeCa as makeTestCa, makeCert as makeTestCert, type ServiceName, serviceEntry } from "@infergrid/testkit";
import { connect as natsConnect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callWith, emulatedSpec, FAST, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * NATS with TLS (client certificates verified) and user/password auth, and mutual gRPC TLS
 * between every service, on real processes: a throwaway CA made with the openssl CLI, a real
 * nats-server, the allocator, 2 backends, 2 frontends and the broker. Requests are answered
 * through it; plaintext or foreign-CA peers are refused; a missing secret stops a service with
 * status 2 naming the option; the password never reaches a log line.
 */
const SERVER_NAME = "infergrid.internal";
const NATS_USER = "infergrid-svc";
// Distinctive, so that finding it anywhere in a log cannot be a coincidence.
const NATS_PASS = `pw-${randomBytes(12).toString("hex")}`;

let dir = "";
const path = (name: string) => join(dir, name);
let cluster: TestCluster | undefined;
let rawFrontend: RawProcess | undefined;

const makeCa = (name: string) => makeTestCa(dir, name);
const makeCert = (name: string, ca: string, san: string) => makeTestCert(dir, name, ca, san);

/** One POST to the broker's HTTPS ingress, trusting `ca` (the cluster's by default). */
function httpsPost(route: string, body: string, ca = readFileSync(path("ca.pem"))): Promise<{ status: number; body: string }> {
  const address = must(cluster, "cluster").broker.ready.httpAddress ?? "";
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port: Number(address.slice(address.lastIndexOf(":") + 1)),
        path: route,
        method: "POST",
        ca,
        headers: { "content-type": "application/json" },
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => {
          text += d.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** The serial number of the certificate a TLS port of the broker presents to a new connection. */
function servedSerial(address: string, alpn: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = tlsConnect(
      {
        host: "127.0.0.1",
        port: Number(address.slice(address.lastIndexOf(":") + 1)),
        ca: readFileSync(path("ca.pem")),
        cert: readFileSync(path("svc.pem")),
        key: readFileSync(path("svc.key")),
        ALPNProtocols: [alpn],
      },
      () => {
        resolve(socket.getPeerCertificate().serialNumber);
        socket.destroy();
      },
    );
    socket.on("error", reject);
  });
}

/** NATS TLS (CA + client certificate) and gRPC mTLS settings, shared by every service. */
function tlsEnv(): Record<string, string> {
  return {
    INFERGRID_NATS_USER: NATS_USER,
    INFERGRID_NATS_TLS_CA_FILE: path("ca.pem"),
    INFERGRID_NATS_TLS_CERT_FILE: path("svc.pem"),
    INFERGRID_NATS_TLS_KEY_FILE: path("svc.key"),
    INFERGRID_GRPC_TLS_CERT_FILE: path("svc.pem"),
    INFERGRID_GRPC_TLS_KEY_FILE: path("svc.key"),
    INFERGRID_GRPC_TLS_CA_FILE: path("ca.pem"),
    INFERGRID_GRPC_TLS_SERVER_NAME: SERVER_NAME,
    // Renewed files are taken within half a second (the last test renews them in place).
    INFERGRID_GRPC_TLS_RELOAD_MS: "500",
  };
}

/** The password from a file (a mounted Secret) ... */
const passFromFile = () => ({ INFERGRID_NATS_PASS_FILE: path("nats-pass") });
/** ... or inline (an env var filled from a Secret). */
const passInline = () => ({ INFERGRID_NATS_PASS: NATS_PASS });

/** A service process whose every byte of stdout and stderr is kept (ServiceProcess keeps parsed lines only). */
interface RawProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  ready: Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

function spawnRaw(service: ServiceName, env: Record<string, string>): RawProcess {
  const child = spawn(process.execPath, [serviceEntry(service)], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const chunks: string[] = [];
  child.stdout?.on("data", (d: Buffer) => chunks.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => chunks.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed.event === "ready") resolve(parsed);
      } catch {
        // not a JSON line: kept in the raw output all the same
      }
    });
    void exited.then((code) => reject(new Error(`${service} exited with ${code} before it was ready:\n${chunks.join("")}`)));
  });
  ready.catch(() => undefined);
  return {
    child,
    output: () => chunks.join(""),
    exited,
    ready,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const done = await Promise.race([exited.then(() => true), sleep(3000).then(() => false)]);
      if (!done) {
        child.kill("SIGKILL");
        await exited;
      }
    },
  };
}

/** The standard health check every gRPC server of the project serves; answers raw bytes. */
const healthCheck = {
  path: "/grpc.health.v1.Health/Check",
  requestStream: false,
  responseStream: false,
  requestSerialize: () => Buffer.alloc(0),
  requestDeserialize: () => ({}),
  responseSerialize: () => Buffer.alloc(0),
  responseDeserialize: (b: Buffer) => b,
} satisfies grpc.MethodDefinition<object, Buffer>;

/** Channel credentials: trust `ca`, present `cert` (if given). */
function clientCreds(ca: string, cert?: string): grpc.ChannelCredentials {
  return cert === undefined
    ? grpc.credentials.createSsl(readFileSync(path(`${ca}.pem`)))
    : grpc.credentials.createSsl(readFileSync(path(`${ca}.pem`)), readFileSync(path(`${cert}.key`)), readFileSync(path(`${cert}.pem`)));
}

function must<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`set-up did not finish: ${what}`);
  return value;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "ig-tls-"));
  makeCa("ca");
  makeCert("nats", "ca", "IP:127.0.0.1,DNS:localhost");
  makeCert("svc", "ca", `IP:127.0.0.1,DNS:${SERVER_NAME}`);
  // A certificate for the very same names, from a CA nobody here trusts.
  makeCa("rogue-ca");
  makeCert("rogue", "rogue-ca", `IP:127.0.0.1,DNS:${SERVER_NAME}`);
  writeFileSync(path("nats-pass"), `${NATS_PASS}\n`, { mode: 0o600 });

  cluster = await startCluster({
    backends: 2,
    frontends: 1,
    nats: {
      args: [
        "--tlsverify",
        "--tlscert",
        path("nats.pem"),
        "--tlskey",
        path("nats.key"),
        "--tlscacert",
        path("ca.pem"),
        "--user",
        NATS_USER,
        "--pass",
        NATS_PASS,
      ],
    },
    env: tlsEnv(),
    allocatorEnv: passFromFile(),
    backendEnv: passFromFile(),
    frontendEnv: passFromFile(),
    brokerEnv: { ...passInline(), INFERGRID_HTTP_TLS: "true" },
    // The test presents the services' certificate and checks the broker's against 127.0.0.1 (its IP SAN).
    grpcClient: { credentials: clientCreds("ca", "svc") },
  });
  // A second frontend with its whole raw output kept, at debug level (the most it ever prints).
  rawFrontend = spawnRaw("frontend", {
    ...FAST,
    ...tlsEnv(),
    ...passInline(),
    INFERGRID_NATS_URL: cluster.nats.url,
    INFERGRID_ID: "frontend-raw",
    INFERGRID_AUTOSCALE_MS: "250",
    INFERGRID_LOG_LEVEL: "debug",
  });
  await rawFrontend.ready;
  await registerService(cluster, emulatedSpec("echo", { maxBackends: 2, initialBackends: 2 }));
  await waitUntilServing(cluster, "echo");
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([rawFrontend?.stop(), cluster?.stop()]);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the request path with NATS TLS + auth and gRPC mTLS everywhere", () => {
  it("answers every request sent through the broker over gRPC with TLS client credentials", async () => {
    const c = must(cluster, "cluster");
    const sent = 30;
    const results = await Promise.allSettled(
      Array.from({ length: sent }, (_, i) =>
        unaryCall(
          c.brokerClient,
          InferenceServiceDefinition.Infer,
          { service: "echo", requestId: `tls-${i}`, inputs: { x: { dims: [2], data: [i, 1] } } },
          { deadline: Date.now() + 10_000 },
        ),
      ),
    );
    const answered = results.flatMap((r, i) =>
      r.status === "fulfilled" && r.value.requestId === `tls-${i}` && /^backend-\d$/.test(r.value.backendId ?? "") ? [r.value] : [],
    );
    const errors = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
    expect(errors).toEqual([]);
    expect(answered).toHaveLength(sent);
    for (const r of answered) {
      expect(r.outputs?.y?.dims).toEqual([1]);
      expect(r.frontendId).toMatch(/^frontend-(0|raw)$/);
    }
  });

  it("every service connected to NATS (TLS + auth) and announced itself", () => {
    const c = must(cluster, "cluster");
    for (const p of [c.allocator, ...c.backends, ...c.frontends, c.broker]) {
      expect(
        p.logs.some((l) => l.msg === "connected to nats"),
        `${p.name} connected to nats`,
      ).toBe(true);
    }
    expect(must(rawFrontend, "raw frontend").output()).toContain("connected to nats");
  });

  it("the broker's HTTP/JSON ingress serves HTTPS with the gRPC certificate (--http-tls), and no plain HTTP", async () => {
    const c = must(cluster, "cluster");
    const res = await httpsPost(
      "/v1/infer",
      JSON.stringify({ service: "echo", request_id: "http-1", inputs: { x: { dims: [1], data: [3] } } }),
    );
    expect(res.status).toBe(200);
    const body = JSON.parse(res.body) as { requestId?: string; backendId?: string };
    expect(body.requestId).toBe("http-1");
    expect(body.backendId).toMatch(/^backend-\d$/);
    // Plain HTTP to the same port gets no answer a client could read as one.
    await expect(fetch(`${c.httpUrl}/v1/infer`, { method: "POST", body: "{}" })).rejects.toThrow();
    // Nor does a client that does not trust the cluster's CA.
    await expect(httpsPost("/v1/infer", "{}", readFileSync(path("rogue-ca.pem")))).rejects.toThrow(/certificate/);
  });
});

describe("peers without the right credentials are refused", () => {
  const addresses = () => {
    const c = must(cluster, "cluster");
    const frontend = c.frontends[0];
    const backend = c.backends[0];
    return {
      broker: c.broker.ready.grpcAddress ?? "",
      frontend: frontend?.ready.grpcAddress ?? "",
      backend: backend?.ready.grpcAddress ?? "",
      allocator: c.allocator.ready.grpcAddress ?? "",
    };
  };

  it("control: the services' own certificate is accepted by every gRPC server", async () => {
    for (const [role, address] of Object.entries(addresses())) {
      const r = await callWith(address, clientCreds("ca", "svc"), healthCheck, {}, { "grpc.ssl_target_name_override": SERVER_NAME });
      expect(r.ok, `${role} health over mTLS`).toBe(true);
    }
  });

  it("a plaintext gRPC client gets an error and no answer, from the broker, a frontend, a backend and the allocator", async () => {
    for (const [role, address] of Object.entries(addresses())) {
      const r = await callWith(address, grpc.credentials.createInsecure(), healthCheck, {});
      expect(r, `${role} refuses plaintext`).toMatchObject({ ok: false, code: grpc.status.UNAVAILABLE });
    }
    const infer = await callWith(addresses().broker, grpc.credentials.createInsecure(), InferenceServiceDefinition.Infer, {
      service: "echo",
    });
    expect(infer).toMatchObject({ ok: false, code: grpc.status.UNAVAILABLE });
  });

  it("a TLS client that presents no certificate is refused (the TLS is mutual)", async () => {
    for (const [role, address] of Object.entries(addresses())) {
      const r = await callWith(address, clientCreds("ca"), healthCheck, {});
      expect(r, `${role} refuses a client without a certificate`).toMatchObject({ ok: false, code: grpc.status.UNAVAILABLE });
    }
  });

  it("a client whose certificate comes from another CA is refused, whichever side checks it", async () => {
    // It trusts the right CA, but presents a certificate for the right names signed by a foreign CA.
    for (const [role, address] of Object.entries(addresses())) {
      const r = await callWith(address, clientCreds("ca", "rogue"), healthCheck, {});
      expect(r, `${role} refuses a foreign client certificate`).toMatchObject({ ok: false, code: grpc.status.UNAVAILABLE });
    }
    const infer = await callWith(addresses().broker, clientCreds("ca", "rogue"), InferenceServiceDefinition.Infer, { service: "echo" });
    expect(infer).toMatchObject({ ok: false, code: grpc.status.UNAVAILABLE });
    // It trusts only its own CA: it refuses the broker's certificate itself.
    const r = await callWith(addresses().broker, clientCreds("rogue-ca", "rogue"), InferenceServiceDefinition.Infer, {
      service: "echo",
    });
    expect(r).toMatchObject({ ok: false, code: grpc.status.UNAVAILABLE });
  });

  it("NATS: only a TLS client with the CA, a client certificate and the credentials gets in", async () => {
    const servers = must(cluster, "cluster").nats.url;
    const tls = { caFile: path("ca.pem"), certFile: path("svc.pem"), keyFile: path("svc.key") };
    const attempt = async (options: Record<string, unknown>): Promise<string> => {
      try {
        const nc = await natsConnect({ servers, maxReconnectAttempts: 0, timeout: 3000, ...options });
        await nc.flush();
        await nc.close();
        return "connected";
      } catch (err) {
        return `refused: ${(err as Error).message}`;
      }
    };
    // Control: with everything, it connects.
    expect(await attempt({ tls, user: NATS_USER, pass: NATS_PASS })).toBe("connected");
    const [noCredentials, wrongPassword, noClientCert, foreignClientCert] = await Promise.all([
      attempt({ tls }),
      attempt({ tls, user: NATS_USER, pass: "wrong" }),
      // The server verifies client certificates (--tlsverify): it drops these after the handshake.
      attempt({ tls: { caFile: path("ca.pem") }, user: NATS_USER, pass: NATS_PASS }),
      attempt({
        tls: { caFile: path("ca.pem"), certFile: path("rogue.pem"), keyFile: path("rogue.key") },
        user: NATS_USER,
        pass: NATS_PASS,
      }),
    ]);
    expect(noCredentials).toMatch(/^refused: Authorization Violation/);
    expect(wrongPassword).toMatch(/^refused: Authorization Violation/);
    expect(noClientCert).toMatch(/^refused/);
    expect(foreignClientCert).toMatch(/^refused/);
  });

  it("NATS: a plaintext client with the right credentials is refused (no PONG)", async () => {
    const port = must(cluster, "cluster").nats.port;
    const transcript = await new Promise<string>((resolve) => {
      let text = "";
      let sent = false;
      const s = tcpConnect(port, "127.0.0.1");
      const finish = () => {
        s.destroy();
        resolve(text);
      };
      const timer = setTimeout(finish, 3000);
      s.on("data", (d: Buffer) => {
        text += d.toString();
        if (text.startsWith("INFO ") && !sent) {
          sent = true;
          s.write(`CONNECT ${JSON.stringify({ user: NATS_USER, pass: NATS_PASS, verbose: false, pedantic: false })}\r\nPING\r\n`);
        }
        if (text.includes("PONG") || text.includes("-ERR")) {
          clearTimeout(timer);
          finish();
        }
      });
      s.on("close", () => {
        clearTimeout(timer);
        resolve(text);
      });
      s.on("error", () => undefined);
    });
    expect(transcript).toMatch(/^INFO .*"tls_required":true/);
    expect(transcript).not.toContain("PONG");
  });
});

describe("a missing secret stops a service before it starts", () => {
  const runToExit = async (service: ServiceName, env: Record<string, string>) => {
    const p = spawnRaw(service, { ...FAST, INFERGRID_NATS_URL: must(cluster, "cluster").nats.url, ...env });
    const code = await Promise.race([p.exited, sleep(15_000).then(() => "still running" as const)]);
    await p.stop();
    return { code, output: p.output() };
  };

  it("auth configured, password file missing: exit 2 naming the option", async () => {
    const r = await runToExit("frontend", { ...tlsEnv(), INFERGRID_NATS_PASS_FILE: path("no-such-pass") });
    expect(r.code).toBe(2);
    expect(r.output).toContain("--nats-pass-file / INFERGRID_NATS_PASS_FILE");
    expect(r.output).toMatch(/no-such-pass \(ENOENT\)/);
    expect(r.output).not.toContain("ready");
  });

  it("auth configured, no password at all: exit 2 naming the option", async () => {
    const r = await runToExit("backend-worker", tlsEnv());
    expect(r.code).toBe(2);
    expect(r.output).toContain("--nats-user / INFERGRID_NATS_USER is set but its password is missing");
  });

  it("a missing gRPC certificate: exit 2 naming it, and the inline password is not printed", async () => {
    const r = await runToExit("broker", { ...tlsEnv(), ...passInline(), INFERGRID_GRPC_TLS_CERT_FILE: path("no-such-cert.pem") });
    expect(r.code).toBe(2);
    expect(r.output).toContain("--grpc-tls-cert-file / INFERGRID_GRPC_TLS_CERT_FILE");
    expect(r.output).not.toContain(NATS_PASS);
  });
});

describe("a certificate renewed in place (cert-manager rewrites the mounted files)", () => {
  it("is presented on new connections within the reload period; requests are answered across the renewal", async () => {
    const c = must(cluster, "cluster");
    makeCert("svc-next", "ca", `IP:127.0.0.1,DNS:${SERVER_NAME}`);
    const next = new X509Certificate(readFileSync(path("svc-next.pem"))).serialNumber;
    const served = () => servedSerial(c.broker.ready.grpcAddress ?? "", "h2");
    // The HTTPS ingress (--http-tls) serves the same certificate and takes the renewed one with it.
    const servedOnHttps = () => servedSerial(c.broker.ready.httpAddress ?? "", "http/1.1");
    expect(await served()).not.toBe(next);
    expect(await servedOnHttps()).toBe(await served());
    // The certificate first, the key a moment later: the half-written pair is passed over, the whole one taken.
    copyFileSync(path("svc-next.pem"), path("svc.pem"));
    await sleep(1_200);
    copyFileSync(path("svc-next.key"), path("svc.key"));
    await sleep(1_500);
    expect(await served()).toBe(next);
    expect(await servedOnHttps()).toBe(next);
    const logged = (p: { logs: { msg?: string }[] }, msg: string) => p.logs.some((l) => l.msg === msg);
    for (const p of [c.broker, ...c.frontends, ...c.backends]) {
      expect(logged(p, "gRPC TLS files not taken; the certificate in use stays"), p.name).toBe(true);
      expect(logged(p, "gRPC TLS files changed: new connections take the new certificate"), p.name).toBe(true);
    }
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        unaryCall(
          c.brokerClient,
          InferenceServiceDefinition.Infer,
          { service: "echo", requestId: `renewed-${i}`, inputs: { x: { dims: [2], data: [i, 1] } } },
          { deadline: Date.now() + 10_000 },
        ),
      ),
    );
    expect(results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []))).toEqual([]);
  });
});

describe("no secret appears in logs", () => {
  it("the password is in no log line of any service, nor in the raw output of one run at debug level", () => {
    const c = must(cluster, "cluster");
    const processes = [c.allocator, ...c.backends, ...c.frontends, c.broker];
    for (const p of processes) {
      expect(p.logs.length, `${p.name} logged`).toBeGreaterThan(0);
      expect(JSON.stringify(p.logs), `${p.name} logs`).not.toContain(NATS_PASS);
    }
    const raw = must(rawFrontend, "raw frontend").output();
    expect(raw.split("\n").length).toBeGreaterThan(3);
    expect(raw).not.toContain(NATS_PASS);
  });
});
