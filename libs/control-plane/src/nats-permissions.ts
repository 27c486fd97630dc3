import type { control } from "@infergrid/proto";
import { inboxPrefixOf, NATS_USER_PATTERN } from "@infergrid/runtime";
import {
  allJobItems,
  JOB_ITEMS_STREAM,
  JOB_RESULTS_BUCKET,
  JOBS_BUCKET,
  REGISTRY_BUCKET,
  type RoleName,
  roleNameOf,
  subjects,
} from "./subjects.js";

/**
 * Least privilege on NATS: what each identity may publish and subscribe to, as nats-server permissions.
 * Every process connects as its own user (its instance id) and may publish only its own heartbeat
 * subject, so together with `heartbeatIdentityProblem` (a heartbeat's id must be its subject's) no process
 * can speak for another. Only the allocator writes the registry, plans, job records and job items.
 */
export type NatsRole = RoleName | "console" | "observer";

export interface NatsPermissions {
  publish: { allow: string[]; deny: string[] };
  subscribe: { allow: string[]; deny: string[] };
}

/** JetStream's API for reading KV buckets and consuming streams (watches, gets, pull consumers). */
const JS_CLIENT = ["$JS.API.>", "$JS.FC.>"];

/**
 * What no one but the allocator may do through JetStream: write the registry or the job records (KV writes,
 * deletes and purges are publishes to $KV.<bucket>.>), rewrite or remove a stream or its messages, and make,
 * change or pause a consumer of the job items (one made first under a job's consumer name would keep the job
 * from ever getting its items; one filtered on every job would block the consumers of the jobs after it).
 */
const JS_WRITES_DENIED = [
  `$KV.${REGISTRY_BUCKET}.>`,
  `$KV.${JOBS_BUCKET}.>`,
  "$JS.API.STREAM.UPDATE.>",
  "$JS.API.STREAM.DELETE.>",
  "$JS.API.STREAM.PURGE.>",
  "$JS.API.STREAM.MSG.DELETE.>",
  `$JS.API.CONSUMER.DELETE.${JOB_ITEMS_STREAM}.>`,
  `$JS.API.CONSUMER.CREATE.${JOB_ITEMS_STREAM}`,
  `$JS.API.CONSUMER.CREATE.${JOB_ITEMS_STREAM}.>`,
  `$JS.API.CONSUMER.DURABLE.CREATE.${JOB_ITEMS_STREAM}.>`,
  `$JS.API.CONSUMER.PAUSE.${JOB_ITEMS_STREAM}.>`,
];

/** Taking (and acknowledging) job items: the backends' and the allocator's business only. */
const JOB_CONSUMING = [`$JS.API.CONSUMER.MSG.NEXT.${JOB_ITEMS_STREAM}.>`, `$JS.ACK.${JOB_ITEMS_STREAM}.>`];

/**
 * `id`: the heartbeat id the user may speak for ("*": any of its role); `user`: the user name, whose own inbox
 * (`_INBOX.<user>.>`, where its connection takes its replies) is the only one it may read.
 */
