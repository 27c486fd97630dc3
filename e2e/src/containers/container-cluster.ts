import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { AllocatorAdminDefinition, type admin, type control, InferenceServiceDefinition, type inference } from "@infergrid/proto";
import { createClient, type grpc, unaryCall } from "@infergrid/runtime";
import { GenericContainer, getContainerRuntimeClient, Network, type StartedNetwork, type StartedTestContainer, Wait } from "testcontainers";

/**
 * The whole system as containers on a private network, as `npm run images` built them: a real
 * NATS (JetStream, user/password auth) and every service, each in its own container, reached by
 * name inside the network. The test process is outside it and reaches the broker, the allocator's
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
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      s.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

export class ContainerCluster {
  readonly nodes = new Map<string, Node>();
  /** The NATS account every service uses; a fresh password per run (and checked absent from logs). */
  readonly natsUser = "infergrid";
  readonly natsPass = randomBytes(18).toString("base64url");
  brokerClient!: grpc.Client;
  adminClient!: grpc.Client;

  private constructor(
    readonly network: StartedNetwork,
    private readonly shape: ClusterShape,
  ) {}

  static async start(shape: ClusterShape): Promise<ContainerCluster> {
    const network = await new Network().start();
    const cluster = new ContainerCluster(network, shape);
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
      cluster.brokerClient = createClient(`127.0.0.1:${cluster.node("broker").hostPort(50051)}`);
      cluster.adminClient = createClient(`127.0.0.1:${cluster.node("allocator").hostPort(50051)}`);
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
    const container = await new GenericContainer(image("nats"))
      .withNetwork(this.network)
      .withNetworkAliases("nats")
      .withCommand(["-js", "-sd", "/data", "-m", "8222", "--user", this.natsUser, "--pass", this.natsPass])
      .withExposedPorts({ container: 4222, host: ports[4222] }, { container: 8222, host: ports[8222] })
      .withWaitStrategy(Wait.forHttp("/healthz", 8222).forStatusCode(200))
      .withStartupTimeout(30_000)
      .start();
    this.track("nats", "nats", container, ports);
  }

  async startService(role: Exclude<Role, "nats">, name: string, env: Record<string, string>, extraPorts: number[] = []): Promise<Node> {
    // Every port the image exposes is published (testcontainers waits for each to be bound).
    const ports: Record<number, number> = { 50051: await freePort(), 9464: await freePort() };
    for (const p of extraPorts) ports[p] = await freePort();
    // Lines printed before the container is ready too (a container that dies at start-up says why).
    const early: string[] = [];
    let container: StartedTestContainer;
    try {
      container = await new GenericContainer(image(`infergrid-${role}`))
        .withNetwork(this.network)
        .withNetworkAliases(name)
        .withEnvironment({
          ...FAST,
          INFERGRID_ID: name,
          INFERGRID_ADVERTISE_HOST: name,
          INFERGRID_NATS_URL: "nats://nats:4222",
          INFERGRID_NATS_USER: this.natsUser,
          INFERGRID_NATS_PASS: this.natsPass,
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
    await (await this.dockerContainer(name)).start();
    void node.container.logs({ since: Math.floor(Date.now() / 1000) - 1 }).then((stream) => {
      stream.on("data", (chunk: Buffer | string) => {
        for (const line of chunk.toString().split("\n")) if (line) node.logs.push(line);
      });
      stream.on("error", () => undefined);
    });
    if (waitReady && node.role !== "nats") await this.waitForLog(name, (l) => l.includes('"event":"ready"'), 60_000, before);
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
  }
}
