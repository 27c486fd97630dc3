import { control } from "@infergrid/proto";
import { inboxPrefixOf } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { heartbeatIdentityProblem, type NatsRole, natsAuthorization, rolePermissions } from "./nats-permissions.js";

const ROLES: NatsRole[] = ["allocator", "frontend", "backend", "broker", "predictor", "console", "observer"];

/** nats-server's subject matching: `*` one token, `>` the rest. */
function matches(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const s = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return s.length > i;
    if (i >= s.length || (p[i] !== "*" && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

const mayPublish = (role: NatsRole, id: string, subject: string) => {
  const { allow, deny } = rolePermissions(role, id, id).publish;
  return allow.some((a) => matches(a, subject)) && !deny.some((d) => matches(d, subject));
};

const maySubscribe = (role: NatsRole, user: string, subject: string) => {
  const { allow, deny } = rolePermissions(role, user, user).subscribe;
  return allow.some((a) => matches(a, subject)) && !deny.some((d) => matches(d, subject));
};

describe("rolePermissions", () => {
  it("lets each identity publish its own heartbeat and no other's", () => {
    for (const role of ["allocator", "frontend", "backend", "broker", "predictor"] as const) {
      expect(mayPublish(role, "me", `ig.hb.${role}.me`), role).toBe(true);
      for (const other of ["allocator", "frontend", "backend", "broker", "predictor"])
        expect(mayPublish(role, "me", `ig.hb.${other}.someone-else`), `${role} as ${other}`).toBe(false);
    }
    expect(mayPublish("console", "c", "ig.hb.frontend.c")).toBe(false);
  });

  it("lets only the allocator write the registry, the plan, the pool events, the job records and the job items", () => {
    for (const subject of [
      "$KV.ig_registry.svc.echo",
      "$KV.ig_registry.backend.b1",
      "ig.plan",
      "ig.pool.events",
      "$KV.ig_jobs.job.a",
      "ig.job.items.a",
    ])
      for (const role of ROLES) expect(mayPublish(role, "x", subject), `${role} -> ${subject}`).toBe(role === "allocator");
  });

  it("lets readers use JetStream's read API but not rewrite or remove streams", () => {
    for (const role of ["frontend", "backend", "console"] as const) {
      expect(mayPublish(role, "x", "$JS.API.CONSUMER.CREATE.KV_ig_registry.abc"), role).toBe(true);
      expect(mayPublish(role, "x", "$JS.API.STREAM.INFO.KV_ig_registry"), role).toBe(true);
      for (const op of ["PURGE", "DELETE", "UPDATE"])
        expect(mayPublish(role, "x", `$JS.API.STREAM.${op}.KV_ig_registry`), `${role} ${op}`).toBe(false);
    }
    // Only the allocator makes, changes or pauses the job items' consumers; the others may read them.
    for (const role of ["frontend", "backend", "console"] as const) {
      for (const subject of [
        "$JS.API.CONSUMER.CREATE.IG_JOB_ITEMS",
        "$JS.API.CONSUMER.CREATE.IG_JOB_ITEMS.job-a.ig.job.items.a",
        "$JS.API.CONSUMER.DURABLE.CREATE.IG_JOB_ITEMS.job-a",
        "$JS.API.CONSUMER.PAUSE.IG_JOB_ITEMS.job-a",
      ])
        expect(mayPublish(role, "x", subject), `${role} -> ${subject}`).toBe(false);
      expect(mayPublish(role, "x", "$JS.API.CONSUMER.INFO.IG_JOB_ITEMS.job-a"), role).toBe(true);
    }
    expect(mayPublish("allocator", "a", "$JS.API.CONSUMER.CREATE.IG_JOB_ITEMS.job-a.ig.job.items.a")).toBe(true);
    // Only backends take job items; they record results but not job records.
    expect(mayPublish("backend", "b", "$JS.API.CONSUMER.MSG.NEXT.IG_JOB_ITEMS.job-a")).toBe(true);
    expect(mayPublish("frontend", "f", "$JS.API.CONSUMER.MSG.NEXT.IG_JOB_ITEMS.job-a")).toBe(false);
    expect(mayPublish("backend", "b", "$KV.ig_job_results.a.1")).toBe(true);
    expect(mayPublish("frontend", "f", "$KV.ig_job_results.a.1")).toBe(false);
  });
});

describe("each user's replies", () => {
  it("come on its own inbox, which no other user may read", () => {
    for (const role of ROLES) {
      expect(maySubscribe(role, "me", `${inboxPrefixOf("me")}.abc123`), role).toBe(true);
      expect(maySubscribe(role, "me", `${inboxPrefixOf("me")}.abc123.7`), role).toBe(true);
      // Another user's replies (pulled job items, JetStream's answers), and every reply at once.
      expect(maySubscribe(role, "me", `${inboxPrefixOf("other")}.abc123`), role).toBe(false);
      expect(maySubscribe(role, "me", "_INBOX.abc123"), role).toBe(false);
      expect(rolePermissions(role, "me", "me").subscribe.allow, role).not.toContain("_INBOX.>");
    }
    // A user shared by a role's pods (Kubernetes) has one inbox for them all.
    expect(rolePermissions("backend", "*", "backend").subscribe.allow).toEqual(["_INBOX.backend.>"]);
  });
});

describe("natsAuthorization", () => {
  it("refuses a user name that is not one subject token (it names the user's inbox)", () => {
    for (const user of ["a.b", "a*", ">", "a b", ""])
      expect(() => natsAuthorization([{ user, password: "p", role: "backend" }]), user).toThrow(/not a subject token/);
  });

  it("renders one user per identity with its role's permissions, strings quoted", () => {
    const conf = natsAuthorization([
      { user: "frontend-0", password: 'p"w', role: "frontend" },
      { user: "broker", password: "b", role: "broker" },
    ]);
    expect(conf).toMatch(/^authorization \{\n {2}users = \[\n/);
    expect(conf).toContain('{ user: "frontend-0", password: "p\\"w", permissions: { publish: { allow: ["ig.hb.frontend.frontend-0"');
    expect(conf).toContain('subscribe: { allow: ["ig.hb.frontend.*", "_INBOX.broker.>"] }');
    expect(conf).toContain('subscribe: { allow: ["_INBOX.frontend-0.>"] }');
  });
});

describe("heartbeatIdentityProblem", () => {
  const hb = (role: control.Role, id: string) => control.Heartbeat.create({ role, id });
  it("accepts a heartbeat on its own subject", () => {
    expect(heartbeatIdentityProblem("ig.hb.frontend.f1", hb(control.Role.ROLE_FRONTEND, "f1"))).toBeUndefined();
  });
  it("refuses one that claims another id, another role, or no role", () => {
    expect(heartbeatIdentityProblem("ig.hb.frontend.f0", hb(control.Role.ROLE_FRONTEND, "f1"))).toBe(
      'heartbeat for frontend "f1" arrived on ig.hb.frontend.f0, not ig.hb.frontend.f1',
    );
    expect(heartbeatIdentityProblem("ig.hb.backend.f1", hb(control.Role.ROLE_FRONTEND, "f1"))).toMatch(/not ig\.hb\.frontend\.f1/);
    expect(heartbeatIdentityProblem("ig.hb.frontend.f1", hb(control.Role.ROLE_UNSPECIFIED, "f1"))).toMatch(/no known role/);
  });
});
