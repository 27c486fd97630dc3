import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { grpc, IDENTITY_URI_PREFIX, makeCa, makeCert } from "@infergrid/runtime";
import { POOL_BACKENDS_USER } from "./nats-identities.js";

/**
 * A cluster run's certificates (docs/security.md; `npm start` and the container suite): a throwaway CA per run and, per process, a certificate
 * naming its identity `spiffe://infergrid/<role>/<id>`, with which it serves and calls gRPC (mutual TLS, peer
 * roles on) and connects to NATS (TLS, client certificate verified). Made before anything starts; the CA's key
 * is deleted once every certificate is issued, so nothing can be given an identity later in the run.
 */
export type TlsRole = "frontend" | "backend" | "broker" | "allocator" | "predictor" | "console" | "client" | "admin";

/** The CLI's own gRPC callers: the load it sends through the broker, and the allocator's admin API. */
export const CLI_CLIENT_ID = "local-cli";
export const CLI_ADMIN_ID = "local-cli-admin";
/** nats-server's certificate; it names no role (nobody admits calls by it). */
const NATS_SERVER = "nats-server";
/** The run's processes all listen and are dialled on loopback, by address or by name. */
const LOOPBACK_SANS = "DNS:localhost,IP:127.0.0.1";
/**
 * The name gRPC clients check in servers' certificates. Peers are dialled by address (127.0.0.1:<port>), but an
 * IP address as TLS server name makes Node print a deprecation warning in every process (RFC 6066 has no SNI
 * for addresses), so every gRPC client checks this name instead.
 */
export const GRPC_SERVER_NAME = "localhost";
export const GRPC_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.ssl_target_name_override": GRPC_SERVER_NAME,
  "grpc.default_authority": GRPC_SERVER_NAME,
};
/** Longer than any run (the CA's key is gone after start-up: nothing can be renewed). */
const VALID_DAYS = 30;

export interface TlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

export interface TlsIdentities {
  dir: string;
  caFile: string;
  /** nats-server's `tls` block: TLS required, client certificates verified against the run's CA. */
  natsServerTls: string;
  /** A process's environment: gRPC mutual TLS with its own certificate, --grpc-peer-roles, NATS over TLS. */
  env(id: string): Record<string, string>;
  files(id: string): TlsFiles;
  /** nats-server's own certificate, key and the CA (what natsServerTls names). */
  natsServerFiles(): TlsFiles;
  /**
   * The CLI's gRPC credentials as `id` (CLI_CLIENT_ID towards the broker, CLI_ADMIN_ID towards the allocator),
   * to be used with GRPC_CHANNEL_OPTIONS.
   */
  grpcCredentials(id: string): grpc.ChannelCredentials;
}

export function identityUri(role: TlsRole, id: string): string {
  return `${IDENTITY_URI_PREFIX}${role}/${id}`;
}

/**
 * Issues the certificates: one per member, one that the allocator's pool backends share (their ids are the
 * allocator's to choose, and no peer-role check looks at a backend's identity), the CLI's client and admin,
 * and nats-server's.
 */
export interface TlsIdentitiesOptions {
  /**
   * Names nats-server is dialled by besides loopback (`nats` on a container network): the NATS clients check
   * the server's certificate against the host of their URL.
   */
  natsServerNames?: readonly string[];
}

export function makeTlsIdentities(
  runDir: string,
  members: readonly { id: string; role: TlsRole }[],
  options: TlsIdentitiesOptions = {},
): TlsIdentities {
  const dir = join(runDir, "tls");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const all: { id: string; role: TlsRole }[] = [
    ...members,
    { id: POOL_BACKENDS_USER, role: "backend" },
    { id: CLI_CLIENT_ID, role: "client" },
    { id: CLI_ADMIN_ID, role: "admin" },
  ];
  const ids = new Set<string>();
  for (const m of [...all, { id: NATS_SERVER }]) {
    if (ids.has(m.id)) throw new Error(`two certificates for ${m.id}`);
    ids.add(m.id);
  }
  makeCa(dir, "ca", VALID_DAYS);
  for (const m of all) makeCert(dir, m.id, "ca", `URI:${identityUri(m.role, m.id)},${LOOPBACK_SANS}`, VALID_DAYS);
  const natsNames = (options.natsServerNames ?? []).map((n) => `,DNS:${n}`).join("");
  makeCert(dir, NATS_SERVER, "ca", `${LOOPBACK_SANS}${natsNames}`, VALID_DAYS);
  rmSync(join(dir, "ca.key"));
  const caFile = join(dir, "ca.pem");
  const files = (id: string): TlsFiles => {
    if (!ids.has(id)) throw new Error(`no certificate was made for ${id}`);
    return { caFile, certFile: join(dir, `${id}.pem`), keyFile: join(dir, `${id}.key`) };
  };
  const server = files(NATS_SERVER);
  return {
    dir,
    caFile,
    natsServerTls: [
      "tls {",
      `  cert_file: ${JSON.stringify(server.certFile)}`,
      `  key_file: ${JSON.stringify(server.keyFile)}`,
      `  ca_file: ${JSON.stringify(caFile)}`,
      "  verify: true",
      // Seconds: twenty processes shaking hands at once on two cores can take longer than the default.
      "  timeout: 5",
      "}",
      "",
    ].join("\n"),
    files,
    natsServerFiles: () => server,
    env: (id) => {
      const f = files(id);
      return {
        INFERGRID_GRPC_TLS_CERT_FILE: f.certFile,
        INFERGRID_GRPC_TLS_KEY_FILE: f.keyFile,
        INFERGRID_GRPC_TLS_CA_FILE: caFile,
        INFERGRID_GRPC_TLS_SERVER_NAME: GRPC_SERVER_NAME,
        INFERGRID_GRPC_PEER_ROLES: "true",
        INFERGRID_NATS_TLS_CA_FILE: caFile,
        INFERGRID_NATS_TLS_CERT_FILE: f.certFile,
        INFERGRID_NATS_TLS_KEY_FILE: f.keyFile,
      };
    },
    grpcCredentials: (id) => {
      const f = files(id);
      return grpc.credentials.createSsl(readFileSync(caFile), readFileSync(f.keyFile), readFileSync(f.certFile));
    },
  };
}

/**
 * What the allocator is to hand the backends it starts: the shared pool-backends certificate instead of its
 * own (the allocator's would let a backend call Resize as the allocator). Takes effect once the allocator has
 * --pool-backend-grpc-tls-cert-file / --pool-backend-grpc-tls-key-file; until then its backends inherit the
 * allocator's certificate with the rest of its environment.
 */
export function poolBackendTlsEnv(tls: TlsIdentities): Record<string, string> {
  const f = tls.files(POOL_BACKENDS_USER);
  return { INFERGRID_POOL_BACKEND_GRPC_TLS_CERT_FILE: f.certFile, INFERGRID_POOL_BACKEND_GRPC_TLS_KEY_FILE: f.keyFile };
}
