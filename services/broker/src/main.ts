import { MembershipTable, serveMember } from "@infergrid/control-plane";
import { ClientRateLimiter, peerAddress } from "@infergrid/dataplane";
import { RoutedInferenceDefinition } from "@infergrid/proto";
import { ClientCache, runService, unaryHandler } from "@infergrid/runtime";
import { Counter } from "prom-client";
import { brokerConfig } from "./config.js";
import { Forwarder, watchFrontends } from "./forwarder.js";
import { FrontendRotation } from "./frontend-rotation.js";
import { buildHttpIngress } from "./http-ingress.js";
import { Ingress } from "./ingress.js";

await runService("broker", brokerConfig, async (ctx) => {
  const { config, logger, metrics, nc, advertise } = ctx;
  const members = new MembershipTable<null>(config.frontendTtlMs);
  const rotation = new FrontendRotation(config.ejectMs);
  const clients = new ClientCache();
  const failovers = new Counter({
    name: "infergrid_broker_failovers_total",
    help: "Calls moved to another frontend",
    registers: [metrics],
  });
  watchFrontends(nc, members, logger.child({ component: "membership" }), ctx.onGarbled);
  const forwarder = new Forwarder(
    members,
    rotation,
    clients,
    {
      maxFailovers: config.maxFailovers,
      staleGraceMs: config.frontendTtlMs * 10,
      answerReserveMs: config.answerReserveMs,
      onFailover: () => failovers.inc(),
    },
    logger,
  );
  const limiter =
    config.clientRateLimit > 0
      ? new ClientRateLimiter({
          ratePerSec: config.clientRateLimit,
          burst: config.clientBurst > 0 ? config.clientBurst : Math.max(1, Math.ceil(config.clientRateLimit)),
        })
      : undefined;
  const ingress = new Ingress(forwarder, config.requestTimeoutMs, metrics, limiter);

  const housekeeping = setInterval(() => {
    const now = Date.now();
    members.expire(now, config.frontendTtlMs * 10);
    const live = members.live(now);
    rotation.forgetExcept(live.map((m) => m.id));
    clients.retain(members.all().map((m) => m.address));
  }, 1000);

  const http = buildHttpIngress(
    ingress,
    { maxRequestBytes: config.maxRequestBytes, receiveTimeoutMs: config.httpReceiveTimeoutMs },
    logger,
  );
  await http.listen({ host: config.host, port: config.httpPort });
  const httpPort = (http.server.address() as { port: number }).port;
  const member = await serveMember(ctx, {
    role: "broker",
    maxReceiveMessageBytes: config.maxRequestBytes,
    register: (server) =>
      server.addService(RoutedInferenceDefinition, {
        Infer: unaryHandler(logger, (req, call) => ingress.handle("grpc", req, call.getDeadline(), peerAddress(call.getPeer()))),
      }),
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
          clients.closeAll();
        },
      },
    ],
  };
});
