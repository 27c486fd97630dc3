import { subjects } from "@infergrid/control-plane";
import { backend, control } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection, subscribeMessages } from "@infergrid/runtime";
import type { NatsObserver } from "./local-cluster.js";
import { type HeartbeatBackendSeconds, type InUseTracker, occupies } from "./observers.js";

/**
 * Feeds backend heartbeats and frontend load reports from NATS into the meters, and keeps each backend's
 * instance type as its heartbeats name it (a request's answer names its backend, so its type is known).
 */
export class ControlPlaneWatch {
  private readonly backends = new Map<string, { instanceType: string; address: string }>();
  private readonly warm = new Map<string, string>();

  private constructor(private readonly nc: NatsConnection) {}

  /** The instance type backend `id` reports, or undefined if it never beat (or reports none). */
  instanceTypeOf(id: string): string | undefined {
    const t = this.backends.get(id)?.instanceType;
    return t === "" ? undefined : t;
  }

  /** How many backends last reported warm (idle or busy) for `service`. */
  warmBackends(service: string): number {
    let n = 0;
    for (const s of this.warm.values()) if (s === service) n++;
    return n;
  }

  /** Every backend that beat, with its type and gRPC address. */
  backendsSeen(): Array<{ id: string; instanceType: string; address: string }> {
    return [...this.backends].map(([id, b]) => ({ id, ...b }));
  }

  static async open(
    natsUrl: string,
    credentials: NatsObserver | undefined,
    meter: HeartbeatBackendSeconds,
    inUse: InUseTracker,
    now: () => number,
  ): Promise<ControlPlaneWatch> {
    // Its own problems (a garbled message) are of no interest on the console.
    const logger = createLogger("local-cluster", "watch", "silent");
    const nc = await connectNats({ servers: natsUrl, name: "local-cluster-watch", ...credentials }, logger);
    const watch = new ControlPlaneWatch(nc);
    subscribeMessages(nc, subjects.heartbeatsOf("backend"), control.Heartbeat, logger, (hb) => {
      if (hb.id) watch.backends.set(hb.id, { instanceType: hb.instanceType ?? "", address: hb.address ?? "" });
      const report = hb.backend;
      const warm =
        report?.state === backend.BackendState.BACKEND_STATE_WARM_IDLE || report?.state === backend.BackendState.BACKEND_STATE_BUSY;
      if (warm && !hb.draining) watch.warm.set(hb.id, report?.service ?? "");
      else watch.warm.delete(hb.id);
      meter.observe(hb.id, report?.service ?? "", occupies(report?.state), hb.draining === true, now());
    });
    subscribeMessages(nc, subjects.allLoad, control.LoadReport, logger, (r) => {
      inUse.onReport(r.service, r.frontendId, r.backendsInUse, now());
    });
    return watch;
  }

  async close(): Promise<void> {
    if (!this.nc.isClosed()) await this.nc.close();
  }
}
