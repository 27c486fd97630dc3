import { setTimeout as sleep } from "node:timers/promises";
import { HeartbeatSigner, LOAD_REPORT_PROOF, subjects } from "@infergrid/control-plane";
import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { createLogger, publishMessage, unaryCall } from "@infergrid/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatedSpec, expectAllAnswered, registerService, type TestCluster, waitUntilServing } from "./process-cluster.js";
import { type RoleUsersCluster, startRoleUsersCluster } from "./role-users-cluster.js";

/**
 * Signed heartbeats on real processes, with NATS users shared by every instance of a role as in Kubernetes
 * (KUBERNETES_NATS_USERS: user = role, any heartbeat subject of that role), so NATS alone cannot tell one
 * frontend from another. Each process signs its heartbeats with its gRPC certificate (spiffe://infergrid/
 * <role>/<id>), and the broker and the allocator run with --signed-heartbeats: a pod that publishes a
 * heartbeat for another member of its role, unsigned or signed with its own certificate, is dropped and
 * logged, and every request meanwhile is answered by the real frontends.
 */
const logger = createLogger("test", "signed-heartbeats", "warn");

let run: RoleUsersCluster;
let cluster: TestCluster;
const pem = (name: string) => run.pem(name);
const asRole: RoleUsersCluster["asRole"] = (role) => run.asRole(role);

const refusal = (what: string) => (l: { msg?: unknown; problem?: unknown }) =>
  l.msg === "dropped a heartbeat that speaks for another member" && String(l.problem).includes(what);
const joined = (id: string) => (l: { msg?: unknown; frontend?: unknown }) => l.msg === "frontend joined the rotation" && l.frontend === id;

beforeAll(async () => {
  run = await startRoleUsersCluster({ backends: 2, frontends: 2, frontendEnv: { INFERGRID_SCALING: "static" } }, [], logger);
  cluster = run.cluster;
  await registerService(cluster, emulatedSpec("echo", { initialBackends: 2, maxBackends: 2 }));
  await waitUntilServing(cluster, "echo", { x: { dims: [1], data: [1] } });
}, 90_000);

afterAll(async () => {
  await run?.stop();
});

