import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type LatencyProfile, parseProfileCsv } from "@infergrid/kairos";
import { control, InferenceServiceDefinition } from "@infergrid/proto";
import { createClient, type grpc, unaryCall } from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  RegistryWriter,
  type ServiceProcess,
  startAll,
  startNatsServer,
  startService,
} from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlWatch } from "./control-watch.js";

/**
 * Kairos's matching on real processes: one service whose model runs on two instance types, 2 fast ones
 * (g4dn.xlarge) and 3 cheap ones (t3.xlarge), with the Kairos artifact's measured profiles
 * (../shared/profiles/kairos-aws-4types.csv, read by path) of DIEN and its 35 ms QoS. Two frontends place each
 * request where it costs least for its batch size; the emulated backends sleep their own type's profile at
 * the request's batch. The registry is written as the allocator writes it (RegistryWriter): the allocator's
 * side of typed pools is tested with the allocator.
 */
const FAST = "g4dn.xlarge";
const CHEAP = "t3.xlarge";
const QOS_MS = 35;
const MODEL = "dien";

let nats: NatsServerHandle;
let writer: RegistryWriter;
let watch: ControlWatch;
let processes: ServiceProcess[] = [];
let client: grpc.Client;
const typeOf = new Map<string, string>();

function profile(table: Map<string, Map<string, LatencyProfile>>, type: string): control.InstanceProfile.$Properties {
  const p = table.get(type)?.get(MODEL);
  if (p === undefined) throw new Error(`no ${MODEL} profile for ${type} in the shared table`);
  return { instanceType: type, points: p.points.map((pt) => ({ batch: pt.batch, meanMs: pt.meanMs, p99Ms: pt.p99Ms })) };
}

beforeAll(async () => {
  const table = parseProfileCsv(readFileSync(join(import.meta.dirname, "../../../shared/profiles/kairos-aws-4types.csv"), "utf8"));
  nats = await startNatsServer();
  const env = {
    INFERGRID_NATS_URL: nats.url,
    INFERGRID_LOG_LEVEL: "warn",
    INFERGRID_HEARTBEAT_MS: "250",
    INFERGRID_SHUTDOWN_GRACE_MS: "1000",
  };
  const types = [FAST, FAST, CHEAP, CHEAP, CHEAP];
  processes = await startAll([
    ...types.map((t, i) =>
      startService("backend-worker", {
        name: `b${i}`,
        env: {
          ...env,
          INFERGRID_ID: `b${i}-${t === FAST ? "fast" : "cheap"}`,
          INFERGRID_INSTANCE_TYPE: t,
          INFERGRID_IDLE_TIMEOUT_MS: "600000",
        },
      }),
    ),
    ...[0, 1].map((i) => startService("frontend", { name: `f${i}`, env: { ...env, INFERGRID_ID: `frontend-${i}` } })),
    startService("broker", { env }),
  ]);
  const backends = processes.slice(0, 5);
  for (const [i, b] of backends.entries()) typeOf.set(b.ready.id ?? "", types[i] as string);
  writer = await RegistryWriter.open(nats.url);
  watch = await ControlWatch.open(nats.url);
  const spec: control.ServiceSpec.$Properties = {
    name: MODEL,
    model: {
      kind: control.ModelKind.MODEL_KIND_EMULATED,
      profile: { shape: 0, locMs: 10, scaleMs: 0 },
      coldStartMs: 100,
      instanceProfiles: [profile(table, FAST), profile(table, CHEAP)],
    },
    sla: { latencyThresholdMs: QOS_MS, percentile: 99, burstFactor: 2 },
    minBackends: 5,
    initialBackends: 5,
  };
  // Cheap ones first in the list: placement, not list order, must send the large queries to the fast type.
  await writer.assign(
    spec,
    [backends[2], backends[3], backends[4], backends[0], backends[1]] as ServiceProcess[],
    5,
    (b) => typeOf.get(b.ready.id ?? "") ?? "",
  );
  client = createClient(processes[7]?.ready.grpcAddress ?? "");
  await eventually("all five backends warm", () => (watch.warmBackends(MODEL).length === 5 ? true : undefined), 30_000, 200).catch(
    (err: unknown) => {
      console.log(JSON.stringify([...watch.backends.values()]));
      throw err;
    },
  );
}, 120_000);

