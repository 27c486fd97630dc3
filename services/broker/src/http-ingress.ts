import { STATUS_CODES } from "node:http";
import { Server as TlsServer } from "node:tls";
import { retryAfterMs } from "@infergrid/dataplane";
import { decodeRoutedInfer, inference, type RoutedInferRequest } from "@infergrid/proto";
import { GrpcStatusError, grpc, httpStatusForGrpc, type Logger, statusOf } from "@infergrid/runtime";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { type Ingress, UnauthenticatedError } from "./ingress.js";
import type { ModelDirectory } from "./model-directory.js";
import { fromOpenInference, toOpenInference, unknownModel, versionProblem } from "./open-inference.js";

const SNAKE_TO_CAMEL: Record<string, string> = { request_id: "requestId", deadline_unix_ms: "deadlineUnixMs" };

/** Accepts the proto3 JSON names in either spelling (requestId or request_id). */
function normaliseKeys(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).map(([k, v]) => [SNAKE_TO_CAMEL[k] ?? k, v]));
}

/** The JSON body as the request path carries it: converted to protobuf once, here. */
function parseInferBody(body: unknown, service?: string): RoutedInferRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new GrpcStatusError(grpc.status.INVALID_ARGUMENT, "the body must be a JSON object");
  }
  const obj = normaliseKeys(body as Record<string, unknown>);
  if (service !== undefined) obj.service = service;
  const problem = inference.InferRequest.verify(obj);
  if (problem) throw new GrpcStatusError(grpc.status.INVALID_ARGUMENT, `malformed request: ${problem}`);
  return decodeRoutedInfer(inference.InferRequest.encode(inference.InferRequest.fromObject(obj)).finish());
}

/** Which error body a route answers with: this system's envelope, or the Open Inference Protocol's `{"error": "..."}`. */
type ErrorStyle = "infergrid" | "open-inference";

function sendError(reply: FastifyReply, err: unknown, style: ErrorStyle = "infergrid"): FastifyReply {
  const s = statusOf(err);
  const retry = retryAfterMs(s.metadata);
  if (retry !== undefined) reply.header("retry-after", String(Math.max(1, Math.ceil(retry / 1000))));
  if (err instanceof UnauthenticatedError) reply.header("www-authenticate", err.challenge);
  return reply.code(httpStatusForGrpc(s.code)).send(errorBody(style, grpc.status[s.code], s.details, retry));
}

/** An error's body: this system's envelope (its code, and when to retry), or the protocol's message alone. */
function errorBody(style: ErrorStyle, code: string, message: string, retryAfterMs?: number): unknown {
  if (style === "open-inference") return { error: message };
  return { error: { code, message, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) } };
}

/** The Open Inference Protocol's routes answer errors in its own body. */
const styleOf = (url: string): ErrorStyle => (url.startsWith("/v2/") || url === "/v2" ? "open-inference" : "infergrid");

export interface HttpIngressOptions {
  maxRequestBytes: number;
  /** Headers and body must have arrived within this (slow clients hold sockets and memory). */
  receiveTimeoutMs: number;
  requestTimeoutHeader?: string;
  /** The version `GET /v2` reports (the broker's package version). */
  serverVersion: string;
  /** The registered services, for the Open Inference Protocol's model readiness and metadata. */
  models: ModelDirectory;
  /** HTTPS with this certificate and key (`renewHttpsCertificate` takes renewed ones); plain HTTP without. */
  tls?: { cert: Buffer; key: Buffer } | undefined;
}

/** New connections to an HTTPS ingress take this certificate and key; a plain HTTP ingress is left as it is. */
export function renewHttpsCertificate(app: FastifyInstance, tls: { cert: Buffer; key: Buffer }): void {
  const server: unknown = app.server;
  if (server instanceof TlsServer) server.setSecureContext({ cert: tls.cert, key: tls.key });
}

/**
 * Errors Node's HTTP parser raises before any route runs (a body shorter than its Content-Length, bad framing,
 * headers too large, a request that did not arrive in time), answered in the project's envelope.
 */
function clientErrorAnswer(code: string | undefined): { http: number; grpc: grpc.status; message: string } {
  if (code === "ERR_HTTP_REQUEST_TIMEOUT")
    return { http: 408, grpc: grpc.status.DEADLINE_EXCEEDED, message: "the request's headers and body did not arrive in time" };
  if (code === "HPE_HEADER_OVERFLOW") return { http: 431, grpc: grpc.status.INVALID_ARGUMENT, message: "request headers too large" };
  if (code === "HPE_INVALID_EOF_STATE")
    return { http: 400, grpc: grpc.status.INVALID_ARGUMENT, message: "the connection ended before the body its Content-Length announced" };
  return { http: 400, grpc: grpc.status.INVALID_ARGUMENT, message: `malformed HTTP request (${code ?? "unknown"})` };
}

