import { control } from "@infergrid/proto";
import { type Logger, LogThrottle, type NatsConnection, type Subscription, subscribeMessages } from "@infergrid/runtime";
import { encodeSealed, type HeartbeatSigner, type HeartbeatVerifier } from "./heartbeat-signature.js";
import { heartbeatIdentityProblem } from "./nats-permissions.js";
import { type RoleName, roleEnum, subjects } from "./subjects.js";

export interface HeartbeatOptions {
  role: RoleName;
  id: string;
  address: string;
  intervalMs: number;
  /** Extra fields read at each beat (a backend's state, say). */
  extra?: () => Partial<control.IHeartbeat>;
  /** Signs each beat with this process's certificate (heartbeat-signature.ts); unsigned without. */
  signer?: HeartbeatSigner | undefined;
}

/**
 * Publishes a heartbeat every interval; `stop()` sends a last one marked draining so that
 * readers take this member out of rotation at once instead of waiting for the ttl.
 */
export function startHeartbeat(nc: NatsConnection, options: HeartbeatOptions): { stop(): void; beat(): void } {
  const startedAt = Date.now();
  let seq = 0;
  const subject = subjects.heartbeat(options.role, options.id);
  const beat = (draining = false) => {
    if (nc.isClosed()) return;
    seq += 1;
    const hb: control.IHeartbeat = {
      role: roleEnum[options.role],
      id: options.id,
      address: options.address,
      startedAtUnixMs: startedAt,
      sentAtUnixMs: Date.now(),
      seq,
      draining,
      ...options.extra?.(),
    };
    nc.publish(subject, encodeSealed(control.Heartbeat, hb, options.signer));
  };
  beat();
  const timer = setInterval(() => beat(), options.intervalMs);
  return {
    beat: () => beat(),
    stop: () => {
      clearInterval(timer);
      beat(true);
    },
  };
}

const refusedLines = new LogThrottle();

/**
 * Subscribes to heartbeats, keeping only those whose role and id are their subject's (heartbeatIdentityProblem):
 * NATS permissions let each identity publish only its own subject, so what passes here speaks for its sender.
 * With a `verifier` (--signed-heartbeats), only those signed by a certificate of the CA naming that member
 * (for NATS users shared by a role's instances, as in Kubernetes). A refused one is dropped and logged (at
 * most 5 lines per subject in 10 s).
 */
export function subscribeHeartbeats(
  nc: NatsConnection,
  subject: string,
  logger: Logger,
  handle: (hb: control.Heartbeat) => void,
  options: { onGarbled?: (subject: string) => void; verifier?: HeartbeatVerifier | undefined } = {},
): Subscription {
  const verifier = options.verifier;
  return subscribeMessages(
    nc,
    subject,
    control.Heartbeat,
    logger,
    (hb, on, data) => {
      const problem = heartbeatIdentityProblem(on, hb) ?? verifier?.problem(hb, data);
      if (problem === undefined) return handle(hb);
      const { write, suppressed } = refusedLines.admit(on, Date.now());
      if (write)
        logger.warn(
          { subject: on, problem, ...(suppressed > 0 ? { suppressed } : {}) },
          "dropped a heartbeat that speaks for another member",
        );
    },
    options.onGarbled ? { onGarbled: options.onGarbled } : {},
  );
}