describe("signed heartbeats (NATS users per role, as in Kubernetes; real processes)", () => {
  it("keeps every real member on its own signature", async () => {
    await expectAllAnswered(cluster, "echo", 10);
    const state = await unaryCall(cluster.adminClient, AllocatorAdminDefinition.GetClusterState, {}, { deadline: Date.now() + 5000 });
    const ids = (state.members ?? []).map((m) => m.id);
    for (const id of ["frontend-0", "frontend-1", "broker"]) expect(ids).toContain(id);
    expect((state.backends ?? []).map((b) => b.backendId).sort()).toEqual(["backend-0", "backend-1"]);
    expect(cluster.broker.logs.filter(joined("frontend-0")).length + cluster.broker.logs.filter(joined("frontend-1")).length).toBe(2);
    expect([...cluster.broker.logs, ...cluster.allocator.logs].filter(refusal(""))).toEqual([]);
    // Their load reports too, each sealed by its frontend.
    expect(cluster.allocator.logs.filter((l) => l.msg === "dropped a load report")).toEqual([]);
  });

  it("a frontend pod's heartbeats for another frontend are dropped: unsigned, or signed with its own certificate", async () => {
    // NATS lets the shared frontend user publish on every frontend subject: only the signature tells them apart.
    const nc = await asRole("frontend");
    const own = new HeartbeatSigner(pem("frontend-0.pem"), pem("frontend-0.key"));
    const beat = (id: string, draining: boolean): control.IHeartbeat => ({
      role: control.Role.ROLE_FRONTEND,
      id,
      address: "127.0.0.1:1",
      startedAtUnixMs: Date.now(),
      sentAtUnixMs: Date.now(),
      draining,
    });
    for (let i = 0; i < 5; i++) {
      publishMessage(nc, subjects.heartbeat("frontend", "frontend-evil"), control.Heartbeat, beat("frontend-evil", false));
      nc.publish(subjects.heartbeat("frontend", "frontend-1"), own.seal(control.Heartbeat.encode(beat("frontend-1", true)).finish()));
      await sleep(100);
    }
    await nc.flush();
    await sleep(500);
    for (const [name, who] of [
      ["broker", cluster.broker],
      ["allocator", cluster.allocator],
    ] as const) {
      expect(who.logs.some(refusal("unsigned")), `${name} refused the unsigned one`).toBe(true);
      expect(
        who.logs.some(refusal("signed by frontend/frontend-0, but speaks for frontend/frontend-1")),
        `${name} refused the forged one`,
      ).toBe(true);
    }
    expect(cluster.broker.logs.some(joined("frontend-evil"))).toBe(false);
    expect(cluster.broker.logs.some((l) => l.msg === "frontend is draining; out of the rotation" && l.frontend === "frontend-1")).toBe(
      false,
    );
    await expectAllAnswered(cluster, "echo", 20);
    await nc.close();
  });

  it("a frontend pod's load reports for another frontend are dropped; the real frontends' own are counted", async () => {
    // Load reports steer the slow loop (the allocator's shares, the predictor's forecasts). Their subject names the
    // service, not the sender, so NATS lets any frontend pod publish any frontend's: only the seal tells.
    const loadReports = async () => {
      const text = await fetch(`http://${cluster.allocator.ready.metricsAddress}/metrics`).then((r) => r.text());
      const count = (outcome: string) =>
        Number(new RegExp(`infergrid_allocator_load_reports_total\\{[^}]*outcome="${outcome}"[^}]*\\} (\\d+)`).exec(text)?.[1] ?? 0);
      return { accepted: count("accepted"), refused: count("refused") };
    };
    const before = await loadReports();
    const nc = await asRole("frontend");
    const own = new HeartbeatSigner(pem("frontend-0.pem"), pem("frontend-0.key"));
    const report = (frontendId: string): control.ILoadReport => ({
      frontendId,
      service: "echo",
      windowStartUnixMs: Date.now() - 1000,
      windowEndUnixMs: Date.now(),
      arrivals: 1_000_000,
    });
    for (let i = 0; i < 5; i++) {
      publishMessage(nc, subjects.load("echo"), control.LoadReport, report("frontend-1"));
      nc.publish(subjects.load("echo"), own.seal(control.LoadReport.encode(report("frontend-1")).finish(), LOAD_REPORT_PROOF));
      await sleep(100);
    }
    await nc.flush();
    // The real frontends report each service every second.
    await sleep(2500);
    const after = await loadReports();
    const dropped = (what: string) =>
      cluster.allocator.logs.filter((l) => l.msg === "dropped a load report" && String(l.problem).includes(what));
    // Ten refused, logged at most five times in 10 s (both kinds among them, in the order sent).
    expect(dropped("unsigned (no certificate or no signature)").length).toBeGreaterThan(0);
    expect(dropped('signed by frontend/frontend-0, but speaks for frontend "frontend-1"').length).toBeGreaterThan(0);
    expect(cluster.allocator.logs.filter((l) => l.msg === "dropped a load report").every((l) => l.frontend === "frontend-1")).toBe(true);
    // The real frontends' sealed reports keep counting (each reports the service every second).
    expect(after.refused - before.refused).toBe(10);
    expect(after.accepted - before.accepted).toBeGreaterThanOrEqual(4);
    await expectAllAnswered(cluster, "echo", 10);
    await nc.close();
  });

  it("a backend pod cannot take another backend out of the pool", async () => {
    const nc = await asRole("backend");
    const own = new HeartbeatSigner(pem("backend-0.pem"), pem("backend-0.key"));
    for (let i = 0; i < 5; i++) {
      const hb = { role: control.Role.ROLE_BACKEND, id: "backend-1", address: "127.0.0.1:1", sentAtUnixMs: Date.now(), draining: true };
      nc.publish(subjects.heartbeat("backend", "backend-1"), own.seal(control.Heartbeat.encode(hb).finish()));
      await sleep(100);
    }
    // The same through a pool event: NATS refuses it (only the allocator publishes pool events), and the
    // allocator returns a backend only on the backend's own heartbeat, so backend-1 stays where it is.
    publishMessage(nc, subjects.poolEvents, control.PoolEvent, {
      kind: control.PoolEventKind.POOL_EVENT_KIND_RETURNED,
      backendId: "backend-1",
      service: "echo",
      atUnixMs: Date.now(),
      reason: "forged",
    });
    await nc.flush();
    await sleep(500);
    expect(cluster.allocator.logs.some(refusal("signed by backend/backend-0, but speaks for backend/backend-1"))).toBe(true);
    expect(cluster.allocator.logs.some((l) => l.msg === "backend returned to the pool")).toBe(false);
    const state = await unaryCall(cluster.adminClient, AllocatorAdminDefinition.GetClusterState, {}, { deadline: Date.now() + 5000 });
    expect((state.backends ?? []).map((b) => b.backendId).sort()).toEqual(["backend-0", "backend-1"]);
    await expectAllAnswered(cluster, "echo", 20);
    await nc.close();
  });
});