afterAll(async () => {
  client?.close();
  await watch?.close();
  await writer?.close();
  await Promise.all(processes.map((p) => p.stop(3000)));
  await nats?.stop();
});

interface Served {
  batch: number;
  type: string;
  latencyMs: number;
  /** The backend's service time for it (drawn from its type's profile at the batch). */
  computeMs: number;
}

describe("Kairos's matching on real processes", () => {
  it("sends large queries to the fast type and small ones to the cheap type, each where its service time meets QoS", async () => {
    const served: Served[] = [];
    const failures: string[] = [];
    const calls: Promise<void>[] = [];
    // 8 queries/s for 12 s, alternating small (batch 10-90) and large (600-950) ones, open loop.
    for (let k = 0; k < 96; k++) {
      const batch = k % 2 === 0 ? 10 + ((k * 7) % 9) * 10 : 600 + ((k * 3) % 8) * 50;
      const sentAt = Date.now();
      calls.push(
        unaryCall(
          client,
          InferenceServiceDefinition.Infer,
          { service: MODEL, inputs: { x: { dims: [batch, 1], data: new Array<number>(batch).fill(1) } } },
          { deadline: sentAt + 5000 },
        ).then(
          (res) => {
            served.push({
              batch,
              type: typeOf.get(res.backendId ?? "") ?? "?",
              latencyMs: Date.now() - sentAt,
              computeMs: res.timing?.computeMs ?? Number.NaN,
            });
          },
          (err: unknown) => {
            failures.push(String(err));
          },
        ),
      );
      await new Promise((r) => setTimeout(r, 125));
    }
    await Promise.all(calls);
    const large = served.filter((s) => s.batch >= 600);
    const small = served.filter((s) => s.batch < 100);
    const share = (xs: Served[], type: string) => xs.filter((s) => s.type === type).length / Math.max(1, xs.length);
    const p = (xs: Served[], q: number) => {
      const sorted = xs.map((s) => s.latencyMs).sort((a, b) => a - b);
      return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
    };
    for (const [name, xs] of [
      ["small (batch 10-90)", small],
      ["large (batch 600-950)", large],
    ] as const) {
      console.log(
        `${name}: ${xs.length} answered; on ${FAST} ${(share(xs, FAST) * 100).toFixed(0)} %, on ${CHEAP} ${(share(xs, CHEAP) * 100).toFixed(0)} %; ` +
          `end-to-end latency p50 ${p(xs, 0.5)} ms, max ${p(xs, 1)} ms; service time max ${Math.max(...xs.map((x) => x.computeMs)).toFixed(1)} ms (QoS ${QOS_MS} ms)`,
      );
    }
    expect(failures).toEqual([]);
    expect(served.length).toBe(96);
    // A large query cannot meet QoS on t3.xlarge (DIEN at batch 600 takes 84 ms there): never sent there.
    expect(share(large, FAST)).toBe(1);
    // A small one costs less on the cheap type: at most 18 ms there, weighted by its heterogeneity coefficient
    // (0.15), against at least 6 ms on the fast one. Only a cheap instance believed busy sends one elsewhere.
    expect(share(small, CHEAP)).toBeGreaterThanOrEqual(0.9);
    // Each ran where its service time meets QoS: always for the large ones (the GPU's p99 is within 2 % of its
    // mean); the t3's measured p99 at batch 60 and 90 is above 35 ms, so a small one may miss now and then, as
    // the p99 target allows. (End to end, two gRPC hops through a broker and a frontend on a shared 2-core
    // machine add several ms to these ms-scale models: printed above, not asserted.)
    for (const s of large) expect(s.computeMs, `batch ${s.batch} on ${s.type}`).toBeLessThan(QOS_MS);
    expect(small.filter((s) => s.computeMs < QOS_MS).length / small.length).toBeGreaterThanOrEqual(0.95);
  }, 60_000);
});
