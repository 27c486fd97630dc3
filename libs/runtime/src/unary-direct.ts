import { EventEmitter } from "node:events";
import http2 from "node:http2";
import { TLSSocket } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { hasScratch, isChunked } from "@infergrid/proto";
import { BufferPool, type PooledBuffer } from "./buffer-pool.js";

/**
 * The request path's hot unary methods served straight on the HTTP/2 streams of a grpc-js server, beside
 * grpc-js, which keeps every other method and the connections themselves. Written by hand for one reason:
 * grpc-js concatenates each request's body into a buffer allocated for it, and on a hop that forwards a
 * 588 KiB image that allocation is half the hop's CPU, through the garbage collection it starts (buffer-pool.ts).
 * Here a body is copied as it arrives into a pooled buffer, released once the handler has answered and the stream
 * has closed. The same handler object serves both paths, with the same statuses and messages as grpc-js
 * (server-interceptors.js): INTERNAL for a bad grpc-timeout or an undecodable body, RESOURCE_EXHAUSTED at the
 * length prefix of an oversized message, UNIMPLEMENTED for none or a second message, DEADLINE_EXCEEDED at the
 * deadline, the handler's status otherwise. Streams this path does not take (compressed bodies, a content-type
 * that is not gRPC) go to grpc-js as before.
 */
export interface UnaryDirectOptions {
  /**
   * The request's bytes go back to the pool once the call is over: only for methods whose request, and what
   * the handler derives from it, does not outlive the call (the routed hops forward views of it and answer with
   * what the next hop sent). A method whose deserializer can decode into lent arrays (proto's `hasScratch`: the
   * backend's Execute) is lent them from the same pool, given back with the body: the handler must not answer
   * before it, and what it hands the tensors to (the model), is done with them.
   */
  pooled: boolean;
  /**
   * Runs once the call's headers are in, before any of its body is read: an error thrown (a status: code,
   * details, metadata) is the answer, and the body is refused with the stream's reset. For what can be decided
   * on the caller alone (the broker's client authentication), so that a refused request costs no body. The
   * handler runs only for calls it let through; on grpc-js's path (compressed requests) it does not run, so the
   * handler must decide for itself what it finds undecided.
   */
  beforeBody?: (call: grpc.ServerUnaryCall<unknown, unknown>) => void;
}

interface Claim extends UnaryDirectOptions {
  method: grpc.MethodDefinition<unknown, unknown>;
  handler: grpc.handleUnaryCall<unknown, unknown>;
}

const claims = new WeakMap<grpc.Server, Map<string, Claim>>();

/** Bodies of at least this size are copied into pooled buffers (smaller ones come from Node's slab). */
export const POOLED_BODY_BYTES = 64 * 1024;
/** What a process keeps of given-back bodies: 32 images in flight at the 1 MiB class fit. */
const pool = new BufferPool(64 * 1024 * 1024, POOLED_BODY_BYTES);
/**
 * A body is copied into its pooled buffer as it arrives (copied at the end instead, the chunks it holds meanwhile
 * survive young collections: 20-30 % more CPU a hop, measured), which takes a buffer of the length its prefix claims
 * before the bytes come. So that clients claiming lengths they never send cannot make the process hold more than
 * this, bodies beyond it are kept as the chunks received and put together at the end.
 */
export const CLAIMED_BYTES_BUDGET = 64 * 1024 * 1024;
let claimedBytes = 0;

/** How the pool of request bodies fares: buffers allocated so far, bytes held for reuse. */
export function unaryDirectPoolStats(): { allocations: number; heldBytes: number; claimedBytes: number } {
  return { allocations: pool.allocations, heldBytes: pool.heldBytes, claimedBytes };
}

/**
 * Serves `method` (registered with grpc-js under the same handler) on the direct path once the server is bound
 * (startGrpcServer installs it).
 */
export function serveUnaryDirect<Req, Res>(
  server: grpc.Server,
  method: grpc.MethodDefinition<Req, Res>,
  handler: grpc.handleUnaryCall<Req, Res>,
  options: UnaryDirectOptions,
): void {
  if (method.requestStream || method.responseStream) throw new Error(`${method.path} is not unary`);
  let own = claims.get(server);
  if (!own) {
    own = new Map();
    claims.set(server, own);
  }
  own.set(method.path, {
    ...options,
    method: method as grpc.MethodDefinition<unknown, unknown>,
    handler: handler as grpc.handleUnaryCall<unknown, unknown>,
  });
}

