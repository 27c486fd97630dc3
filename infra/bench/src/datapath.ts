/**
 * Data-path benchmark: requests/s, p50/p99 latency and CPU per request of every process, through
 * broker -> frontend -> backend against calling the same backend directly, in one run, on a zero-time
 * emulated model (so what is measured is the serving system, not a model), at three payload sizes.
 * Real processes, real gRPC, real NATS. CPU is each process's own (user + system) over the measured window.
 *
 *   npm run bench:datapath -- --duration 10 --concurrency 32 --payloads tiny,tokens,image
 */

import { resolve } from "node:path";
import { constants, type PerformanceEntry, PerformanceObserver } from "node:perf_hooks";
import {
  BackendServiceDefinition,
  control,
  InferenceServiceDefinition,
  type inference,
  OpenInferenceDefinition,
  type openInference,
} from "@infergrid/proto";
import { bytesMethod, createClient, unaryCall } from "@infergrid/runtime";
import { eventually, RegistryWriter, startNatsServer, startService } from "@infergrid/testkit";
import { Command } from "commander";
import { closedLoop, type LoopResult } from "./closed-loop.js";
import { CpuMeter, processCpuMs, selfCpuMs } from "./cpu-meter.js";
import { type HistogramTotals, type HopTimes, histogramTotals, hopTimes, meanMsBetween } from "./hop-time.js";
import { type OpenLoopResult, openLoop, pooled } from "./open-loop.js";

/** Request payloads: a few floats; a token batch (8 sequences of 512 ids); a 224x224 RGB float32 image (588 KiB). */
const PAYLOADS: Record<string, { dims: number[]; describe: string }> = {
  tiny: { dims: [4], describe: "4 floats" },
  tokens: { dims: [8, 512], describe: "8x512 token ids (16 KiB)" },
  image: { dims: [1, 3, 224, 224], describe: "1x3x224x224 float32 image (588 KiB)" },
};

const program = new Command()
  .name("bench:datapath")
  .option("--duration <seconds>", "measured seconds per path and payload", "10")
  .option("--warmup <seconds>", "unmeasured seconds before each path", "2")
  .option("--concurrency <n>", "requests in flight (closed loop)", "32")
  .option("--payloads <list>", `comma-separated, of ${Object.keys(PAYLOADS).join(", ")}`, "tiny,tokens,image")
  .option("--cpu-prof <dir>", "write a V8 CPU profile of broker, frontend and backend into this directory (open in Chrome DevTools)")
  .option(
    "--latency-load <fraction>",
    "after the closed loops, both paths at this fraction of the full path's measured throughput, open loop, for latency below saturation (0: skip)",
    "0.25",
  )
  .option(
    "--latency-rounds <n>",
    "open-loop windows per path, taken in turn with the other path's (direct, full, direct, ...); percentiles over all of a path's",
    "3",
  )
  .option(
    "--client-encoding <when>",
    "each: the client encodes every request from JavaScript numbers (as in every run in docs/results.md before 2026-11-28); once: it encodes each payload's request once and sends those bytes (a load generator that costs about what sending costs)",
    "each",
  )
  .option(
    "--client-api <api>",
    "the full path's client API: infergrid (InferenceService/Infer), oip-raw (the Open Inference Protocol's ModelInfer with raw_input_contents), oip-contents (ModelInfer with fp32_contents)",
    "infergrid",
  )
  .option("--service-node-args <args>", "extra node options for broker, frontend and backend, space-separated (e.g. V8 heap settings)", "")
  .parse();
const opts = program.opts<{
  duration: string;
  warmup: string;
  concurrency: string;
  payloads: string;
  cpuProf?: string;
  serviceNodeArgs: string;
  latencyLoad: string;
  latencyRounds: string;
  clientEncoding: string;
  clientApi: string;
}>();
if (!["infergrid", "oip-raw", "oip-contents"].includes(opts.clientApi))
  program.error("--client-api must be infergrid, oip-raw or oip-contents");
