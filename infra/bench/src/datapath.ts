/**
 * Data-path benchmark: requests/s and p50/p99 latency through broker -> frontend -> backend,
 * against calling the same backend directly, in one run, on a zero-time emulated model (so
 * what is measured is the serving system, not a model). Real processes, real gRPC, real NATS.
 *
 *   npm run bench:datapath -- --duration 10 --concurrency 32
 */
import { BackendServiceDefinition, control, InferenceServiceDefinition } from "@infergrid/proto";
import { createClient, unaryCall } from "@infergrid/runtime";
import { eventually, RegistryWriter, startNatsServer, startService } from "@infergrid/testkit";
import { Command } from "commander";
import { closedLoop, type LoopResult } from "./closed-loop.js";

const program = new Command()
  .name("bench:datapath")
  .option("--duration <seconds>", "measured seconds per path", "10")
  .option("--warmup <seconds>", "unmeasured seconds before each path", "2")
  .option("--concurrency <n>", "requests in flight (closed loop)", "32")
  .parse();
const opts = program.opts<{ duration: string; warmup: string; concurrency: string }>();
const durationMs = Number(opts.duration) * 1000;
const warmupMs = Number(opts.warmup) * 1000;
const concurrency = Number(opts.concurrency);
if (!(durationMs > 0 && warmupMs >= 0 && Number.isInteger(concurrency) && concurrency > 0)) {
  program.error("--duration and --concurrency must be positive numbers, --warmup non-negative");
}

const nats = await startNatsServer();
const env = { INFERGRID_NATS_URL: nats.url, INFERGRID_LOG_LEVEL: "warn" };
const backend = await startService("backend-worker", { env: { ...env, INFERGRID_ID: "bench-backend", INFERGRID_CONCURRENCY: "64" } });
const frontend = await startService("frontend", { env: { ...env, INFERGRID_SCALING: "static" } });
const broker = await startService("broker", { env });
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
const inputs = { x: { dims: [4], data: [1, 2, 3, 4] } };

const rows: Array<[string, LoopResult]> = [];
try {
  await eventually(
    "the path to serve",
    () => unaryCall(brokerClient, InferenceServiceDefinition.Infer, { service: "zero", inputs }, { deadline: Date.now() + 2000 }),
    30_000,
    200,
  );
  const direct = await closedLoop(
    () =>
      unaryCall(
        backendClient,
        BackendServiceDefinition.Execute,
        { service: "zero", frontendId: "bench", inputs, attempt: 1 },
        { deadline: Date.now() + 5000 },
      ),
    concurrency,
    warmupMs,
    durationMs,
  );
  rows.push(["backend directly", direct]);
  const full = await closedLoop(
    () => unaryCall(brokerClient, InferenceServiceDefinition.Infer, { service: "zero", inputs }, { deadline: Date.now() + 5000 }),
    concurrency,
    warmupMs,
    durationMs,
  );
  rows.push(["broker -> frontend -> backend", full]);
} finally {
  brokerClient.close();
  backendClient.close();
  await writer.close();
  await Promise.all([broker.stop(), frontend.stop(), backend.stop()]);
  await nats.stop();
}

const fmt = (n: number, d = 1) => n.toFixed(d).padStart(9);
console.log(`\ndata path, zero-time model, closed loop, concurrency ${concurrency}, ${opts.duration} s per path (node ${process.version})`);
console.log(`${"path".padEnd(32)}${"req/s".padStart(9)}${"p50 ms".padStart(9)}${"p99 ms".padStart(9)}${"errors".padStart(9)}`);
for (const [name, r] of rows) console.log(`${name.padEnd(32)}${fmt(r.perSecond)}${fmt(r.p50Ms, 2)}${fmt(r.p99Ms, 2)}${fmt(r.errors, 0)}`);
const [d, f] = [rows[0]?.[1], rows[1]?.[1]];
if (d && f) {
  console.log(
    `ratio full/direct: throughput ${(f.perSecond / d.perSecond).toFixed(2)}x, p50 ${(f.p50Ms / d.p50Ms).toFixed(2)}x, p99 ${(f.p99Ms / d.p99Ms).toFixed(2)}x`,
  );
}