type StreamListener = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number) => void;

/**
 * Puts the claimed methods of `server` in front of grpc-js's stream handler on each of its HTTP/2 servers.
 * False if a server has no stream handler to put them in front of (grpc-js changed): they stay grpc-js's.
 */
export function installUnaryDirect(
  server: grpc.Server,
  h2servers: ReadonlyArray<http2.Http2Server | http2.Http2SecureServer>,
  maxReceiveMessageBytes: number,
): boolean {
  const own = claims.get(server);
  if (!own || own.size === 0) return true;
  let installed = true;
  for (const h2 of h2servers) {
    const theirs = h2.listeners("stream") as StreamListener[];
    if (theirs.length === 0) {
      installed = false;
      continue;
    }
    h2.removeAllListeners("stream");
    const toGrpcJs: StreamListener = (stream, headers, flags) => {
      for (const l of theirs) l.call(h2, stream, headers, flags);
    };
    h2.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number) => {
      const claim = own.get(String(headers[":path"]));
      const encoding = headers["grpc-encoding"];
      const contentType = headers["content-type"];
      if (
        !claim ||
        (encoding !== undefined && encoding !== "identity") ||
        typeof contentType !== "string" ||
        !contentType.startsWith("application/grpc")
      ) {
        toGrpcJs(stream, headers, flags);
        return;
      }
      // grpc-js counts a session's open streams for its idle timeout.
      const opened: unknown = Reflect.get(server, "onStreamOpened");
      if (typeof opened === "function") opened.call(server, stream);
      new DirectUnaryCall(stream, headers, claim, maxReceiveMessageBytes);
    });
  }
  return installed;
}

