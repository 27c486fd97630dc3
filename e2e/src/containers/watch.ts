import { subjects } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection, type NatsOptions, subscribeMessages } from "@infergrid/runtime";

/** The frontends' load reports, seen from outside through NATS' published port (as a read-only observer when secure). */
export class LoadWatch {
  readonly reports = new Map<string, control.LoadReport>();

  private constructor(private readonly nc: NatsConnection) {}

  static async open(options: NatsOptions): Promise<LoadWatch> {
    const logger = createLogger("drill", "load-watch", "error");
    const nc = await connectNats(options, logger);
    const w = new LoadWatch(nc);
    subscribeMessages(nc, subjects.allLoad, control.LoadReport, logger, (r) => {
      w.reports.set(`${r.service}/${r.frontendId}`, r);
    });
    return w;
  }

  /** n_F as each named frontend last reported it for `service`, with reports newer than `since`. */
  estimates(service: string, frontendIds: readonly string[], since: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const id of frontendIds) {
      const r = this.reports.get(`${service}/${id}`);
      if (r && Number(r.windowEndUnixMs) > since) out.set(id, r.frontendsEstimate);
    }
    return out;
  }

  /** What each named frontend last reported for `service` (for a failed check's message). */
  describe(service: string, frontendIds: readonly string[]): string {
    return frontendIds
      .map((id) => {
        const r = this.reports.get(`${service}/${id}`);
        if (!r) return `${id}: no report`;
        const ageMs = Date.now() - Number(r.windowEndUnixMs);
        return `${id}: n_F ${r.frontendsEstimate}, n ${r.backendsInUse}, arrivals ${r.arrivals}, completed ${r.completed}, failed ${r.failed} (${ageMs} ms ago)`;
      })
      .join("; ");
  }

  async close(): Promise<void> {
    await this.nc.close();
  }
}
