import { readFileSync } from "node:fs";
import { HeardClock, heartbeatVerifier, MembershipTable, ServiceRegistry, serveMember } from "@infergrid/control-plane";
import { SteadyClock } from "@infergrid/core";
import { ClientAuthenticator, ClientRateLimiter, ClientTokensError, peerAddress, readClientTokensFile } from "@infergrid/dataplane";
import { RoutedInferenceDefinition, type RoutedInferRequest } from "@infergrid/proto";
import {
  CLIENT_FACING_CONNECTION_WINDOW_BYTES,
  CLIENT_FACING_WINDOW_BYTES,
  ClientCache,
  type CommonConfig,
  callSignal,
  type GrpcTls,
  type grpc,
  type Logger,
  peerIdentity,
  runService,
  type ServiceContext,
  type StartedService,
  serveUnaryDirect,
  unaryHandler,
} from "@infergrid/runtime";
import { Counter } from "prom-client";
import { type BrokerConfig, brokerConfig, brokerConfigProblems } from "./config.js";
import { Forwarder, watchFrontends } from "./forwarder.js";
import { FrontendRotation } from "./frontend-rotation.js";
import { buildHttpIngress, renewHttpsCertificate } from "./http-ingress.js";
import { Ingress, type IngressAuth } from "./ingress.js";
import { ModelDirectory } from "./model-directory.js";
import { OpenInferenceServingDefinition, openInferenceHandlers } from "./open-inference-grpc.js";

/** Client auth from the tokens file (already checked by the config), read again on SIGHUP: rotation without a restart. */
function clientAuth(file: string, parent: Logger): IngressAuth {
  const logger = parent.child({ component: "client-auth" });
  const authenticator = new ClientAuthenticator(readClientTokensFile(file));
  logger.info({ file, clients: authenticator.clients.length }, "client auth on: every request needs a client token");
  process.on("SIGHUP", () => {
    try {
      authenticator.replace(readClientTokensFile(file));
      logger.info({ file, clients: authenticator.clients.length }, "client tokens reloaded");
    } catch (err) {
      if (!(err instanceof ClientTokensError)) throw err;
      // A half-written or broken file must not lock every client out: the tokens in use stay.
      logger.error({ problem: err.message }, "client tokens file not reloaded; the previous tokens stay in use");
    }
  });
  return { authenticator, logger };
}

