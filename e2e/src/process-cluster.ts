import { AllocatorAdminDefinition, control, InferenceServiceDefinition, type inference } from "@infergrid/proto";
import { createClient, grpc, isServiceError, unaryCall } from "@infergrid/runtime";
import {
  eventually,
  type NatsServerHandle,
  type NatsServerOptions,
  type ServiceProcess,
  startAll,
  startNatsServer,
  startService,
} from "@infergrid/testkit";
import { expect } from "vitest";

/** Fast time constants so a test sees whole control cycles in seconds. */
export const FAST = {
  INFERGRID_HEARTBEAT_MS: "250",
  INFERGRID_LOG_LEVEL: "info",
  INFERGRID_SHUTDOWN_GRACE_MS: "1000",
};

export interface TestCluster {
  nats: NatsServerHandle;
  allocator: ServiceProcess;
  backends: ServiceProcess[];
  frontends: ServiceProcess[];
  broker: ServiceProcess;
  brokerClient: grpc.Client;
  adminClient: grpc.Client;
  httpUrl: string;
  stop(): Promise<void>;
}

export interface ClusterShape {
  backends: number;
  frontends: number;
  backendEnv?: Record<string, string>;
  frontendEnv?: Record<string, string>;
  allocatorEnv?: Record<string, string>;
  brokerEnv?: Record<string, string>;
  /** Given to every service (before the per-role env), e.g. NATS auth and TLS settings. */
  env?: Record<string, string>;
  /** Given to one instance by its id (allocator, backend-<i>, frontend-<i>, broker), after the rest: its own credentials. */
  instanceEnv?: (id: string) => Record<string, string>;
  /** Options of the nats-server (extra arguments for TLS and auth). */
  nats?: NatsServerOptions;
  /** Credentials of the test's own gRPC clients (brokerClient, adminClient); plaintext by default. */
  grpcClient?: { credentials: grpc.ChannelCredentials; options?: grpc.ChannelOptions };
}

/** Starts NATS, the allocator, backends, frontends and a broker as real processes. */
export async function startCluster(shape: ClusterShape): Promise<TestCluster> {
  const nats = await startNatsServer(shape.nats);
  const started: ServiceProcess[] = [];
  /** `id`: the instance's INFERGRID_ID (undefined: the process makes its own) and the key of its instanceEnv. */
  const env = (id: string | undefined, extra: Record<string, string> = {}) => ({
    ...FAST,
    INFERGRID_NATS_URL: nats.url,
    ...shape.env,
    ...(id === undefined ? {} : { INFERGRID_ID: id }),
    ...extra,
    ...(id === undefined ? {} : shape.instanceEnv?.(id)),
  });
  // Fixed ids for the allocator and the broker only when a test keys its settings by them.
  const keyed = (id: string) => (shape.instanceEnv ? id : undefined);
  const client = (address: string) =>
    shape.grpcClient === undefined
      ? createClient(address)
      : new grpc.Client(address, shape.grpcClient.credentials, shape.grpcClient.options ?? {});
  try {
    const allocator = await startService("global-allocator", {
      env: env(keyed("allocator"), { INFERGRID_BACKEND_TTL_MS: "1500", INFERGRID_CONTROL_PERIOD_MS: "250", ...shape.allocatorEnv }),
    });
    started.push(allocator);
    // Every start is awaited to its end (none left half-started), then any failure stops them all.
    const starts = [
      ...Array.from({ length: shape.backends }, (_, i) =>
        startService("backend-worker", { name: `backend-${i}`, env: env(`backend-${i}`, shape.backendEnv) }),
      ),
      ...Array.from({ length: shape.frontends }, (_, i) =>
        startService("frontend", {
          name: `frontend-${i}`,
          env: env(`frontend-${i}`, { INFERGRID_AUTOSCALE_MS: "250", ...shape.frontendEnv }),
        }),
      ),
      startService("broker", { env: env(keyed("broker"), { INFERGRID_FRONTEND_TTL_MS: "2000", ...shape.brokerEnv }) }),
    ];
    const up = await startAll(starts);
    started.push(...up);
    const backends = up.slice(0, shape.backends);
    const frontends = up.slice(shape.backends, shape.backends + shape.frontends);
    const broker = up[up.length - 1] as ServiceProcess;
    const brokerClient = client(broker.ready.grpcAddress ?? "");
    const adminClient = client(allocator.ready.grpcAddress ?? "");
    return {
      nats,
      allocator,
      backends,
      frontends,
      broker,
      brokerClient,
      adminClient,
      httpUrl: `http://${broker.ready.httpAddress}`,
      stop: async () => {
        brokerClient.close();
        adminClient.close();
        await Promise.all(started.map((p) => p.stop(3000)));
        await nats.stop();
      },
    };
  } catch (err) {
    await Promise.all(started.map((p) => p.kill()));
    await nats.stop();
    throw err;
  }
}

