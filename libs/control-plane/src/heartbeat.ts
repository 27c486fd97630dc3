import { control } from "@infergrid/proto";
import { type NatsConnection, publishMessage } from "@infergrid/runtime";
import { type RoleName, roleEnum, subjects } from "./subjects.js";

export interface HeartbeatOptions {
  role: RoleName;
  id: string;
  address: string;
  intervalMs: number;
  /** Extra fields read at each beat (a backend's state, say). */
  extra?: () => Partial<control.IHeartbeat>;
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
    publishMessage(nc, subject, control.Heartbeat, {
      role: roleEnum[options.role],
      id: options.id,
      address: options.address,
      startedAtUnixMs: startedAt,
      sentAtUnixMs: Date.now(),
      seq,
      draining,
      ...options.extra?.(),
    });
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
