import { subjects } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { type Logger, type NatsConnection, type Subscription, subscribeMessages } from "@infergrid/runtime";
import type { Allocator } from "./allocator.js";

/** Feeds the allocator from NATS: heartbeats of every role, backend heartbeats, pool events. */
export function collect(
  nc: NatsConnection,
  allocator: Allocator,
  logger: Logger,
  onGarbled: () => void,
  now: () => number = Date.now,
): Subscription[] {
  const log = logger.child({ component: "collector" });
  return [
    subscribeMessages(nc, subjects.heartbeatsOf("backend"), control.Heartbeat, log, (hb) => allocator.onBackendHeartbeat(hb, now()), {
      onGarbled,
    }),
    subscribeMessages(nc, subjects.allHeartbeats, control.Heartbeat, log, (hb) => allocator.onMemberHeartbeat(hb, now()), { onGarbled }),
    subscribeMessages(nc, subjects.poolEvents, control.PoolEvent, log, (event) => allocator.onPoolEvent(event), { onGarbled }),
  ];
}
