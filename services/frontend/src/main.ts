import { heartbeatSigner, ServiceRegistry, serveMember } from "@infergrid/control-plane";
import { SteadyClock, systemRandom } from "@infergrid/core";
import { RoutedInferenceDefinition } from "@infergrid/proto";
import { addServiceWithMultiplex, ClientCache, callSignal, requirePeerRole, runService, unaryHandler } from "@infergrid/runtime";
import { PRUNE_BUDGET_DEFAULTS } from "@infergrid/swayam";
import { Counter } from "prom-client";
import { BackendTracker } from "./backend-tracker.js";
import { frontendConfig } from "./config.js";
import { Dispatcher } from "./dispatcher.js";
import { Frontend } from "./frontend.js";
import { createScaler } from "./scalers.js";
import { ServiceTable } from "./service-table.js";
import { Warmer } from "./warmer.js";

await runService("frontend", frontendConfig, async (ctx) => {
  const { config, id, logger, metrics, nc } = ctx;
  const registry = await ServiceRegistry.open(nc, logger);
  const clients = new ClientCache();
  // Every interval this frontend measures (rates, deadlines, cooldowns, load windows) is on this clock.
  const clock = new SteadyClock();
  const tracker = new BackendTracker(config.backendFailCooldownMs);
  const warmUps = new Counter({
    name: "infergrid_frontend_warmups_total",
    help: "Warm-up requests sent to backends",
    registers: [metrics],
  });
  const warmer = new Warmer(clients, tracker, id, 2_000, logger.child({ component: "warmer" }), () => warmUps.inc(), clock);
  const dispatcher = new Dispatcher(
    clients,
    tracker,
    systemRandom,
    {
      retryGapMs: config.retryGapMs,
      attemptTimeoutMs: config.attemptTimeoutMs,
      retryAfterMs: 1000,
      answerReserveMs: config.answerReserveMs,
      parkWindowMs: config.parkWindowMs,
    },
    logger.child({ component: "dispatch" }),
    clock,
  );
  // Heartbeats and load reports sealed with this frontend's certificate (readers with --signed-heartbeats require it).
  const signer = heartbeatSigner(ctx);
  let frontend: Frontend | undefined;
  const table = new ServiceTable(registry, logger.child({ component: "services" }), (name, entry) => {
    frontend?.onServiceChange(name, entry);
    clients.retain(table.addresses());
  });
  frontend = new Frontend({
    id,
    table,
    tracker,
    dispatcher,
    warmer,
    newScaler: () => createScaler(config),
    requestTimeoutMs: config.requestTimeoutMs,
    pruneBudget: { ...PRUNE_BUDGET_DEFAULTS, mode: config.pruneBudget },
    nc,
    metrics,
    logger,
    clock,
    signer,
  });
  const fe = frontend;
  table.start();

  const autoscale = setInterval(() => {
    fe.autoscaleTick(clock.now());
    // A late Release or withdraw to a backend no longer listed opens a channel to it; it is closed here.
    clients.retain(table.addresses());
  }, config.autoscaleMs);
  const reports = setInterval(() => fe.publishLoad(clock.now()), config.loadReportMs);
  const member = await serveMember(ctx, {
    role: "frontend",
    signer,
    maxReceiveMessageBytes: config.maxRequestBytes,
    // Infer also over the broker's multiplexed stream (runtime multiplex.ts), the same handler.
    register: (server) =>
      addServiceWithMultiplex(
        server,
        RoutedInferenceDefinition,
        {
          // With --grpc-peer-roles: the broker, or clients given a direct-client identity (README, "Direct mode").
          Infer: requirePeerRole(
            config.grpcPeerRoles,
            ["broker", "direct-client"],
            "Infer",
            unaryHandler(logger, (req, call) => fe.infer(req, call.getDeadline(), callSignal(call), call.getPeer())),
          ),
        },
        logger,
        // The request (its tensors views of the body) does not outlive the call: the frontend forwards it and
        // answers with what the backend sent.
        { pooled: true },
      ),
  });

  return {
    ready: member.ready,
    shutdown: [
      ...member.shutdown,
      {
        name: "loops",
        run: () => {
          clearInterval(autoscale);
          clearInterval(reports);
          table.stop();
          clients.closeAll();
        },
      },
    ],
  };
});
