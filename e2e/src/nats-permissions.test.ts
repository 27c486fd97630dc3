import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type NatsRole, natsAuthorization, ServiceRegistry, subjects } from "@infergrid/control-plane";
import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { connectNats, createLogger, inboxPrefixOf, type NatsConnection, publishMessage, unaryCall } from "@infergrid/runtime";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatedSpec, expectAllAnswered, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * Security drills on NATS, real processes: every process connects as its own user with its role's
 * permissions (libs/control-plane natsAuthorization), and heartbeats are kept only when they speak for the
 * member their subject names. Each drill is an attempt with a real identity's credentials that must fail,
 * with the server's refusal (a permissions violation) or the receivers' log line as the evidence, while
 * requests through the broker keep being answered by the real frontends (0 misrouted, 0 failed).
 */

const logger = createLogger("test", "nats-permissions", "warn");
const dir = mkdtempSync(join(tmpdir(), "ig-nats-perm-"));
const passwords = new Map<string, string>();
const ROLES: [string, NatsRole][] = [
  ["allocator", "allocator"],
  ["broker", "broker"],
  ["frontend-0", "frontend"],
  ["frontend-1", "frontend"],
  ["backend-0", "backend"],
  ["backend-1", "backend"],
  ["observer", "observer"],
];
for (const [user] of ROLES) passwords.set(user, randomBytes(12).toString("hex"));
const conf = join(dir, "nats.conf");
writeFileSync(conf, natsAuthorization(ROLES.map(([user, role]) => ({ user, role, password: passwords.get(user) ?? "" }))));

let cluster: TestCluster;
let observer: NatsConnection;
const seen: { subject: string; data: Uint8Array }[] = [];

/** Connects with `user`'s credentials and collects the server's errors (permission violations) on that connection. */
async function as(user: string): Promise<{ nc: NatsConnection; errors: string[] }> {
  const nc = await connectNats({ servers: cluster.nats.url, name: `drill-${user}`, user, pass: passwords.get(user) }, logger);
  const errors: string[] = [];
  void (async () => {
    for await (const s of nc.status()) if (s.type === "error") errors.push(String(s.error?.message ?? s.error));
  })();
  return { nc, errors };
}

beforeAll(async () => {
  cluster = await startCluster({
    backends: 2,
    frontends: 2,
    nats: { args: ["-c", conf] },
    instanceEnv: (id) => ({ INFERGRID_NATS_USER: id, INFERGRID_NATS_PASS: passwords.get(id) ?? "" }),
    frontendEnv: { INFERGRID_SCALING: "static" },
  });
  await registerService(cluster, emulatedSpec("echo", { initialBackends: 2, maxBackends: 2 }));
  await waitUntilServing(cluster, "echo", { x: { dims: [1], data: [1] } });
  observer = await connectNats({ servers: cluster.nats.url, name: "observer", user: "observer", pass: passwords.get("observer") }, logger);
  observer.subscribe("ig.>", {
    callback: (_err, msg) => {
      seen.push({ subject: msg.subject, data: msg.data });
    },
  });
}, 90_000);

