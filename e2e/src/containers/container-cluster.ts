import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AllocatorAdminDefinition, type admin, type control, InferenceServiceDefinition, type inference } from "@infergrid/proto";
import { createClient, type grpc, type NatsOptions, unaryCall } from "@infergrid/runtime";
import {
  CLI_ADMIN_ID,
  CLI_CLIENT_ID,
  GRPC_CHANNEL_OPTIONS,
  makeNatsIdentities,
  makeTlsIdentities,
  type NatsIdentities,
  type TlsIdentities,
  type TlsRole,
} from "@infergrid/testkit";
import { GenericContainer, getContainerRuntimeClient, Network, type StartedNetwork, type StartedTestContainer, Wait } from "testcontainers";

/**
 * The whole system as containers on a private network, as `npm run images` built them: a real
 * NATS (JetStream) and every service, each in its own container, reached by name inside the network.
 * Secure by default, as `npm start` and the production overlay run it (docs/security.md): every
 * container connects to NATS over TLS as its own user with its role's permissions, and speaks gRPC
 * with mutual TLS and peer roles, with a certificate from a throwaway CA made for the run; each
 * container gets only its own password, certificate and key (copied in at the paths its environment
 * names). `secure: false`: one NATS account for all, plaintext gRPC. The test process is outside it and reaches the broker, the allocator's
 * admin API and NATS through published ports. Each container's host port is fixed at creation, so
 * a container that is stopped and started again (a restart after a crash) keeps its address.
 */

export const imageTag = process.env.INFERGRID_IMAGE_TAG ?? "local";
export const image = (name: string) => `localhost/${name}:${imageTag}`;

/** Short time constants so drills see whole control cycles in seconds. */
export const FAST = {
  INFERGRID_HEARTBEAT_MS: "250",
  INFERGRID_SHUTDOWN_GRACE_MS: "1000",
  INFERGRID_LOG_LEVEL: "info",
};

export type Role = "nats" | "broker" | "frontend" | "backend-worker" | "predictor" | "global-allocator" | "console";

export interface Node {
  name: string;
  role: Role;
  container: StartedTestContainer;
  /** host port -> container port (fixed for the container's life, restarts included). */
  hostPort(containerPort: number): number;
  logs: string[];
}

export interface ClusterShape {
  frontends: number;
  backends: number;
  predictor?: boolean;
  backendEnv?: Record<string, string>;
  frontendEnv?: Record<string, string>;
  allocatorEnv?: Record<string, string>;
  brokerEnv?: Record<string, string>;
  /** Default true: per-process NATS identities over TLS, gRPC mutual TLS with peer roles. */
  secure?: boolean;
}

/** Which role's certificate and NATS permissions a container of this image gets. */
const IDENTITY_ROLE: Record<Exclude<Role, "nats">, TlsRole> = {
  broker: "broker",
  frontend: "frontend",
  "backend-worker": "backend",
  predictor: "predictor",
  "global-allocator": "allocator",
  console: "console",
};

/** Frontends a drill may start beyond the first ones (replacement pods), each with an identity made at start. */
const SPARE_FRONTENDS = 2;

/** What a secure run made: the identities and the directory holding them on the host. */
interface Security {
  dir: string;
  nats: NatsIdentities;
  tls: TlsIdentities;
  /** Each identity's role: a container is started only under an identity of its image's role. */
  roles: Map<string, TlsRole>;
}

/**
 * The first of the kernel's ephemeral ports (outgoing connections' local ports): a host port chosen among them can
 * be taken by any connection between the check and podman's bind (seen in CI: "bind: address already in use").
 */
function ephemeralLow(): number {
  try {
    const lo = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    if (Number.isInteger(lo)) return lo;
  } catch {
    // Not Linux: the IANA range.
  }
  return 49152;
}

/** Host ports are drawn from [PORT_BASE, PORT_TOP): below the ephemeral range. */
const PORT_TOP = ephemeralLow();
const PORT_BASE = Math.max(1024, Math.min(20_000, PORT_TOP - 10_000));

const handedOut = new Set<number>();

/** Names a service's container within its cluster, so that one that failed to start can be found and removed. */
const NODE_LABEL = "infergrid.e2e.node";

