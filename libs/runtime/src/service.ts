import { hostname } from "node:os";
import { Counter, type Registry } from "prom-client";
import { z } from "zod";
import { ConfigError, configHelp, field, loadConfig } from "./config.js";
import { grpc } from "./grpc.js";
import { makeInstanceId } from "./ids.js";
import { announceReady, createLogger, type Logger } from "./logger.js";
import { createMetricsRegistry, startMetricsServer } from "./metrics.js";
import { connectNats, type NatsConnection } from "./nats.js";
import { applyGrpcTls, type GrpcTls, type ResolvedSecurity, resolveSecurity } from "./security.js";
import { installShutdown, type ShutdownStep } from "./shutdown.js";
import { ReloadingTls } from "./tls-reload.js";

/** Settings every service has. */
export const commonConfigShape = {
  id: field.optionalString().describe("instance id (default: role-host-random)"),
  host: field.string("127.0.0.1").describe("address to bind servers to (0.0.0.0 in containers)"),
  advertiseHost: field
    .optionalString()
    .describe("host others use to reach this process (default: host, or the hostname when binding 0.0.0.0)"),
  grpcPort: field.port(0).describe("gRPC port (0 = any free port)"),
  metricsPort: field.port(0).describe("Prometheus /metrics port (0 = any free port)"),
  natsUrl: field.string("nats://127.0.0.1:4222").describe("NATS server URL(s), comma-separated"),
  natsUser: field.optionalString().describe("NATS user (with natsPass)"),
  natsPass: field.optionalString().describe("NATS password"),
  natsToken: field.optionalString().describe("NATS token"),
  natsPassFile: field.optionalString().describe("file holding the NATS password (a mounted Secret), instead of natsPass"),
  natsTokenFile: field.optionalString().describe("file holding the NATS token, instead of natsToken"),
  natsTlsCaFile: field.optionalString().describe("CA certificate to verify the NATS server with (TLS)"),
  natsTlsCertFile: field.optionalString().describe("client certificate for NATS (with natsTlsKeyFile), if the server asks for one"),
  natsTlsKeyFile: field.optionalString().describe("client certificate key for NATS"),
  grpcTlsCertFile: field.optionalString().describe("gRPC TLS: this process's certificate (with grpcTlsKeyFile, grpcTlsCaFile)"),
  grpcTlsKeyFile: field.optionalString().describe("gRPC TLS: the certificate's key"),
  grpcTlsCaFile: field.optionalString().describe("gRPC TLS: CA that peers' certificates must chain to"),
  grpcTlsServerName: field.optionalString().describe("gRPC TLS: name checked in peers' certificates (peers are dialled by address)"),
  grpcTlsReloadMs: field
    .ms(60_000)
    .describe(
      "gRPC TLS: how often the certificate, key and CA files are read again (renewed in place by cert-manager); new connections take renewed files once they make a whole (0: read at start-up only)",
    ),
  grpcPeerRoles: field
    .bool(false)
    .describe(
      "gRPC TLS: admit each call by the caller's role, from its certificate's spiffe://infergrid/<role>/<id> URI (docs/security.md)",
    ),
  signedHeartbeats: field
    .bool(false)
    .describe(
      "keep only heartbeats signed by a certificate of the gRPC CA that names their member, (the allocator, the predictor) count only load reports sealed by the frontend they name, each once, and (the allocator) only job results sealed by a backend that worked for the job (needs gRPC TLS; docs/security.md); a process with a gRPC certificate always signs its own",
    ),
  logLevel: field.logLevel().describe("pino log level"),
  heartbeatMs: field.ms(1000).describe("membership heartbeat period"),
  shutdownGraceMs: field.ms(5000).describe("time in-flight calls get on shutdown"),
};

const commonSchema = z.object(commonConfigShape);
export type CommonConfig = z.infer<typeof commonSchema>;

