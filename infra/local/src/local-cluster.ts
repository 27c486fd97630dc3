import { existsSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { NatsRole } from "@infergrid/control-plane";
import type { RestartBackoffOptions } from "@infergrid/core";
import { type grpc, type NatsOptions, SERVICE_NODE_FLAGS } from "@infergrid/runtime";
import {
  CLI_ADMIN_ID,
  CLI_CLIENT_ID,
  findNatsServer,
  GRPC_CHANNEL_OPTIONS,
  makeNatsIdentities,
  makeTlsIdentities,
  poolBackendEnv,
  poolBackendTlsEnv,
  type ServiceName,
  serviceEntry,
  type TlsRole,
} from "@infergrid/testkit";
import type { ScalingPolicy } from "./options.js";
import { type ChildHandle, type SpawnOptions, startLoggedNats, startLoggedService } from "./processes.js";
import { pinnedPortEnv, type Relaunch, type RestartCounts, type Supervised, type SupervisionEvent, Supervisor } from "./supervisor.js";

/**
 * Time constants for a demo that replays hours in minutes: the services' defaults are the papers'
 * (t_setup 10 s, rate history 500 s, scale-in cooldown 10 min) and would hardly move within a
 * run. All members share one heartbeat period (the allocator's ttl is three of them).
 */
export const DEMO_TIMING = {
  heartbeatMs: 500,
  shutdownGraceMs: 2_000,
  allocatorControlPeriodMs: 1_000,
  tSetupMs: 5_000,
  autoscaleMs: 500,
  loadReportMs: 1_000,
  rateWindowMs: 5_000,
  rateHistoryMs: 60_000,
  scaleInCooldownMs: 15_000,
  predictorWindowMs: 5_000,
  brokerFrontendTtlMs: 1_500,
  /** The Faro loop at demo speed: a solve every 6 predictor windows, violations judged every 2 s. */
  solvePeriodMs: 30_000,
  reactiveTickMs: 2_000,
  forecastMaxAgeMs: 15_000,
  plannedColdStartMs: 1_000,
} as const;

/**
 * Restarts of a process that died (Kubernetes' CrashLoopBackOff at demo speed; the kubelet waits 10 s doubling
 * to 5 min, and trusts a container again after 10 min of running). The first restart after 1 s: about when the
 * control plane has noticed the death (three 500 ms heartbeats), and a node service needs about that long to
 * load anyway. Doubling to 30 s (five doublings, as 10 s to 5 min): a process that keeps dying costs one
 * start (about a CPU-second of module loading) every 30 s, little beside the services on a two-core machine,
 * and is still tried several times in a default run of 4 minutes. Reset after 60 s of running, twice the cap
 * as Kubernetes' 10 min are twice its 5: longer than any start-up, shorter than a run, so a process that
 * crashed once early and then ran a minute starts again from 1 s.
 */
export const DEMO_RESTART_BACKOFF: RestartBackoffOptions = { initialMs: 1_000, factor: 2, maxMs: 30_000, resetAfterMs: 60_000 };

/** What happens to a process that dies once the cluster is up. */
export interface Supervision {
  /** false: it is reported and stays down (--no-restart). */
  restart: boolean;
  /** A process died, was restarted, or did not come back (live progress). */
  onEvent?: (event: SupervisionEvent) => void;
  backoff?: RestartBackoffOptions;
}

/** One per-type pool of the heterogeneous mode: the type, its hourly price, and how many backends it holds. */
export interface TypedPoolShape {
  name: string;
  pricePerHour: number;
  maxCount: number;
}

export interface ClusterShape {
  /** Backend-workers this process starts (0 with typedPools: the allocator starts them). */
  backends: number;
  /**
   * Heterogeneous mode: the allocator's own typed pools (--pool-actuator local --pool-types ...) start the
   * backends, each with INFERGRID_INSTANCE_TYPE, exactly maxCount of each type (the pool's size is pinned to
   * their sum). The allocator's path is the one production takes (a Deployment per type), so the local
   * cluster uses it rather than starting typed backends itself.
   */
  typedPools?: readonly TypedPoolShape[];
  /** More of the allocator's environment (the vertical-scaling mode's pool and Themis settings), given the NATS URL. */
  allocatorEnv?: (natsUrl: string) => Record<string, string>;
  frontends: number;
  policy: ScalingPolicy;
  idleTimeoutMs: number;
  /** Backends harvest their idle time for best-effort jobs (--harvest). */
  harvest?: boolean;
  logLevel: string;
  runDir: string;
  /** Port of the live web console (0: any free port). */
  consolePort: number;
  /**
   * Every process on NATS as its own user with its role's permissions, NATS over TLS, gRPC mutual TLS with a
   * certificate naming each process's role and peer roles enforced (docs/security.md); false: one open NATS
   * server and plaintext gRPC.
   */
  secure: boolean;
}

export type NatsObserver = Pick<NatsOptions, "user" | "pass" | "tls">;

export interface Cluster {
  /** The same for the whole run: a restarted nats-server takes the first one's port. */
  natsUrl: string;
  /** Its gRPC address stays the same across restarts (pinned port), as the broker's and the console's. */
  allocator: Supervised;
  broker: Supervised;
  /** The live web console (its ready line's httpAddress). */
  console: Supervised;
  /** This CLI's own read-only connections to NATS: its user and TLS files (undefined: the server is open). */
  natsObserver: NatsObserver | undefined;
  /**
   * This CLI's gRPC credentials towards the broker (client) and the allocator's admin API (admin), with the
   * channel options every client needs (GRPC_CHANNEL_OPTIONS); undefined: plaintext.
   */
  grpcCallers: { client: grpc.ChannelCredentials; admin: grpc.ChannelCredentials; channelOptions: grpc.ChannelOptions } | undefined;
  /** Every process, in start order (nats-server first), each restarted when it dies until the cluster stops. */
  all(): Supervised[];
  /** No restart from now on (the first Ctrl-C); `stop` does this first. */
  stopRestarts(): void;
  restarts(): RestartCounts;
  /** Stops the services front to back (broker, frontends, backends, control plane), then nats-server. */
  stop(timeoutMs: number): Promise<void>;
}

const SERVICES: ServiceName[] = ["global-allocator", "predictor", "backend-worker", "frontend", "broker", "console"];

/** The compiled services this needs, with a hint when one is missing. */
export function missingServices(): string[] {
  return SERVICES.filter((s) => !existsSync(serviceEntry(s))).map((s) => serviceEntry(s));
}

/** Environment of one service: INFERGRID_ + the SNAKE_CASE of its config key. */
export function serviceEnv(
  shape: ClusterShape,
  natsUrl: string,
  role: "allocator" | "predictor" | "backend" | "frontend" | "broker" | "console",
  id: string,
): Record<string, string> {
  const common = {
    INFERGRID_NATS_URL: natsUrl,
    INFERGRID_ID: id,
    INFERGRID_LOG_LEVEL: shape.logLevel,
    INFERGRID_HEARTBEAT_MS: String(DEMO_TIMING.heartbeatMs),
    INFERGRID_SHUTDOWN_GRACE_MS: String(DEMO_TIMING.shutdownGraceMs),
  };
  switch (role) {
    case "allocator":
      return {
        ...common,
        INFERGRID_CONTROL_PERIOD_MS: String(DEMO_TIMING.allocatorControlPeriodMs),
        ...(shape.typedPools === undefined ? {} : typedPoolEnv(shape, shape.typedPools, natsUrl)),
        ...(shape.allocatorEnv?.(natsUrl) ?? {}),
        ...(shape.policy === "infergrid"
          ? {
              INFERGRID_POLICY: "faro",
              INFERGRID_SOLVE_PERIOD_MS: String(DEMO_TIMING.solvePeriodMs),
              INFERGRID_REACTIVE_TICK_MS: String(DEMO_TIMING.reactiveTickMs),
              INFERGRID_FORECAST_MAX_AGE_MS: String(DEMO_TIMING.forecastMaxAgeMs),
              INFERGRID_PLANNED_COLD_START_MS: String(DEMO_TIMING.plannedColdStartMs),
            }
          : {}),
      };
    case "predictor":
      return { ...common, INFERGRID_WINDOW_MS: String(DEMO_TIMING.predictorWindowMs) };
    case "backend":
      // A fixed allocation keeps its backends: they never decommission themselves.
      return {
        ...common,
        INFERGRID_IDLE_TIMEOUT_MS: String(shape.policy === "fixed-peak" ? 86_400_000 : shape.idleTimeoutMs),
        INFERGRID_T_SETUP_MS: String(DEMO_TIMING.tSetupMs),
        ...(shape.harvest ? { INFERGRID_HARVEST: "true" } : {}),
      };
    case "frontend":
      return {
        ...common,
        INFERGRID_SCALING: shape.policy === "swayam" || shape.policy === "infergrid" ? "swayam" : "static",
        INFERGRID_T_SETUP_MS: String(DEMO_TIMING.tSetupMs),
        INFERGRID_AUTOSCALE_MS: String(DEMO_TIMING.autoscaleMs),
        INFERGRID_LOAD_REPORT_MS: String(DEMO_TIMING.loadReportMs),
        INFERGRID_RATE_WINDOW_MS: String(DEMO_TIMING.rateWindowMs),
        INFERGRID_RATE_HISTORY_MS: String(DEMO_TIMING.rateHistoryMs),
        INFERGRID_SCALE_IN_COOLDOWN_MS: String(DEMO_TIMING.scaleInCooldownMs),
      };
    case "broker":
      return { ...common, INFERGRID_FRONTEND_TTL_MS: String(DEMO_TIMING.brokerFrontendTtlMs) };
    case "console":
      return { ...common, INFERGRID_HTTP_PORT: String(shape.consolePort), INFERGRID_STALE_MS: String(3.5 * DEMO_TIMING.heartbeatMs) };
  }
}

/**
 * The allocator's typed pools, sized to exactly the given backends per type: the price list caps each
 * type's pool at its maxCount, and the pool's size is pinned to their sum (min = max, no headroom), so
 * splitPoolSize fills every type to its count. Backends are the allocator's children and inherit its
 * environment (libs/pool-actuator's local actuator), so their own settings go here too; their output goes to
 * the allocator's log at debug level, not to files of their own.
 */
function typedPoolEnv(shape: ClusterShape, pools: readonly TypedPoolShape[], natsUrl: string): Record<string, string> {
  const total = pools.reduce((a, p) => a + p.maxCount, 0);
  const backend = serviceEnv({ ...shape, typedPools: undefined }, natsUrl, "backend", "");
  const { INFERGRID_ID: _id, ...backendOnly } = backend;
  return {
    ...backendOnly,
    INFERGRID_POOL_ACTUATOR: "local",
    INFERGRID_POOL_BACKEND_ENTRY: serviceEntry("backend-worker"),
    INFERGRID_POOL_TYPES: pools.map((p) => p.name).join(","),
    INFERGRID_INSTANCE_TYPES: JSON.stringify(pools.map((p) => ({ name: p.name, pricePerHour: p.pricePerHour, maxCount: p.maxCount }))),
    INFERGRID_POOL_MIN_SIZE: String(total),
    INFERGRID_POOL_MAX_SIZE: String(total),
    INFERGRID_POOL_HEADROOM: "0",
  };
}

const pad = (i: number) => String(i).padStart(2, "0");

/** Like Promise.all, but waits for every start to end before failing, so none is left half-started. */
async function allStarted<T>(starts: Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(starts);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/**
 * Starts nats-server, the allocator and predictor, then the backends, frontends and broker (in
 * parallel: on a small machine most of the wait is node loading modules). On any failure what
 * was started is killed and the error names the log to read.
 */
export async function startCluster(
  shape: ClusterShape,
  progress: (msg: string) => void,
  aborted: () => boolean = () => false,
  supervision: Supervision = { restart: true },
): Promise<Cluster> {
  const backendIds = Array.from({ length: shape.backends }, (_, i) => `backend-${pad(i)}`);
  const frontendIds = Array.from({ length: shape.frontends }, (_, i) => `frontend-${i}`);
  const members: { id: string; role: TlsRole & NatsRole }[] = [
    { id: "allocator", role: "allocator" },
    { id: "predictor", role: "predictor" },
    { id: "console", role: "console" },
    { id: "broker", role: "broker" },
    ...backendIds.map((id) => ({ id, role: "backend" as const })),
    ...frontendIds.map((id) => ({ id, role: "frontend" as const })),
  ];
  const identities = shape.secure ? makeNatsIdentities(shape.runDir, members) : undefined;
  const tls = shape.secure ? makeTlsIdentities(shape.runDir, members) : undefined;
  let natsArgs: string[] = [];
  if (identities && tls) {
    const conf = join(shape.runDir, "nats-server.conf");
    // nats-server resolves an include against the including file's directory, even an absolute path.
    writeFileSync(conf, `include ${JSON.stringify(relative(shape.runDir, identities.confPath))}\n${tls.natsServerTls}`, { mode: 0o600 });
    natsArgs = ["-c", conf];
  }
  const nats = await startLoggedNats(findNatsServer(), shape.runDir, natsArgs);
  /** A service's environment with its own identity (the allocator also hands one to the backends it starts). */
  const envOf = (role: Parameters<typeof serviceEnv>[2], id: string) => ({
    ...serviceEnv(shape, nats.url, role, id),
    ...identities?.env(id),
    ...tls?.env(id),
    ...(identities && role === "allocator" ? poolBackendEnv(identities) : {}),
    ...(tls && role === "allocator" ? poolBackendTlsEnv(tls) : {}),
  });
  const started: ChildHandle[] = [nats];
  const relaunchers = new Map<ChildHandle, Relaunch<ChildHandle>>();
  /** `stableAddress`: a restart keeps the ports of the first start (the CLI holds or prints its addresses). */
  const start = async (service: ServiceName, name: string, env: Record<string, string>, stableAddress = false) => {
    // Ctrl-C between two starts: start nothing more (the failure unwinds what is running).
    if (aborted()) throw new Error("interrupted");
    const spawn: SpawnOptions & { readyTimeoutMs: number } = {
      name,
      command: process.execPath,
      args: [...SERVICE_NODE_FLAGS, serviceEntry(service)],
      env,
      logDir: shape.runDir,
      readyTimeoutMs: 60_000,
    };
    const child = await startLoggedService(spawn);
    started.push(child);
    const again = { ...spawn, env: { ...env, ...(stableAddress ? pinnedPortEnv(child.ready) : {}) } };
    relaunchers.set(child, (_previous, signal) => startLoggedService({ ...again, signal }));
    return child;
  };
  try {
    progress(`nats-server at ${nats.url}`);
    const [allocator, , web] = await allStarted([
      start("global-allocator", "global-allocator", envOf("allocator", "allocator"), true),
      start("predictor", "predictor", envOf("predictor", "predictor")),
      start("console", "console", envOf("console", "console"), true),
    ]);
    if (!allocator || !web) throw new Error("global-allocator or console did not start");
    progress(`global-allocator at ${allocator.ready.grpcAddress}, predictor, console at http://${web.ready.httpAddress}/`);
    const rest = await allStarted([
      ...backendIds.map((id) => start("backend-worker", id, envOf("backend", id))),
      ...frontendIds.map((id) => start("frontend", id, envOf("frontend", id))),
      start("broker", "broker", envOf("broker", "broker"), true),
    ]);
    const broker = rest[rest.length - 1];
    if (!broker) throw new Error("broker did not start");
    const pools = shape.typedPools?.map((p) => `${p.name} x${p.maxCount}`).join(", ");
    const backends =
      pools !== undefined
        ? `backend-workers from the allocator's typed pools (${pools})`
        : shape.backends === 0 && shape.allocatorEnv
          ? "backend-workers from the allocator's pool"
          : `${shape.backends} backend-workers`;
    progress(
      `${backends}, ${shape.frontends} frontends (${shape.policy}), broker at ${broker.ready.grpcAddress} ` +
        `(HTTP: http://${broker.ready.httpAddress}/v1/infer, and the Open Inference Protocol's /v2/models/<service>/infer)`,
    );
    // Supervised from here on: until now a process that dies fails the start (its log says why).
    const supervisor = new Supervisor({
      backoff: supervision.backoff ?? DEMO_RESTART_BACKOFF,
      restart: supervision.restart,
      ...(supervision.onEvent ? { onEvent: supervision.onEvent } : {}),
    });
    // nats-server again on its port with its store: JetStream (the registry) survives, the services reconnect.
    const slots: Supervised[] = started.map((c) =>
      c === nats
        ? supervisor.supervise(nats, (previous) => previous.relaunch())
        : supervisor.supervise(c, relaunchers.get(c) as Relaunch<ChildHandle>),
    );
    const slotOf = (c: ChildHandle) => slots[started.indexOf(c)] as Supervised;
    return {
      natsUrl: nats.url,
      allocator: slotOf(allocator),
      broker: slotOf(broker),
      console: slotOf(web),
      natsObserver: identities && tls ? { ...identities.observer, tls: tls.files(CLI_CLIENT_ID) } : undefined,
      grpcCallers: tls
        ? { client: tls.grpcCredentials(CLI_CLIENT_ID), admin: tls.grpcCredentials(CLI_ADMIN_ID), channelOptions: GRPC_CHANNEL_OPTIONS }
        : undefined,
      all: () => [...slots],
      stopRestarts: () => supervisor.stopRestarts(),
      restarts: () => supervisor.restarts(),
      stop: async (timeoutMs) => {
        supervisor.stopRestarts();
        const role = (c: ChildHandle) =>
          c.name === "broker" ? 0 : c.name.startsWith("frontend") ? 1 : c.name.startsWith("backend") ? 2 : c.name === "nats-server" ? 4 : 3;
        for (let stage = 0; stage <= 4; stage++) {
          await Promise.all(slots.filter((c) => role(c) === stage).map((c) => c.stop(timeoutMs)));
        }
      },
    };
  } catch (err) {
    for (const c of started) c.kill();
    await Promise.all(started.map((c) => c.exited));
    throw err;
  }
}
