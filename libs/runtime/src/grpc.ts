import { EventEmitter } from "node:events";
import type { Http2SecureServer, Http2Server, ServerHttp2Session } from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { HealthImplementation } from "grpc-health-check";
import type { Logger } from "pino";
import { installUnaryDirect } from "./unary-direct.js";

export { grpc };

/** An error that carries the gRPC status the caller should see. */
export class GrpcStatusError extends Error {
  override readonly name = "GrpcStatusError";
  constructor(
    readonly code: grpc.status,
    readonly details: string,
    readonly metadata: grpc.Metadata = new grpc.Metadata(),
  ) {
    super(details);
  }
}

export function isServiceError(err: unknown): err is grpc.ServiceError {
  return typeof err === "object" && err !== null && "code" in err && typeof (err as { code: unknown }).code === "number";
}

/** The status code of any error: GrpcStatusError and ServiceError keep theirs, anything else is INTERNAL. */
export function statusOf(err: unknown): { code: grpc.status; details: string; metadata: grpc.Metadata } {
  if (err instanceof GrpcStatusError) return { code: err.code, details: err.details, metadata: err.metadata };
  if (isServiceError(err)) return { code: err.code, details: err.details, metadata: err.metadata ?? new grpc.Metadata() };
  return { code: grpc.status.INTERNAL, details: err instanceof Error ? err.message : String(err), metadata: new grpc.Metadata() };
}

const HTTP_FOR_GRPC: Partial<Record<grpc.status, number>> = {
  [grpc.status.OK]: 200,
  [grpc.status.INVALID_ARGUMENT]: 400,
  [grpc.status.FAILED_PRECONDITION]: 400,
  [grpc.status.OUT_OF_RANGE]: 400,
  [grpc.status.UNAUTHENTICATED]: 401,
  [grpc.status.PERMISSION_DENIED]: 403,
  [grpc.status.NOT_FOUND]: 404,
  [grpc.status.ALREADY_EXISTS]: 409,
  [grpc.status.ABORTED]: 409,
  [grpc.status.RESOURCE_EXHAUSTED]: 429,
  [grpc.status.CANCELLED]: 499,
  [grpc.status.UNIMPLEMENTED]: 501,
  [grpc.status.UNAVAILABLE]: 503,
  [grpc.status.DEADLINE_EXCEEDED]: 504,
};

export function httpStatusForGrpc(code: grpc.status): number {
  return HTTP_FOR_GRPC[code] ?? 500;
}

/**
 * Wraps an async handler as a grpc-js unary handler: exactly one callback per call, a thrown
 * GrpcStatusError becomes its status, anything else INTERNAL (and is logged).
 */
export function unaryHandler<Req, Res>(
  logger: Logger,
  handle: (request: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    let answer: Promise<Res>;
    try {
      answer = handle(call.request, call);
    } catch (err) {
      // A handler that throws before its first await (a refusal checked up front) is refused the same way: else
      // grpc-js answers UNKNOWN "Unknown error" and the message is lost.
      answer = Promise.reject(err);
    }
    answer.then(
      (response) => callback(null, response),
      (err: unknown) => {
        const status = statusOf(err);
        if (status.code === grpc.status.INTERNAL) logger.error({ err }, "handler failed");
        callback({ code: status.code, details: status.details, metadata: status.metadata });
      },
    );
  };
}

/**
 * Aborted once the server call is cancelled (its caller went away, or its deadline passed) before the handler
 * answered: what a hop passes on, so that the next one stops work nobody waits for. Server calls of grpc-js, of
 * the direct path and of the multiplexed stream all say so with a "cancelled" event.
 */
export function callSignal(call: { readonly cancelled?: boolean; once(event: "cancelled", listener: () => void): unknown }): AbortSignal {
  const cancelled = new AbortController();
  if (call.cancelled) cancelled.abort();
  else call.once("cancelled", () => cancelled.abort());
  return cancelled.signal;
}

export interface GrpcServerOptions {
  host: string;
  port: number;
  maxReceiveMessageBytes?: number;
  /** HTTP/2 flow-control window per stream; SERVER_WINDOW_BYTES unless given. */
  windowBytes?: number;
  /** HTTP/2 flow-control window per connection; SERVER_WINDOW_BYTES unless given. */
  connectionWindowBytes?: number;
  credentials?: grpc.ServerCredentials;
  register(server: grpc.Server): void;
}

