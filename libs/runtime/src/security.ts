import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError, field } from "./config.js";
import { grpc, setDefaultGrpcCredentials } from "./grpc.js";
import { NATS_USER_PATTERN } from "./nats.js";
import { ReloadingTls } from "./tls-reload.js";

/**
 * Credentials and TLS, resolved once at start-up from the validated config. Secrets may come
 * inline (env INFERGRID_NATS_PASS, from a Kubernetes Secret) or from files (a mounted Secret);
 * either way a configured auth mode whose secret is missing stops the service before it starts,
 * and secrets never reach a log line (the logger redacts their fields; errors name the option,
 * never the value).
 */
export interface SecurityConfig {
  natsUser?: string | undefined;
  natsPass?: string | undefined;
  natsPassFile?: string | undefined;
  natsToken?: string | undefined;
  natsTokenFile?: string | undefined;
  natsTlsCaFile?: string | undefined;
  natsTlsCertFile?: string | undefined;
  natsTlsKeyFile?: string | undefined;
  grpcTlsCertFile?: string | undefined;
  grpcTlsKeyFile?: string | undefined;
  grpcTlsCaFile?: string | undefined;
  grpcTlsServerName?: string | undefined;
  controlToken?: string | undefined;
  controlTokenFile?: string | undefined;
  grpcPeerRoles?: boolean | undefined;
  signedHeartbeats?: boolean | undefined;
}