export function emulatedSpec(
  name: string,
  options: {
    locMs?: number;
    scaleMs?: number;
    shape?: number;
    coldStartMs?: number;
    maxBackends?: number;
    initialBackends?: number;
    rtMaxMs?: number;
  } = {},
): control.ServiceSpec.$Properties {
  return {
    name,
    model: {
      kind: control.ModelKind.MODEL_KIND_EMULATED,
      profile: { shape: options.shape ?? 0.3, locMs: options.locMs ?? 2, scaleMs: options.scaleMs ?? 3 },
      coldStartMs: options.coldStartMs ?? 100,
    },
    sla: { latencyThresholdMs: options.rtMaxMs ?? 200, percentile: 99, burstFactor: 2 },
    minBackends: 1,
    maxBackends: options.maxBackends ?? 0,
    initialBackends: options.initialBackends ?? 1,
  };
}

export async function registerService(
  cluster: TestCluster,
  spec: control.ServiceSpec.$Properties,
): Promise<control.ServiceEntry.$Properties> {
  const reply = await unaryCall(cluster.adminClient, AllocatorAdminDefinition.RegisterService, { spec }, { deadline: Date.now() + 5000 });
  return reply.entry ?? {};
}

/** `metadata`: sent with the call (a client token: `authorization: Bearer <token>`). */
export function infer(
  cluster: TestCluster,
  request: inference.InferRequest.$Properties,
  timeoutMs = 10_000,
  metadata?: grpc.Metadata,
): Promise<inference.InferResponse.$Properties> {
  return unaryCall(cluster.brokerClient, InferenceServiceDefinition.Infer, request, { deadline: Date.now() + timeoutMs, metadata });
}

/** Sends `n` requests to `service` through the broker at once and expects every one answered (none failed). */
export async function expectAllAnswered(cluster: TestCluster, service: string, n: number): Promise<void> {
  const results = await Promise.allSettled(
    Array.from({ length: n }, () => infer(cluster, { service, inputs: { x: { dims: [1], data: [1] } } }, 5000)),
  );
  const failed = results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason));
  expect(failed, "requests that failed").toEqual([]);
}

/** Waits until a request to `service` succeeds through the broker (lists assigned, warm). */
export function waitUntilServing(
  cluster: TestCluster,
  service: string,
  inputs: inference.InferRequest.$Properties["inputs"] = {},
  timeoutMs = 30_000,
): Promise<inference.InferResponse.$Properties> {
  return eventually(`${service} to serve`, async () => infer(cluster, { service, inputs }, 2000), timeoutMs, 200);
}

/** One call on a fresh channel; the channel is closed after. */
export async function callWith<Req, Res>(
  address: string,
  credentials: grpc.ChannelCredentials,
  method: grpc.MethodDefinition<Req, Res>,
  request: Req,
  options: grpc.ChannelOptions = {},
): Promise<{ ok: true; value: Res } | { ok: false; code: grpc.status; details: string }> {
  const client = new grpc.Client(address, credentials, options);
  try {
    return { ok: true, value: await unaryCall(client, method, request, { deadline: Date.now() + 3000 }) };
  } catch (err) {
    if (isServiceError(err)) return { ok: false, code: err.code, details: err.details };
    throw err;
  } finally {
    client.close();
  }
}