export interface GrpcServerHandle {
  server: grpc.Server;
  port: number;
  address: string;
  /** The standard grpc.health.v1 service; "" is the whole process. */
  health: HealthImplementation;
  shutdown(graceMs: number): Promise<void>;
}

/**
 * What servers and clients use when their call site passes no credentials: plaintext unless the
 * process was configured for TLS (security.ts applyGrpcTls, called by runService).
 */
let defaults: {
  server: () => grpc.ServerCredentials;
  client: () => grpc.ChannelCredentials;
  channelOptions: grpc.ChannelOptions;
  tls: (() => UnaryChannelTls) | undefined;
} = {
  server: () => grpc.ServerCredentials.createInsecure(),
  client: () => grpc.credentials.createInsecure(),
  channelOptions: {},
  tls: undefined,
};

/** What the request path's own channels (h2-channel.ts) need of TLS: the raw material behind the credentials. */
export interface UnaryChannelTls {
  ca: Buffer;
  cert?: Buffer;
  key?: Buffer;
  serverName?: string;
}

/** `tls`: the material now, or how to read it when it may change (tls-reload.ts), for each new connection. */
export function setDefaultGrpcCredentials(creds: {
  server: grpc.ServerCredentials;
  client: grpc.ChannelCredentials;
  channelOptions?: grpc.ChannelOptions;
  tls?: UnaryChannelTls | (() => UnaryChannelTls);
}): void {
  const tls = creds.tls;
  defaults = {
    server: () => creds.server,
    client: () => creds.client,
    channelOptions: creds.channelOptions ?? {},
    tls: tls === undefined ? undefined : typeof tls === "function" ? tls : () => tls,
  };
}

/**
 * The TLS this process's own channels use unless a call site passes credentials (undefined: plaintext), as a
 * reading to make at each new connection (the files may have been renewed since).
 */
export function defaultChannelTls(): (() => UnaryChannelTls) | undefined {
  return defaults.tls;
}

const drains = new WeakMap<grpc.Server, () => void>();

/**
 * The HTTP/2 flow-control window a server grants each stream and each connection. Node's default (64 KiB) makes a
 * client stop every 64 KiB of a large request (a 588 KiB image: nine round trips a hop) and wait for a WINDOW_UPDATE;
 * the request path's own client (h2-channel.ts) grants the same to answers.
 */
export const SERVER_WINDOW_BYTES = 4 * 1024 * 1024;

/**
 * The per-stream window a server facing unauthenticated clients grants (the broker): one image (588 KiB) and room to
 * spare, so that an upload does not stop for WINDOW_UPDATEs, but a quarter of SERVER_WINDOW_BYTES. A request over the
 * size limit is refused at its length prefix and its stream reset (unary-direct.ts), yet what its client sent
 * meanwhile, up to this window, still arrives: under 4 MiB stream windows and grpc-js (no reset) the hostile-client
 * drill failed once in CI (the others' p99 from 15 to 42 ms; its bar is 2x); at 1 MiB with the reset it passed 3 of
 * 3 runs (p99 1.1-1.4x). The connection's window stays SERVER_WINDOW_BYTES: at 64 KiB a client's concurrent uploads
 * took turns on it (docs/results.md, "Data path").
 */
export const CLIENT_FACING_WINDOW_BYTES = 1024 * 1024;

/**
 * The connection window a server facing clients grants (the broker). A client multiplexes its calls on one
 * connection, and under SERVER_WINDOW_BYTES its concurrent uploads (32 images: 19 MB) waited for WINDOW_UPDATEs
 * from a broker whose event loop was busy forwarding: the full path served 357-362 images a second, and 398-442
 * with this window (docs/results.md, "the broker's client-facing connection window"). Half the broker's
 * budget of bodies arriving at once (unary-direct.ts CLAIMED_BYTES_BUDGET), so that one connection cannot claim
 * all of it unanswered; the broker reads what arrives whatever the window, so the window bounds no memory.
 */
export const CLIENT_FACING_CONNECTION_WINDOW_BYTES = 32 * 1024 * 1024;

/** What grpc-js keeps of the HTTP/2 servers it made: private, so read through a check, never assumed. */
function http2ServersOf(server: grpc.Server): Array<Http2Server | Http2SecureServer> {
  const servers: unknown = Reflect.get(server, "http2Servers");
  if (!(servers instanceof Map)) return [];
  return [...servers.keys()].filter(
    (s): s is Http2Server | Http2SecureServer =>
      s instanceof EventEmitter && "updateSettings" in s && typeof s.updateSettings === "function",
  );
}