export function rolePermissions(role: NatsRole, id: string, user: string): NatsPermissions {
  const own = (r: RoleName) => subjects.heartbeat(r, id);
  const INBOX = `${inboxPrefixOf(user)}.>`;
  switch (role) {
    case "allocator":
      return {
        publish: { allow: [own("allocator"), subjects.plan, subjects.poolEvents, allJobItems, "$KV.>", "$JS.>"], deny: [] },
        subscribe: { allow: ["ig.>", INBOX], deny: [] },
      };
    case "frontend":
      return {
        publish: { allow: [own("frontend"), subjects.allLoad, ...JS_CLIENT], deny: [...JS_WRITES_DENIED, ...JOB_CONSUMING] },
        subscribe: { allow: [INBOX], deny: [] },
      };
    case "backend":
      return {
        publish: {
          allow: [own("backend"), `$KV.${JOB_RESULTS_BUCKET}.>`, ...JS_CLIENT, `$JS.ACK.${JOB_ITEMS_STREAM}.>`],
          deny: JS_WRITES_DENIED,
        },
        subscribe: { allow: [INBOX], deny: [] },
      };
    case "broker":
      // JetStream's read API: the registry, for the Open Inference Protocol's model readiness and metadata.
      return {
        publish: { allow: [own("broker"), ...JS_CLIENT], deny: [...JS_WRITES_DENIED, ...JOB_CONSUMING] },
        subscribe: { allow: [subjects.heartbeatsOf("frontend"), INBOX], deny: [] },
      };
    case "predictor":
      return {
        publish: { allow: [own("predictor"), subjects.allForecasts], deny: [] },
        subscribe: { allow: [subjects.allLoad, INBOX], deny: [] },
      };
    case "console":
    case "observer":
      // Reads everything the control plane says, says nothing.
      return {
        publish: { allow: JS_CLIENT, deny: [...JS_WRITES_DENIED, ...JOB_CONSUMING] },
        subscribe: { allow: ["ig.>", INBOX], deny: [] },
      };
  }
}

export interface NatsUser {
  user: string;
  role: NatsRole;
  /** The password, or `passwordEnv`: the name of an environment variable nats-server reads it from (a Secret). */
  password?: string;
  passwordEnv?: string;
  /** The id its heartbeats carry (default: the user). "*": a user shared by every instance of the role. */
  id?: string;
}

const q = (s: string) => JSON.stringify(s);
const list = (xs: readonly string[]) => `[${xs.map(q).join(", ")}]`;

/**
 * The users of a Kubernetes deployment: one per role, shared by the role's pods (their heartbeats' ids are pod
 * names, so a pod may publish any heartbeat of its role), passwords from the environment (Secret
 * infergrid-nats-auth, key <role>-password, as NATS_<ROLE>_PASSWORD).
 */
export const KUBERNETES_NATS_USERS: readonly NatsUser[] = (
  ["allocator", "frontend", "backend", "broker", "predictor", "console"] as const
).map((role) => ({ user: role, role, id: "*", passwordEnv: `NATS_${role.toUpperCase()}_PASSWORD` }));

/** nats-server's `authorization` block for these users, each with its role's permissions (its user name is its id). */
export function natsAuthorization(users: readonly NatsUser[]): string {
  for (const u of users)
    if (!NATS_USER_PATTERN.test(u.user))
      throw new Error(`NATS user ${JSON.stringify(u.user)} is not a subject token: it names the user's inbox`);
  const entries = users.map((u) => {
    const p = rolePermissions(u.role, u.id ?? u.user, u.user);
    const side = (s: { allow: string[]; deny: string[] }) =>
      s.deny.length > 0 ? `{ allow: ${list(s.allow)}, deny: ${list(s.deny)} }` : `{ allow: ${list(s.allow)} }`;
    const password = u.passwordEnv !== undefined ? `$${u.passwordEnv}` : q(u.password ?? "");
    return `    { user: ${q(u.user)}, password: ${password}, permissions: { publish: ${side(p.publish)}, subscribe: ${side(p.subscribe)} } }`;
  });
  return `authorization {\n  users = [\n${entries.join(",\n")}\n  ]\n}\n`;
}

/**
 * A heartbeat speaks for the member its subject names: its role and id must be the subject's. With each
 * identity allowed to publish only its own subject, a process cannot announce, drain or impersonate another.
 */
export function heartbeatIdentityProblem(subject: string, hb: control.Heartbeat): string | undefined {
  const role = roleNameOf(hb.role);
  if (!role) return `heartbeat on ${subject} has no known role`;
  const expected = subjects.heartbeat(role, hb.id ?? "");
  return subject === expected ? undefined : `heartbeat for ${role} ${JSON.stringify(hb.id ?? "")} arrived on ${subject}, not ${expected}`;
}
