import { subjects } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection, subscribeMessages } from "@infergrid/runtime";
import { type HeartbeatBackendSeconds, type InUseTracker, occupies } from "./observers.js";

/** Feeds backend heartbeats and frontend load reports from NATS into the meters. */
export class ControlPlaneWatch {
  private constructor(private readonly nc: NatsConnection) {}

  static async open(natsUrl: string, meter: HeartbeatBackendSeconds, inUse: InUseTracker, now: () => number): Promise<ControlPlaneWatch> {
    // Its own problems (a garbled message) are of no interest on the console.
    const logger = createLogger("local-cluster", "watch", "silent");
    const nc = await connectNats({ servers: natsUrl, name: "local-cluster-watch" }, logger);
    subscribeMessages(nc, subjects.heartbeatsOf("backend"), control.Heartbeat, logger, (hb) => {
      const report = hb.backend;
      meter.observe(hb.id, report?.service ?? "", occupies(report?.state), hb.draining === true, now());
    });
    subscribeMessages(nc, subjects.allLoad, control.LoadReport, logger, (r) => {
      inUse.onReport(r.service, r.frontendId, r.backendsInUse, now());
    });
    return new ControlPlaneWatch(nc);
  }

  async close(): Promise<void> {
    if (!this.nc.isClosed()) await this.nc.close();
  }
}
