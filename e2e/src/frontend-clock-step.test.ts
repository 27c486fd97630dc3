import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type grpc } from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  RegistryWriter,
  type ServiceProcess,
  startAll,
  startNatsServer,
  startService,
  WALL_CLOCK_STEPPED,
  wallClockStepArgs,
} from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlWatch } from "./control-watch.js";
import { LoadDriver } from "./load-driver.js";
import { emulatedSpec } from "./process-cluster.js";

/**
 * A node's wall clock stepped back or forward an hour (an NTP correction, `date -s`) under steady load: a real broker, a
 * real frontend and real backends, every one of them on that node (each process's `Date.now` steps together).
 * The frontend's rate history, deadlines and load windows run on a clock the step does not move. On the wall
 * clock, every arrival after the step fell into a bucket older than the history's newest and was dropped, so the
 * frontend predicted no load for the hour, and its load reports' windows ended an hour before they started.
 * One node's clock off the others' is clock-skew.test.ts.
 */
const RATE = 40;
const LOAD_REPORT_MS = 500;
const RT_MAX_MS = 300;

describe.each([
  ["back", -3_600_000],
  ["forward", 3_600_000],
])("a frontend across a step %s of an hour of its node's wall clock (real processes)", (_direction, stepMs) => {
  const dir = mkdtempSync(join(tmpdir(), "ig-frontend-clock-"));
  let nats: NatsServerHandle;
  let writer: RegistryWriter;
  let watch: ControlWatch;
  let frontend: ServiceProcess;
  let others: ServiceProcess[] = [];
  let client: grpc.Client;
  let driver: LoadDriver;

  const report = () => watch.reports.get(`svc/${frontend.ready.id}`);

  beforeAll(async () => {
    nats = await startNatsServer();
    const step = wallClockStepArgs(dir, stepMs);
    const env = { INFERGRID_NATS_URL: nats.url, INFERGRID_HEARTBEAT_MS: "250", INFERGRID_SHUTDOWN_GRACE_MS: "1000" };
    const up = await startAll([
      startService("frontend", {
        nodeArgs: step,
        env: {
          ...env,
          INFERGRID_ID: "frontend-0",
          INFERGRID_T_SETUP_MS: "1000",
          INFERGRID_RATE_WINDOW_MS: "2000",
          INFERGRID_RATE_HISTORY_MS: "10000",
          INFERGRID_AUTOSCALE_MS: "250",
          INFERGRID_LOAD_REPORT_MS: String(LOAD_REPORT_MS),
        },
      }),
      ...Array.from({ length: 4 }, (_, i) =>
        startService("backend-worker", {
          name: `b${i}`,
          nodeArgs: step,
          env: { ...env, INFERGRID_ID: `b${i}`, INFERGRID_IDLE_TIMEOUT_MS: "600000" },
        }),
      ),
      startService("broker", { nodeArgs: step, env: { ...env, INFERGRID_FRONTEND_TTL_MS: "2000" } }),
    ]);
    frontend = up[0] as ServiceProcess;
    others = up.slice(1);
    writer = await RegistryWriter.open(nats.url);
    watch = await ControlWatch.open(nats.url);
    await writer.assign(
      emulatedSpec("svc", { locMs: 20, scaleMs: 5, shape: 0.3, coldStartMs: 100, rtMaxMs: RT_MAX_MS, initialBackends: 2 }),
      others.slice(0, 4),
      2,
    );
    client = createClient(others[4]?.ready.grpcAddress ?? "");
    await eventually("svc to serve", () => (watch.warmBackends("svc").length > 0 ? true : undefined), 20_000);
    driver = new LoadDriver(client, () => ({ service: "svc", inputs: { x: { dims: [1], data: [1] } } }), RATE).start();
  }, 120_000);

  afterAll(async () => {
    await driver?.stop();
    client?.close();
    await watch?.close();
    await writer?.close();
    await Promise.all([frontend, ...others].filter(Boolean).map((p) => p.stop(3000)));
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it("keeps predicting the load it serves, reports windows of the length they lasted, and serves on", async () => {
    const settled = await eventually(
      "the frontend to predict the offered load",
      () => {
        const r = report();
        return r && Math.abs(r.globalRateEstimate - RATE) <= RATE / 4 ? r : undefined;
      },
      20_000,
      200,
    );
    const reports: { rate: number; windowMs: number; n: number }[] = [];
    const stop = watch.onLoadReport((r) => {
      if (r.service === "svc" && r.frontendId === frontend.ready.id)
        reports.push({ rate: r.globalRateEstimate, windowMs: Number(r.windowEndUnixMs) - Number(r.windowStartUnixMs), n: r.backendsInUse });
    });
    for (const p of [frontend, ...others]) process.kill(p.pid, "SIGUSR2");
    await Promise.all([frontend, ...others].map((p) => p.waitForLog((l) => l.msg === WALL_CLOCK_STEPPED, 5_000)));
    const steppedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    stop();
    // Answered or failed by now: the driver's requests time out after 10 s.
    // Judged on the requests sent after the step (the client's own deadline is a wall-clock time).
    const after = driver.outcomes.filter((o) => o.sentAt >= steppedAt && o.sentAt < steppedAt + 5_000);
    const ok = after.filter((o) => o.ok && o.doneAt - o.sentAt <= RT_MAX_MS).length;
    const rates = reports.map((r) => r.rate);
    console.log(
      `before the step: rate ${settled.globalRateEstimate.toFixed(1)}/s, n ${settled.backendsInUse}; ` +
        `after: rate ${Math.min(...rates).toFixed(1)}-${Math.max(...rates).toFixed(1)}/s, n ${reports.map((r) => r.n).join(",")}, ` +
        `windows ${reports.map((r) => r.windowMs).join(",")} ms; ${ok}/${after.length} requests within ${RT_MAX_MS} ms, failures ${JSON.stringify(driver.failureCodes())}`,
    );
    expect(reports.length).toBeGreaterThanOrEqual(10);
    // Every window, the one across the step included, as long as it lasted (a report every 500 ms).
    for (const r of reports) {
      expect(r.windowMs).toBeGreaterThan(0);
      expect(r.windowMs).toBeLessThan(4 * LOAD_REPORT_MS);
    }
    // The offered load, within the estimate's noise, from the first report after the step to the last.
    for (const rate of rates) expect(Math.abs(rate - RATE)).toBeLessThanOrEqual(RATE / 4);
    expect(after.length).toBeGreaterThan(RATE * 4);
    expect(ok / after.length).toBeGreaterThanOrEqual(0.99);
  }, 60_000);
});
