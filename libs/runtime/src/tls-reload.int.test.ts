import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytesMethod } from "./bytes-method.js";
import { makeCa, makeCert } from "./certs.js";
import { createClient, defaultChannelTls, type GrpcServerHandle, grpc, startGrpcServer, unaryCall } from "./grpc.js";
import { H2Channel } from "./h2-channel.js";
import { peerIdentity } from "./peer-identity.js";
import { applyGrpcTls } from "./security.js";
import { ReloadingTls, tlsMaterialProblem } from "./tls-reload.js";

/**
 * A process's certificate renewed in place while it serves (cert-manager rewrites the mounted files): a real
 * grpc-js server and real clients on this process's TLS (applyGrpcTls with ReloadingTls, as runService sets it).
 * New connections take the renewed certificate, served and dialled; connections already open keep theirs; files
 * caught half-written are passed over until they make a whole.
 */
const dir = mkdtempSync(join(tmpdir(), "ig-tls-reload-"));
const files = { certFile: join(dir, "self.pem"), keyFile: join(dir, "self.key"), caFile: join(dir, "ca.pem") };
const Who = bytesMethod("/test.Who/Who");
let server: GrpcServerHandle;
let tls: ReloadingTls;

/** Puts certificate `name` (made by makeCert) where the process reads its own; `part`: only its cert or its key. */
function install(name: string, part: "both" | "cert" | "key" = "both"): void {
  if (part !== "key") copyFileSync(join(dir, `${name}.pem`), files.certFile);
  if (part !== "cert") copyFileSync(join(dir, `${name}.key`), files.keyFile);
}

/** The identity the server presents to a new TLS connection. */
function served(): Promise<string> {
  const [host, port] = [
    server.address.slice(0, server.address.lastIndexOf(":")),
    Number(server.address.slice(server.address.lastIndexOf(":") + 1)),
  ];
  const ca = readFileSync(files.caFile);
  // A client of its own (the server asks every client for a certificate of the CA).
  return new Promise((resolve, reject) => {
    const socket = connect(
      { host, port, ca, cert: readFileSync(join(dir, "client.pem")), key: readFileSync(join(dir, "client.key")), ALPNProtocols: ["h2"] },
      () => {
        const san = socket.getPeerCertificate().subjectaltname ?? "";
        socket.destroy();
        resolve(san.slice(san.lastIndexOf("/") + 1));
      },
    );
    socket.on("error", reject);
  });
}

/** The identity a new grpc-js channel of this process presents to the server. */
async function dialled(): Promise<string> {
  // A connection of its own: grpc-js otherwise shares one between channels to the same address.
  const client = createClient(server.address, undefined, { "grpc.use_local_subchannel_pool": 1 });
  try {
    return (await unaryCall(client, Who, Buffer.alloc(0), { deadline: Date.now() + 5_000 })).toString();
  } finally {
    client.close();
  }
}

beforeAll(async () => {
  makeCa(dir, "ca");
  for (const id of ["old", "new", "newer"]) makeCert(dir, id, "ca", `IP:127.0.0.1,URI:spiffe://infergrid/backend/${id}`);
  makeCert(dir, "client", "ca", "IP:127.0.0.1,URI:spiffe://infergrid/frontend/client");
  install("old");
  tls = new ReloadingTls(files, { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile), ca: readFileSync(files.caFile) });
  applyGrpcTls(tls);
  server = await startGrpcServer({
    host: "127.0.0.1",
    port: 0,
    register: (s) =>
      s.register(
        Who.path,
        ((call, cb) => cb(null, Buffer.from(peerIdentity(call)?.id ?? "none"))) as grpc.handleUnaryCall<Buffer, Buffer>,
        Who.responseSerialize,
        Who.requestDeserialize,
        "unary",
      ),
  });
});

afterAll(async () => {
  await server?.shutdown(100);
  tls?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("ReloadingTls", () => {
  it("serves and dials with the certificate it started with", async () => {
    expect(await served()).toBe("old");
    expect(await dialled()).toBe("old");
  });

  it("takes renewed files for new connections, served and dialled; an open connection keeps its own", async () => {
    const open = createClient(server.address);
    expect((await unaryCall(open, Who, Buffer.alloc(0), { deadline: Date.now() + 5_000 })).toString()).toBe("old");
    install("new");
    expect(tls.refresh()).toBe(true);
    expect(await served()).toBe("new");
    expect(await dialled()).toBe("new");
    // The request path's own channels read it at their next connection too.
    expect(defaultChannelTls()?.().cert?.equals(readFileSync(join(dir, "new.pem")))).toBe(true);
    expect((await unaryCall(open, Who, Buffer.alloc(0), { deadline: Date.now() + 5_000 })).toString()).toBe("old");
    open.close();
    expect(tls.refresh()).toBe(false);
  });

  it("passes over files caught half-written, and takes them once whole", async () => {
    install("newer", "cert");
    expect(tls.refresh()).toBe(false);
    expect(await served()).toBe("new");
    expect(await dialled()).toBe("new");
    install("newer", "key");
    expect(tls.refresh()).toBe(true);
    expect(await served()).toBe("newer");
    expect(await dialled()).toBe("newer");
  });

  it("an H2Channel given the reading dials with the renewed certificate", async () => {
    const reading = defaultChannelTls();
    expect(reading).toBeDefined();
    if (!reading) return;
    const channel = new H2Channel(server.address, {
      tls: reading,
      maxReceiveMessageBytes: 1024 * 1024,
      keepaliveMs: 10_000,
      keepaliveTimeoutMs: 5_000,
      initialBackoffMs: 100,
      maxBackoffMs: 1_000,
    });
    const who = await new Promise<string>((resolve, reject) =>
      channel.makeUnaryRequest(
        Who.path,
        Who.requestSerialize,
        Who.responseDeserialize,
        Buffer.alloc(0),
        new grpc.Metadata(),
        { deadline: Date.now() + 5_000 },
        (err, value) => (err ? reject(err) : resolve(String(value))),
      ),
    );
    expect(who).toBe("newer");
    channel.close();
  });
});

describe("tlsMaterialProblem", () => {
  it("names what keeps files from serving together", () => {
    const read = (n: string) => readFileSync(join(dir, n));
    expect(tlsMaterialProblem({ cert: read("new.pem"), key: read("new.key"), ca: read("ca.pem") })).toBeUndefined();
    expect(tlsMaterialProblem({ cert: read("new.pem"), key: read("old.key"), ca: read("ca.pem") })).toMatch(/not the certificate's/);
    expect(tlsMaterialProblem({ cert: Buffer.from(""), key: read("new.key"), ca: read("ca.pem") })).toMatch(/no certificate/);
    expect(tlsMaterialProblem({ cert: read("new.pem"), key: Buffer.from("x"), ca: read("ca.pem") })).toMatch(/no private key/);
    expect(tlsMaterialProblem({ cert: read("new.pem"), key: read("new.key"), ca: Buffer.from("junk") })).toMatch(/CA file/);
  });
});