if (opts.clientEncoding !== "once" && opts.clientEncoding !== "each") program.error("--client-encoding must be once or each");
const latencyLoad = Number(opts.latencyLoad);
if (!(latencyLoad >= 0 && latencyLoad < 1)) program.error("--latency-load must be in [0, 1)");
const latencyRounds = Number(opts.latencyRounds);
if (!(Number.isInteger(latencyRounds) && latencyRounds >= 1)) program.error("--latency-rounds must be a positive integer");
const durationMs = Number(opts.duration) * 1000;
const warmupMs = Number(opts.warmup) * 1000;
const concurrency = Number(opts.concurrency);
const payloads = opts.payloads.split(",").map((p) => p.trim());
if (!(durationMs > 0 && warmupMs >= 0 && Number.isInteger(concurrency) && concurrency > 0)) {
  program.error("--duration and --concurrency must be positive numbers, --warmup non-negative");
}
for (const p of payloads) if (!(p in PAYLOADS)) program.error(`--payloads: unknown payload ${JSON.stringify(p)}`);

function inputsOf(name: string): Record<string, inference.Tensor.$Properties> {
  const dims = PAYLOADS[name]?.dims ?? [1];
  const n = dims.reduce((a, b) => a * b, 1);
  return { x: { dims, data: Array.from({ length: n }, (_, i) => (i % 255) / 255) } };
}

const nats = await startNatsServer();
const env = {
  INFERGRID_NATS_URL: nats.url,
  INFERGRID_LOG_LEVEL: "warn",
};
const nodeArgs = [
  ...(opts.cpuProf ? ["--cpu-prof", `--cpu-prof-dir=${resolve(opts.cpuProf)}`] : []),
  ...opts.serviceNodeArgs.split(" ").filter(Boolean),
];
const backend = await startService("backend-worker", {
  nodeArgs,
  env: { ...env, INFERGRID_ID: "bench-backend", INFERGRID_CONCURRENCY: "64" },
});
const frontend = await startService("frontend", { nodeArgs, env: { ...env, INFERGRID_SCALING: "static" } });
const broker = await startService("broker", { nodeArgs, env });
const writer = await RegistryWriter.open(nats.url);
const spec = {
  name: "zero",
  model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs: 0, scaleMs: 0 }, coldStartMs: 0 },
  sla: { latencyThresholdMs: 100, percentile: 99, burstFactor: 2 },
  minBackends: 1,
  initialBackends: 1,
};
await writer.assign(spec, [backend], 1);
const brokerClient = createClient(broker.ready.grpcAddress ?? "");
const backendClient = createClient(backend.ready.grpcAddress ?? "");

const PROCESSES = ["client", "broker", "frontend", "backend"] as const;
const meter = new CpuMeter(
  new Map<string, () => number>([
    ["client", selfCpuMs],
    ["broker", () => processCpuMs(broker.pid)],
    ["frontend", () => processCpuMs(frontend.pid)],
    ["backend", () => processCpuMs(backend.pid)],
  ]),
);

interface Row {
  payload: string;
  path: string;
  result: LoopResult;
  /** CPU µs per answered request, by process. */
  cpuUs: CpuUs;
  /** Full path: where the mean request's time went. */
  hops?: HopTimes;
  /** The share of the window the client's event loop was busy. */
  clientBusy: number;
  /** The client's own collector over the window: pause µs per request, and its full (mark-compact) collections. */
  clientGc: { usPerRequest: number; full: number };
}

type CpuUs = Record<(typeof PROCESSES)[number], number>;

/** CPU µs per request, by process, over the meter's last window. */
function cpuPer(requests: number): CpuUs {
  const per = (name: string) => meter.usPerRequest(name, requests);
  return { client: per("client"), broker: per("broker"), frontend: per("frontend"), backend: per("backend") };
}

const DURATIONS = [
  [broker, "infergrid_broker_request_duration_seconds"],
  [frontend, "infergrid_frontend_request_duration_seconds"],
] as const;

/** The broker's and the frontend's duration histograms, now. */
async function readDurations(): Promise<HistogramTotals[]> {
  return Promise.all(
    DURATIONS.map(async ([svc, name]) => histogramTotals(await (await fetch(`http://${svc.ready.metricsAddress}/metrics`)).text(), name)),
  );
}

