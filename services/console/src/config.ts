import { CLUSTER_VIEW_DEFAULTS } from "@infergrid/cluster-view";
import { field } from "@infergrid/runtime";
import { z } from "zod";

export const consoleConfig = z.object({
  httpPort: field.port(8090).describe("port of the console's web page and its API (0 = any free port)"),
  updateMs: field
    .int(CLUSTER_VIEW_DEFAULTS.sampleMs, 250, 60_000)
    .describe("the page gets an update (and the time series a point) this often"),
  historyMs: field.int(CLUSTER_VIEW_DEFAULTS.historyMs, 10_000, 6 * 3_600_000).describe("time series kept, and sent to a page that opens"),
  staleMs: field
    .int(CLUSTER_VIEW_DEFAULTS.staleMs, 500)
    .describe("a process with no heartbeat for this long is shown missing (a listed backend) or not at all"),
  reportFreshMs: field
    .int(CLUSTER_VIEW_DEFAULTS.reportFreshMs, 500)
    .describe("a frontend's load report older than this no longer counts towards a service's rate, n and latency"),
  maxClients: field.int(64, 1, 10_000).describe("pages that may follow the live updates at once (more get 503)"),
  authTokenFile: field
    .optionalString()
    .describe("file holding the console's access token: when set, every request needs HTTP Basic auth with it as the password"),
});

export type ConsoleConfig = z.infer<typeof consoleConfig>;
