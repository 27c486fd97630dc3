/**
 * The console's cost: the page's weight, the bytes of one live update, and the CPU of the console process
 * at a given cluster size (default 10 services x 10 backends = 100 backends, 3 frontends), with 0, 1 and
 * `--pages` pages following the updates. A real nats-server and a real console process; this process plays
 * the cluster's control plane (heartbeats every second, load reports every second per frontend and service,
 * a forecast per service every 10 s, a plan every 2 s), as the services publish them.
 *
 *   npm run bench:console -- --services 10 --backends-per-service 10 --seconds 30 --pages 10
 */

import { request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { ServiceRegistry, subjects } from "@infergrid/control-plane";
import { backend, control } from "@infergrid/proto";
import { connectNats, createLogger, publishMessage } from "@infergrid/runtime";
import { startNatsServer, startService } from "@infergrid/testkit";
import { Command } from "commander";
import { processCpuMs } from "./cpu-meter.js";

const program = new Command()
  .name("bench:console")
  .option("--services <n>", "services", "10")
  .option("--backends-per-service <n>", "backends in each service's list", "10")
  .option("--frontends <n>", "frontends reporting load for every service", "3")
  .option("--seconds <s>", "measured seconds per case", "30")
  .option("--pages <n>", "pages following the updates in the last case", "10")
  .parse();
const o = program.opts<{ services: string; backendsPerService: string; frontends: string; seconds: string; pages: string }>();
const SERVICES = Number(o.services);
const PER = Number(o.backendsPerService);
const FRONTENDS = Number(o.frontends);
const SECONDS = Number(o.seconds);
const PAGES = Number(o.pages);
for (const [k, v] of Object.entries({ SERVICES, PER, FRONTENDS, SECONDS, PAGES }))
  if (!(Number.isInteger(v) && v > 0)) program.error(`${k} must be a positive integer`);

const nats = await startNatsServer();
const web = await startService("console", { env: { INFERGRID_NATS_URL: nats.url, INFERGRID_HTTP_PORT: "0", INFERGRID_LOG_LEVEL: "warn" } });
const address = web.ready.httpAddress ?? "";
const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
const logger = createLogger("bench", "bench-console", "warn");
const nc = await connectNats({ servers: nats.url, name: "bench-console" }, logger);
const registry = await ServiceRegistry.open(nc, logger);

const names = Array.from({ length: SERVICES }, (_, i) => `svc-${String(i).padStart(2, "0")}`);
const backendOf = (s: number, b: number) => `backend-${String(s * PER + b).padStart(3, "0")}`;
for (const [s, name] of names.entries()) {
  await registry.putService({
    spec: { name, sla: { latencyThresholdMs: 200, percentile: 99 } },
    backends: Array.from({ length: PER }, (_, b) => ({
      backendId: backendOf(s, b),
      address: `10.0.0.${s}:${5000 + b}`,
      instanceType: "cpu-1",
    })),
    version: 1,
    minWarm: 2,
  });
}

const STATES = [
  backend.BackendState.BACKEND_STATE_WARM_IDLE,
  backend.BackendState.BACKEND_STATE_BUSY,
  backend.BackendState.BACKEND_STATE_COLD,
];
let tick = 0;
function publishSecond(): void {
  const now = Date.now();
  tick++;
  for (const [s, name] of names.entries()) {
    for (let b = 0; b < PER; b++) {
      const id = backendOf(s, b);
      publishMessage(nc, subjects.heartbeat("backend", id), control.Heartbeat, {
        role: control.Role.ROLE_BACKEND,
        id,
        address: `10.0.0.${s}:${5000 + b}`,
        sentAtUnixMs: now,
        instanceType: "cpu-1",
        backend: { backendId: id, state: STATES[(b + tick) % 3], service: name, cores: 1, reportedAtUnixMs: now },
      });
    }
    for (let f = 0; f < FRONTENDS; f++) {
      publishMessage(nc, subjects.load(name), control.LoadReport, {
        frontendId: `frontend-${f}`,
        service: name,
        windowStartUnixMs: now - 1000,
        windowEndUnixMs: now,
        arrivals: 20 + ((tick + f) % 7),
        completed: 20,
        withinSlo: 19,
        failed: tick % 5 === 0 ? 1 : 0,
        latencyP50Ms: 30 + (tick % 5),
        latencyP99Ms: 150 + (tick % 13),
        frontendsEstimate: FRONTENDS,
        backendsInUse: 4 + (tick % 2),
        globalRateEstimate: 60,
        slaWindows: tick,
        slaCompliantWindows: tick - (tick % 3 === 0 ? 1 : 0),
      });
    }
    if (tick % 10 === 1)
      publishMessage(nc, subjects.forecast(name), control.Forecast, {
        service: name,
        issuedAtUnixMs: now,
        stepMs: 10_000,
        steps: 6,
        model: "nhits",
        quantiles: [0.5, 0.6, 0.9, 0.99].map((q) => ({ quantile: q, ratePerS: Array.from({ length: 6 }, () => 60 * (1 + q)) })),
      });
  }
  for (const role of ["frontend", "broker", "predictor", "allocator"] as const) {
    const count = role === "frontend" ? FRONTENDS : 1;
    for (let i = 0; i < count; i++)
      publishMessage(nc, subjects.heartbeat(role, `${role}-${i}`), control.Heartbeat, {
        role: {
          frontend: control.Role.ROLE_FRONTEND,
          broker: control.Role.ROLE_BROKER,
          predictor: control.Role.ROLE_PREDICTOR,
          allocator: control.Role.ROLE_ALLOCATOR,
        }[role],
        id: `${role}-${i}`,
        address: `10.1.0.${i}:50051`,
        sentAtUnixMs: now,
      });
  }
  if (tick % 2 === 0)
    publishMessage(nc, subjects.plan, control.AllocationPlan, {
      issuedAtUnixMs: now,
      seq: tick,
      poolSize: SERVICES * PER,
      objective: "attainment",
      objectiveValue: 9.5,
      objectiveUpperBound: 9.7,
      solveMs: 12,
      solvedAtUnixMs: now,
      services: names.map((service) => ({ service, maxBackends: PER, share: PER, minWarm: 2, predictedRatePerS: 60, utility: 0.95 })),
    });
}
const publisher = setInterval(publishSecond, 1000);

function fetchBytes(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path }, (res) => {
      let n = 0;
      res.on("data", (d: Buffer) => {
        n += d.length;
      });
      res.on("end", () => resolve(n));
    });
    req.on("error", reject);
    req.end();
  });
}

