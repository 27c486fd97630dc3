import { randomUUID } from "node:crypto";
import {
  type ClientAuthenticator,
  type ClientRateLimiter,
  deadlineMs,
  effectiveDeadline,
  routedRequestProblem,
  unavailableMetadata,
} from "@infergrid/dataplane";
import type { RoutedInferRequest } from "@infergrid/proto";
import { GrpcStatusError, grpc, type Logger, LogThrottle, statusOf } from "@infergrid/runtime";
import { Counter, Histogram, type Registry } from "prom-client";
import type { Forwarder } from "./forwarder.js";

export type Protocol = "grpc" | "http";

/** What a request says about who sent it, read before anything else of it. */
export interface Caller {
  /** Every `authorization` value that came (gRPC metadata, HTTP header). */
  authorization: string | readonly string[] | undefined;
  /** The peer's address, without the port: the client when authentication is off, and the key of failure logs. */
  peer: string;
  /** The client named by the caller's verified TLS certificate (spiffe://infergrid/client/<name>), if any. */
  certificateClient?: string | undefined;
}

/** The client auth the broker enforces: undefined when no tokens file is configured (every caller admitted). */
export interface IngressAuth {
  authenticator: ClientAuthenticator;
  logger: Logger;
}

/** Thrown for a caller that did not authenticate; HTTP answers it 401 with its challenge. */
export class UnauthenticatedError extends GrpcStatusError {
  constructor(
    message: string,
    /** The WWW-Authenticate value (RFC 6750: error="invalid_token" only when a token was presented). */
    readonly challenge: string,
  ) {
    super(grpc.status.UNAUTHENTICATED, message);
  }
}

/**
 * The broker's one request path, shared by the gRPC and HTTP front doors: validate, fix the
 * deadline, forward, and count exactly one outcome per request.
 */
export class Ingress {
  private readonly requests: Counter<"protocol" | "code">;
  private readonly duration: Histogram<"protocol">;
  private readonly unauthenticated: Counter<"protocol" | "reason">;
  private readonly forbidden: Counter<"protocol">;
  /** Per peer address: a client sending without (or with a wrong) token at line rate must not flood the log. */
  private readonly authLogThrottle = new LogThrottle(10_000, 5);
  /** Per client: one calling a service it may not, at line rate, must not flood the log either. */
  private readonly forbiddenLogThrottle = new LogThrottle(10_000, 5);

