import { EventEmitter } from "node:events";
import { isChunked, MultiplexDefinition, type rpc } from "@infergrid/proto";
import { createClient, GrpcStatusError, grpc, onServerDrain } from "./grpc.js";
import { PROBE_TIMEOUT_MS, SUSPECT_AFTER_MS, type UnaryChannel } from "./h2-channel.js";
import type { Logger } from "./logger.js";
import { serveUnaryDirect, type UnaryDirectOptions } from "./unary-direct.js";

/**
 * Unary calls multiplexed over one long-lived gRPC stream per peer (proto/infergrid/rpc/v1/multiplex.proto),
 * for the request path's internal hops. A unary call costs each side an HTTP/2 stream with its headers and
 * trailers: about 35 µs of a grpc-js server's CPU and 35-70 µs of a client's on this machine, against about
 * 10 µs a side for a message on an open stream (docs/results.md, "Multiplexed hops"). The calls keep their
 * unary meaning end to end: the server runs the very handler of the unary method (peer roles included, the
 * stream's TLS identity being the caller's), each call ends in exactly one outcome or is abandoned by its
 * caller, deadlines and cancellation reach the handler as they would on a unary call, and a broken stream
 * fails its calls UNAVAILABLE, as a broken connection does.
 *
 * Written by hand because this is the project's own wire arrangement over grpc-js's streams (no library
 * multiplexes unary calls onto a stream); grpc-js still does HTTP/2, TLS, flow control and keepalive.
 */

/** One unary method the multiplexed service runs: its server definition and the handler it is served with. */
export interface MultiplexRoute {
  readonly path: string;
  run(call: MultiplexedCall, request: Buffer, answer: (outcome: Omit<rpc.IOutcome, "id">) => void): void;
}

export function multiplexRoute<Req, Res>(method: grpc.MethodDefinition<Req, Res>, handler: grpc.handleUnaryCall<Req, Res>): MultiplexRoute {
  return {
    path: method.path,
    run: (call, bytes, answer) => {
      let request: Req;
      try {
        request = method.requestDeserialize(bytes);
      } catch (err) {
        answer({ code: grpc.status.INTERNAL, details: `request deserialization failed: ${String(err)}` });
        return;
      }
      call.request = request;
      // The handlers are written for grpc-js's ServerUnaryCall; a MultiplexedCall has every member they use
      // (request, metadata, getDeadline, getPeer, getAuthContext, "cancelled").
      handler(call as unknown as grpc.ServerUnaryCall<Req, Res>, (err, value, trailer) => {
        if (err) {
          const md = err.metadata ?? trailer;
          answer({
            code: err.code ?? grpc.status.UNKNOWN,
            details: err.details ?? ("message" in err ? err.message : ""),
            ...(md ? { metadata: toMap(md) } : {}),
          });
          return;
        }
        try {
          answer({ code: grpc.status.OK, response: method.responseSerialize(value as Res) });
        } catch (e) {
          answer({ code: grpc.status.INTERNAL, details: `response serialization failed: ${String(e)}` });
        }
      });
    },
  };
}

/** A call received on a stream, as its handler sees it. */
export class MultiplexedCall extends EventEmitter {
  request: unknown;
  cancelled = false;

  constructor(
    readonly metadata: grpc.Metadata,
    private readonly deadline: number,
    private readonly stream: grpc.ServerDuplexStream<rpc.ICall, rpc.IOutcome>,
  ) {
    super();
  }

  getDeadline(): grpc.Deadline {
    return this.deadline > 0 ? new Date(this.deadline) : Number.POSITIVE_INFINITY;
  }

  getPeer(): string {
    return this.stream.getPeer();
  }

  getAuthContext(): ReturnType<grpc.ServerDuplexStream<rpc.ICall, rpc.IOutcome>["getAuthContext"]> {
    return this.stream.getAuthContext();
  }

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.emit("cancelled");
  }
}

/** Calls one stream may have running at once: a peer that sends more is refused, not buffered without end. */
export const MAX_CALLS_PER_STREAM = 10_000;

/** Serves `routes` over Multiplex/Calls, beside their own unary methods (which the server also registers). */
export function addMultiplexService(server: grpc.Server, routes: readonly MultiplexRoute[], logger: Logger): MultiplexServer {
  const mux = new MultiplexServer(new Map(routes.map((r) => [r.path, r])), logger);
  server.addService(MultiplexDefinition, { Calls: (stream: grpc.ServerDuplexStream<rpc.ICall, rpc.IOutcome>) => mux.serve(stream) });
  onServerDrain(server, () => mux.drain());
  return mux;
}