/**
 * HTTP/JSON front door: POST /v1/infer and POST /v1/services/:service/infer, and the Open Inference Protocol's
 * POST /v2/models/:model/infer with its health and server-metadata routes (open-inference.ts).
 */
export function buildHttpIngress(ingress: Ingress, options: HttpIngressOptions, logger: Logger): FastifyInstance {
  const { maxRequestBytes, requestTimeoutHeader = "x-request-timeout-ms", serverVersion, models } = options;
  // Node checks these every connectionsCheckingInterval (30 s by default): often enough to keep them. Its
  // request timeout is not enforced while the headers' (60 s by default) is longer.
  const serverOptions = {
    headersTimeout: options.receiveTimeoutMs,
    connectionsCheckingInterval: Math.max(100, Math.min(1_000, options.receiveTimeoutMs / 2)),
  };
  // Fastify types an HTTPS instance apart from an HTTP one; its routes, hooks and handlers are the same.
  const app = Fastify({
    bodyLimit: maxRequestBytes,
    logger: false,
    requestTimeout: options.receiveTimeoutMs,
    ...(options.tls === undefined
      ? { http: serverOptions }
      : { https: { ...serverOptions, cert: options.tls.cert, key: options.tls.key } }),
    clientErrorHandler: (err: NodeJS.ErrnoException, socket) => {
      if (err.code === "ECONNRESET" || socket.destroyed) return;
      const answer = clientErrorAnswer(err.code);
      ingress.countRejected("http", answer.grpc);
      const body = JSON.stringify({ error: { code: grpc.status[answer.grpc], message: answer.message } });
      if (socket.writable) {
        socket.write(
          `HTTP/1.1 ${answer.http} ${STATUS_CODES[answer.http]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
            `Content-Type: application/json\r\nConnection: close\r\n\r\n${body}`,
        );
      }
      socket.destroy();
    },
  });

  /** Each admitted request's client, set by the onRequest hook (before the body is read) for the handler. */
  const clients = new WeakMap<FastifyRequest, string>();
  const authenticate = async (req: FastifyRequest, reply: FastifyReply) => {
    try {
      clients.set(req, ingress.admit("http", { authorization: req.headers.authorization, peer: req.ip }));
    } catch (err) {
      // Answered here, so the body of a request that did not authenticate is never parsed.
      return sendError(reply, err, styleOf(req.url));
    }
  };

  /**
   * Whether `client` may call `service` (its services= list); if not, the refusal is sent, and counted as the
   * outcome of an inference request when `inference`. Checked before a body naming the service is converted.
   */
  const permitted = (client: string, service: string, reply: FastifyReply, style: ErrorStyle, inference: boolean): boolean => {
    try {
      ingress.permit("http", client, service);
      return true;
    } catch (err) {
      if (inference) ingress.countRejected("http", statusOf(err).code);
      void sendError(reply, err, style);
      return false;
    }
  };

  /** Runs one request down the path; `answer` turns the frontend's encoded answer into the route's body. */
  const run = async (
    request: RoutedInferRequest,
    headers: Record<string, unknown>,
    client: string,
    reply: FastifyReply,
    style: ErrorStyle,
    answer: (response: Uint8Array) => unknown,
  ) => {
    const timeout = Number(headers[requestTimeoutHeader]);
    const grpcDeadline = Number.isFinite(timeout) && timeout > 0 ? Date.now() + timeout : undefined;
    // The client hung up before its answer: the request is cancelled down the path, as a gRPC cancel is.
    const gone = new AbortController();
    reply.raw.once("close", () => {
      if (!reply.raw.writableFinished) gone.abort();
    });
    try {
      const response = await ingress.handle("http", request, grpcDeadline, client, gone.signal);
      return reply.code(200).send(answer(response));
    } catch (err) {
      return sendError(reply, err, style);
    }
  };

  const infer = async (
    body: unknown,
    service: string | undefined,
    headers: Record<string, unknown>,
    client: string,
    reply: FastifyReply,
  ) => {
    if (service !== undefined && !permitted(client, service, reply, "infergrid", true)) return reply;
    let request: RoutedInferRequest;
    try {
      request = parseInferBody(body, service);
    } catch (err) {
      ingress.countRejected("http", grpc.status.INVALID_ARGUMENT);
      return sendError(reply, err);
    }
    return run(request, headers, client, reply, "infergrid", (response) =>
      inference.InferResponse.toObject(inference.InferResponse.decode(response), { longs: Number, defaults: true }),
    );
  };

  const inferOpen = async (body: unknown, model: string, headers: Record<string, unknown>, client: string, reply: FastifyReply) => {
    if (!permitted(client, model, reply, "open-inference", true)) return reply;
    let parsed: ReturnType<typeof fromOpenInference>;
    try {
      parsed = fromOpenInference(body, model);
    } catch (err) {
      ingress.countRejected("http", grpc.status.INVALID_ARGUMENT);
      return sendError(reply, err, "open-inference");
    }
    return run(parsed.request, headers, client, reply, "open-inference", (response) => toOpenInference(response, model, parsed.outputs));
  };

  const clientOf = (req: FastifyRequest) => clients.get(req) ?? req.ip;
  app.post("/v1/infer", { onRequest: authenticate }, (req, reply) => infer(req.body, undefined, req.headers, clientOf(req), reply));
  app.post<{ Params: { service: string } }>("/v1/services/:service/infer", { onRequest: authenticate }, (req, reply) =>
    infer(req.body, req.params.service, req.headers, clientOf(req), reply),
  );
  app.get("/healthz", (_req, reply) => reply.code(200).send({ status: "ok" }));

  // The Open Inference Protocol (KServe v2): inference, health and server metadata.
  app.post<{ Params: { model: string } }>("/v2/models/:model/infer", { onRequest: authenticate }, (req, reply) =>
    inferOpen(req.body, req.params.model, req.headers, clientOf(req), reply),
  );
  app.post<{ Params: { model: string; version: string } }>("/v2/models/:model/versions/:version/infer", (req, reply) =>
    sendError(reply, versionProblem(req.params.model, req.params.version), "open-inference"),
  );
  app.get("/v2", (_req, reply) => reply.code(200).send({ name: "infergrid", version: serverVersion, extensions: [] }));
  app.get("/v2/health/live", (_req, reply) => reply.code(200).send({ live: true }));
  // The protocol's readiness is the status: 200 ready, a 4xx not. The server is ready while a frontend is there to
  // take requests; a model, while its service's list holds a backend.
  app.get("/v2/health/ready", (_req, reply) => {
    const ready = ingress.ready();
    return reply.code(ready ? 200 : 400).send({ ready });
  });
  app.get<{ Params: { model: string } }>("/v2/models/:model/ready", { onRequest: authenticate }, (req, reply) => {
    if (!permitted(clientOf(req), req.params.model, reply, "open-inference", false)) return reply;
    const ready = models.ready(req.params.model);
    if (ready === undefined) return sendError(reply, unknownModel(req.params.model), "open-inference");
    return reply.code(ready ? 200 : 400).send({ name: req.params.model, ready });
  });
  app.get<{ Params: { model: string } }>("/v2/models/:model", { onRequest: authenticate }, (req, reply) => {
    if (!permitted(clientOf(req), req.params.model, reply, "open-inference", false)) return reply;
    const metadata = models.metadata(req.params.model);
    if (metadata === undefined) return sendError(reply, unknownModel(req.params.model), "open-inference");
    return reply.code(200).send(metadata);
  });

  app.setErrorHandler((err: { statusCode?: number; code?: string; message: string }, req, reply) => {
    // Errors fastify raises before a handler runs: body too large, bad JSON, wrong content type.
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      ingress.countRejected("http", grpc.status.RESOURCE_EXHAUSTED);
      return reply
        .code(413)
        .send(errorBody(styleOf(req.url), "RESOURCE_EXHAUSTED", `request body over the limit of ${maxRequestBytes} bytes`));
    }
    if (err.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE" && styleOf(req.url) === "open-inference") {
      // What a Triton client sends with its binary-data extension (application/octet-stream).
      ingress.countRejected("http", grpc.status.INVALID_ARGUMENT);
      const type = JSON.stringify(req.headers["content-type"] ?? "");
      return reply
        .code(415)
        .send({ error: `content type ${type} is not supported (Triton's binary-data extension is not): send application/json` });
    }
    const status = err.statusCode ?? 500;
    if (status >= 500) logger.error({ err }, "http ingress failed");
    ingress.countRejected("http", status < 500 ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL);
    return reply.code(status).send(errorBody(styleOf(req.url), status < 500 ? "INVALID_ARGUMENT" : "INTERNAL", err.message));
  });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send(errorBody(styleOf(req.url), "NOT_FOUND", `no route ${req.method} ${req.url}`)),
  );
  return app;
}