/**
 * How busy the client's event loop was over the last window: near 1, the single-threaded client is what bounds a
 * closed loop's throughput, whatever the servers could do.
 */
let clientElu = performance.eventLoopUtilization();
let clientBusy = Number.NaN;
/**
 * The client's collector, so that what the load generator's own heap costs each path is seen beside its CPU: a
 * request that lives longer (the full path's) is live at more of its collections, and the generator pays for it.
 * Entries arrive a little after their collection, so a window may miss its last one.
 */
const gcSoFar = { ms: 0, full: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcSoFar.ms += e.duration;
    if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcSoFar.full += 1;
  }
}).observe({ entryTypes: ["gc"] });
let gcAtStart = { ...gcSoFar };
let clientGcWindow = { ms: 0, full: 0 };
const clientWindow = {
  onStart: () => {
    clientElu = performance.eventLoopUtilization();
    gcAtStart = { ...gcSoFar };
  },
  onEnd: () => {
    clientBusy = performance.eventLoopUtilization(clientElu).utilization;
    clientGcWindow = { ms: gcSoFar.ms - gcAtStart.ms, full: gcSoFar.full - gcAtStart.full };
  },
};
const clientGcPer = (requests: number) => ({ usPerRequest: (1000 * clientGcWindow.ms) / requests, full: clientGcWindow.full });

async function measure(payload: string, path: string, call: () => Promise<unknown>): Promise<Row> {
  if (path === "backend directly") {
    const result = await closedLoop(call, concurrency, warmupMs, durationMs, {
      onStart: () => {
        meter.window.onStart();
        clientWindow.onStart();
      },
      onEnd: () => {
        clientWindow.onEnd();
        meter.window.onEnd();
      },
    });
    return { payload, path, result, cpuUs: cpuPer(result.requests), clientBusy, clientGc: clientGcPer(result.requests) };
  }
  // The histograms are read as the window opens and closes (a read takes a few ms of the window).
  let before: Promise<HistogramTotals[]> | undefined;
  let after: Promise<HistogramTotals[]> | undefined;
  const result = await closedLoop(call, concurrency, warmupMs, durationMs, {
    onStart: () => {
      meter.window.onStart();
      clientWindow.onStart();
      before = readDurations();
    },
    onEnd: () => {
      clientWindow.onEnd();
      meter.window.onEnd();
      after = readDurations();
    },
  });
  const [b, a] = [await before, await after];
  const [brokerMs, frontendMs] = [0, 1].map((i) => (b?.[i] && a?.[i] ? meanMsBetween(b[i], a[i]) : Number.NaN));
  return {
    payload,
    path,
    result,
    cpuUs: cpuPer(result.requests),
    clientBusy,
    clientGc: clientGcPer(result.requests),
    hops: hopTimes(result.meanMs, brokerMs ?? Number.NaN, frontendMs ?? Number.NaN),
  };
}

/** The open loop at `rate`, with each process's CPU per request sent. */
async function measureOpen(call: () => Promise<unknown>, rate: number): Promise<{ result: OpenLoopResult; cpuUs: CpuUs }> {
  const result = await openLoop(call, rate, warmupMs, durationMs, meter.window);
  return { result, cpuUs: cpuPer(result.sent) };
}

/** Windows of one path as one: latencies pooled, CPU per request weighted by each window's requests. */
function pooledOpen(windows: readonly Awaited<ReturnType<typeof measureOpen>>[]): { result: OpenLoopResult; cpuUs: CpuUs } {
  const result = pooled(windows.map((w) => w.result));
  const cpu = (p: (typeof PROCESSES)[number]) => windows.reduce((a, w) => a + w.cpuUs[p] * w.result.sent, 0) / result.sent;
  return { result, cpuUs: { client: cpu("client"), broker: cpu("broker"), frontend: cpu("frontend"), backend: cpu("backend") } };
}

