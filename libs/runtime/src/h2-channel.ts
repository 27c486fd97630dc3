import http2 from "node:http2";
import { isIP } from "node:net";
import { isChunked } from "@infergrid/proto";
import { GrpcStatusError, grpc, type UnaryCaller, type UnaryChannelTls } from "./grpc.js";

/**
 * A unary gRPC client over one long-lived HTTP/2 session, for the request path's internal hops (broker ->
 * frontend, frontend -> backend). Written by hand because grpc-js's client costs about 150 µs of CPU per
 * call on this path (its channel, filter and resolver machinery), five times what the HTTP/2 exchange itself
 * costs (docs/results.md, "Data path"); the servers stay grpc-js. It speaks the gRPC wire protocol
 * (PROTOCOL-HTTP2.md) for unary calls only: length-prefixed uncompressed messages, `grpc-timeout`, statuses
 * and metadata from trailers (or trailers-only answers), HTTP failures mapped as gRPC clients map them.
 */
export interface UnaryChannel extends UnaryCaller {
  close(): void;
}

export interface H2ChannelOptions {
  /**
   * Mutual TLS: the CA that signs servers, this process's certificate and key, the name servers present; as a
   * function, read at each new connection (renewed certificates, tls-reload.ts).
   */
  tls?: UnaryChannelTls | (() => UnaryChannelTls);
  maxReceiveMessageBytes: number;
  /** A ping this often; a session whose ping goes unanswered for keepaliveTimeoutMs is dropped. */
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
  /** After a failed connection, calls fail fast (UNAVAILABLE) for this long, doubling up to maxBackoffMs. */
  initialBackoffMs: number;
  maxBackoffMs: number;
  /**
   * A call that times out on a session that said nothing since the call went out makes the channel ping it; a
   * ping unanswered for this long drops the session (a peer killed with its network namespace sends no RST, and
   * keepalive would take keepaliveMs + keepaliveTimeoutMs to notice). Default PROBE_TIMEOUT_MS.
   */
  probeTimeoutMs?: number;
  /**
   * A call outstanding this long on a session silent since it went out has the session probed too, before its
   * deadline: a caller with a long deadline (the broker gives a frontend the client's) can then fail over to
   * another peer instead of waiting it out. Default SUSPECT_AFTER_MS.
   */
  suspectAfterMs?: number;
}

/** A live peer's event loop answers a ping in milliseconds; a second of silence is a dead peer or a frozen one. */
export const PROBE_TIMEOUT_MS = 1_000;
/** Calls outstanding for a second on a silent connection have it probed. */
export const SUSPECT_AFTER_MS = 1_000;

/**
 * What a session has said lately, and the calls outstanding on it (oldest first, by when each was sent). Its times
 * are on performance.now(): a step of the wall clock must not look like silence.
 */
interface Liveness {
  startedAt: number;
  connected: boolean;
  heardAt: number;
  probing: boolean;
  calls: Map<object, number>;
}

const RESERVED_TRAILERS = ["grpc-status", "grpc-message", "grpc-status-details-bin", "content-type", ":status", "date", "grpc-encoding"];
/** A gRPC status from an HTTP status, for answers that carry none (PROTOCOL-HTTP2.md / http-grpc-status-mapping.md). */
const FROM_HTTP: Record<number, grpc.status> = {
  400: grpc.status.INTERNAL,
  401: grpc.status.UNAUTHENTICATED,
  403: grpc.status.PERMISSION_DENIED,
  404: grpc.status.UNIMPLEMENTED,
  429: grpc.status.UNAVAILABLE,
  502: grpc.status.UNAVAILABLE,
  503: grpc.status.UNAVAILABLE,
  504: grpc.status.UNAVAILABLE,
};

function trailerMetadata(headers: http2.IncomingHttpHeaders): grpc.Metadata {
  const own: http2.IncomingHttpHeaders = { ...headers };
  for (const k of RESERVED_TRAILERS) delete own[k];
  return grpc.Metadata.fromHttp2Headers(own);
}