export interface NatsSecurity {
  user?: string;
  pass?: string;
  token?: string;
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

export interface GrpcTls {
  cert?: Buffer;
  key?: Buffer;
  ca?: Buffer;
  serverName?: string;
}

export interface ResolvedSecurity {
  nats: NatsSecurity;
  /** Undefined: gRPC stays plaintext (the default). */
  grpc: GrpcTls | undefined;
}

const kebab = (s: string) => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const envName = (s: string) => `INFERGRID_${s.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
const option = (key: string) => `--${kebab(key)} / ${envName(key)}`;

function readSecretFile(key: keyof SecurityConfig, path: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "unreadable";
    throw new ConfigError(`${option(key)}: cannot read ${path} (${code})`);
  }
  // Secret files usually end with a newline that is not part of the secret.
  const value = text.replace(/\r?\n$/, "");
  if (value === "") throw new ConfigError(`${option(key)}: ${path} is empty`);
  return value;
}

function readFile(key: keyof SecurityConfig, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "unreadable";
    throw new ConfigError(`${option(key)}: cannot read ${path} (${code})`);
  }
}

function mustExist(key: keyof SecurityConfig, path: string | undefined): string | undefined {
  if (path !== undefined) readFile(key, path);
  return path;
}

/** Validates and loads every secret and certificate; throws ConfigError naming the option at fault. */
export function resolveSecurity(config: SecurityConfig): ResolvedSecurity {
  const problems: string[] = [];
  const attempt = <T>(f: () => T): T | undefined => {
    try {
      return f();
    } catch (err) {
      if (err instanceof ConfigError) problems.push(err.message);
      else throw err;
      return undefined;
    }
  };
  if (config.natsPass !== undefined && config.natsPassFile !== undefined) {
    problems.push(`${option("natsPass")} and ${option("natsPassFile")}: give one, not both`);
  }
  if (config.natsToken !== undefined && config.natsTokenFile !== undefined) {
    problems.push(`${option("natsToken")} and ${option("natsTokenFile")}: give one, not both`);
  }
  const pass =
    config.natsPassFile !== undefined ? attempt(() => readSecretFile("natsPassFile", config.natsPassFile ?? "")) : config.natsPass;
  const token =
    config.natsTokenFile !== undefined ? attempt(() => readSecretFile("natsTokenFile", config.natsTokenFile ?? "")) : config.natsToken;
  if (config.natsUser !== undefined && pass === undefined && config.natsPassFile === undefined) {
    problems.push(`${option("natsUser")} is set but its password is missing: set ${option("natsPass")} or ${option("natsPassFile")}`);
  }
  if (config.natsUser !== undefined && !NATS_USER_PATTERN.test(config.natsUser)) {
    problems.push(
      `${option("natsUser")} ${JSON.stringify(config.natsUser)} is not a NATS subject token (letters, digits, - and _): its replies come on _INBOX.<user>`,
    );
  }
  if (pass !== undefined && config.natsUser === undefined) {
    problems.push(`a NATS password is set without ${option("natsUser")}`);
  }
  if (config.natsUser !== undefined && token !== undefined) problems.push(`NATS auth: give a user/password or a token, not both`);
  if ((config.natsTlsCertFile === undefined) !== (config.natsTlsKeyFile === undefined)) {
    problems.push(`${option("natsTlsCertFile")} and ${option("natsTlsKeyFile")} go together`);
  }
  const natsTls = {
    caFile: attempt(() => mustExist("natsTlsCaFile", config.natsTlsCaFile)),
    certFile: attempt(() => mustExist("natsTlsCertFile", config.natsTlsCertFile)),
    keyFile: attempt(() => mustExist("natsTlsKeyFile", config.natsTlsKeyFile)),
  };

  let grpcTls: GrpcTls | undefined;
  const anyGrpcTls = config.grpcTlsCertFile !== undefined || config.grpcTlsKeyFile !== undefined || config.grpcTlsCaFile !== undefined;
  if (anyGrpcTls) {
    if (config.grpcTlsCertFile === undefined || config.grpcTlsKeyFile === undefined || config.grpcTlsCaFile === undefined) {
      // A server needs its certificate and key; as a client it needs the CA to verify its peers.
      problems.push(`gRPC TLS needs ${option("grpcTlsCertFile")}, ${option("grpcTlsKeyFile")} and ${option("grpcTlsCaFile")} together`);
    } else {
      grpcTls = {
        cert: attempt(() => readFile("grpcTlsCertFile", config.grpcTlsCertFile ?? "")),
        key: attempt(() => readFile("grpcTlsKeyFile", config.grpcTlsKeyFile ?? "")),
        ca: attempt(() => readFile("grpcTlsCaFile", config.grpcTlsCaFile ?? "")),
        ...(config.grpcTlsServerName === undefined ? {} : { serverName: config.grpcTlsServerName }),
      };
    }
  }
  if (config.grpcPeerRoles === true && !anyGrpcTls) {
    problems.push(`${option("grpcPeerRoles")} needs gRPC TLS: a caller's role comes from its client certificate`);
  }
  if (config.signedHeartbeats === true && !anyGrpcTls) {
    problems.push(`${option("signedHeartbeats")} needs gRPC TLS: heartbeats are checked against its CA`);
  }
  // Checked here too, so a bad control token stops start-up before anything connects.
  attempt(() => resolveControlToken(config));
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.map((p) => `  ${p}`).join("\n")}`);

  const nats: NatsSecurity = {};
  if (config.natsUser !== undefined) nats.user = config.natsUser;
  if (pass !== undefined) nats.pass = pass;
  if (token !== undefined) nats.token = token;
  if (natsTls.caFile !== undefined || natsTls.certFile !== undefined) {
    nats.tls = {
      ...(natsTls.caFile === undefined ? {} : { caFile: natsTls.caFile }),
      ...(natsTls.certFile === undefined ? {} : { certFile: natsTls.certFile }),
      ...(natsTls.keyFile === undefined ? {} : { keyFile: natsTls.keyFile }),
    };
  }
  return { nats, grpc: grpcTls };
}

/** Server and client credentials for gRPC TLS (mutual: peers present the same kind of certificate). */
export function grpcTlsCredentials(tls: GrpcTls): {
  server: grpc.ServerCredentials;
  client: grpc.ChannelCredentials;
  channelOptions: grpc.ChannelOptions;
} {
  if (!tls.cert || !tls.key || !tls.ca) throw new Error("gRPC TLS needs a certificate, its key and a CA");
  return {
    // true: a client must present a certificate that chains to the CA (without it, any TLS
    // client at all, or one with a certificate from any CA, was served).
    server: grpc.ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], true),
    client: grpc.credentials.createSsl(tls.ca, tls.key, tls.cert),
    channelOptions: serverNameOptions(tls.serverName),
  };
}

/**
 * Peers are dialled by pod IP or container name; they all present a certificate for one service name, checked
 * instead of the dialled host.
 */
function serverNameOptions(serverName: string | undefined): grpc.ChannelOptions {
  return serverName === undefined ? {} : { "grpc.ssl_target_name_override": serverName, "grpc.default_authority": serverName };
}

/**
 * Makes every gRPC server and client of this process use TLS unless a call site passes its own credentials: fixed
 * material, or material read again from its files (tls-reload.ts), which each new connection takes as it is then.
 */
export function applyGrpcTls(tls: GrpcTls | ReloadingTls | undefined): void {
  if (tls === undefined) return;
  if (tls instanceof ReloadingTls) {
    const serverName = tls.current.serverName;
    setDefaultGrpcCredentials({
      // The same provider for both: grpc-js 1.14's server credentials take (CA, identity) in the other order.
      server: grpc.experimental.createCertificateProviderServerCredentials(tls, tls, true),
      client: grpc.experimental.createCertificateProviderChannelCredentials(tls, tls),
      channelOptions: serverNameOptions(serverName),
      tls: () => tls.current,
    });
    return;
  }
  const creds = grpcTlsCredentials(tls);
  if (!tls.ca) throw new Error("gRPC TLS needs a CA");
  setDefaultGrpcCredentials({
    ...creds,
    tls: {
      ca: tls.ca,
      ...(tls.cert ? { cert: tls.cert } : {}),
      ...(tls.key ? { key: tls.key } : {}),
      ...(tls.serverName === undefined ? {} : { serverName: tls.serverName }),
    },
  });
}

/**
 * The control token: a shared secret that calls steering the system (a backend's Resize) must carry as
 * `authorization: Bearer <token>`. Services that send or check such calls spread this into their config.
 */
export const controlTokenConfigShape = {
  controlToken: field.optionalString().describe("control token for calls that steer the system (Resize); a Secret"),
  controlTokenFile: field.optionalString().describe("file holding the control token (a mounted Secret), instead of controlToken"),
};

/** The configured control token, or undefined when none is (such calls are then disabled); ConfigError names the option. */
export function resolveControlToken(config: Pick<SecurityConfig, "controlToken" | "controlTokenFile">): string | undefined {
  if (config.controlToken !== undefined && config.controlTokenFile !== undefined) {
    throw new ConfigError(`${option("controlToken")} and ${option("controlTokenFile")}: give one, not both`);
  }
  if (config.controlTokenFile === undefined) return config.controlToken;
  return readSecretFile("controlTokenFile", config.controlTokenFile);
}

/** Call metadata carrying the control token. */
export function controlMetadata(token: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  return md;
}

/**
 * Whether the call's metadata carries `token` as its bearer token. The comparison takes the same time whatever
 * the presented value (both sides are hashed to one length first), so timing tells nothing about the token.
 */
export function bearerTokenMatches(metadata: grpc.Metadata, token: string): boolean {
  const values = metadata.get("authorization");
  if (values.length !== 1) return false;
  const presented = String(values[0]);
  const match = /^Bearer (.+)$/.exec(presented);
  const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();
  const equal = timingSafeEqual(digest(match?.[1] ?? ""), digest(token));
  return match !== null && equal;
}