interface Page {
  events: number[];
  close(): void;
}

/** A page following /api/events: the size of every event it gets (the first is the full update). */
function follow(): Page {
  const events: number[] = [];
  let buffer = "";
  const req = request({ host, port, path: "/api/events" }, (res) => {
    res.on("data", (d: Buffer) => {
      buffer += d.toString();
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const block = buffer.slice(0, end + 2);
        buffer = buffer.slice(end + 2);
        if (block.startsWith("data: ")) events.push(Buffer.byteLength(block));
        end = buffer.indexOf("\n\n");
      }
    });
  });
  req.on("error", () => {});
  req.end();
  return { events, close: () => req.destroy() };
}

async function measure(pages: number): Promise<{ cpuPct: number; pages: Page[] }> {
  const open = Array.from({ length: pages }, follow);
  await sleep(3000);
  const before = processCpuMs(web.pid);
  const t0 = Date.now();
  await sleep(SECONDS * 1000);
  const cpuMs = processCpuMs(web.pid) - before;
  const wall = Date.now() - t0;
  return { cpuPct: (100 * cpuMs) / wall, pages: open };
}

// Let the view fill: every backend and service seen, series under way.
await sleep(5000);
const weight = {
  html: await fetchBytes("/"),
  js: await fetchBytes("/console.js"),
  css: await fetchBytes("/console.css"),
  uplotJs: await fetchBytes("/vendor/uPlot.iife.min.js"),
  uplotCss: await fetchBytes("/vendor/uPlot.min.css"),
};
const results: string[] = [];
const quiet = await measure(0);
results.push(`0 pages: console CPU ${quiet.cpuPct.toFixed(2)} % of a core (ingesting the control plane only)`);
for (const n of [1, PAGES]) {
  const r = await measure(n);
  const deltas = r.pages.flatMap((p) => p.events.slice(1));
  const first = r.pages.map((p) => p.events[0] ?? 0);
  const mean = deltas.reduce((a, b) => a + b, 0) / Math.max(1, deltas.length);
  const perSecond = deltas.length / (r.pages.length * (SECONDS + 3));
  results.push(
    `${n} page${n === 1 ? "" : "s"}: console CPU ${r.cpuPct.toFixed(2)} % of a core (+${(r.cpuPct - quiet.cpuPct).toFixed(2)} over 0 pages); ` +
      `update ${(mean / 1024).toFixed(1)} KiB (${perSecond.toFixed(2)}/s per page, ${((mean * perSecond) / 1024).toFixed(1)} KiB/s per page); ` +
      `first (full) update ${(Math.max(...first) / 1024).toFixed(1)} KiB`,
  );
  for (const p of r.pages) p.close();
}
clearInterval(publisher);
const total = Object.values(weight).reduce((a, b) => a + b, 0);
console.log(`console benchmark: ${SERVICES} services x ${PER} backends (${SERVICES * PER}), ${FRONTENDS} frontends, ${SECONDS} s per case`);
console.log(
  `page weight: ${(total / 1024).toFixed(1)} KiB uncompressed (html ${(weight.html / 1024).toFixed(1)}, console.js ${(weight.js / 1024).toFixed(1)}, ` +
    `console.css ${(weight.css / 1024).toFixed(1)}, uPlot ${((weight.uplotJs + weight.uplotCss) / 1024).toFixed(1)})`,
);
for (const r of results) console.log(r);
await nc.close();
await web.stop();
await nats.stop();