interface Active {
  call: MultiplexedCall;
  timer: NodeJS.Timeout | undefined;
  answered: boolean;
}

type ServerStream = grpc.ServerDuplexStream<rpc.ICall, rpc.IOutcome>;

class StreamState {
  readonly active = new Map<number, Active>();
  /** The caller sent its last call, or the server drains: close once the running calls are answered. */
  closeWhenIdle = false;
  closed = false;
}

export class MultiplexServer {
  private readonly streams = new Map<ServerStream, StreamState>();
  private draining = false;

  constructor(
    private readonly routes: ReadonlyMap<string, MultiplexRoute>,
    private readonly logger: Logger,
  ) {}

  serve(stream: ServerStream): void {
    const state = new StreamState();
    this.streams.set(stream, state);
    const gone = () => {
      if (state.closed) return;
      state.closed = true;
      this.streams.delete(stream);
      // The caller is gone: every call still running is cancelled, as a unary call's would be.
      for (const a of state.active.values()) {
        if (a.timer) clearTimeout(a.timer);
        a.call.cancel();
      }
      state.active.clear();
    };
    stream.on("data", (c: rpc.Call) => this.receive(stream, state, c));
    stream.on("end", () => this.closeWhenIdle(stream, state));
    stream.on("cancelled", gone);
    stream.on("error", (err: Error) => {
      this.logger.debug({ err: err.message }, "multiplexed stream failed");
      gone();
    });
    if (this.draining) this.closeWhenIdle(stream, state);
  }

  /** No new calls; each stream ends once its calls are answered. */
  drain(): void {
    this.draining = true;
    for (const [stream, state] of [...this.streams]) this.closeWhenIdle(stream, state);
  }

  private closeWhenIdle(stream: ServerStream, state: StreamState): void {
    state.closeWhenIdle = true;
    if (state.active.size > 0 || state.closed) return;
    state.closed = true;
    this.streams.delete(stream);
    stream.end();
  }

  private receive(stream: ServerStream, state: StreamState, c: rpc.Call): void {
    const id = Number(c.id);
    if (c.ping) {
      if (!state.closed) stream.write({ id, code: grpc.status.OK });
      return;
    }
    if (c.cancel) {
      state.active.get(id)?.call.cancel();
      return;
    }
    const reply = (outcome: Omit<rpc.IOutcome, "id">) => {
      if (!state.closed) stream.write({ id, ...outcome });
    };
    const route = this.routes.get(c.method);
    // What is left of the call's deadline, counted from now as gRPC counts its timeout header (the caller's wall
    // clock need not agree with this one's); a caller that sends no timeout is read by its wall-clock deadline.
    const now = Date.now();
    const timeout = Number(c.timeoutMs);
    const stampedDeadline = Number(c.deadlineUnixMs);
    const left = timeout > 0 ? timeout : stampedDeadline > 0 ? stampedDeadline - now : Number.POSITIVE_INFINITY;
    const deadline = Number.isFinite(left) ? now + left : 0;
    const refusal = this.draining
      ? { code: grpc.status.UNAVAILABLE, details: "shutting down" }
      : state.active.has(id)
        ? { code: grpc.status.INVALID_ARGUMENT, details: `call id ${id} is already running` }
        : state.active.size >= MAX_CALLS_PER_STREAM
          ? { code: grpc.status.RESOURCE_EXHAUSTED, details: `more than ${MAX_CALLS_PER_STREAM} calls at once on one stream` }
          : !route
            ? { code: grpc.status.UNIMPLEMENTED, details: `${c.method} is not served here` }
            : left <= 0
              ? { code: grpc.status.DEADLINE_EXCEEDED, details: "Deadline exceeded" }
              : undefined;
    if (refusal || !route) {
      reply(refusal ?? { code: grpc.status.UNIMPLEMENTED, details: `${c.method} is not served here` });
      return;
    }
    const call = new MultiplexedCall(fromMap(c.metadata), deadline, stream);
    const active: Active = { call, timer: undefined, answered: false };
    const answer = (outcome: Omit<rpc.IOutcome, "id">) => {
      if (active.answered) return;
      active.answered = true;
      if (active.timer) clearTimeout(active.timer);
      reply(outcome);
      state.active.delete(id);
      if (state.closeWhenIdle) this.closeWhenIdle(stream, state);
    };
    if (Number.isFinite(left)) {
      active.timer = setTimeout(() => {
        // As grpc-js does for a unary call: the handler sees the call cancelled, the caller gets the status.
        call.cancel();
        answer({ code: grpc.status.DEADLINE_EXCEEDED, details: "Deadline exceeded" });
      }, left);
    }
    state.active.set(id, active);
    route.run(call, Buffer.isBuffer(c.request) ? c.request : Buffer.from(c.request), answer);
  }
}

