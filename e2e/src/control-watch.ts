import { subjects } from "@infergrid/control-plane";
import { backend, control } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection, subscribeMessages } from "@infergrid/runtime";

/** What a test sees of the control plane: load reports and backend heartbeats. */
export class ControlWatch {
  readonly reports = new Map<string, control.LoadReport>();
  readonly backends = new Map<string, backend.BackendReport.$Properties>();
  /** Called with every load report as it arrives. */
  private readonly reportListeners = new Set<(r: control.LoadReport) => void>();

  private constructor(private readonly nc: NatsConnection) {}

  static async open(natsUrl: string): Promise<ControlWatch> {
    const logger = createLogger("test", "control-watch", "warn");
    const nc = await connectNats({ servers: natsUrl, name: "control-watch" }, logger);
    const w = new ControlWatch(nc);
    subscribeMessages(nc, subjects.allLoad, control.LoadReport, logger, (r) => {
      w.reports.set(`${r.service}/${r.frontendId}`, r);
      for (const listener of w.reportListeners) listener(r);
    });
    subscribeMessages(nc, subjects.heartbeatsOf("backend"), control.Heartbeat, logger, (hb) => {
      if (hb.backend) w.backends.set(hb.id, hb.backend);
    });
    return w;
  }

  /** Every load report from now on, until the returned function is called. */
  onLoadReport(listener: (r: control.LoadReport) => void): () => void {
    this.reportListeners.add(listener);
    return () => this.reportListeners.delete(listener);
  }

  /** Each live frontend's latest report for a service. */
  frontendReports(service: string, frontendIds: readonly string[]): control.LoadReport[] {
    return frontendIds.flatMap((id) => {
      const r = this.reports.get(`${service}/${id}`);
      return r ? [r] : [];
    });
  }

  warmBackends(service: string): string[] {
    const warm = new Set([backend.BackendState.BACKEND_STATE_WARM_IDLE, backend.BackendState.BACKEND_STATE_BUSY]);
    return [...this.backends.values()].filter((b) => b.service === service && warm.has(b.state ?? 0)).map((b) => b.backendId ?? "");
  }

  async close(): Promise<void> {
    await this.nc.close();
  }
}
