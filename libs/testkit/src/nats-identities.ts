import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type NatsRole, type NatsUser, natsAuthorization } from "@infergrid/control-plane";

/**
 * The local cluster's NATS identities (docs/security.md): every process it starts gets its own user, named by
 * its instance id, with a random password in a file only this user can read; nats-server gets the users with
 * their roles' permissions. A throwaway set per run, made before anything starts.
 */
export interface NatsIdentities {
  /** nats-server's configuration file (the authorization block). */
  confPath: string;
  /** The environment that makes a process connect as `id`. */
  env(id: string): { INFERGRID_NATS_USER: string; INFERGRID_NATS_PASS_FILE: string };
  /** This CLI's own read-only connections (its live view and summaries). */
  observer: { user: string; pass: string };
  /** Every password file made (to check that no log shows a password). */
  passwordFiles(): string[];
}

/** The user the backends the allocator starts itself share (their ids are the allocator's to choose). */
export const POOL_BACKENDS_USER = "pool-backends";
export const OBSERVER_USER = "local-cli";

export function makeNatsIdentities(runDir: string, members: readonly { id: string; role: NatsRole }[]): NatsIdentities {
  const dir = join(runDir, "nats-identities");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const users: NatsUser[] = [];
  const files = new Map<string, string>();
  const passwords = new Map<string, string>();
  const add = (user: string, role: NatsRole, id?: string) => {
    const password = randomBytes(18).toString("base64url");
    const file = join(dir, `${user}.pass`);
    writeFileSync(file, `${password}\n`, { mode: 0o600 });
    files.set(user, file);
    passwords.set(user, password);
    users.push({ user, role, password, ...(id === undefined ? {} : { id }) });
  };
  for (const m of members) add(m.id, m.role);
  add(POOL_BACKENDS_USER, "backend", "*");
  add(OBSERVER_USER, "observer");
  const confPath = join(dir, "nats-auth.conf");
  writeFileSync(confPath, natsAuthorization(users), { mode: 0o600 });
  chmodSync(confPath, 0o600);
  return {
    confPath,
    env: (id) => {
      const file = files.get(id);
      if (!file) throw new Error(`no NATS identity was made for ${id}`);
      return { INFERGRID_NATS_USER: id, INFERGRID_NATS_PASS_FILE: file };
    },
    observer: { user: OBSERVER_USER, pass: passwords.get(OBSERVER_USER) ?? "" },
    passwordFiles: () => [...files.values()],
  };
}

/** What the allocator passes to the backends it starts: the shared pool-backends identity. */
export function poolBackendEnv(identities: NatsIdentities): Record<string, string> {
  const own = identities.env(POOL_BACKENDS_USER);
  return { INFERGRID_POOL_BACKEND_NATS_USER: own.INFERGRID_NATS_USER, INFERGRID_POOL_BACKEND_NATS_PASS_FILE: own.INFERGRID_NATS_PASS_FILE };
}
