import { type HeardClock, type HeartbeatVerifier, type MembershipTable, subjects, subscribeHeartbeats } from "@infergrid/control-plane";
import { type Clock, SteadyClock } from "@infergrid/core";
import { isDeliberate, unavailableMetadata } from "@infergrid/dataplane";
import { RoutedInferenceDefinition, type RoutedInferRequest } from "@infergrid/proto";
import { type ClientCache, GrpcStatusError, grpc, type Logger, type NatsConnection, statusOf, unaryCall } from "@infergrid/runtime";
import type { FrontendRotation } from "./frontend-rotation.js";

/** Statuses that mean the frontend was never reached or went away mid-call: try another one. */
function isTransportFailure(err: unknown): boolean {
  const s = statusOf(err);
  if (isDeliberate(s.metadata)) return false;
  return s.code === grpc.status.UNAVAILABLE || s.code === grpc.status.UNKNOWN;
}

export interface ForwarderOptions {
  maxFailovers: number;
  /** How long a frontend whose heartbeats stopped may still be tried when no other is live. */
  staleGraceMs: number;
  answerReserveMs: number;
  onFailover(): void;
}

/** Sends each request to one frontend (round robin), failing over to others it cannot reach. */
export class Forwarder {
  constructor(
    private readonly members: MembershipTable<null>,
    /** When `members` is judged at: through a NATS outage, the frontends live when it began stay so. */
    private readonly heard: HeardClock,
    private readonly rotation: FrontendRotation,
    private readonly clients: ClientCache,
    private readonly options: ForwarderOptions,
    private readonly logger: Logger,
    /**
     * The broker's clock: deadlines, heartbeats' arrival and ejections. A step of the wall clock does not move it: on
     * the wall clock a step forward made every frontend's last heartbeat look stale (requests ended UNAVAILABLE
     * until the next ones), and a step back kept a dead frontend live for as long.
     */
    readonly clock: SteadyClock = new SteadyClock(),
  ) {}

  /**
   * Frontends with a fresh heartbeat; if none is fresh (late heartbeats on a loaded machine, a NATS
   * outage) the ones heard from recently, since a call that fails still ejects them.
   */
  liveFrontends(clockNow: number): string[] {
    const now = this.heard.at(clockNow);
    const live = this.members.live(now);
    if (live.length > 0) return live.map((m) => m.id);
    return this.members
      .all()
      .filter((m) => !m.draining && now - m.lastSeen <= this.options.staleGraceMs)
      .map((m) => m.id)
      .sort();
  }

  /**
   * The frontend's answer, an encoded InferResponse relayed as it came. `deadline` on `clock`. `signal`: the client
   * went away.
   */
  async forward(request: RoutedInferRequest, deadline: number, signal?: AbortSignal): Promise<Uint8Array> {
    const tried = new Set<string>();
    let lastError: unknown;
    for (let attempt = 0; attempt <= this.options.maxFailovers; attempt++) {
      if (signal?.aborted) throw new GrpcStatusError(grpc.status.CANCELLED, "the client cancelled the request");
      const now = this.clock.now();
      if (now >= deadline) throw new GrpcStatusError(grpc.status.DEADLINE_EXCEEDED, "deadline passed before a frontend answered");
      const id = this.rotation.next(this.liveFrontends(now), tried, now, request.service);
      const member = id === undefined ? undefined : this.members.get(id);
      if (id === undefined || !member) break;
      tried.add(id);
      // The frontend gets a little less time than the client, so that its own answer (say, UNAVAILABLE
      // with a retry hint) comes back before the client's deadline rather than racing it.
      const frontendDeadline = Math.floor(Math.max(now + 1, deadline - this.options.answerReserveMs));
      try {
        return await unaryCall(
          this.clients.get(member.address),
          RoutedInferenceDefinition.Infer,
          // Stamped on this process's steady clock, which the frontend reads by its lag (dataplane sender-lag.ts);
          // grpc-js takes the deadline on the wall clock and sends what is left of it.
          { ...request, deadlineUnixMs: frontendDeadline },
          { deadline: this.clock.toWall(frontendDeadline), signal },
        );
      } catch (err) {
        if (signal?.aborted) throw new GrpcStatusError(grpc.status.CANCELLED, "the client cancelled the request");
        if (!isTransportFailure(err)) {
          // Our reserve ran out (not an answer of the frontend's): say so as the client would see it.
          if (statusOf(err).code === grpc.status.DEADLINE_EXCEEDED && this.clock.now() >= frontendDeadline) {
            throw new GrpcStatusError(grpc.status.DEADLINE_EXCEEDED, "deadline passed before a frontend answered");
          }
          throw err;
        }
        lastError = err;
        this.rotation.eject(id, this.clock.now());
        this.options.onFailover();
        this.logger.warn({ frontend: id, err: statusOf(err).details }, "frontend unreachable; failing over");
      }
    }
    const why = lastError ? `no frontend could be reached (last: ${statusOf(lastError).details})` : "no frontend is available";
    throw new GrpcStatusError(grpc.status.UNAVAILABLE, why, unavailableMetadata("broker", 1000));
  }
}

/** Keeps the membership table fed from frontend heartbeats. */
export function watchFrontends(
  nc: NatsConnection,
  members: MembershipTable<null>,
  logger: Logger,
  onGarbled: () => void,
  /** The clock `members` is kept on (the forwarder's). */
  clock: Clock,
  /** Told of every heartbeat heard (the forwarder's). */
  heard: HeardClock,
  /** --signed-heartbeats: only heartbeats signed by their frontend's certificate. */
  verifier?: HeartbeatVerifier,
): void {
  subscribeHeartbeats(
    nc,
    subjects.heartbeatsOf("frontend"),
    logger,
    (hb) => {
      if (!hb.id || !hb.address) return;
      const now = clock.now();
      heard.heard(now);
      const isNew = members.observe(hb.id, hb.address, Number(hb.startedAtUnixMs), hb.draining, null, now);
      if (isNew && !hb.draining) logger.info({ frontend: hb.id, address: hb.address }, "frontend joined the rotation");
      if (hb.draining) logger.info({ frontend: hb.id }, "frontend is draining; out of the rotation");
    },
    { onGarbled, verifier },
  );
}