const rows: Row[] = [];
/** Per payload: the open-loop rate and each path's latencies at it. */
const below: {
  payload: string;
  rate: number;
  direct: Awaited<ReturnType<typeof measureOpen>>;
  full: Awaited<ReturnType<typeof measureOpen>>;
  /** Each round's p99 added (full's window less direct's), for the spread. */
  roundsAddedMs: number[];
}[] = [];
try {
  await eventually(
    "the path to serve",
    () =>
      unaryCall(
        brokerClient,
        InferenceServiceDefinition.Infer,
        { service: "zero", inputs: inputsOf("tiny") },
        { deadline: Date.now() + 2000 },
      ),
    30_000,
    200,
  );
  for (const payload of payloads) {
    const inputs = inputsOf(payload);
    const execute = { service: "zero", frontendId: "bench", inputs, attempt: 1 };
    const infer = { service: "zero", inputs };
    const deadline = () => ({ deadline: Date.now() + 10_000 });
    let direct: () => Promise<unknown>;
    let full: () => Promise<unknown>;
    if (opts.clientApi !== "infergrid") {
      // The Open Inference Protocol's request for the same tensor, converted to an Infer at the broker.
      const [name, tensor] = Object.entries(inputs)[0] ?? ["x", {}];
      const raw = opts.clientApi === "oip-raw";
      const values = Float32Array.from(tensor.data ?? []);
      const modelInfer: openInference.IModelInferRequest = {
        modelName: "zero",
        inputs: [{ name, datatype: "FP32", shape: tensor.dims ?? [], ...(raw ? {} : { contents: { fp32Contents: Array.from(values) } }) }],
        rawInputContents: raw ? [Buffer.from(values.buffer)] : [],
      };
      const once = opts.clientEncoding === "once";
      const modelInferBytes = OpenInferenceDefinition.ModelInfer.requestSerialize(modelInfer);
      const modelInferRaw = bytesMethod(OpenInferenceDefinition.ModelInfer.path);
      const executeBytes = BackendServiceDefinition.Execute.requestSerialize(execute);
      const executeRaw = bytesMethod(BackendServiceDefinition.Execute.path);
      direct = once
        ? () => unaryCall(backendClient, executeRaw, executeBytes, deadline())
        : () => unaryCall(backendClient, BackendServiceDefinition.Execute, execute, deadline());
      full = once
        ? () => unaryCall(brokerClient, modelInferRaw, modelInferBytes, deadline())
        : () => unaryCall(brokerClient, OpenInferenceDefinition.ModelInfer, modelInfer, deadline());
    } else if (opts.clientEncoding === "once") {
      // The same bytes the generated encoders write, encoded once: the servers see what they saw before.
      const executeBytes = BackendServiceDefinition.Execute.requestSerialize(execute);
      const inferBytes = InferenceServiceDefinition.Infer.requestSerialize(infer);
      const executeRaw = bytesMethod(BackendServiceDefinition.Execute.path);
      const inferRaw = bytesMethod(InferenceServiceDefinition.Infer.path);
      direct = () => unaryCall(backendClient, executeRaw, executeBytes, deadline());
      full = () => unaryCall(brokerClient, inferRaw, inferBytes, deadline());
    } else {
      direct = () => unaryCall(backendClient, BackendServiceDefinition.Execute, execute, deadline());
      full = () => unaryCall(brokerClient, InferenceServiceDefinition.Infer, infer, deadline());
    }
    rows.push(await measure(payload, "backend directly", direct));
    const saturated = await measure(payload, "broker -> frontend -> backend", full);
    rows.push(saturated);
    if (latencyLoad > 0) {
      const rate = Math.max(1, Math.round(saturated.result.perSecond * latencyLoad));
      const directs: Awaited<ReturnType<typeof measureOpen>>[] = [];
      const fulls: Awaited<ReturnType<typeof measureOpen>>[] = [];
      for (let round = 0; round < latencyRounds; round++) {
        directs.push(await measureOpen(direct, rate));
        fulls.push(await measureOpen(full, rate));
      }
      below.push({
        payload,
        rate,
        direct: pooledOpen(directs),
        full: pooledOpen(fulls),
        roundsAddedMs: fulls.map((f, i) => f.result.p99Ms - (directs[i]?.result.p99Ms ?? Number.NaN)),
      });
    }
  }
} finally {
  brokerClient.close();
  backendClient.close();
  await writer.close();
  await Promise.all([broker.stop(), frontend.stop(), backend.stop()]);
  await nats.stop();
}

