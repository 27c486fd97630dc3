import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type NatsRole, natsAuthorization } from "@infergrid/control-plane";
import { connectNats, grpc, type Logger, type NatsConnection } from "@infergrid/runtime";
import { makeCa, makeCert } from "@infergrid/testkit";
import { type ClusterShape, startCluster, type TestCluster } from "./process-cluster.js";

const SERVER_NAME = "infergrid.internal";
const ROLE_USERS: NatsRole[] = ["allocator", "broker", "frontend", "backend", "observer"];

export interface RoleUsersCluster {
  cluster: TestCluster;
  /** A file of the run's CA and certificates (`ca.pem`, `<id>.pem`, `<id>.key`). */
  pem(name: string): Buffer;
  /** A NATS connection as the shared user of a role: what any pod of that role may do. */
  asRole(role: NatsRole): Promise<NatsConnection>;
  stop(): Promise<void>;
}

/**
 * A cluster of real processes set up as in Kubernetes' production overlay: one NATS user per role, shared by every
 * instance of it (KUBERNETES_NATS_USERS), so NATS alone cannot tell two pods of a role apart; gRPC mutual TLS with
 * a certificate per process naming it (spiffe://infergrid/<role>/<id>), peer roles and signed heartbeats on. The
 * processes are the allocator, `backend-<i>`, `frontend-<i>` and the broker, each with its own certificate; `extra`
 * names more certificates of the CA (an admin client is always made), for pods that take part only in the test.
 */
export async function startRoleUsersCluster(
  shape: Omit<ClusterShape, "nats" | "env" | "instanceEnv" | "grpcClient">,
  extra: readonly [id: string, role: string][],
  logger: Logger,
): Promise<RoleUsersCluster> {
  const dir = mkdtempSync(join(tmpdir(), "ig-role-users-"));
  const roles = new Map<string, NatsRole>([
    ["allocator", "allocator"],
    ["broker", "broker"],
    ...Array.from({ length: shape.frontends }, (_, i) => [`frontend-${i}`, "frontend"] as [string, NatsRole]),
    ...Array.from({ length: shape.backends }, (_, i) => [`backend-${i}`, "backend"] as [string, NatsRole]),
  ]);
  const roleOf = (id: string): NatsRole => roles.get(id) ?? "observer";
  const passwords = new Map(ROLE_USERS.map((r) => [r, randomBytes(12).toString("hex")]));
  const conf = join(dir, "nats.conf");
  writeFileSync(conf, natsAuthorization(ROLE_USERS.map((role) => ({ user: role, role, id: "*", password: passwords.get(role) ?? "" }))));
  const pem = (name: string) => readFileSync(join(dir, name));
  makeCa(dir, "ca");
  const identities: (readonly [string, string])[] = [...roles, ["admin", "admin"], ...extra];
  for (const [id, role] of identities) makeCert(dir, id, "ca", `IP:127.0.0.1,DNS:${SERVER_NAME},URI:spiffe://infergrid/${role}/${id}`);
  let cluster: TestCluster;
  try {
    cluster = await startCluster({
      ...shape,
      nats: { args: ["-c", conf] },
      env: {
        INFERGRID_GRPC_TLS_CA_FILE: join(dir, "ca.pem"),
        INFERGRID_GRPC_TLS_SERVER_NAME: SERVER_NAME,
        INFERGRID_GRPC_PEER_ROLES: "true",
        INFERGRID_SIGNED_HEARTBEATS: "true",
      },
      instanceEnv: (id) => ({
        INFERGRID_NATS_USER: roleOf(id),
        INFERGRID_NATS_PASS: passwords.get(roleOf(id)) ?? "",
        INFERGRID_GRPC_TLS_CERT_FILE: join(dir, `${id}.pem`),
        INFERGRID_GRPC_TLS_KEY_FILE: join(dir, `${id}.key`),
      }),
      grpcClient: {
        credentials: grpc.credentials.createSsl(pem("ca.pem"), pem("admin.key"), pem("admin.pem")),
        options: { "grpc.ssl_target_name_override": SERVER_NAME },
      },
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    cluster,
    pem,
    asRole: (role) => connectNats({ servers: cluster.nats.url, name: `drill-${role}`, user: role, pass: passwords.get(role) }, logger),
    stop: async () => {
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