  constructor(
    private readonly forwarder: Forwarder,
    private readonly requestTimeoutMs: number,
    registry: Registry,
    /** Per-client limit, checked right after authentication; undefined: none. */
    private readonly limiter?: ClientRateLimiter,
    private readonly auth?: IngressAuth,
  ) {
    this.requests = new Counter({
      name: "infergrid_broker_requests_total",
      help: "Requests the broker answered, by protocol and final status code",
      labelNames: ["protocol", "code"],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: "infergrid_broker_request_duration_seconds",
      help: "Time from receipt to answer at the broker",
      labelNames: ["protocol"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
    this.unauthenticated = new Counter({
      name: "infergrid_broker_unauthenticated_total",
      help: "Requests refused because their client did not authenticate (missing, malformed or unknown token), before any work",
      labelNames: ["protocol", "reason"],
      registers: [registry],
    });
    this.forbidden = new Counter({
      name: "infergrid_broker_forbidden_total",
      help: "Requests refused because their authenticated client may not call the service they name (its services= list), before any work",
      labelNames: ["protocol"],
      registers: [registry],
    });
  }

  /**
   * Who the request comes from: its authenticated client name when client auth is on (else its peer address),
   * the key of its rate limit. Costs a hash and a map lookup, so that unauthenticated floods stay cheap; a
   * refusal is counted here as the request's one outcome.
   */
  admit(protocol: Protocol, caller: Caller): string {
    if (!this.auth) return caller.peer;
    const decision = this.auth.authenticator.authenticate(caller.authorization, caller.certificateClient);
    if (decision.ok) return decision.client;
    this.unauthenticated.inc({ protocol, reason: decision.reason });
    this.countRejected(protocol, grpc.status.UNAUTHENTICATED);
    const log = this.authLogThrottle.admit(caller.peer, this.forwarder.clock.now());
    if (log.write) {
      this.auth.logger.warn(
        { peer: caller.peer, protocol, reason: decision.reason, suppressed: log.suppressed },
        "refused a request that did not authenticate",
      );
    }
    const challenge = decision.reason === "missing" ? 'Bearer realm="infergrid"' : 'Bearer realm="infergrid", error="invalid_token"';
    throw new UnauthenticatedError(decision.message, challenge);
  }

  /**
   * Refuses PERMISSION_DENIED a call by `client` (what `admit` returned) to a service outside its `services=` list
   * in the tokens file: an inference request, or a model's readiness or metadata. Free when client auth is off.
   */
  permit(protocol: Protocol, client: string, service: string): void {
    if (!this.auth || this.auth.authenticator.mayCall(client, service)) return;
    this.forbidden.inc({ protocol });
    const log = this.forbiddenLogThrottle.admit(client, this.forwarder.clock.now());
    if (log.write) {
      this.auth.logger.warn(
        { client, service, protocol, suppressed: log.suppressed },
        "refused a call to a service its client may not call",
      );
    }
    throw new GrpcStatusError(grpc.status.PERMISSION_DENIED, `client ${client} may not call service ${JSON.stringify(service)}`);
  }

  /** Whether a frontend is there to take requests (the Open Inference Protocol's server readiness). */
  ready(): boolean {
    return this.forwarder.liveFrontends(this.forwarder.clock.now()).length > 0;
  }

  /** Counts a request refused before it reached `handle` (too large, unparsable). */
  countRejected(protocol: Protocol, code: grpc.status): void {
    this.requests.inc({ protocol, code: grpc.status[code] });
  }

  /**
   * `client`: who sent it (what `admit` returned), for the per-client limit. `signal`: the client went away (the
   * forward is cancelled, and the request ends CANCELLED).
   */
  async handle(
    protocol: Protocol,
    request: RoutedInferRequest,
    grpcDeadline: Date | number | undefined,
    client: string,
    signal?: AbortSignal,
  ): Promise<Uint8Array> {
    const clock = this.forwarder.clock;
    const started = clock.now();
    try {
      // Before the rate limit: a call its client may not make takes nothing from the client's bucket.
      this.permit(protocol, client, request.service);
      const allowed = this.limiter?.take(client, started);
      if (allowed && !allowed.ok) {
        throw new GrpcStatusError(
          grpc.status.RESOURCE_EXHAUSTED,
          `client ${client} is over its request rate; retry after ${allowed.retryAfterMs} ms`,
          unavailableMetadata("broker", allowed.retryAfterMs),
        );
      }
      const checked = routedRequestProblem(request);
      if ("problem" in checked) throw new GrpcStatusError(grpc.status.INVALID_ARGUMENT, checked.problem);
      const deadline = effectiveDeadline(
        started,
        deadlineMs(grpcDeadline),
        request.deadlineUnixMs,
        this.requestTimeoutMs,
        clock.wallOffset(),
      );
      if (deadline <= started)
        throw new GrpcStatusError(grpc.status.DEADLINE_EXCEEDED, `deadline passed ${started - deadline} ms before the request arrived`);
      // Its deadline goes out as the forwarder sends it (on the wall clock).
      const forwarded = { ...request, requestId: request.requestId || randomUUID() };
      const response = await this.forwarder.forward(forwarded, deadline, signal);
      this.requests.inc({ protocol, code: "OK" });
      return response;
    } catch (err) {
      this.requests.inc({ protocol, code: grpc.status[statusOf(err).code] });
      throw err;
    } finally {
      this.duration.observe({ protocol }, (clock.now() - started) / 1000);
    }
  }
}