function grpcMessage(raw: string | string[] | undefined): string {
  const text = Array.isArray(raw) ? raw.join(",") : (raw ?? "");
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** grpc-timeout: at most 8 digits, so larger timeouts go in coarser units. */
function grpcTimeout(ms: number): string {
  const whole = Math.max(1, Math.ceil(ms));
  if (whole < 1e8) return `${whole}m`;
  return `${Math.min(99_999_999, Math.ceil(whole / 1000))}S`;
}

function deadlineOf(options: grpc.CallOptions): number {
  const d = options.deadline;
  if (d === undefined) return Number.POSITIVE_INFINITY;
  return d instanceof Date ? d.getTime() : d;
}

export class H2Channel implements UnaryChannel {
  private session: http2.ClientHttp2Session | undefined;
  private readonly liveness = new WeakMap<http2.ClientHttp2Session, Liveness>();
  private failedUntil = 0;
  private backoffMs: number;
  private lastFailure = "";
  private closed = false;
  private readonly authority: string;
  private readonly serverName: string | undefined;

  constructor(
    readonly address: string,
    private readonly options: H2ChannelOptions,
  ) {
    this.backoffMs = options.initialBackoffMs;
    this.authority = `${options.tls ? "https" : "http"}://${address}`;
    const host = address.startsWith("[") ? address.slice(1, address.indexOf("]")) : address.slice(0, address.lastIndexOf(":"));
    this.serverName = isIP(host) ? undefined : host;
  }

  /** What a new connection is made with: the TLS material as it is now. */
  private connectOptions(): http2.SecureClientSessionOptions {
    const tls = typeof this.options.tls === "function" ? this.options.tls() : this.options.tls;
    const serverName = tls?.serverName ?? this.serverName;
    return {
      // The answers of the request path are small; a large window keeps big ones from waiting on WINDOW_UPDATEs.
      settings: { initialWindowSize: 4 * 1024 * 1024, enablePush: false },
      // Node's default (10 MB of buffered frames per session) is reached by a few dozen image answers in flight
      // under those windows, and nghttp2 then resets new streams (ENHANCE_YOUR_CALM); grpc-js lifts it too.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      ...(tls
        ? {
            ca: tls.ca,
            ...(tls.cert ? { cert: tls.cert } : {}),
            ...(tls.key ? { key: tls.key } : {}),
            ...(serverName === undefined ? {} : { servername: serverName }),
            ALPNProtocols: ["h2"],
          }
        : {}),
    };
  }

  /** `now` on the monotonic clock (performance.now). */
  private connection(now: number): http2.ClientHttp2Session | GrpcStatusError {
    if (this.closed) return new GrpcStatusError(grpc.status.UNAVAILABLE, `channel to ${this.address} is closed`);
    const live = this.session;
    if (live && !live.closed && !live.destroyed) return live;
    if (now < this.failedUntil)
      return new GrpcStatusError(
        grpc.status.UNAVAILABLE,
        `${this.address} unreachable (${this.lastFailure}); next try in ${Math.ceil(this.failedUntil - now)} ms`,
      );
    const session = http2.connect(this.authority, this.connectOptions());
    this.session = session;
    const life: Liveness = { startedAt: now, connected: false, heardAt: now, probing: false, calls: new Map() };
    this.liveness.set(session, life);
    let keepalive: NodeJS.Timeout | undefined;
    const suspectAfterMs = this.options.suspectAfterMs ?? SUSPECT_AFTER_MS;
    const watchdog = setInterval(() => {
      // The first call sent since the session last said anything: an older one still outstanding (the others'
      // answers came after it went out) is only slow, and would hide a death behind its own deadline.
      for (const sentAt of life.calls.values()) {
        if (sentAt < life.heardAt) continue;
        if (performance.now() - sentAt >= suspectAfterMs) this.suspect(session, sentAt);
        break;
      }
    }, suspectAfterMs / 2);
    watchdog.unref();
    session.once("connect", () => {
      life.connected = true;
      life.heardAt = performance.now();
      this.backoffMs = this.options.initialBackoffMs;
      keepalive = setInterval(() => {
        const timeout = setTimeout(() => session.destroy(new Error("keepalive ping unanswered")), this.options.keepaliveTimeoutMs);
        timeout.unref();
        if (!session.ping((err) => (err ? undefined : clearTimeout(timeout)))) clearTimeout(timeout);
      }, this.options.keepaliveMs);
      keepalive.unref();
    });
    session.on("error", (err: Error) => {
      this.lastFailure = err.message;
      if (!life.connected) {
        this.failedUntil = performance.now() + this.backoffMs;
        this.backoffMs = Math.min(this.backoffMs * 2, this.options.maxBackoffMs);
      }
    });
    // New calls go to a new session; calls under way finish on this one.
    session.on("goaway", () => this.forget(session));
    session.on("close", () => {
      clearInterval(keepalive);
      clearInterval(watchdog);
      this.forget(session);
    });
    // An idle session must not keep the process alive.
    session.unref();
    return session;
  }

  private forget(session: http2.ClientHttp2Session): void {
    if (this.session === session) this.session = undefined;
  }

  /**
   * A call sent at `sentAt` timed out. If the session said nothing since, it is pinged, and dropped (its calls fail
   * UNAVAILABLE, to be tried elsewhere) unless the ping is answered in time; a session still connecting after the
   * probe timeout is dropped at once.
   */
  private suspect(session: http2.ClientHttp2Session, sentAt: number): void {
    const life = this.liveness.get(session);
    if (!life || life.probing || life.heardAt > sentAt || session.destroyed || session.closed) return;
    const timeoutMs = this.options.probeTimeoutMs ?? PROBE_TIMEOUT_MS;
    const drop = (why: string) => {
      this.lastFailure = why;
      this.forget(session);
      session.destroy(new Error(why));
    };
    if (!life.connected) {
      if (performance.now() - life.startedAt >= timeoutMs) drop(`not connected after ${Math.round(performance.now() - life.startedAt)} ms`);
      return;
    }
    life.probing = true;
    const timer = setTimeout(() => {
      life.probing = false;
      if (life.heardAt < performance.now() - timeoutMs) drop(`no answer to a ping in ${timeoutMs} ms: connection dropped`);
    }, timeoutMs);
    timer.unref();
    const sent = session.ping((err) => {
      if (err) return;
      clearTimeout(timer);
      life.probing = false;
      life.heardAt = performance.now();
    });
    if (!sent) {
      clearTimeout(timer);
      life.probing = false;
    }
  }

  makeUnaryRequest<Req, Res>(
    path: string,
    serialize: (value: Req) => Buffer,
    deserialize: (value: Buffer) => Res,
    request: Req,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<Res>,
  ): { cancel(): void } {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let stream: http2.ClientHttp2Stream | undefined;
    let outstanding: Map<object, number> | undefined;
    const token = {};
    const finish = (err: GrpcStatusError | null, value?: Res) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      outstanding?.delete(token);
      if (err) callback(err as unknown as grpc.ServiceError);
      else callback(null, value);
    };
    const fail = (code: grpc.status, details: string, md?: grpc.Metadata) => {
      finish(new GrpcStatusError(code, details, md));
      if (stream && !stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
    };
    const handle = { cancel: () => fail(grpc.status.CANCELLED, "Cancelled on client") };

    const now = Date.now();
    // The session's liveness is timed on the monotonic clock: a step of the wall clock would look like silence.
    const at = performance.now();
    const deadline = deadlineOf(options);
    if (deadline <= now) {
      queueMicrotask(() => fail(grpc.status.DEADLINE_EXCEEDED, "Deadline exceeded before the call started"));
      return handle;
    }
    const session = this.connection(at);
    if (session instanceof GrpcStatusError) {
      queueMicrotask(() => finish(session));
      return handle;
    }
    let body: Buffer[];
    try {
      // A forwarding hop's request comes as chunks that leave each tensor where it arrived (routed.ts).
      body = isChunked(serialize) ? serialize.chunks(request) : [serialize(request)];
    } catch (err) {
      queueMicrotask(() => fail(grpc.status.INTERNAL, `request serialization failed: ${String(err)}`));
      return handle;
    }
    let length = 0;
    for (const b of body) length += b.length;
    // The message's 5-byte prefix goes out as its own write: copying a 588 KiB tensor behind it would cost
    // an allocation of its size, and the collector's time with it, on every hop.
    const prefix = Buffer.allocUnsafe(5);
    prefix[0] = 0;
    prefix.writeUInt32BE(length, 1);

    const headers: http2.OutgoingHttpHeaders = {
      ...metadata.toHttp2Headers(),
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
    };
    if (Number.isFinite(deadline)) {
      headers["grpc-timeout"] = grpcTimeout(deadline - now);
      timer = setTimeout(() => {
        fail(grpc.status.DEADLINE_EXCEEDED, "Deadline exceeded");
        this.suspect(session, at);
      }, deadline - now);
    }
    try {
      stream = session.request(headers, { endStream: false });
    } catch (err) {
      this.forget(session);
      queueMicrotask(() => fail(grpc.status.UNAVAILABLE, `${this.address}: ${String(err)}`));
      return handle;
    }

    let httpStatus = 0;
    let headerStatus: http2.IncomingHttpHeaders | undefined;
    let trailers: http2.IncomingHttpHeaders | undefined;
    const chunks: Buffer[] = [];
    let received = 0;
    const max = this.options.maxReceiveMessageBytes;
    const life = this.liveness.get(session);
    outstanding = life?.calls;
    outstanding?.set(token, at);
    const heard = () => {
      if (life) life.heardAt = performance.now();
    };
    stream.on("response", (h) => {
      heard();
      httpStatus = Number(h[":status"]);
      // Trailers-only: an answer with no message carries its status in the headers.
      if (h["grpc-status"] !== undefined) headerStatus = h;
    });
    stream.on("data", (chunk: Buffer) => {
      heard();
      received += chunk.length;
      if (received > max + 5) {
        fail(grpc.status.RESOURCE_EXHAUSTED, `Received message larger than max (${received - 5} vs. ${max})`);
        return;
      }
      chunks.push(chunk);
    });
    stream.on("trailers", (t) => {
      heard();
      trailers = t;
    });
    stream.on("error", (err: Error & { code?: string }) => {
      // The peer reset the stream (as grpc-js maps it), or the connection failed or went away (UNAVAILABLE: tried elsewhere).
      const rst = err.code === "ERR_HTTP2_STREAM_ERROR" ? stream?.rstCode : undefined;
      const code =
        rst === undefined || rst === http2.constants.NGHTTP2_REFUSED_STREAM
          ? grpc.status.UNAVAILABLE
          : rst === http2.constants.NGHTTP2_CANCEL
            ? grpc.status.CANCELLED
            : rst === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM
              ? grpc.status.RESOURCE_EXHAUSTED
              : grpc.status.INTERNAL;
      fail(code, `${this.address}: ${err.message}`);
    });
    stream.on("close", () => {
      if (done) return;
      const statusHeaders = trailers ?? headerStatus;
      if (!statusHeaders) {
        const rst = stream?.rstCode ?? 0;
        if (httpStatus !== 200 && httpStatus !== 0)
          return fail(FROM_HTTP[httpStatus] ?? grpc.status.UNKNOWN, `${this.address} answered HTTP ${httpStatus}`);
        return fail(grpc.status.UNAVAILABLE, `${this.address}: stream closed without a status (RST code ${rst})`);
      }
      const code = Number(statusHeaders["grpc-status"]) as grpc.status;
      if (!Number.isInteger(code) || code < 0 || code > 16)
        return fail(grpc.status.UNKNOWN, `${this.address}: status ${String(statusHeaders["grpc-status"])}`);
      if (code !== grpc.status.OK) return fail(code, grpcMessage(statusHeaders["grpc-message"]), trailerMetadata(statusHeaders));
      const data = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      if (data.length < 5) return fail(grpc.status.UNIMPLEMENTED, `${this.address}: OK without a message`);
      if (data[0] !== 0) return fail(grpc.status.INTERNAL, `${this.address}: compressed message, no compression was offered`);
      const length = data.readUInt32BE(1);
      if (data.length !== 5 + length)
        return fail(grpc.status.INTERNAL, `${this.address}: ${data.length - 5} bytes for a message of ${length}`);
      let value: Res;
      try {
        value = deserialize(data.subarray(5));
      } catch (err) {
        return fail(grpc.status.INTERNAL, `response deserialization failed: ${String(err)}`);
      }
      finish(null, value);
    });
    stream.write(prefix);
    for (const b of body) stream.write(b);
    stream.end();
    return handle;
  }

  close(): void {
    this.closed = true;
    this.session?.close();
    this.session = undefined;
  }
}
