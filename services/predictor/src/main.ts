import { heartbeatVerifier, serveMember, subscribeLoadReports } from "@infergrid/control-plane";
import { SteadyClock } from "@infergrid/core";
import { runService } from "@infergrid/runtime";
import { Counter, Gauge } from "prom-client";
import { predictorConfig } from "./config.js";
import { ForecastPublisher } from "./publisher.js";
import { LoadWindows } from "./windows.js";

await runService("predictor", predictorConfig, async (ctx) => {
  const { config, logger, metrics, nc } = ctx;
  const reports = new Counter({
    name: "infergrid_predictor_load_reports_total",
    help: "Load reports received, by outcome (accepted, invalid, too_old, too_many_services; refused: not sealed by the frontend it names, with --signed-heartbeats, or a repeat)",
    labelNames: ["outcome"],
    registers: [metrics],
  });
  const published = new Counter({ name: "infergrid_predictor_forecasts_total", help: "Forecasts published", registers: [metrics] });
  const windows = new LoadWindows(config.windowMs, config.historyWindows, config.latenessMs);
  const log = logger.child({ component: "predictor" });
  // The windows are kept, and closed, on this clock: on the wall clock a step back of an hour left no closed window
  // after the first report's, so no forecast was published for the hour.
  const clock = new SteadyClock();
  const publisher = new ForecastPublisher(
    nc,
    windows,
    config,
    log,
    () => published.inc(),
    (ms) => clock.toWall(ms),
  );
  new Gauge({
    name: "infergrid_predictor_observed_rate_per_second",
    help: "Arrival rate of the last closed window, per service",
    labelNames: ["service"],
    registers: [metrics],
    collect() {
      this.reset();
      for (const [service, rate] of publisher.lastObserved) this.set({ service }, rate);
    },
  });

  // With --signed-heartbeats a report counts only when sealed by the frontend it names: the windows sum every
  // report's arrivals, so one frontend speaking for others (or a report twice) would inflate the forecast.
  const subscription = subscribeLoadReports(
    nc,
    log,
    (report) => {
      const outcome = windows.add(report, clock.now(), clock.wallOffset());
      reports.inc({ outcome });
      if (outcome !== "accepted") log.debug({ service: report.service, outcome }, "load report not counted");
    },
    { verifier: heartbeatVerifier(ctx), onGarbled: ctx.onGarbled, onRefused: () => reports.inc({ outcome: "refused" }) },
  );
  const timer = setInterval(() => publisher.publishAll(clock.now()), config.periodMs > 0 ? config.periodMs : config.windowMs);

  // No API of its own: the gRPC server carries the standard health service.
  const member = await serveMember(ctx, { role: "predictor", register: () => {} });

  return {
    ready: member.ready,
    shutdown: [
      ...member.shutdown,
      {
        name: "loop",
        run: () => {
          clearInterval(timer);
          subscription.unsubscribe();
        },
      },
    ],
  };
});