afterAll(async () => {
  await observer?.close();
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("NATS least privilege (real nats-server with per-identity users, real processes)", () => {
  it("every service runs under its own identity and serves", async () => {
    await expectAllAnswered(cluster, "echo", 10);
    const state = await unaryCall(cluster.adminClient, AllocatorAdminDefinition.GetClusterState, {}, { deadline: Date.now() + 5000 });
    const ids = (state.members ?? []).map((m) => m.id).sort();
    for (const id of ["frontend-0", "frontend-1", "broker"]) expect(ids).toContain(id);
    // The services' own work needs nothing their roles do not allow.
    expect(
      cluster.nats
        .output()
        .split("\n")
        .filter((l) => /Violation/i.test(l)),
    ).toEqual([]);
  });

  it("refuses a connection without credentials", async () => {
    await expect(
      connectNats({ servers: cluster.nats.url, name: "anonymous" }, logger).then(async (nc) => {
        await nc.close();
        return "connected";
      }),
    ).rejects.toThrow(/Authorization Violation/i);
  });

  it("a frontend cannot announce an invented frontend, nor speak on another's subject", async () => {
    const { nc, errors } = await as("frontend-0");
    const forged = (id: string, draining: boolean) =>
      publishMessage(nc, subjects.heartbeat("frontend", id), control.Heartbeat, {
        role: control.Role.ROLE_FRONTEND,
        id,
        address: "127.0.0.1:1",
        startedAtUnixMs: Date.now(),
        draining,
      });
    for (let i = 0; i < 5; i++) {
      forged("frontend-evil", false);
      forged("frontend-1", true);
      await sleep(100);
    }
    await nc.flush();
    await sleep(500);
    expect(errors.join("\n")).toMatch(/Permissions Violation for Publish to "?ig\.hb\.frontend\.frontend-evil/);
    expect(errors.join("\n")).toMatch(/Permissions Violation for Publish to "?ig\.hb\.frontend\.frontend-1/);
    expect(seen.filter((s) => s.subject === "ig.hb.frontend.frontend-evil")).toEqual([]);
    expect(cluster.broker.logs.some((l) => String(l.msg).includes("frontend joined the rotation") && l.frontend === "frontend-evil")).toBe(
      false,
    );
    await expectAllAnswered(cluster, "echo", 20);
    await nc.close();
  });

  it("a heartbeat on a frontend's own subject that claims another's id is dropped by its readers", async () => {
    const { nc, errors } = await as("frontend-0");
    for (let i = 0; i < 5; i++) {
      // Permitted subject, forged body: frontend-1 "draining", so the broker would take it out of rotation.
      publishMessage(nc, subjects.heartbeat("frontend", "frontend-0"), control.Heartbeat, {
        role: control.Role.ROLE_FRONTEND,
        id: "frontend-1",
        address: "127.0.0.1:1",
        draining: true,
      });
      await sleep(100);
    }
    await nc.flush();
    await sleep(300);
    expect(errors).toEqual([]);
    const refused = (l: { msg?: unknown; problem?: unknown }) =>
      l.msg === "dropped a heartbeat that speaks for another member" && String(l.problem).includes("frontend-1");
    expect(cluster.broker.logs.some(refused), "the broker's refusal").toBe(true);
    expect(cluster.allocator.logs.some(refused), "the allocator's refusal").toBe(true);
    expect(cluster.broker.logs.some((l) => l.msg === "frontend is draining; out of the rotation" && l.frontend === "frontend-1")).toBe(
      false,
    );
    await expectAllAnswered(cluster, "echo", 20);
    await nc.close();
  });

  it("only the allocator writes the registry: a frontend's or the broker's KV write is refused and the list stays the allocator's", async () => {
    const before = await unaryCall(
      cluster.adminClient,
      AllocatorAdminDefinition.GetService,
      { name: "echo" },
      { deadline: Date.now() + 5000 },
    );
    // Both read the registry (the broker for the Open Inference Protocol's model readiness); neither may write it.
    for (const who of ["frontend-0", "broker"]) {
      const { nc, errors } = await as(who);
      const registry = await ServiceRegistry.open(nc, logger);
      expect((await registry.getService("echo"))?.entry.backends.map((b) => b.backendId)).toEqual(before.backends?.map((b) => b.backendId));
      const forged = { ...before, backends: [{ backendId: "evil", address: "127.0.0.1:1" }], version: 999 };
      await expect(registry.putService(forged)).rejects.toThrow();
      await expect(registry.deleteService("echo")).rejects.toThrow();
      expect(errors.join("\n"), who).toMatch(/Permissions Violation for Publish to "?\$KV\.ig_registry\.svc\.echo/);
      await nc.close();
    }
    const after = await unaryCall(
      cluster.adminClient,
      AllocatorAdminDefinition.GetService,
      { name: "echo" },
      { deadline: Date.now() + 5000 },
    );
    expect(after.backends?.map((b) => b.backendId)).toEqual(before.backends?.map((b) => b.backendId));
    await expectAllAnswered(cluster, "echo", 20);
  });

  it("a backend cannot publish a plan, a frontend's load, a job record, a pool event, or make a job items' consumer", async () => {
    const { nc, errors } = await as("backend-0");
    publishMessage(nc, subjects.plan, control.AllocationPlan, { seq: 999_999, objective: "forged" });
    publishMessage(nc, subjects.load("echo"), control.LoadReport, { frontendId: "frontend-0", service: "echo", arrivals: 1_000_000 });
    publishMessage(nc, subjects.heartbeat("backend", "backend-1"), control.Heartbeat, {
      role: control.Role.ROLE_BACKEND,
      id: "backend-1",
      draining: true,
    });
    nc.publish("$KV.ig_jobs.job.forged", new Uint8Array([1]));
    publishMessage(nc, subjects.poolEvents, control.PoolEvent, {
      kind: control.PoolEventKind.POOL_EVENT_KIND_RETURNED,
      backendId: "backend-1",
    });
    nc.publish("$JS.API.CONSUMER.DURABLE.CREATE.IG_JOB_ITEMS.job-forged", new Uint8Array([1]));
    await nc.flush();
    await sleep(500);
    const all = errors.join("\n");
    for (const subject of [
      "ig.plan",
      "ig.load.echo",
      "ig.hb.backend.backend-1",
      "$KV.ig_jobs.job.forged",
      "ig.pool.events",
      "$JS.API.CONSUMER.DURABLE.CREATE.IG_JOB_ITEMS.job-forged",
    ]) {
      expect(all, subject).toContain(`Permissions Violation for Publish to "${subject}"`);
      // The server logs each refusal with the identity that tried.
      expect(cluster.nats.output(), subject).toContain(`Publish Violation - User "backend-0", Subject "${subject}"`);
    }
    // What the observer got on those subjects came from the allocator and the frontends, none of it forged.
    const plans = seen.filter((s) => s.subject === "ig.plan").map((s) => control.AllocationPlan.decode(s.data));
    expect(plans.length).toBeGreaterThan(0);
    expect(plans.filter((p) => p.objective === "forged")).toEqual([]);
    const loads = seen.filter((s) => s.subject === "ig.load.echo").map((s) => control.LoadReport.decode(s.data));
    expect(loads.filter((r) => Number(r.arrivals) === 1_000_000)).toEqual([]);
    await nc.close();
  });

  it("the broker may read frontend heartbeats only: its subscription to load reports is refused", async () => {
    const { nc, errors } = await as("broker");
    const got: string[] = [];
    const refusals: string[] = [];
    nc.subscribe(subjects.allLoad, {
      callback: (err, msg) => {
        if (err) refusals.push(err.message);
        else got.push(msg.subject);
      },
    });
    await nc.flush();
    await sleep(2000);
    expect([...errors, ...refusals].join("\n")).toMatch(/Permissions Violation for Subscription to "?ig\.load\.\*/);
    expect(got).toEqual([]);
    await nc.close();
  });

  it("a backend reads its own replies only: another's inbox, or every inbox, is refused while JetStream answers it", async () => {
    const { nc, errors } = await as("backend-0");
    const got: string[] = [];
    const refusals: string[] = [];
    for (const subject of ["_INBOX.>", `${inboxPrefixOf("backend-1")}.>`, `${inboxPrefixOf("observer")}.>`])
      nc.subscribe(subject, {
        callback: (err, msg) => {
          if (err) refusals.push(err.message);
          else got.push(msg.subject);
        },
      });
    await nc.flush();
    // Replies on other inboxes while those subscriptions stand: the observer's JetStream calls, and the
    // backend's own, which come on _INBOX.backend-0 (the subscriptions above would have seen both).
    const theirs = await jetstreamManager(observer);
    const own = await jetstreamManager(nc);
    for (let i = 0; i < 5; i++) {
      await theirs.getAccountInfo();
      expect((await own.getAccountInfo()).streams).toBeGreaterThan(0);
      await sleep(200);
    }
    const all = [...errors, ...refusals].join("\n");
    expect(all).toMatch(/Permissions Violation for Subscription to "?_INBOX\.>/);
    expect(all).toMatch(/Permissions Violation for Subscription to "?_INBOX\.backend-1\.>/);
    expect(all).toMatch(/Permissions Violation for Subscription to "?_INBOX\.observer\.>/);
    expect(got).toEqual([]);
    await nc.close();
  });
});