/**
 * grpc-js has no server option for the flow-control window (only its client has one): each HTTP/2 server it made
 * announces it in every new session's first SETTINGS, and each session widens its connection window when it opens.
 * If a grpc-js release renames its servers' field, sessions keep Node's default and the caller says so.
 */
function widenServerWindows(server: grpc.Server, streamBytes: number, connectionBytes: number): boolean {
  const servers = http2ServersOf(server);
  for (const h2 of servers) {
    h2.updateSettings({ initialWindowSize: streamBytes });
    h2.on("session", (session: ServerHttp2Session) => session.setLocalWindowSize(connectionBytes));
  }
  return servers.length > 0;
}

/** What a server's shutdown runs first: ends its long-lived streams gracefully (multiplex.ts). */
export function onServerDrain(server: grpc.Server, drain: () => void): void {
  drains.set(server, drain);
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServerHandle> {
  const maxReceiveMessageBytes = options.maxReceiveMessageBytes ?? 4 * 1024 * 1024;
  const server = new grpc.Server({
    "grpc.max_receive_message_length": maxReceiveMessageBytes,
    "grpc.keepalive_permit_without_calls": 1,
  });
  const health = new HealthImplementation({ "": "NOT_SERVING" });
  health.addToServer(server);
  options.register(server);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${options.host}:${options.port}`, options.credentials ?? defaults.server(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    );
  });
  if (!widenServerWindows(server, options.windowBytes ?? SERVER_WINDOW_BYTES, options.connectionWindowBytes ?? SERVER_WINDOW_BYTES)) {
    process.emitWarning("grpc-js server internals changed: HTTP/2 windows stay at 64 KiB (large requests slow down)", "InferGridWarning");
  }
  if (!installUnaryDirect(server, http2ServersOf(server), maxReceiveMessageBytes)) {
    process.emitWarning("grpc-js server internals changed: the request path's methods stay on grpc-js (slower)", "InferGridWarning");
  }
  return {
    server,
    port,
    address: `${options.host}:${port}`,
    health,
    shutdown: (graceMs) =>
      new Promise<void>((resolve) => {
        health.setStatus("", "NOT_SERVING");
        // Long-lived streams (multiplexed calls) end once their calls are answered, or tryShutdown would wait for ever.
        drains.get(server)?.();
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

export interface CallOptions {
  deadline?: number; // Unix ms
  metadata?: grpc.Metadata;
  /** Aborting cancels the call (it then rejects with CANCELLED). */
  signal?: AbortSignal;
}

/** What a unary call needs of a channel: grpc-js's Client and the request path's H2Channel both have it. */
export interface UnaryCaller {
  makeUnaryRequest<Req, Res>(
    path: string,
    serialize: (value: Req) => Buffer,
    deserialize: (value: Buffer) => Res,
    request: Req,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<Res>,
  ): { cancel(): void };
}

/** One unary call with a deadline; rejects with the grpc ServiceError. */
export function unaryCall<Req, Res>(
  client: Pick<grpc.Client, "makeUnaryRequest"> | UnaryCaller,
  method: grpc.MethodDefinition<Req, Res>,
  request: Req,
  options: CallOptions = {},
): Promise<Res> {
  return new Promise<Res>((resolve, reject) => {
    const call = client.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      request,
      options.metadata ?? new grpc.Metadata(),
      options.deadline === undefined ? {} : { deadline: options.deadline },
      (err, response) => {
        if (err) reject(err);
        else if (response === undefined) reject(new GrpcStatusError(grpc.status.INTERNAL, `${method.path}: empty response`));
        else resolve(response);
      },
    );
    const signal = options.signal;
    if (signal) {
      if (signal.aborted) call.cancel();
      else signal.addEventListener("abort", () => call.cancel(), { once: true });
    }
  });
}

/** `channelOptions`: this client's own besides the process's defaults (a TLS name override for credentials of its own). */
export function createClient(
  address: string,
  credentials?: grpc.ChannelCredentials,
  channelOptions: grpc.ChannelOptions = {},
): grpc.Client {
  return new grpc.Client(address, credentials ?? defaults.client(), {
    ...defaults.channelOptions,
    ...channelOptions,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.max_receive_message_length": 16 * 1024 * 1024,
    // Reconnect quickly after a peer restarts; the default backoff goes up to 120 s.
    "grpc.initial_reconnect_backoff_ms": 200,
    "grpc.max_reconnect_backoff_ms": 2_000,
  });
}