async function serveBroker(ctx: ServiceContext<BrokerConfig & CommonConfig>): Promise<StartedService> {
  const { config, logger, metrics, nc, advertise } = ctx;
  const members = new MembershipTable<null>(config.frontendTtlMs);
  const rotation = new FrontendRotation(config.ejectMs);
  const clients = new ClientCache();
  const failovers = new Counter({
    name: "infergrid_broker_failovers_total",
    help: "Calls moved to another frontend",
    registers: [metrics],
  });
  // Heartbeats' arrival, ejections and deadlines are timed on this clock.
  const clock = new SteadyClock();
  const heard = new HeardClock(config.frontendTtlMs);
  const membershipLog = logger.child({ component: "membership" });
  watchFrontends(nc, members, membershipLog, ctx.onGarbled, clock, heard, heartbeatVerifier(ctx));
  const forwarder = new Forwarder(
    members,
    heard,
    rotation,
    clients,
    {
      maxFailovers: config.maxFailovers,
      staleGraceMs: config.frontendTtlMs * 10,
      answerReserveMs: config.answerReserveMs,
      onFailover: () => failovers.inc(),
    },
    logger,
    clock,
  );
  const limiter =
    config.clientRateLimit > 0
      ? new ClientRateLimiter({
          ratePerSec: config.clientRateLimit,
          burst: config.clientBurst > 0 ? config.clientBurst : Math.max(1, Math.ceil(config.clientRateLimit)),
        })
      : undefined;
  const auth = config.clientTokensFile === undefined ? undefined : clientAuth(config.clientTokensFile, logger);
  const ingress = new Ingress(forwarder, config.requestTimeoutMs, metrics, limiter, auth);

  let deaf = false;
  const housekeeping = setInterval(() => {
    // No frontend heard for a ttl: NATS is away, not every frontend dead. Those live when it went stay in the
    // rotation (over gRPC, a call that fails still ejects one) and are not forgotten.
    const clockNow = clock.now();
    if (heard.deaf(clockNow) !== deaf) {
      deaf = !deaf;
      if (deaf)
        membershipLog.warn({ silentMs: heard.silentMs(clockNow) }, "no frontend heartbeat (NATS away?): the rotation is kept as it was");
      else membershipLog.info("frontends' heartbeats are back");
    }
    const now = heard.at(clockNow);
    members.expire(now, config.frontendTtlMs * 10);
    const live = members.live(now);
    rotation.forgetExcept(live.map((m) => m.id));
    clients.retain(members.all().map((m) => m.address));
  }, 1000);

  const version = packageVersion();
  // The registered services, read for the Open Inference Protocol's model readiness and metadata.
  const models = new ModelDirectory();
  const registry = await ServiceRegistry.open(nc, logger);
  const stopModelWatch = registry.watchServices((name, entry) => models.update(name, entry));
  const certificate = (tls: GrpcTls | undefined) => (tls?.cert && tls.key ? { cert: tls.cert, key: tls.key } : undefined);
  const httpsCertificate = config.httpTls ? certificate(ctx.grpcTls) : undefined;
  const http = buildHttpIngress(
    ingress,
    {
      maxRequestBytes: config.maxRequestBytes,
      receiveTimeoutMs: config.httpReceiveTimeoutMs,
      serverVersion: version,
      models,
      tls: httpsCertificate,
    },
    logger,
  );
  // cert-manager renews the files in place: new HTTPS connections take the certificate gRPC's take.
  const stopHttpsRenewal = httpsCertificate
    ? ctx.onGrpcTlsChange((tls) => {
        const renewed = certificate(tls);
        if (renewed) renewHttpsCertificate(http, renewed);
      })
    : () => {};
  await http.listen({ host: config.host, port: config.httpPort });
  const httpPort = (http.server.address() as { port: number }).port;
  const member = await serveMember(ctx, {
    role: "broker",
    maxReceiveMessageBytes: config.maxRequestBytes,
    windowBytes: CLIENT_FACING_WINDOW_BYTES,
    connectionWindowBytes: CLIENT_FACING_CONNECTION_WINDOW_BYTES,
    credentials: config.clientCertificates === "optional" ? ctx.clientCertificateOptional() : undefined,
    register: (server) => {
      type Call = Pick<grpc.ServerUnaryCall<unknown, unknown>, "metadata" | "getPeer" | "getAuthContext">;
      const admit = (call: Call) => {
        const identity = peerIdentity(call);
        return ingress.admit("grpc", {
          authorization: call.metadata.get("authorization").map(String),
          peer: peerAddress(call.getPeer()),
          certificateClient: identity?.role === "client" ? identity.id : undefined,
        });
      };
      // Who a call comes from, when the direct path admitted it on its headers (before its body).
      const admitted = new WeakMap<object, string>();
      const infer = unaryHandler<RoutedInferRequest, Uint8Array>(logger, async (req, call) =>
        ingress.handle("grpc", req, call.getDeadline(), admitted.get(call) ?? admit(call), callSignal(call)),
      );
      server.addService(RoutedInferenceDefinition, { Infer: infer });
      // The Open Inference Protocol's ModelInfer takes the same direct path as Infer: its body in a pooled buffer
      // (grpc-js's copy of a 588 KiB image cost the broker about 2 ms of CPU a request), its client admitted first.
      const openInference = openInferenceHandlers(ingress, models, (call) => admitted.get(call) ?? admit(call), version, logger);
      server.addService(OpenInferenceServingDefinition, openInference);
      serveUnaryDirect(server, OpenInferenceServingDefinition.ModelInfer, openInference.ModelInfer, {
        pooled: true,
        beforeBody: (call) => admitted.set(call, admit(call)),
      });
      serveUnaryDirect(server, RoutedInferenceDefinition.Infer, infer, {
        // The request (its tensors views of the body) does not outlive the call: forwarded, answered with the frontend's bytes.
        pooled: true,
        // A client that did not authenticate is refused before its body is read.
        beforeBody: (call) => admitted.set(call, admit(call)),
      });
    },
  });

  return {
    ready: { ...member.ready, httpAddress: advertise(httpPort) },
    shutdown: [
      ...member.shutdown,
      { name: "http", run: () => http.close() },
      {
        name: "clients",
        run: () => {
          clearInterval(housekeeping);
          stopModelWatch();
          stopHttpsRenewal();
          clients.closeAll();
        },
      },
    ],
  };
}

await runService("broker", brokerConfig, serveBroker, brokerConfigProblems);

/** The broker's package version, which the Open Inference Protocol's server metadata reports. */
function packageVersion(): string {
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    const version = typeof pkg === "object" && pkg !== null ? (pkg as { version?: unknown }).version : undefined;
    return typeof version === "string" ? version : "unknown";
  } catch {
    return "unknown";
  }
}
