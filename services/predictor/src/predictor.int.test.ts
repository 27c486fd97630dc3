import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HeartbeatSigner, LOAD_REPORT_PROOF, subjects } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import {
  checkHealth,
  connectNats,
  createLogger,
  makeCa,
  makeCert,
  type NatsConnection,
  publishMessage,
  subscribeMessages,
} from "@infergrid/runtime";
import { eventually, type NatsServerHandle, type ServiceProcess, startNatsServer, startService } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const WINDOW_MS = 1000;

/** A nats-server and a predictor process on 1 s windows (Holt's model), with a connection collecting its forecasts. */
async function startPredictor(extraEnv: Record<string, string>, name: string) {
  const nats = await startNatsServer();
  const predictor = await startService("predictor", {
    env: {
      INFERGRID_NATS_URL: nats.url,
      INFERGRID_WINDOW_MS: String(WINDOW_MS),
      INFERGRID_LATENESS_MS: "300",
      INFERGRID_PERIOD_MS: "250",
      INFERGRID_STEPS: "5",
      // These tests check Holt's numbers; the N-HiTS path is covered by publisher.test.ts.
      INFERGRID_MODEL: "holt",
      ...extraEnv,
    },
  });
  const logger = createLogger("test", name, "warn");
  const nc = await connectNats({ servers: nats.url, name }, logger);
  const forecasts: control.Forecast[] = [];
  subscribeMessages(nc, subjects.allForecasts, control.Forecast, logger, (f) => {
    forecasts.push(f);
  });
  return { nats, predictor, nc, forecasts };
}

