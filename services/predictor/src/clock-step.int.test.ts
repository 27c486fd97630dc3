import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { subjects } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection, publishMessage, subscribeMessages } from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  type ServiceProcess,
  startNatsServer,
  startService,
  WALL_CLOCK_STEPPED,
  wallClockStepArgs,
} from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const WINDOW_MS = 1000;
/** The rate the reports carry: each report the arrivals of the time since the last, whenever its timer fires. */
const RATE_PER_S = 100;

/**
 * A real predictor process whose node's wall clock steps back or forward an hour while the frontends of that node
 * report load: their reports' stamps step with it (this test stamps them as they would). The predictor keeps its
 * windows on a clock the step does not move. On the wall clock, a step back left no closed window after the
 * first report's, and no forecast was published for the hour; a step forward closed an hour of empty windows.
 */
describe.each([
  ["back", -3_600_000],
  ["forward", 3_600_000],
])("predictor across a step %s of an hour of its node's wall clock (real nats-server, real process)", (_direction, stepMs) => {
  const dir = mkdtempSync(join(tmpdir(), "ig-predictor-clock-"));
  let nats: NatsServerHandle;
  let predictor: ServiceProcess;
  let nc: NatsConnection;
  const forecasts: { at: number; forecast: control.Forecast }[] = [];
  let timer: NodeJS.Timeout | undefined;
  /** How far the node's wall clock has stepped, as the reporting frontends read it. */
  let stepped = 0;

  beforeAll(async () => {
    nats = await startNatsServer();
    predictor = await startService("predictor", {
      nodeArgs: wallClockStepArgs(dir, stepMs),
      env: {
        INFERGRID_NATS_URL: nats.url,
        INFERGRID_WINDOW_MS: String(WINDOW_MS),
        INFERGRID_LATENESS_MS: "300",
        INFERGRID_PERIOD_MS: "250",
        INFERGRID_STEPS: "3",
        INFERGRID_MODEL: "holt",
      },
    });
    const logger = createLogger("test", "predictor-clock-test", "warn");
    nc = await connectNats({ servers: nats.url, name: "predictor-clock-test" }, logger);
    subscribeMessages(nc, subjects.allForecasts, control.Forecast, logger, (forecast) => {
      forecasts.push({ at: Date.now(), forecast });
    });
    // A timer that fires late on a busy machine (the whole suite's load) must not lower the rate reported: each
    // report carries the arrivals of the time since the last, as a frontend's would.
    let last = Date.now();
    let owed = 0;
    timer = setInterval(() => {
      const real = Date.now();
      owed += ((real - last) * RATE_PER_S) / 1000;
      const arrivals = Math.floor(owed);
      owed -= arrivals;
      const now = real + stepped;
      publishMessage(nc, subjects.load("svc"), control.LoadReport, {
        frontendId: "fe",
        service: "svc",
        windowStartUnixMs: now - (real - last),
        windowEndUnixMs: now,
        arrivals,
      });
      last = real;
    }, 100);
  });

  afterAll(async () => {
    clearInterval(timer);
    await predictor?.stop();
    await nc?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("forecasts the load on after the step, stamped on the node's wall clock as it reads now", async () => {
    await eventually("a forecast from full windows", () => forecasts.find((f) => f.forecast.observedRatePerS > 80), 10_000);
    process.kill(predictor.pid, "SIGUSR2");
    await predictor.waitForLog((l) => l.msg === WALL_CLOCK_STEPPED, 5_000);
    stepped = stepMs;
    const steppedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 4 * WINDOW_MS));
    // The first window after the step is still being reported: from the second on.
    const after = forecasts.filter((f) => f.at >= steppedAt + WINDOW_MS);
    const rates = after.map((f) => f.forecast.observedRatePerS);
    const skews = after.map((f) => Number(f.forecast.issuedAtUnixMs) - (f.at + stepped));
    console.log(
      `step ${stepMs} ms: ${after.length} forecasts after the step, observed ${Math.min(...rates)}-${Math.max(...rates)}/s, ` +
        `issued ${Math.min(...skews)} to ${Math.max(...skews)} ms from the stepped wall clock at receipt`,
    );
    // One every 250 ms for 3 s.
    expect(after.length).toBeGreaterThanOrEqual(8);
    // 100 a second, as reported: a step forward read on the wall clock gave empty windows (0), a step back none.
    for (const r of rates) {
      expect(r).toBeGreaterThan(70);
      expect(r).toBeLessThan(130);
    }
    for (const skew of skews) expect(Math.abs(skew)).toBeLessThan(1_000);
  });
});