/** True if nothing listens on the port on any IPv4 address (podman publishes on 0.0.0.0). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "0.0.0.0", () => s.close(() => resolve(true)));
  });
}

/** A host port below the ephemeral range, free now and not handed out before by this process. */
async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = PORT_BASE + Math.floor(Math.random() * (PORT_TOP - PORT_BASE));
    if (handedOut.has(port) || !(await bindable(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free host port in ${PORT_BASE}-${PORT_TOP - 1}`);
}

export class ContainerCluster {
  readonly nodes = new Map<string, Node>();
  /** The NATS account every service uses when the cluster is not secure; a fresh password per run. */
  private readonly openNatsUser = "infergrid";
  /** Tells this cluster's containers from another run's. */
  private readonly clusterId = randomBytes(6).toString("hex");
  private readonly openNatsPass = randomBytes(18).toString("base64url");
  brokerClient!: grpc.Client;
  adminClient!: grpc.Client;

  private constructor(
    readonly network: StartedNetwork,
    private readonly shape: ClusterShape,
    private readonly security: Security | undefined,
  ) {}

  static async start(shape: ClusterShape): Promise<ContainerCluster> {
    const security = shape.secure === false ? undefined : makeSecurity(shape);
    let network: StartedNetwork;
    try {
      network = await new Network().start();
    } catch (err) {
      if (security) rmSync(security.dir, { recursive: true, force: true });
      throw err;
    }
    const cluster = new ContainerCluster(network, shape, security);
    try {
      await cluster.startNats();
      await cluster.startService("global-allocator", "allocator", {
        INFERGRID_BACKEND_TTL_MS: "1500",
        INFERGRID_CONTROL_PERIOD_MS: "250",
        ...shape.allocatorEnv,
      });
      // allSettled: when one start fails the others still finish (and are tracked) before the
      // cleanup below stops them, so a failed start leaves no container behind.
      const started = await Promise.allSettled([
        shape.predictor ? cluster.startService("predictor", "predictor", { INFERGRID_WINDOW_MS: "1000" }) : undefined,
        ...Array.from({ length: shape.backends }, (_, i) => cluster.startBackend(i)),
        ...Array.from({ length: shape.frontends }, (_, i) => cluster.startFrontend(i)),
        cluster.startService(
          "broker",
          "broker",
          { INFERGRID_FRONTEND_TTL_MS: "1000", INFERGRID_EJECT_MS: "1000", ...shape.brokerEnv },
          [8080],
        ),
      ]);
      const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed) throw failed.reason;
      const tls = security?.tls;
      cluster.brokerClient = createClient(
        `127.0.0.1:${cluster.node("broker").hostPort(50051)}`,
        tls?.grpcCredentials(CLI_CLIENT_ID),
        tls ? GRPC_CHANNEL_OPTIONS : {},
      );
      cluster.adminClient = createClient(
        `127.0.0.1:${cluster.node("allocator").hostPort(50051)}`,
        tls?.grpcCredentials(CLI_ADMIN_ID),
        tls ? GRPC_CHANNEL_OPTIONS : {},
      );
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  node(name: string): Node {
    const n = this.nodes.get(name);
    if (!n) throw new Error(`no container ${name}`);
    return n;
  }

  get natsUrlFromHost(): string {
    return `nats://127.0.0.1:${this.node("nats").hostPort(4222)}`;
  }

  get secure(): boolean {
    return this.security !== undefined;
  }

  /** How the test process connects to NATS from the host: read-only observer (secure) or the shared account. */
  natsFromHost(name: string): NatsOptions {
    const s = this.security;
    if (!s) return { servers: this.natsUrlFromHost, name, user: this.openNatsUser, pass: this.openNatsPass };
    return { servers: this.natsUrlFromHost, name, ...s.nats.observer, tls: s.tls.files(CLI_CLIENT_ID) };
  }

  /** The test process's gRPC credentials as the CLI's client or admin identity (use with GRPC_CHANNEL_OPTIONS). */
  callerCredentials(as: "client" | "admin"): grpc.ChannelCredentials {
    const tls = this.security?.tls;
    if (!tls) throw new Error("the cluster is not secure: no caller certificates");
    return tls.grpcCredentials(as === "client" ? CLI_CLIENT_ID : CLI_ADMIN_ID);
  }

  /** Every NATS password of the run: none may appear in a container's log. */
  natsPasswords(): string[] {
    const s = this.security;
    if (!s) return [this.openNatsPass];
    return [...s.nats.passwordFiles().map((f) => readFileSync(f, "utf8").trim()), s.nats.observer.pass];
  }

  frontendNames(): string[] {
    return [...this.nodes.values()].filter((n) => n.role === "frontend").map((n) => n.name);
  }

  backendNames(): string[] {
    return [...this.nodes.values()].filter((n) => n.role === "backend-worker").map((n) => n.name);
  }

  startFrontend(i: number): Promise<Node> {
    return this.startService("frontend", `frontend-${i}`, {
      INFERGRID_AUTOSCALE_MS: "250",
      INFERGRID_LOAD_REPORT_MS: "500",
      ...this.shape.frontendEnv,
    });
  }

  startBackend(i: number): Promise<Node> {
    return this.startService("backend-worker", `backend-${String(i).padStart(2, "0")}`, { ...this.shape.backendEnv });
  }

  private async startNats(): Promise<void> {
    const ports = { 4222: await freePort(), 8222: await freePort() };
    const s = this.security;
    let nats = new GenericContainer(image("nats"));
    if (s) {
      // The users with their roles' permissions and the tls block, in one file at the paths the block names.
      const conf = join(s.dir, "nats-server.conf");
      writeFileSync(conf, `${readFileSync(s.nats.confPath, "utf8")}\n${s.tls.natsServerTls}`, { mode: 0o600 });
      const server = s.tls.natsServerFiles();
      nats = nats
        .withCopyFilesToContainer(readable([conf, server.certFile, server.keyFile, server.caFile]))
        .withCommand(["-js", "-sd", "/data", "-m", "8222", "-c", conf]);
    } else {
      nats = nats.withCommand(["-js", "-sd", "/data", "-m", "8222", "--user", this.openNatsUser, "--pass", this.openNatsPass]);
    }
    const container = await nats
      .withNetwork(this.network)
      .withNetworkAliases("nats")
      .withExposedPorts({ container: 4222, host: ports[4222] }, { container: 8222, host: ports[8222] })
      .withWaitStrategy(Wait.forHttp("/healthz", 8222).forStatusCode(200))
      .withStartupTimeout(30_000)
      .start();
    this.track("nats", "nats", container, ports);
  }

  async startService(role: Exclude<Role, "nats">, name: string, env: Record<string, string>, extraPorts: number[] = []): Promise<Node> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.startServiceOnce(role, name, env, extraPorts);
      } catch (err) {
        // A host port taken between the check and podman's bind: the container was created, not started. It goes,
        // and the service starts again on other ports.
        if (attempt >= 3 || !(err instanceof Error) || !/address already in use/.test(err.message)) throw err;
        const client = await getContainerRuntimeClient();
        const left = await client.container.fetchByLabel(NODE_LABEL, this.nodeLabel(name), { status: ["created", "exited"] });
        if (left) await client.container.remove(left, { removeVolumes: true });
      }
    }
  }

  private nodeLabel(name: string): string {
    return `${this.clusterId}/${name}`;
  }

  private async startServiceOnce(
    role: Exclude<Role, "nats">,
    name: string,
    env: Record<string, string>,
    extraPorts: number[],
  ): Promise<Node> {
    // Every port the image exposes is published (testcontainers waits for each to be bound).
    const ports: Record<number, number> = { 50051: await freePort(), 9464: await freePort() };
    for (const p of extraPorts) ports[p] = await freePort();
    // Lines printed before the container is ready too (a container that dies at start-up says why).
    const early: string[] = [];
    let container: StartedTestContainer;
    const s = this.security;
    let identity: Record<string, string> = { INFERGRID_NATS_USER: this.openNatsUser, INFERGRID_NATS_PASS: this.openNatsPass };
    let definition = new GenericContainer(image(`infergrid-${role}`));
    // The predictor's CPU limit from its manifest (infra/k8s/base/predictor.yaml, 1 core): a restarted predictor's
    // start-up took both of this machine's cores from the request path (one drill request 2 ms over its SLO).
    if (role === "predictor") definition = definition.withResourcesQuota({ cpu: 1 });
    if (s) {
      const nats = s.nats.env(name);
      const tls = s.tls.files(name);
      identity = { ...nats, ...s.tls.env(name) };
      definition = definition.withCopyFilesToContainer(readable([nats.INFERGRID_NATS_PASS_FILE, tls.certFile, tls.keyFile, tls.caFile]));
      if (IDENTITY_ROLE[role] !== s.roles.get(name)) throw new Error(`${name} was given a ${s.roles.get(name)} identity, not ${role}'s`);
    }
    try {
      container = await definition
        .withNetwork(this.network)
        .withNetworkAliases(name)
        .withLabels({ [NODE_LABEL]: this.nodeLabel(name) })
        .withEnvironment({
          ...FAST,
          INFERGRID_ID: name,
          INFERGRID_ADVERTISE_HOST: name,
          INFERGRID_NATS_URL: "nats://nats:4222",
          ...identity,
          ...env,
        })
        .withExposedPorts(...Object.entries(ports).map(([c, h]) => ({ container: Number(c), host: h })))
        .withLogConsumer((stream) => {
          stream.on("data", (chunk: Buffer | string) => early.push(...chunk.toString().split("\n").filter(Boolean)));
        })
        .withWaitStrategy(Wait.forLogMessage(/"event":"ready"/))
        .withStartupTimeout(60_000)
        .start();
    } catch (err) {
      throw new Error(
        `${name} (${role}) did not start: ${err instanceof Error ? err.message : String(err)}\n${early.slice(-15).join("\n")}`,
      );
    }
    return this.track(name, role, container, ports);
  }

  private track(name: string, role: Role, container: StartedTestContainer, ports: Record<number, number>): Node {
    const node: Node = {
      name,
      role,
      container,
      logs: [],
      hostPort: (p) => {
        const h = ports[p];
        if (h === undefined) throw new Error(`${name} publishes no port ${p}`);
        return h;
      },
    };
    void container.logs().then((stream) => {
      stream.on("data", (chunk: Buffer | string) => {
        for (const line of chunk.toString().split("\n")) if (line) node.logs.push(line);
        if (node.logs.length > 20_000) node.logs.splice(0, node.logs.length - 20_000);
      });
      stream.on("error", () => undefined);
    });
    this.nodes.set(name, node);
    return node;
  }

  private async dockerContainer(name: string) {
    const client = await getContainerRuntimeClient();
    return client.container.getById(this.node(name).container.getId());
  }

  /** SIGKILL, as a crash or an OOM kill would. The container stays, stopped, until restarted. */
  async kill(name: string): Promise<void> {
    await (await this.dockerContainer(name)).kill({ signal: "SIGKILL" });
  }

  /** Starts a killed container again (what Kubernetes does to a crashed pod), same name and ports. */
  async restart(name: string, waitReady = true): Promise<void> {
    const node = this.node(name);
    const before = node.logs.length;
    const since = Math.floor(Date.now() / 1000) - 1;
    const docker = await this.dockerContainer(name);
    await docker.start();
    void node.container.logs({ since }).then((stream) => {
      stream.on("data", (chunk: Buffer | string) => {
        for (const line of chunk.toString().split("\n")) if (line) node.logs.push(line);
      });
      stream.on("error", () => undefined);
    });
    if (!waitReady || node.role === "nats") return;
    // The followed stream of a container started again has now and then delivered nothing (a drill waited 60 s for
    // a ready line the process had written in its first second), so the runtime's own log is read as well.
    const ready = '"event":"ready"';
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (node.logs.slice(before).some((l) => l.includes(ready))) return;
      const log = await docker.logs({ stdout: true, stderr: true, follow: false, since }).catch(() => Buffer.alloc(0));
      if (log.toString().includes(ready)) return;
      if (Date.now() > deadline)
        throw new Error(`${name}: not ready 60000 ms after its restart; last:\n${node.logs.slice(-20).join("\n")}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** SIGSTOP / SIGCONT: a process that hangs, holding its connections open, answering nothing. */
  async freeze(name: string): Promise<void> {
    await (await this.dockerContainer(name)).kill({ signal: "SIGSTOP" });
  }

  async thaw(name: string): Promise<void> {
    await (await this.dockerContainer(name)).kill({ signal: "SIGCONT" });
  }

  private readonly cutAddresses = new Map<string, string>();

  /** Takes the container off the private network: it runs on, but reaches and is reached by nobody. */
  async cut(name: string): Promise<void> {
    const client = await getContainerRuntimeClient();
    const id = this.node(name).container.getId();
    const info = await client.container.inspect(client.container.getById(id));
    const ip = Object.values(info.NetworkSettings.Networks)[0]?.IPAddress;
    if (ip) this.cutAddresses.set(name, ip);
    await client.network.getById(this.network.getId()).disconnect({ Container: id, Force: true });
  }

  /** Puts it back with the address it had: a healed partition, not a new host. */
  async heal(name: string): Promise<void> {
    const client = await getContainerRuntimeClient();
    const ip = this.cutAddresses.get(name);
    await client.network.getById(this.network.getId()).connect({
      Container: this.node(name).container.getId(),
      EndpointConfig: { Aliases: [name], ...(ip ? { IPAMConfig: { IPv4Address: ip } } : {}) },
    });
  }

  /** Removes a (killed) container for good, as Kubernetes deletes a failed pod it replaces. */
  async remove(name: string): Promise<void> {
    await this.node(name)
      .container.stop({ timeout: 0 })
      .catch(() => undefined);
    this.nodes.delete(name);
  }

  async waitForLog(name: string, predicate: (line: string) => boolean, timeoutMs: number, fromIndex = 0): Promise<string> {
    const node = this.node(name);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = node.logs.slice(fromIndex).find(predicate);
      if (hit) return hit;
      if (Date.now() > deadline)
        throw new Error(`${name}: log line not seen in ${timeoutMs} ms; last:\n${node.logs.slice(-20).join("\n")}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  registerService(spec: control.ServiceSpec.$Properties): Promise<admin.RegisterServiceReply.$Properties> {
    return unaryCall(this.adminClient, AllocatorAdminDefinition.RegisterService, { spec }, { deadline: Date.now() + 5000 });
  }

  clusterState(): Promise<control.ClusterState.$Properties> {
    return unaryCall(this.adminClient, AllocatorAdminDefinition.GetClusterState, {}, { deadline: Date.now() + 3000 });
  }

  infer(request: inference.InferRequest.$Properties, timeoutMs = 5000): Promise<inference.InferResponse.$Properties> {
    return unaryCall(this.brokerClient, InferenceServiceDefinition.Infer, request, { deadline: Date.now() + timeoutMs });
  }

  async stop(): Promise<void> {
    this.brokerClient?.close();
    this.adminClient?.close();
    await Promise.all([...this.nodes.values()].map((n) => n.container.stop({ timeout: 1000 }).catch(() => undefined)));
    await this.network.stop().catch(() => undefined);
    if (this.security) rmSync(this.security.dir, { recursive: true, force: true });
  }
}

/**
 * Files copied into a container at the path they have on the host (the environment names that path). The
 * images run as a non-root user and a copied file belongs to root, so it is made readable to all: inside the
 * container, where that user is the only one.
 */
function readable(paths: readonly string[]): { source: string; target: string; mode: number }[] {
  return paths.map((p) => ({ source: p, target: p, mode: 0o444 }));
}

/** The run's identities: one per container the shape starts, spare frontends for replacements. */
function makeSecurity(shape: ClusterShape): Security {
  const members: { id: string; role: TlsRole & ("frontend" | "backend" | "broker" | "allocator" | "predictor" | "console") }[] = [
    { id: "allocator", role: "allocator" },
    { id: "predictor", role: "predictor" },
    { id: "broker", role: "broker" },
    { id: "console", role: "console" },
    ...Array.from({ length: shape.frontends + SPARE_FRONTENDS }, (_, i) => ({ id: `frontend-${i}`, role: "frontend" as const })),
    ...Array.from({ length: shape.backends }, (_, i) => ({ id: `backend-${String(i).padStart(2, "0")}`, role: "backend" as const })),
  ];
  const dir = mkdtempSync(join(tmpdir(), "ig-containers-"));
  try {
    return {
      dir,
      nats: makeNatsIdentities(dir, members),
      tls: makeTlsIdentities(dir, members, { natsServerNames: ["nats"] }),
      roles: new Map(members.map((m) => [m.id, m.role])),
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