describe("predictor (real nats-server, real process)", () => {
  let nats: NatsServerHandle;
  let predictor: ServiceProcess;
  let nc: NatsConnection;
  let forecasts: control.Forecast[] = [];
  let timer: NodeJS.Timeout | undefined;

  beforeAll(async () => {
    ({ nats, predictor, nc, forecasts } = await startPredictor({}, "predictor-test"));
  });

  afterAll(async () => {
    clearInterval(timer);
    await predictor?.stop();
    await nc?.close();
    await nats?.stop();
  });

  it("is healthy and turns the frontends' load reports into forecasts with the observed rate", async () => {
    expect(await checkHealth(predictor.ready.grpcAddress ?? "", 2000)).toBe(true);
    // Three frontends report every 100 ms, out of phase: 2 + 3 + 5 = 10 arrivals per 100 ms = 100/s in total.
    const perReport: Record<string, number> = { "fe-a": 2, "fe-b": 3, "fe-c": 5 };
    let tick = 0;
    timer = setInterval(() => {
      const now = Date.now();
      tick += 1;
      for (const [frontendId, arrivals] of Object.entries(perReport)) {
        publishMessage(nc, subjects.load("resnet"), control.LoadReport, {
          frontendId,
          service: "resnet",
          windowStartUnixMs: now - 100,
          windowEndUnixMs: now,
          arrivals,
          frontendsEstimate: 3,
        });
      }
      // A second service at a lower rate from one frontend.
      if (tick % 2 === 0)
        publishMessage(nc, subjects.load("ocr"), control.LoadReport, {
          frontendId: "fe-a",
          service: "ocr",
          windowStartUnixMs: now - 200,
          windowEndUnixMs: now,
          arrivals: 4,
        });
    }, 100);

    // Forecasts from full windows (the first one the reports began in may be partial).
    const f = await eventually(
      "a resnet forecast from 3+ windows",
      () => forecasts.findLast((x) => x.service === "resnet" && x.model === "holt"),
      10_000,
    );
    expect(f.observedRatePerS).toBeGreaterThan(85);
    expect(f.observedRatePerS).toBeLessThan(115);
    expect(f.steps).toBe(5);
    expect(Number(f.stepMs)).toBe(WINDOW_MS);
    expect(f.quantiles.map((q) => q.quantile)).toEqual([0.5, 0.6, 0.9, 0.99]);
    for (const q of f.quantiles) {
      expect(q.ratePerS).toHaveLength(5);
      for (const r of q.ratePerS ?? []) expect(r).toBeGreaterThanOrEqual(0);
    }
    const [p50, p60, p90, p99] = f.quantiles.map((q) => q.ratePerS?.[0] ?? 0);
    expect(p60).toBeGreaterThan(p50 ?? 0);
    expect(p50).toBeGreaterThan(70);
    expect(p50).toBeLessThan(130);
    expect(p90).toBeGreaterThan(p50 ?? 0);
    expect(p99).toBeGreaterThan(p90 ?? 0);

    const ocr = await eventually("an ocr forecast", () => forecasts.findLast((x) => x.service === "ocr" && x.model === "holt"), 10_000);
    // 4 arrivals every 200 ms = 20/s.
    expect(ocr.observedRatePerS).toBeGreaterThan(14);
    expect(ocr.observedRatePerS).toBeLessThan(26);
  });

  it("drops garbled and invalid messages, counts them, and keeps forecasting", async () => {
    nc.publish(subjects.load("resnet"), new Uint8Array([0x0a, 0xff, 0xff]));
    publishMessage(nc, subjects.load("x"), control.LoadReport, { service: "Not A Name", windowEndUnixMs: Date.now(), arrivals: 3 });
    await predictor.waitForLog((l) => l.msg === "dropped a garbled message", 5000);
    const count = forecasts.length;
    await eventually("more forecasts", () => (forecasts.length > count + 2 ? true : undefined), 5000);
    expect(predictor.isRunning()).toBe(true);
    const metrics = await fetch(`http://${predictor.ready.metricsAddress}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/infergrid_garbled_messages_total\{[^}]*\} 1/);
    expect(metrics).toMatch(/infergrid_predictor_load_reports_total\{[^}]*outcome="invalid"[^}]*\} 1/);
    expect(metrics).toMatch(/infergrid_predictor_observed_rate_per_second\{[^}]*service="resnet"/);
  });
});

describe("predictor with --signed-heartbeats (real nats-server, real process, real certificates)", () => {
  let nats: NatsServerHandle;
  let predictor: ServiceProcess;
  let nc: NatsConnection;
  let timer: NodeJS.Timeout | undefined;
  const dir = mkdtempSync(join(tmpdir(), "ig-predictor-signed-"));
  const pem = (name: string) => readFileSync(join(dir, name));
  let forecasts: control.Forecast[] = [];

  beforeAll(async () => {
    makeCa(dir, "ca");
    makeCert(dir, "predictor", "ca", "IP:127.0.0.1,URI:spiffe://infergrid/predictor/predictor");
    makeCert(dir, "fe-a", "ca", "URI:spiffe://infergrid/frontend/fe-a");
    ({ nats, predictor, nc, forecasts } = await startPredictor(
      {
        INFERGRID_GRPC_TLS_CA_FILE: join(dir, "ca.pem"),
        INFERGRID_GRPC_TLS_CERT_FILE: join(dir, "predictor.pem"),
        INFERGRID_GRPC_TLS_KEY_FILE: join(dir, "predictor.key"),
        INFERGRID_SIGNED_HEARTBEATS: "true",
      },
      "predictor-signed-test",
    ));
  });

  afterAll(async () => {
    clearInterval(timer);
    await predictor?.stop();
    await nc?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("counts only the reports sealed by the frontend they name, each once", async () => {
    const feA = new HeartbeatSigner(pem("fe-a.pem"), pem("fe-a.key"));
    const report = (frontendId: string, arrivals: number, now: number) =>
      control.LoadReport.encode({ frontendId, service: "resnet", windowStartUnixMs: now - 100, windowEndUnixMs: now, arrivals }).finish();
    timer = setInterval(() => {
      const now = Date.now();
      // fe-a's own reports: 5 arrivals per 100 ms = 50/s, each sent twice (the second is a repeat).
      const own = feA.seal(report("fe-a", 5, now), LOAD_REPORT_PROOF);
      nc.publish(subjects.load("resnet"), own);
      nc.publish(subjects.load("resnet"), own);
      // Another frontend's, unsigned; and one fe-a signed but naming another frontend: 500/s each if counted.
      nc.publish(subjects.load("resnet"), report("fe-b", 50, now));
      nc.publish(subjects.load("resnet"), feA.seal(report("fe-c", 50, now), LOAD_REPORT_PROOF));
    }, 100);

    const f = await eventually(
      "a resnet forecast from 3+ windows",
      () =>
        forecasts.findLast(
          (x) => x.service === "resnet" && x.model === "holt" && forecasts.filter((y) => y.service === "resnet").length > 4,
        ),
      15_000,
    );
    // Counted alone, fe-a's 50/s; the others would make it 1,100/s (or 1,050 with the repeats dropped).
    expect(f.observedRatePerS).toBeGreaterThan(40);
    expect(f.observedRatePerS).toBeLessThan(60);
    const dropped = (what: string) => predictor.logs.some((l) => l.msg === "dropped a load report" && String(l.problem).includes(what));
    expect(dropped("unsigned (no certificate or no signature)")).toBe(true);
    expect(dropped('signed by frontend/fe-a, but speaks for frontend "fe-c"')).toBe(true);
    expect(dropped("not after the last one counted from this frontend")).toBe(true);
    const metrics = await fetch(`http://${predictor.ready.metricsAddress}/metrics`).then((r) => r.text());
    const refused = Number(/infergrid_predictor_load_reports_total\{[^}]*outcome="refused"[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0);
    const accepted = Number(/infergrid_predictor_load_reports_total\{[^}]*outcome="accepted"[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0);
    // Three of every four reports refused.
    expect(refused).toBeGreaterThan(2.5 * accepted);
    expect(accepted).toBeGreaterThan(10);
  });
});
