import type { control } from "@infergrid/proto";
import {
  type CommonConfig,
  type GrpcServerHandle,
  type grpc,
  type ServiceContext,
  type ShutdownStep,
  startGrpcServer,
} from "@infergrid/runtime";
import { startHeartbeat } from "./heartbeat.js";
import { HeartbeatSigner, HeartbeatVerifier } from "./heartbeat-signature.js";
import type { RoleName } from "./subjects.js";

export interface MemberOptions {
  role: RoleName;
  maxReceiveMessageBytes?: number;
  /** HTTP/2 flow-control window (runtime grpc.ts SERVER_WINDOW_BYTES unless given). */
  windowBytes?: number;
  /** HTTP/2 flow-control window per connection (SERVER_WINDOW_BYTES unless given). */
  connectionWindowBytes?: number;
  register(server: grpc.Server): void;
  /** The server's credentials, when not the process's defaults (the broker's, with client certificates optional). */
  credentials?: grpc.ServerCredentials | undefined;
  /** Extra heartbeat fields, read at each beat. */
  heartbeatExtra?: () => Partial<control.IHeartbeat>;
  /** The process's signer, when it signs more than its heartbeats (a backend's job results, a frontend's load reports); else made here. */
  signer?: HeartbeatSigner | undefined;
}

export interface MemberHandle {
  grpcServer: GrpcServerHandle;
  heartbeat: { stop(): void; beat(): void };
  ready: { grpcAddress: string };
  /** Leave the membership first (a last heartbeat marked draining), then stop serving. */
  shutdown: ShutdownStep[];
}

/**
 * How a service joins the cluster: its gRPC server (with the standard health service, SERVING
 * from here on) and its membership heartbeat carrying the address others reach it at.
 */
export async function serveMember(ctx: ServiceContext<CommonConfig>, options: MemberOptions): Promise<MemberHandle> {
  const { config } = ctx;
  const grpcServer = await startGrpcServer({
    host: config.host,
    port: config.grpcPort,
    register: options.register,
    ...(options.maxReceiveMessageBytes === undefined ? {} : { maxReceiveMessageBytes: options.maxReceiveMessageBytes }),
    ...(options.windowBytes === undefined ? {} : { windowBytes: options.windowBytes }),
    ...(options.connectionWindowBytes === undefined ? {} : { connectionWindowBytes: options.connectionWindowBytes }),
    ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
  });
  const address = ctx.advertise(grpcServer.port);
  const heartbeat = startHeartbeat(ctx.nc, {
    role: options.role,
    id: ctx.id,
    address,
    intervalMs: config.heartbeatMs,
    ...(options.heartbeatExtra ? { extra: options.heartbeatExtra } : {}),
    signer: options.signer ?? heartbeatSigner(ctx),
  });
  grpcServer.health.setStatus("", "SERVING");
  return {
    grpcServer,
    heartbeat,
    ready: { grpcAddress: address },
    shutdown: [
      { name: "heartbeat", run: () => heartbeat.stop() },
      { name: "grpc", run: () => grpcServer.shutdown(config.shutdownGraceMs) },
    ],
  };
}

/** A process with a gRPC certificate signs its heartbeats with it (readers with --signed-heartbeats require it). */
export function heartbeatSigner(ctx: Pick<ServiceContext<CommonConfig>, "grpcTls" | "onGrpcTlsChange">): HeartbeatSigner | undefined {
  const tls = ctx.grpcTls;
  if (!tls?.cert || !tls.key) return undefined;
  const signer = new HeartbeatSigner(tls.cert, tls.key);
  // A renewed certificate signs from then on: the old one would be refused once it expires.
  ctx.onGrpcTlsChange((now) => {
    if (now.cert && now.key) signer.renew(now.cert, now.key);
  });
  return signer;
}

/** What a heartbeat reader checks signatures with: undefined unless --signed-heartbeats (which needs gRPC TLS). */
export function heartbeatVerifier(
  ctx: Pick<ServiceContext<CommonConfig>, "grpcTls" | "config" | "onGrpcTlsChange">,
): HeartbeatVerifier | undefined {
  if (!ctx.config.signedHeartbeats) return undefined;
  const ca = ctx.grpcTls?.ca;
  if (!ca) throw new Error("--signed-heartbeats needs the gRPC CA");
  const verifier = new HeartbeatVerifier(ca);
  // A CA rotation: the bundle renewed in place (both CAs for the time of the roll, then the new one alone).
  ctx.onGrpcTlsChange((now) => {
    if (now.ca) verifier.trust(now.ca);
  });
  return verifier;
}
