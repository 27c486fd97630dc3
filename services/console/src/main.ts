import { readFileSync } from "node:fs";
import { ClusterView, updateJson } from "@infergrid/cluster-view";
import { heartbeatVerifier, ServiceRegistry, subjects, subscribeHeartbeats } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { runService, subscribeMessages } from "@infergrid/runtime";
import { Counter, Gauge, Histogram } from "prom-client";
import { consoleConfig } from "./config.js";
import { startConsoleWeb, UpdateHub } from "./web.js";

await runService("console", consoleConfig, async (ctx) => {
  const { config, logger, metrics, nc } = ctx;
  const log = logger.child({ component: "console" });
  const token = config.authTokenFile === undefined ? undefined : readFileSync(config.authTokenFile, "utf8").trim();
  if (token === "") throw new Error(`--auth-token-file ${config.authTokenFile} is empty`);

  const view = new ClusterView({
    sampleMs: config.updateMs,
    historyMs: config.historyMs,
    staleMs: config.staleMs,
    reportFreshMs: config.reportFreshMs,
  });
  const options = { onGarbled: ctx.onGarbled };
  const subscriptions = [
    subscribeHeartbeats(nc, subjects.allHeartbeats, log, (m) => view.onHeartbeat(m, Date.now()), {
      ...options,
      verifier: heartbeatVerifier(ctx),
    }),
    subscribeMessages(nc, subjects.allLoad, control.LoadReport, log, (m) => view.onLoadReport(m, Date.now()), options),
    subscribeMessages(nc, subjects.allForecasts, control.Forecast, log, (m) => view.onForecast(m, Date.now()), options),
    subscribeMessages(nc, subjects.plan, control.AllocationPlan, log, (m) => view.onPlan(m), options),
    subscribeMessages(nc, subjects.poolEvents, control.PoolEvent, log, (m) => view.onPoolEvent(m), options),
  ];
  const registry = await ServiceRegistry.open(nc, logger);
  const stopWatch = registry.watchServices((name, entry) => view.onServiceEntry(name, entry));

  const updateBytes = new Histogram({
    name: "infergrid_console_update_bytes",
    help: "Bytes of one live update (one server-sent event), sent to every page",
    buckets: [256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576],
    registers: [metrics],
  });
  const sent = new Counter({ name: "infergrid_console_sent_bytes_total", help: "Bytes sent to pages", registers: [metrics] });
  const hub = new UpdateHub(config.maxClients, log, (bytes) => sent.inc(bytes));
  new Gauge({
    name: "infergrid_console_pages",
    help: "Pages following the live updates",
    registers: [metrics],
    collect() {
      this.set(hub.size);
    },
  });

  const timer = setInterval(() => {
    const now = Date.now();
    view.sample(now);
    // Nobody watching: the series still advance, nothing is encoded.
    if (hub.size === 0) return;
    updateBytes.observe(hub.broadcast(updateJson(view.update(now, "latest"))));
  }, config.updateMs);

  const web = await startConsoleWeb({
    host: config.host,
    port: config.httpPort,
    token,
    hub,
    fullUpdate: () => updateJson(view.update(Date.now(), "all")),
    logger: log,
  });
  log.info({ url: `http://${ctx.advertise(Number(web.address.split(":").pop()))}/`, auth: token !== undefined }, "console serving");

  return {
    ready: { httpAddress: web.address },
    shutdown: [
      {
        name: "console",
        run: async () => {
          clearInterval(timer);
          stopWatch();
          for (const s of subscriptions) s.unsubscribe();
          await web.close();
        },
      },
    ],
  };
});
