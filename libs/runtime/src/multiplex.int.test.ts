import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MultiplexDefinition, type rpc } from "@infergrid/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytesMethod } from "./bytes-method.js";
import { makeCa, makeCert } from "./certs.js";
import { createClient, type GrpcServerHandle, grpc, startGrpcServer, statusOf, unaryCall } from "./grpc.js";
import { H2Channel } from "./h2-channel.js";
import { addServiceWithMultiplex, MultiplexChannel, MultiplexedCall } from "./multiplex.js";
import { requirePeerRole } from "./peer-identity.js";

/**
 * Unary calls multiplexed over one stream, against real grpc-js servers: the same answers, statuses, trailing
 * metadata, deadlines and cancellation as unary calls, large requests and peers without the service served as
 * unary calls, a broken stream failing its calls UNAVAILABLE, a drained server closing its streams, and the
 * caller's TLS identity reaching the handler.
 */
const method = (name: string) => bytesMethod(`/test.Echo/${name}`);
const Echo = { Echo: method("Echo"), Fail: method("Fail"), Slow: method("Slow"), Who: method("Who") };

/** What the handlers saw: whether each call came over the stream, and which were cancelled. */
const seen: { body: string; multiplexed: boolean }[] = [];
const cancelled: string[] = [];

function handlers(peerRoles = false) {
  const who: grpc.handleUnaryCall<Buffer, Buffer> = (call, cb) => cb(null, Buffer.from(String(call.getPeer().length > 0)));
  return {
    Echo: ((call, cb) => {
      seen.push({ body: call.request.subarray(0, 16).toString(), multiplexed: call instanceof MultiplexedCall });
      cb(null, Buffer.concat([Buffer.from(`${String(call.metadata.get("x-who")[0] ?? "")}:`), call.request]));
    }) as grpc.handleUnaryCall<Buffer, Buffer>,
    Fail: ((_call, cb) => {
      const md = new grpc.Metadata();
      md.set("x-infergrid-retry-after-ms", "250");
      cb({ code: grpc.status.UNAVAILABLE, details: "busy: 100 % ünicode", metadata: md });
    }) as grpc.handleUnaryCall<Buffer, Buffer>,
    Slow: ((call, cb) => {
      call.on("cancelled", () => cancelled.push(call.request.toString()));
      setTimeout(() => cb(null, call.request), 1_000);
    }) as grpc.handleUnaryCall<Buffer, Buffer>,
    Who: requirePeerRole(peerRoles, ["frontend"], "Who", who),
  };
}

const dir = mkdtempSync(join(tmpdir(), "ig-multiplex-"));
const pem = (name: string) => readFileSync(join(dir, name));
const H2 = {
  maxReceiveMessageBytes: 16 * 1024 * 1024,
  keepaliveMs: 10_000,
  keepaliveTimeoutMs: 5_000,
  initialBackoffMs: 200,
  maxBackoffMs: 1_000,
};
const logger = { debug: () => undefined } as unknown as Parameters<typeof addServiceWithMultiplex>[3];

let server: GrpcServerHandle;
let plainServer: GrpcServerHandle;

function channel(address: string, maxStreamedBytes = 64 * 1024): MultiplexChannel {
  return new MultiplexChannel(address, { unary: new H2Channel(address, H2), maxStreamedBytes });
}

beforeAll(async () => {
  makeCa(dir, "ca");
  makeCert(dir, "server", "ca", "DNS:infergrid.internal");
  makeCert(dir, "frontend", "ca", "URI:spiffe://infergrid/frontend/f-1");
  makeCert(dir, "broker", "ca", "URI:spiffe://infergrid/broker/b-1");
  server = await startGrpcServer({
    host: "127.0.0.1",
    port: 0,
    register: (s) => addServiceWithMultiplex(s, Echo, handlers(), logger),
  });
  // A peer that serves the methods but not Multiplex (an older build).
  plainServer = await startGrpcServer({ host: "127.0.0.1", port: 0, register: (s) => s.addService(Echo, handlers()) });
});

afterAll(async () => {
  await Promise.all([server?.shutdown(100), plainServer?.shutdown(100)]);
  rmSync(dir, { recursive: true, force: true });
});

const call = (
  ch: MultiplexChannel,
  m: grpc.MethodDefinition<Buffer, Buffer>,
  body: string | Buffer,
  options: Parameters<typeof unaryCall>[3] = {},
) => unaryCall(ch, m, typeof body === "string" ? Buffer.from(body) : body, { deadline: Date.now() + 5_000, ...options });

