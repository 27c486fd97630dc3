import { randomUUID } from "node:crypto";
import { type ClientRateLimiter, deadlineMs, effectiveDeadline, routedRequestProblem, unavailableMetadata } from "@infergrid/dataplane";
import type { RoutedInferRequest } from "@infergrid/proto";
import { GrpcStatusError, grpc, statusOf } from "@infergrid/runtime";
import { Counter, Histogram, type Registry } from "prom-client";
import type { Forwarder } from "./forwarder.js";

export type Protocol = "grpc" | "http";

/**
 * The broker's one request path, shared by the gRPC and HTTP front doors: validate, fix the
 * deadline, forward, and count exactly one outcome per request.
 */
export class Ingress {
  private readonly requests: Counter<"protocol" | "code">;
  private readonly duration: Histogram<"protocol">;

  constructor(
    private readonly forwarder: Forwarder,
    private readonly requestTimeoutMs: number,
    registry: Registry,
    /** Per-client limit, checked before anything else; undefined: none. */
    private readonly limiter?: ClientRateLimiter,
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
  }

  /** Counts a request refused before it reached `handle` (too large, unparsable). */
  countRejected(protocol: Protocol, code: grpc.status): void {
    this.requests.inc({ protocol, code: grpc.status[code] });
  }

  /** `client`: who sent it (its peer address until clients authenticate), for the per-client limit. */
  async handle(
    protocol: Protocol,
    request: RoutedInferRequest,
    grpcDeadline: Date | number | undefined,
    client: string,
  ): Promise<Uint8Array> {
    const started = Date.now();
    try {
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
      const deadline = effectiveDeadline(started, deadlineMs(grpcDeadline), request.deadlineUnixMs, this.requestTimeoutMs);
      if (deadline <= started)
        throw new GrpcStatusError(grpc.status.DEADLINE_EXCEEDED, `deadline passed ${started - deadline} ms before the request arrived`);
      const forwarded = { ...request, requestId: request.requestId || randomUUID(), deadlineUnixMs: deadline };
      const response = await this.forwarder.forward(forwarded, deadline);
      this.requests.inc({ protocol, code: "OK" });
      return response;
    } catch (err) {
      this.requests.inc({ protocol, code: grpc.status[statusOf(err).code] });
      throw err;
    } finally {
      this.duration.observe({ protocol }, (Date.now() - started) / 1000);
    }
  }
}