const DEADLINE = /(\d{1,8})\s*([HMSmun])/;
const MAX_TIMER_MS = 2 ** 31 - 1;
const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };
const DROPPED_HEADERS = ["grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "accept-encoding", "te", "content-type"];
const RESPONSE_HEADERS = {
  ":status": 200,
  "content-type": "application/grpc+proto",
  "grpc-accept-encoding": "identity,deflate,gzip",
  "grpc-encoding": "identity",
};

/** What an error thrown or passed by a handler answers, as grpc-js reads it (server-call.js serverErrorToStatus). */
function statusOfError(err: unknown, trailer?: grpc.Metadata): { code: grpc.status; details: string; metadata: grpc.Metadata | undefined } {
  const e: Partial<grpc.StatusObject> & { message?: unknown } = typeof err === "object" && err !== null ? err : { message: err };
  const coded = typeof e.code === "number" && Number.isInteger(e.code);
  return {
    code: coded ? (e.code as grpc.status) : grpc.status.UNKNOWN,
    details: coded && typeof e.details === "string" ? e.details : "message" in e ? String(e.message) : "Unknown Error",
    metadata: trailer ?? e.metadata ?? undefined,
  };
}

/**
 * One call on the direct path: what its handler sees of it is what grpc-js's ServerUnaryCall gives the request
 * path's handlers (request, metadata, getDeadline, getPeer, getAuthContext, `cancelled` and its event), as
 * multiplex.ts's MultiplexedCall does.
 */
class DirectUnaryCall extends EventEmitter {
  request: unknown = undefined;
  cancelled = false;
  readonly metadata: grpc.Metadata;
  private deadline = Number.POSITIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private answered = false;
  private readonly prefix = Buffer.alloc(5);
  private prefixFilled = 0;
  private body: PooledBuffer | Buffer | undefined;
  /** The message's length from its prefix, the chunks of it received so far and their bytes. */
  private length = 0;
  private parts: Buffer[] = [];
  /** Bytes of CLAIMED_BYTES_BUDGET this call's body holds before all of it has arrived. */
  private claimed = 0;
  private filled = 0;
  private messages = 0;
  private handlerDone = true;
  private streamClosed = false;
  /** Arrays lent to the deserializer, given back with the body. */
  private lent: PooledBuffer[] = [];

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    private readonly claim: Claim,
    private readonly max: number,
  ) {
    super();
    // Errors on the stream come with a close, handled there; without a listener they would be thrown.
    stream.on("error", () => {});
    const metadata = grpc.Metadata.fromHttp2Headers(headers);
    for (const h of DROPPED_HEADERS) metadata.remove(h);
    this.metadata = metadata;
    stream.on("close", () => this.onClose());
    const timeout = headers["grpc-timeout"];
    if (timeout !== undefined) {
      const m = String(timeout).match(DEADLINE);
      if (!m) {
        this.fail(grpc.status.INTERNAL, `Invalid grpc-timeout value "${String(timeout)}"`);
        return;
      }
      // Not `| 0`, which wraps a timeout of 25 days or more to a negative one; and a timer beyond setTimeout's
      // 2^31 - 1 ms would fire at once.
      const ms = Math.floor(Number(m[1]) * (UNIT_MS[m[2] ?? "m"] ?? 1));
      this.deadline = Date.now() + ms;
      this.timer = setTimeout(() => this.fail(grpc.status.DEADLINE_EXCEEDED, "Deadline exceeded"), Math.min(ms, MAX_TIMER_MS));
    }
    if (claim.beforeBody) {
      try {
        claim.beforeBody(this as unknown as grpc.ServerUnaryCall<unknown, unknown>);
      } catch (err) {
        const s = statusOfError(err);
        this.fail(s.code, s.details, s.metadata);
        return;
      }
    }
    stream.on("data", (chunk: Buffer) => this.onData(chunk));
    stream.on("end", () => this.onEnd());
  }

  getDeadline(): grpc.Deadline {
    return this.deadline;
  }

  getPeer(): string {
    const socket = this.stream.session?.socket;
    if (!socket?.remoteAddress) return "unknown";
    return socket.remotePort ? `${socket.remoteAddress}:${socket.remotePort}` : socket.remoteAddress;
  }

  getAuthContext(): ReturnType<grpc.ServerUnaryCall<unknown, unknown>["getAuthContext"]> {
    const socket = this.stream.session?.socket;
    if (!(socket instanceof TLSSocket) || !socket.authorized) return {};
    const cert = socket.getPeerCertificate();
    return { transportSecurityType: "ssl", sslPeerCertificate: cert.raw ? cert : undefined };
  }

  getPath(): string {
    return this.claim.method.path;
  }

  private bytes(): Buffer | undefined {
    const b = this.body;
    return b === undefined ? undefined : Buffer.isBuffer(b) ? b : b.bytes;
  }

  private onData(chunk: Buffer): void {
    if (this.answered) return;
    let at = 0;
    while (at < chunk.length) {
      if (this.prefixFilled < 5) {
        const n = Math.min(5 - this.prefixFilled, chunk.length - at);
        chunk.copy(this.prefix, this.prefixFilled, at, at + n);
        this.prefixFilled += n;
        at += n;
        if (this.prefixFilled < 5) return;
        // The compressed flag is not read: with no grpc-encoding (others go to grpc-js), grpc-js reads the
        // message as it is whatever the flag says.
        const length = this.prefix.readUInt32BE(1);
        if (length > this.max) {
          this.fail(grpc.status.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs ${this.max})`);
          return;
        }
        if (this.messages > 0) {
          this.fail(grpc.status.UNIMPLEMENTED, `Received a second request message for server streaming method ${this.claim.method.path}`);
          return;
        }
        this.length = length;
        this.filled = 0;
        if (this.claim.pooled && length >= POOLED_BODY_BYTES && claimedBytes + length <= CLAIMED_BYTES_BUDGET) {
          this.body = pool.take(length);
          this.claimed = length;
          claimedBytes += length;
        }
        if (length === 0) this.completeMessage();
        continue;
      }
      const n = Math.min(this.length - this.filled, chunk.length - at);
      const into = this.bytes();
      if (into) chunk.copy(into, this.filled, at, at + n);
      else this.parts.push(chunk.subarray(at, at + n));
      this.filled += n;
      at += n;
      if (this.filled === this.length) this.completeMessage();
    }
  }

  private completeMessage(): void {
    this.messages++;
    this.prefixFilled = 0;
    this.unclaim();
    if (this.body !== undefined) return;
    // Small bodies, and large ones beyond the claim budget: what the call held until now is what it received.
    const parts = this.parts;
    this.parts = [];
    if (this.claim.pooled && this.length >= POOLED_BODY_BYTES) {
      const pooled = pool.take(this.length);
      let at = 0;
      for (const p of parts) {
        pooled.bytes.set(p, at);
        at += p.length;
      }
      this.body = pooled;
    } else this.body = parts.length === 1 ? parts[0] : Buffer.concat(parts, this.length);
  }

  /** The body's claim on the budget ends once it has all arrived, or its call is over. */
  private unclaim(): void {
    claimedBytes -= this.claimed;
    this.claimed = 0;
  }

  private onEnd(): void {
    if (this.answered) return;
    // A message cut short is no message, and what follows a whole one is ignored, as by grpc-js.
    if (this.messages === 0) {
      this.fail(grpc.status.UNIMPLEMENTED, `Received no request message for server streaming method ${this.claim.method.path}`);
      return;
    }
    const body = this.bytes() ?? Buffer.alloc(0);
    const deserialize = this.claim.method.requestDeserialize;
    try {
      this.request = this.claim.pooled && hasScratch(deserialize) ? deserialize.withScratch(body, this.lend) : deserialize(body);
    } catch {
      this.fail(grpc.status.INTERNAL, "Error deserializing request");
      return;
    }
    this.handlerDone = false;
    const call = this as unknown as grpc.ServerUnaryCall<unknown, unknown>;
    try {
      this.claim.handler(call, (err, value, trailer) => this.onAnswer(err, value, trailer ?? undefined));
    } catch (err) {
      this.onAnswer(err, undefined, undefined);
    }
  }

  private onAnswer(err: unknown, value: unknown, trailer: grpc.Metadata | undefined): void {
    if (this.handlerDone) return;
    this.handlerDone = true;
    if (err) {
      const s = statusOfError(err, trailer);
      this.fail(s.code, s.details, s.metadata);
    } else this.send(value, trailer);
    this.maybeRelease();
  }

  private send(value: unknown, trailer: grpc.Metadata | undefined): void {
    if (this.answered || this.isGone()) return;
    let chunks: Buffer[];
    try {
      const serialize = this.claim.method.responseSerialize;
      chunks = isChunked(serialize) ? serialize.chunks(value) : [serialize(value)];
    } catch {
      this.fail(grpc.status.INTERNAL, "Error serializing response");
      return;
    }
    this.answered = true;
    this.clearTimer();
    let length = 0;
    for (const c of chunks) length += c.length;
    const prefix = Buffer.allocUnsafe(5);
    prefix[0] = 0;
    prefix.writeUInt32BE(length, 1);
    const stream = this.stream;
    stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
    stream.once("wantTrailers", () => {
      stream.sendTrailers({ "grpc-status": String(grpc.status.OK), "grpc-message": "OK", ...(trailer?.toHttp2Headers() ?? {}) });
    });
    stream.write(prefix);
    for (const c of chunks) stream.write(c);
    stream.end();
  }

  /** A trailers-only answer; the rest of a request still coming is refused with RST_STREAM(NO_ERROR). */
  private fail(code: grpc.status, details: string, metadata?: grpc.Metadata): void {
    if (this.answered || this.isGone()) return;
    this.answered = true;
    this.clearTimer();
    this.stream.respond(
      {
        ...RESPONSE_HEADERS,
        "grpc-status": String(code),
        "grpc-message": encodeURI(details),
        ...(metadata?.toHttp2Headers() ?? {}),
      },
      { endStream: true },
    );
    if (!this.stream.readableEnded) this.stream.close(http2.constants.NGHTTP2_NO_ERROR);
    this.maybeRelease();
  }

  private isGone(): boolean {
    return this.stream.destroyed || this.stream.closed;
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private onClose(): void {
    this.streamClosed = true;
    this.clearTimer();
    if (!this.answered) {
      this.answered = true;
      this.cancelled = true;
      this.emit("cancelled", "Cancelled by client");
    }
    this.maybeRelease();
  }

  /** The body goes back only when neither the handler nor the stream can touch it. */
  private maybeRelease(): void {
    if (this.handlerDone && this.streamClosed) this.release();
  }

  /** Values of at least POOLED_BODY_BYTES come from the pool (smaller ones cost the collector little). */
  private readonly lend = (count: number): Float32Array => {
    if (count * 4 < POOLED_BODY_BYTES) return new Float32Array(count);
    const lent = pool.take(count * 4);
    // The pool's buffers start their own ArrayBuffers, so the view is aligned; checked all the same.
    if (lent.bytes.byteOffset % 4 !== 0) {
      lent.release();
      return new Float32Array(count);
    }
    this.lent.push(lent);
    return new Float32Array(lent.bytes.buffer, lent.bytes.byteOffset, count);
  };

  private release(): void {
    this.unclaim();
    for (const l of this.lent) l.release();
    this.lent = [];
    this.parts = [];
    const b = this.body;
    this.body = undefined;
    if (b !== undefined && !Buffer.isBuffer(b)) b.release();
  }
}