describe("MultiplexChannel and the multiplexed service (real grpc-js servers)", () => {
  it("answers many concurrent calls over the stream, each with its own answer and the caller's metadata", async () => {
    seen.length = 0;
    const ch = channel(server.address);
    const md = new grpc.Metadata();
    md.set("x-who", "broker-1");
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => call(ch, Echo.Echo, `r${i}`, { metadata: md })));
    expect(answers.map((a) => a.toString())).toEqual(Array.from({ length: 200 }, (_, i) => `broker-1:r${i}`));
    expect(seen.length).toBe(200);
    expect(seen.every((s) => s.multiplexed)).toBe(true);
    ch.close();
  });

  it("gives the handler's status, message and trailing metadata", async () => {
    const ch = channel(server.address);
    const s = statusOf(await call(ch, Echo.Fail, "x").catch((e: unknown) => e));
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
    expect(s.details).toBe("busy: 100 % ünicode");
    expect(s.metadata.get("x-infergrid-retry-after-ms")).toEqual(["250"]);
    ch.close();
  });

  it("ends a call at its deadline and on cancel, and the handler sees it cancelled; the stream goes on", async () => {
    cancelled.length = 0;
    const ch = channel(server.address);
    const t0 = Date.now();
    expect(statusOf(await call(ch, Echo.Slow, "late", { deadline: Date.now() + 150 }).catch((e: unknown) => e)).code).toBe(
      grpc.status.DEADLINE_EXCEEDED,
    );
    expect(Date.now() - t0).toBeLessThan(900);
    const abort = new AbortController();
    const pending = call(ch, Echo.Slow, "gone", { signal: abort.signal }).catch((e: unknown) => e);
    setTimeout(() => abort.abort(), 50);
    expect(statusOf(await pending).code).toBe(grpc.status.CANCELLED);
    await new Promise((r) => setTimeout(r, 200));
    expect(cancelled.sort()).toEqual(["gone", "late"]);
    expect((await call(ch, Echo.Echo, "after")).toString()).toBe(":after");
    ch.close();
  });

  it("sends a request larger than the stream's bound as a unary call of its own", async () => {
    seen.length = 0;
    const ch = channel(server.address, 1024);
    const big = Buffer.alloc(100 * 1024, 65);
    const small = await call(ch, Echo.Echo, "small");
    const answer = await call(ch, Echo.Echo, big);
    expect(small.toString()).toBe(":small");
    expect(answer.length).toBe(1 + big.length);
    expect(seen.map((s) => s.multiplexed)).toEqual([true, false]);
    ch.close();
  });

  it("falls back to unary calls for a peer without the multiplexed service, the calls in flight included", async () => {
    seen.length = 0;
    const ch = channel(plainServer.address);
    const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => call(ch, Echo.Echo, `p${i}`)));
    expect(answers.map((a) => a.toString())).toEqual(["p0", "p1", "p2", "p3", "p4"].map((b) => `:${b}`));
    expect((await call(ch, Echo.Echo, "later")).toString()).toBe(":later");
    expect(seen.every((s) => !s.multiplexed)).toBe(true);
    ch.close();
  });

  it("cancels a call sent again as a unary call when the peer has no multiplexed service: the handler sees it", async () => {
    cancelled.length = 0;
    // The first call on a fresh channel goes to the stream, is refused UNIMPLEMENTED there, and is sent again.
    const ch = channel(plainServer.address);
    const abort = new AbortController();
    const pending = call(ch, Echo.Slow, "resent", { signal: abort.signal }).catch((e: unknown) => e);
    setTimeout(() => abort.abort(), 100);
    expect(statusOf(await pending).code).toBe(grpc.status.CANCELLED);
    await new Promise((r) => setTimeout(r, 200));
    expect(cancelled).toEqual(["resent"]);
    ch.close();
  });

  it("fails the calls of a broken stream UNAVAILABLE, and opens a new one once the peer is back", async () => {
    const s = await startGrpcServer({ host: "127.0.0.1", port: 0, register: (x) => addServiceWithMultiplex(x, Echo, handlers(), logger) });
    const ch = channel(s.address);
    expect((await call(ch, Echo.Echo, "up")).toString()).toBe(":up");
    const inFlight = call(ch, Echo.Slow, "cut").catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 50));
    s.server.forceShutdown();
    expect(statusOf(await inFlight).code).toBe(grpc.status.UNAVAILABLE);
    const again = await startGrpcServer({
      host: "127.0.0.1",
      port: s.port,
      register: (x) => addServiceWithMultiplex(x, Echo, handlers(), logger),
    });
    let back: unknown;
    for (let i = 0; i < 30 && !(back instanceof Buffer); i++) {
      back = await call(ch, Echo.Echo, "back").catch((e: unknown) => e);
      if (!(back instanceof Buffer)) await new Promise((r) => setTimeout(r, 100));
    }
    expect(String(back)).toBe(":back");
    ch.close();
    await again.shutdown(100);
  });

  it("a server shutting down answers the calls it runs, then ends its streams (no wait for the grace)", async () => {
    const s = await startGrpcServer({ host: "127.0.0.1", port: 0, register: (x) => addServiceWithMultiplex(x, Echo, handlers(), logger) });
    const ch = channel(s.address);
    const running = call(ch, Echo.Slow, "drained");
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    await s.shutdown(10_000);
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect((await running).toString()).toBe("drained");
    ch.close();
  });

  /** A Multiplex stream written by hand (a hostile, broken or older peer), with the outcomes it gets. */
  function rawStream() {
    const client = createClient(server.address);
    const stream = client.makeBidiStreamRequest(
      MultiplexDefinition.Calls.path,
      MultiplexDefinition.Calls.requestSerialize,
      MultiplexDefinition.Calls.responseDeserialize,
    );
    const outcomes: rpc.Outcome[] = [];
    stream.on("data", (o: rpc.Outcome) => outcomes.push(o));
    stream.on("error", () => undefined); // cancelled when the client closes
    return { client, stream, outcomes };
  }

  it("refuses a reused call id and an unknown method, on the stream itself (a hostile or broken peer)", async () => {
    const { client, stream, outcomes } = rawStream();
    stream.write({ id: 1, method: Echo.Slow.path, request: Buffer.from("a"), deadlineUnixMs: Date.now() + 5_000 });
    stream.write({ id: 1, method: Echo.Slow.path, request: Buffer.from("b"), deadlineUnixMs: Date.now() + 5_000 });
    stream.write({ id: 2, method: "/test.Echo/Nope", request: Buffer.from("c") });
    await new Promise((r) => setTimeout(r, 300));
    expect(outcomes.map((o) => [Number(o.id), grpc.status[o.code]])).toEqual([
      [1, "INVALID_ARGUMENT"],
      [2, "UNIMPLEMENTED"],
    ]);
    stream.end();
    client.close();
  });

  it("counts a call's timeout from when it read the call, whatever the caller's wall clock read", async () => {
    const { client, stream, outcomes } = rawStream();
    const hourAgo = Date.now() - 3_600_000;
    // A caller whose clock is an hour behind: with its timeout the call runs; without, its stamp alone has passed.
    stream.write({ id: 1, method: Echo.Echo.path, request: Buffer.from("behind"), deadlineUnixMs: hourAgo + 5_000, timeoutMs: 5_000 });
    stream.write({ id: 2, method: Echo.Echo.path, request: Buffer.from("stamp"), deadlineUnixMs: hourAgo + 5_000 });
    // A caller an hour ahead, with 100 ms left: the call ends DEADLINE_EXCEEDED after those 100 ms, not an hour.
    stream.write({ id: 3, method: Echo.Slow.path, request: Buffer.from("ahead"), deadlineUnixMs: Date.now() + 3_600_100, timeoutMs: 100 });
    await new Promise((r) => setTimeout(r, 600));
    expect(outcomes.map((o) => [Number(o.id), grpc.status[o.code]])).toEqual([
      [1, "OK"],
      [2, "DEADLINE_EXCEEDED"],
      [3, "DEADLINE_EXCEEDED"],
    ]);
    stream.end();
    client.close();
  });

  it("hands the stream's TLS identity to the handler: peer roles hold over the stream", async () => {
    const s = await startGrpcServer({
      host: "127.0.0.1",
      port: 0,
      register: (x) => addServiceWithMultiplex(x, Echo, handlers(true), logger),
      credentials: grpc.ServerCredentials.createSsl(
        pem("ca.pem"),
        [{ cert_chain: pem("server.pem"), private_key: pem("server.key") }],
        true,
      ),
    });
    const as = (name: string) => {
      const tls = { ca: pem("ca.pem"), cert: pem(`${name}.pem`), key: pem(`${name}.key`), serverName: "infergrid.internal" };
      return new MultiplexChannel(s.address, {
        unary: new H2Channel(s.address, { ...H2, tls }),
        maxStreamedBytes: 64 * 1024,
        credentials: grpc.credentials.createSsl(tls.ca, tls.key, tls.cert),
        channelOptions: { "grpc.ssl_target_name_override": "infergrid.internal" },
      });
    };
    const frontend = as("frontend");
    expect((await call(frontend, Echo.Who, "x")).toString()).toBe("true");
    const broker = as("broker");
    expect(statusOf(await call(broker, Echo.Who, "x").catch((e: unknown) => e)).code).toBe(grpc.status.PERMISSION_DENIED);
    frontend.close();
    broker.close();
    await s.shutdown(100);
  });
});