const num = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : "-");
console.log(
  `\ndata path, zero-time model, closed loop, concurrency ${concurrency}, ${opts.duration} s per path, full path's client API ${opts.clientApi} (node ${process.version})`,
);
console.log(
  "| payload | path | req/s | p50 ms | p99 ms | errors | CPU µs/req: client | broker | frontend | backend | client's loop busy | client's GC pauses µs/req (full collections) |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  const direct = r.path === "backend directly";
  console.log(
    `| ${r.payload} | ${r.path} | ${num(r.result.perSecond)} | ${num(r.result.p50Ms, 1)} | ${num(r.result.p99Ms, 1)} | ${r.result.errors === 0 ? 0 : `${r.result.errors} ${JSON.stringify(r.result.errorsByCode)}`} | ` +
      `${num(r.cpuUs.client)} | ${direct ? "-" : num(r.cpuUs.broker)} | ${direct ? "-" : num(r.cpuUs.frontend)} | ${num(r.cpuUs.backend)} | ` +
      `${num(100 * r.clientBusy)} % | ${num(r.clientGc.usPerRequest)} (${r.clientGc.full}) |`,
  );
}
for (const payload of payloads) {
  const [d, f] = [
    rows.find((r) => r.payload === payload && r.path === "backend directly"),
    rows.find((r) => r.payload === payload && r.path !== "backend directly"),
  ];
  if (!d || !f) continue;
  console.log(
    `${payload} (${PAYLOADS[payload]?.describe}): full/direct throughput ${(f.result.perSecond / d.result.perSecond).toFixed(2)}x, ` +
      `p99 added ${(f.result.p99Ms - d.result.p99Ms).toFixed(1)} ms`,
  );
}
console.log(
  "\nwhere a full-path request's time goes (closed loop above, means, ms; from the broker's and the frontend's own duration histograms)",
);
console.log("| payload | client's mean | to the broker having it, and back | broker to frontend, and back | frontend, backend and back |");
console.log("|---|---|---|---|---|");
for (const r of rows) {
  if (!r.hops) continue;
  console.log(
    `| ${r.payload} | ${num(r.result.meanMs, 1)} | ${num(r.hops.toBroker, 1)} | ${num(r.hops.brokerToFrontend, 1)} | ${num(r.hops.frontendAndBackend, 1)} |`,
  );
}
if (below.length > 0) {
  console.log(
    `\nlatency below saturation: open loop at ${latencyLoad} x the full path's throughput above, evenly spaced, ` +
      `${latencyRounds} windows of ${opts.duration} s per path in turn with the other path's, percentiles over each path's windows together`,
  );
  console.log(
    "| payload | req/s | direct p50 ms | direct p99 ms | full p50 ms | full p99 ms | p99 added ms | each window's p99 added ms | errors (direct, full) | CPU µs/req direct: client, backend | full: client, broker, frontend, backend |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const b of below) {
    const [d, f] = [b.direct.result, b.full.result];
    const [dc, fc] = [b.direct.cpuUs, b.full.cpuUs];
    console.log(
      `| ${b.payload} | ${b.rate} | ${num(d.p50Ms, 1)} | ${num(d.p99Ms, 1)} | ${num(f.p50Ms, 1)} | ${num(f.p99Ms, 1)} | ` +
        `${num(f.p99Ms - d.p99Ms, 1)} | ${b.roundsAddedMs.map((a) => num(a, 1)).join(", ")} | ${d.errors}, ${f.errors} | ${num(dc.client)}, ${num(dc.backend)} | ` +
        `${num(fc.client)}, ${num(fc.broker)}, ${num(fc.frontend)}, ${num(fc.backend)} |`,
    );
  }
}
