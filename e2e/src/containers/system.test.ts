import { AllocatorAdminDefinition, InferenceServiceDefinition } from "@infergrid/proto";
import { grpc } from "@infergrid/runtime";
import { GRPC_CHANNEL_OPTIONS } from "@infergrid/testkit";
import { connect } from "@nats-io/transport-node";
import { getContainerRuntimeClient } from "testcontainers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LoadDriver } from "../load-driver.js";
import { callWith, emulatedSpec } from "../process-cluster.js";
import { ContainerCluster, image } from "./container-cluster.js";
import { replay, traceSlice } from "./trace.js";

/**
 * The whole system as containers (images from `npm run images`) on a private network with a real
 * NATS container (JetStream, a user per process over TLS; gRPC mutual TLS with peer roles): allocator,
 * predictor, 2 frontends, 6 backends and the broker. A trace slice is replayed through the broker; every request sent ends answered or
 * explicitly failed.
 */
let cluster: ContainerCluster;

beforeAll(async () => {
  const t0 = Date.now();
  cluster = await ContainerCluster.start({
    frontends: 2,
    backends: 6,
    predictor: true,
    backendEnv: { INFERGRID_IDLE_TIMEOUT_MS: "600000" },
  });
  await cluster.registerService(emulatedSpec("echo", { locMs: 5, scaleMs: 5, maxBackends: 4, initialBackends: 2, rtMaxMs: 300 }));
  await waitUntil(async () => (await cluster.infer({ service: "echo", inputs: { x: { dims: [1], data: [1] } } }, 2000)).backendId, 60_000);
  console.log(`container cluster (11 containers) up and serving in ${Date.now() - t0} ms`);
}, 240_000);

afterAll(async () => {
  await cluster?.stop();
});

async function waitUntil<T>(probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== "") return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out: ${last instanceof Error ? last.message : String(last)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe("the system in containers", () => {
  it("every container serves and joined the cluster (allocator's view)", async () => {
    const state = await cluster.clusterState();
    const ids = new Set((state.members ?? []).map((m) => m.id));
    for (const n of ["frontend-0", "frontend-1", "broker", "predictor"]) expect(ids, n).toContain(n);
    expect((state.backends ?? []).map((b) => b.backendId).sort()).toEqual(cluster.backendNames().sort());
    const echo = (state.services ?? []).find((s) => s.spec?.name === "echo");
    expect(echo?.backends?.length).toBeGreaterThanOrEqual(2);
  });

  it("the console's image serves the live view: every backend container and the echo service", async () => {
    // Stopped with the others by cluster.stop(); the password check below covers its logs too.
    const web = await cluster.startService("console", "console", {}, [8090]);
    const url = `http://127.0.0.1:${web.hostPort(8090)}`;
    const page = await fetch(`${url}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("/console.js");
    await waitUntil(async () => {
      const state = (await (await fetch(`${url}/api/state`)).json()) as {
        services?: { name: string; backends?: unknown[] }[];
        cluster?: { backends?: number };
      };
      expect(state.cluster?.backends).toBe(cluster.backendNames().length);
      expect(state.services?.find((s) => s.name === "echo")?.backends?.length).toBeGreaterThanOrEqual(2);
      return true;
    }, 20_000);
  });

  it("replays a trace slice through the broker: every request answered or explicitly failed, none lost", async () => {
    const slice = traceSlice({ minutes: 12, peakRate: 25, stepMs: 1500 });
    const driver = new LoadDriver(
      cluster.brokerClient,
      () => ({ service: "echo", inputs: { x: { dims: [1], data: [1] } } }),
      1,
      5000,
    ).start();
    await replay(slice, (r) => driver.setRate(r));
    await driver.stop();
    const c = driver.counts();
    const ok = driver.outcomes.filter((o) => o.ok);
    const p99 = ok.map((o) => o.doneAt - o.sentAt).sort((a, b) => a - b)[Math.floor(ok.length * 0.99)] ?? 0;
    console.log(
      `trace replay (${slice.source}): ${JSON.stringify(c)}, p99 ${p99} ms, backends used ${new Set(ok.map((o) => o.backendId)).size}; ` +
        `failures by code ${JSON.stringify(driver.failureCodes())}`,
    );
    if (c.failed > 0) {
      // What the broker and the frontends warned of says where the failures came from.
      for (const n of ["broker", "frontend-0", "frontend-1"])
        console.log(
          `--- ${n} warnings:\n${cluster
            .node(n)
            .logs.filter((l) => /"level":(40|50|60)/.test(l))
            .slice(-12)
            .join("\n")}`,
        );
    }
    expect(c.sent).toBeGreaterThan(100);
    expect(c.lost).toBe(0);
    expect(c.answered + c.failed).toBe(c.sent);
    expect(c.failed / c.sent).toBeLessThan(0.01);
  });

  it("no container printed a NATS password", () => {
    const passwords = cluster.natsPasswords();
    expect(passwords.length).toBeGreaterThan(cluster.nodes.size - 1);
    for (const node of cluster.nodes.values()) {
      expect(node.logs.length, node.name).toBeGreaterThan(0);
      expect(
        node.logs.filter((l) => passwords.some((p) => l.includes(p))),
        node.name,
      ).toEqual([]);
    }
  });

  it("is secure by default: plaintext gRPC, a client without a certificate, the wrong role and anonymous NATS are refused", async () => {
    expect(cluster.secure).toBe(true);
    const broker = `127.0.0.1:${cluster.node("broker").hostPort(50051)}`;
    const allocator = `127.0.0.1:${cluster.node("allocator").hostPort(50051)}`;
    const infer = { service: "echo", inputs: { x: { dims: [1], data: [1] } } };
    const plain = await callWith(broker, grpc.credentials.createInsecure(), InferenceServiceDefinition.Infer, infer);
    expect(plain.ok ? "answered" : grpc.status[plain.code]).toBe("UNAVAILABLE");
    // The broker's client certificate is the CLI's client identity: the admin API refuses it (peer roles).
    const listAs = async (as: "client" | "admin") => {
      const r = await callWith(allocator, cluster.callerCredentials(as), AllocatorAdminDefinition.ListServices, {}, GRPC_CHANNEL_OPTIONS);
      return r.ok ? "answered" : grpc.status[r.code];
    };
    expect(await listAs("client")).toBe("PERMISSION_DENIED");
    expect(await listAs("admin")).toBe("answered");
    const anonymous = await connect({ servers: cluster.natsUrlFromHost, reconnect: false, timeout: 3000 }).then(
      async (nc) => {
        await nc.close();
        return "connected";
      },
      (err: unknown) => (err instanceof Error ? err.message : String(err)),
    );
    expect(anonymous).not.toBe("connected");
  });

  it("a service whose NATS user comes without the password refuses to start (exit 2), naming the option, not a value", async () => {
    const docker = (await getContainerRuntimeClient()).container.dockerode;
    for (const env of [["INFERGRID_NATS_USER=svc"], ["INFERGRID_NATS_USER=svc", "INFERGRID_NATS_PASS_FILE=/run/secrets/absent"]]) {
      const c = await docker.createContainer({ Image: image("infergrid-frontend"), Env: env });
      await c.start();
      const { StatusCode } = (await c.wait()) as { StatusCode: number };
      const logs = (await c.logs({ stdout: true, stderr: true })).toString();
      await c.remove({ force: true });
      expect(StatusCode).toBe(2);
      expect(logs).toMatch(/INFERGRID_NATS_(USER is set but its password is missing|PASS_FILE: cannot read \/run\/secrets\/absent)/);
    }
  });
});