/** What the client side needs beyond the address. */
export interface MultiplexChannelOptions {
  /** Unary calls for what does not go over the stream: large requests, and peers without Multiplex. */
  unary: UnaryChannel;
  /**
   * Requests larger than this go as unary calls: a message on a stream goes out whole before the next one
   * starts, so a large tensor would hold back the small calls behind it.
   */
  maxStreamedBytes: number;
  credentials?: grpc.ChannelCredentials;
  channelOptions?: grpc.ChannelOptions;
  /**
   * How long a probe of a silent stream may go unanswered before its connection is dropped (default
   * PROBE_TIMEOUT_MS). A live peer answers a probe from its event loop, without running a handler.
   */
  probeTimeoutMs?: number;
  /** A call outstanding this long on a stream silent since it went out has the stream probed (default SUSPECT_AFTER_MS). */
  suspectAfterMs?: number;
}

type ClientStream = grpc.ClientDuplexStream<rpc.ICall, rpc.IOutcome>;

/** The stream calls go over, and when it last said anything (an outcome, its headers). */
interface OpenStream {
  stream: ClientStream;
  /** On performance.now(), as Pending.sentAt. */
  heardAt: number;
  /** The probe in flight on it: its call id and the timer that drops the connection. */
  probe: { id: number; timer: NodeJS.Timeout } | undefined;
  /** Probes the stream when its oldest call has waited long in silence (a caller's deadline may be far off). */
  watchdog: NodeJS.Timeout;
}

interface Pending {
  stream: ClientStream;
  sentAt: number;
  path: string;
  body: Buffer;
  metadata: grpc.Metadata;
  options: grpc.CallOptions;
  deserialize: (b: Buffer) => unknown;
  callback: grpc.requestCallback<unknown>;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The caller's side: a UnaryChannel whose calls go over one Multiplex stream to the peer (opened on first use,
 * again after it breaks), with its own deadline timer and cancel per call.
 */
export class MultiplexChannel implements UnaryChannel {
  private client: grpc.Client;
  private open_: OpenStream | undefined;
  private readonly pending = new Map<number, Pending>();
  /** Calls sent again as unary calls when the peer turned out to have no Multiplex: their cancel, by call id. */
  private readonly resent = new Map<number, { cancel(): void }>();
  private nextId = 0;
  /** The peer has no Multiplex service (an older build, a test's server): unary from then on. */
  private unsupported = false;
  private closed = false;

  constructor(
    readonly address: string,
    private readonly options: MultiplexChannelOptions,
  ) {
    this.client = this.newClient();
  }

  /**
   * A channel of its own (grpc-js shares connections between channels to the same address by default): when a
   * probe goes unanswered, closing this channel closes its dead connection, and the next one dials anew.
   */
  private newClient(): grpc.Client {
    return createClient(this.address, this.options.credentials, {
      ...(this.options.channelOptions ?? {}),
      "grpc.use_local_subchannel_pool": 1,
    });
  }