export interface ServiceContext<C> {
  config: C;
  id: string;
  logger: Logger;
  metrics: Registry;
  nc: NatsConnection;
  /** host:port at which others reach a server of this process bound to `port`. */
  advertise(port: number): string;
  /** Counts a NATS message dropped as undecodable (`infergrid_garbled_messages_total`). */
  onGarbled(): void;
  /** This process's gRPC TLS material (certificate, key, CA) as read at start-up, undefined when gRPC is plaintext. */
  grpcTls: GrpcTls | undefined;
  /** Calls `listener` with the material each time renewed files are taken (grpcTlsReloadMs); returns the unsubscribe. */
  onGrpcTlsChange(listener: (tls: GrpcTls) => void): () => void;
  /**
   * Server credentials on this process's (renewed) TLS material that let a client connect without a certificate
   * (undefined when gRPC is plaintext). A certificate a client does present is still verified against the CA, and
   * one that does not chain to it names no one: the caller's auth context is then empty (grpc-js and
   * unary-direct.ts read a peer certificate only from a connection TLS authorized).
   */
  clientCertificateOptional(): grpc.ServerCredentials | undefined;
}

export interface StartedService {
  /** Addresses for the ready line (grpcAddress, httpAddress, ...). */
  ready: Record<string, string>;
  /** Run in order on SIGTERM/SIGINT, before NATS is drained and metrics stop. */
  shutdown: ShutdownStep[];
}

/**
 * The shell every service runs in: validated config (a bad value exits with status 2 and a
 * message naming it), pino logger, /metrics, NATS, the ready line and ordered shutdown.
 */
export async function runService<S extends z.ZodObject>(
  role: string,
  schema: S,
  start: (ctx: ServiceContext<z.infer<S> & CommonConfig>) => Promise<StartedService>,
  /** What the options say together that none says alone, checked before anything connects; each names its options. */
  configProblems?: (config: z.infer<S> & CommonConfig) => string[],
): Promise<void> {
  const full = commonSchema.extend(schema.shape);
  if (process.argv.includes("--help")) {
    process.stdout.write(`usage: ${role} [options]\n${configHelp(full)}\n`);
    process.exit(0);
  }
  let config: z.infer<S> & CommonConfig;
  let security: ResolvedSecurity;
  try {
    config = loadConfig(full) as z.infer<S> & CommonConfig;
    const problems = configProblems?.(config) ?? [];
    if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.map((p) => `  ${p}`).join("\n")}`);
    // A configured auth mode or TLS whose secret or certificate is missing: refuse to start.
    security = resolveSecurity(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${role}: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const id = config.id ?? makeInstanceId(role);
  const logger = createLogger(role, id, config.logLevel);
  const advertiseHost = config.advertiseHost ?? (config.host === "0.0.0.0" ? hostname() : config.host);
  try {
    const metrics = createMetricsRegistry({ service: role });
    const metricsServer = await startMetricsServer(metrics, config.host, config.metricsPort);
    const grpcTls =
      security.grpc && config.grpcTlsCertFile && config.grpcTlsKeyFile && config.grpcTlsCaFile
        ? new ReloadingTls(
            { certFile: config.grpcTlsCertFile, keyFile: config.grpcTlsKeyFile, caFile: config.grpcTlsCaFile },
            security.grpc,
            logger,
          ).start(config.grpcTlsReloadMs)
        : undefined;
    applyGrpcTls(grpcTls ?? security.grpc);
    const nc = await connectNats({ servers: config.natsUrl, name: id, ...security.nats }, logger);
    const garbled = new Counter({
      name: "infergrid_garbled_messages_total",
      help: "NATS messages dropped as undecodable",
      registers: [metrics],
    });
    const started = await start({
      config,
      id,
      logger,
      metrics,
      nc,
      advertise: (port) => `${advertiseHost}:${port}`,
      onGarbled: () => garbled.inc(),
      grpcTls: security.grpc,
      onGrpcTlsChange: (listener) => grpcTls?.onChange(listener) ?? (() => false),
      clientCertificateOptional: () =>
        // requestCert stays on (a certificate is asked for and checked); rejectUnauthorized is off.
        grpcTls === undefined ? undefined : grpc.experimental.createCertificateProviderServerCredentials(grpcTls, grpcTls, false),
    });
    installShutdown(
      logger,
      [
        ...started.shutdown,
        { name: "nats", run: () => nc.drain() },
        { name: "metrics", run: () => metricsServer.close() },
        { name: "tls-reload", run: async () => grpcTls?.stop() },
      ],
      config.shutdownGraceMs + 5000,
    );
    announceReady(logger, { id, metricsAddress: metricsServer.address, ...started.ready });
  } catch (err) {
    logger.fatal({ err }, "start-up failed");
    process.exit(1);
  }
}
