import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/** A process id that is unique in the cluster and still readable: role-host-random. */
export function makeInstanceId(role: string): string {
  const host = hostname()
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 24);
  return `${role}-${host}-${randomBytes(3).toString("hex")}`;
}