  private get stream(): ClientStream | undefined {
    return this.open_?.stream;
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
    if (this.unsupported || this.closed)
      return this.options.unary.makeUnaryRequest(path, serialize, deserialize, request, metadata, options, callback);
    const now = Date.now();
    const deadline = deadlineOf(options);
    const fail = (code: grpc.status, details: string) => {
      queueMicrotask(() => callback(new GrpcStatusError(code, details) as unknown as grpc.ServiceError));
      return { cancel: () => undefined };
    };
    if (deadline <= now) return fail(grpc.status.DEADLINE_EXCEEDED, "Deadline exceeded before the call started");
    let chunks: Buffer[];
    try {
      chunks = isChunked(serialize) ? serialize.chunks(request) : [serialize(request)];
    } catch (err) {
      return fail(grpc.status.INTERNAL, `request serialization failed: ${String(err)}`);
    }
    let size = 0;
    for (const c of chunks) size += c.length;
    // A large request's tensors stay where they came: the unary channel writes the chunks one after another.
    if (size > this.options.maxStreamedBytes) return this.unaryOf(path, chunks, deserialize, metadata, options, callback);
    const body = chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, size);
    const id = ++this.nextId;
    const stream = this.open();
    const p: Pending = {
      stream,
      // The stream's liveness is timed on the monotonic clock: a step of the wall clock would look like silence.
      sentAt: performance.now(),
      path,
      body,
      metadata,
      options,
      deserialize,
      callback: callback as grpc.requestCallback<unknown>,
      timer: undefined,
    };
    this.pending.set(id, p);
    if (Number.isFinite(deadline)) {
      p.timer = setTimeout(() => this.abandon(id, grpc.status.DEADLINE_EXCEEDED, "Deadline exceeded"), deadline - now);
    }
    stream.write({
      id,
      method: path,
      request: body,
      deadlineUnixMs: Number.isFinite(deadline) ? deadline : 0,
      timeoutMs: Number.isFinite(deadline) ? Math.max(1, Math.ceil(deadline - now)) : 0,
      metadata: toMap(metadata),
    });
    return {
      cancel: () => {
        const again = this.resent.get(id);
        if (again) again.cancel();
        else this.abandon(id, grpc.status.CANCELLED, "Cancelled on client");
      },
    };
  }

  close(): void {
    this.closed = true;
    for (const id of [...this.pending.keys()]) this.abandon(id, grpc.status.UNAVAILABLE, `channel to ${this.address} is closed`);
    if (this.open_?.probe) clearTimeout(this.open_.probe.timer);
    if (this.open_) clearInterval(this.open_.watchdog);
    this.stream?.end();
    this.open_ = undefined;
    this.client.close();
    this.options.unary.close();
  }

  private unaryOf<Res>(
    path: string,
    chunks: Buffer[],
    deserialize: (value: Buffer) => Res,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<Res>,
  ): { cancel(): void } {
    const serialize = Object.assign((c: Buffer[]) => Buffer.concat(c), { chunks: (c: Buffer[]) => c });
    return this.options.unary.makeUnaryRequest(path, serialize, deserialize, chunks, metadata, options, callback);
  }

  private open(): ClientStream {
    if (this.open_) return this.open_.stream;
    const stream: ClientStream = this.client.makeBidiStreamRequest(
      MultiplexDefinition.Calls.path,
      MultiplexDefinition.Calls.requestSerialize,
      MultiplexDefinition.Calls.responseDeserialize,
    );
    const suspectAfterMs = this.options.suspectAfterMs ?? SUSPECT_AFTER_MS;
    const watchdog = setInterval(() => {
      // Calls are pending in the order they were sent; those of an older stream were failed when it broke. The
      // first one sent since the stream last said anything is watched: an older one still pending is only slow.
      for (const p of this.pending.values()) {
        if (p.stream !== stream || p.sentAt < open.heardAt) continue;
        if (performance.now() - p.sentAt >= suspectAfterMs) this.probe(open);
        break;
      }
    }, suspectAfterMs / 2);
    watchdog.unref();
    const open: OpenStream = { stream, heardAt: performance.now(), probe: undefined, watchdog };
    this.open_ = open;
    stream.on("metadata", () => {
      open.heardAt = performance.now();
    });
    stream.on("data", (o: rpc.Outcome) => {
      open.heardAt = performance.now();
      this.settle(o);
    });
    stream.on("error", (err: grpc.ServiceError) => this.broken(stream, err.code, err.details));
    // The server ended the stream (it drains before shutting down): what is still pending was not answered.
    stream.on("end", () => this.broken(stream, grpc.status.UNAVAILABLE, "the stream ended"));
    return stream;
  }

  private settle(o: rpc.Outcome): void {
    const id = Number(o.id);
    const probe = this.open_?.probe;
    if (probe?.id === id) {
      clearTimeout(probe.timer);
      if (this.open_) this.open_.probe = undefined;
      return;
    }
    const p = this.pending.get(id);
    if (!p) return; // abandoned already (deadline, cancel): its late answer is dropped
    this.pending.delete(id);
    if (p.timer) clearTimeout(p.timer);
    if (o.code !== grpc.status.OK) {
      p.callback(new GrpcStatusError(o.code, o.details, fromMap(o.metadata)) as unknown as grpc.ServiceError);
      return;
    }
    let value: unknown;
    try {
      value = p.deserialize(Buffer.isBuffer(o.response) ? o.response : Buffer.from(o.response));
    } catch (err) {
      p.callback(
        new GrpcStatusError(grpc.status.INTERNAL, `response deserialization failed: ${String(err)}`) as unknown as grpc.ServiceError,
      );
      return;
    }
    p.callback(null, value);
  }

  private abandon(id: number, code: grpc.status, details: string): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (p.timer) clearTimeout(p.timer);
    // Tell the server, so that the handler sees the call cancelled (a backend gives up work nobody waits for).
    if (p.stream === this.stream) p.stream.write({ id, cancel: true });
    // Nothing came back on the stream since this call went out: the peer may have died without closing the
    // connection (a killed pod sends no RST), and every call sent into it would wait out its deadline too.
    const open = this.open_;
    if (code === grpc.status.DEADLINE_EXCEEDED && open?.stream === p.stream && open.heardAt <= p.sentAt) this.probe(open);
    p.callback(new GrpcStatusError(code, details) as unknown as grpc.ServiceError);
  }

  /** Asks the peer to answer at once; if it does not within the probe timeout, drops the connection. */
  private probe(open: OpenStream): void {
    if (open.probe) return;
    const id = ++this.nextId;
    const timeoutMs = this.options.probeTimeoutMs ?? PROBE_TIMEOUT_MS;
    const timer = setTimeout(() => {
      open.probe = undefined;
      if (this.open_ !== open || open.heardAt > performance.now() - timeoutMs) return;
      const old = this.client;
      this.client = this.newClient();
      this.broken(open.stream, grpc.status.UNAVAILABLE, `no answer to a probe in ${timeoutMs} ms: connection dropped`);
      open.stream.cancel();
      old.close();
    }, timeoutMs);
    timer.unref();
    open.probe = { id, timer };
    open.stream.write({ id, ping: true });
  }

  private broken(stream: ClientStream, code: grpc.status, details: string): void {
    if (this.open_?.stream === stream) {
      if (this.open_.probe) clearTimeout(this.open_.probe.timer);
      clearInterval(this.open_.watchdog);
      this.open_ = undefined;
    }
    const mine = [...this.pending].filter(([, p]) => p.stream === stream);
    if (code === grpc.status.UNIMPLEMENTED) {
      // No Multiplex there: nothing was run, so the calls go again as unary calls, with what is left of their time.
      this.unsupported = true;
      for (const [id, p] of mine) {
        this.pending.delete(id);
        if (p.timer) clearTimeout(p.timer);
        // Its caller's cancel now goes to the unary call (the handler there must see it cancelled too).
        const again = this.unaryOf(p.path, [p.body], p.deserialize, p.metadata, p.options, (err, value) => {
          this.resent.delete(id);
          p.callback(err, value);
        });
        this.resent.set(id, again);
      }
      return;
    }
    for (const [id] of mine) this.abandonBroken(id, details);
  }

  private abandonBroken(id: number, details: string): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (p.timer) clearTimeout(p.timer);
    p.callback(new GrpcStatusError(grpc.status.UNAVAILABLE, `${this.address}: ${details}`) as unknown as grpc.ServiceError);
  }
}

function deadlineOf(options: grpc.CallOptions): number {
  const d = options.deadline;
  if (d === undefined) return Number.POSITIVE_INFINITY;
  return d instanceof Date ? d.getTime() : d;
}

/** ASCII metadata as a map (binary `-bin` values are not carried: the request path sends none). */
function toMap(md: grpc.Metadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(md.getMap())) if (typeof v === "string") out[k] = v;
  return out;
}

function fromMap(map: Record<string, string> | null | undefined): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(map ?? {})) {
    try {
      md.set(k, v);
    } catch {
      // A key grpc-js refuses (not a valid header name) is dropped, not fatal.
    }
  }
  return md;
}

/**
 * Registers a unary service both as itself and over Multiplex/Calls, with the same handlers: what the request
 * path's peers (frontends, backends) serve.
 */
export function addServiceWithMultiplex<D extends grpc.ServiceDefinition>(
  server: grpc.Server,
  definition: D,
  // What a server's handler takes and gives (a serving definition may decode differently from what clients send).
  implementation: {
    [K in keyof D]: D[K] extends { requestDeserialize: (b: Buffer) => infer Req; responseSerialize: (v: infer Res) => Buffer }
      ? grpc.handleUnaryCall<Req, Res>
      : never;
  },
  logger: Logger,
  /** Also serve each method on the direct path (unary-direct.ts), with these options. */
  direct?: UnaryDirectOptions,
): MultiplexServer {
  server.addService(definition, implementation);
  const routes = Object.keys(definition).map((name) => {
    const method = definition[name] as grpc.MethodDefinition<unknown, unknown>;
    if (method.requestStream || method.responseStream) throw new Error(`${method.path} is not unary: it cannot be multiplexed`);
    const handler = implementation[name] as grpc.handleUnaryCall<unknown, unknown>;
    if (direct) serveUnaryDirect(server, method, handler, direct);
    return multiplexRoute(method, handler);
  });
  return addMultiplexService(server, routes, logger);
}
