import { planStaticAllocation } from "@infergrid/allocation";
import { Registry, serveMember } from "@infergrid/control-plane";
import { AllocatorAdminDefinition } from "@infergrid/proto";
import { runService } from "@infergrid/runtime";
import { RegistryActuator, readRegistry } from "./actuator.js";
import { adminHandlers } from "./admin.js";
import { Allocator } from "./allocator.js";
import { collect } from "./collector.js";
import { allocatorConfig, timing } from "./config.js";
import { startControlLoop } from "./loop.js";
import { allocatorMetrics } from "./metrics.js";
import { createPoolActuator } from "./pool-actuator.js";
import { PoolManager } from "./pool-manager.js";
import { SignalBook } from "./signals.js";

/** Load reports are kept this long: the reactive step looks at the last control periods only. */
const SIGNAL_KEEP_MS = 5 * 60_000;

await runService("global-allocator", allocatorConfig, async (ctx) => {
  const { config, logger, metrics, nc } = ctx;
  const registry = await Registry.open(nc, logger);
  const { ttlMs, graceMs, settleMs, deafAfterMs } = timing(config);
  const allocator = new Allocator(new RegistryActuator(registry, nc), logger.child({ component: "allocator" }), {
    ttlMs,
    graceMs,
    settleMs,
    deafAfterMs,
    memberForgetMs: config.memberForgetMs,
    specDefaults: {
      initialBackends: config.defaultInitialBackends,
      minBackends: config.defaultMinBackends,
      burstFactor: config.defaultBurstFactor,
    },
    objective: "static",
    policy: planStaticAllocation,
  });
  const found = await readRegistry(registry);
  allocator.restore(found.services, found.assignments, Date.now());

  const actuator = createPoolActuator(config, ctx.id, logger);
  const poolManager =
    actuator &&
    new PoolManager(
      allocator,
      actuator,
      {
        minSize: config.poolMinSize,
        maxSize: config.poolMaxSize,
        headroom: config.poolHeadroom,
        scaleDownDelayMs: config.poolScaleDownDelayMs,
      },
      logger.child({ component: "pool" }),
      { onScaled: (from, to) => m.poolResizes.inc({ direction: to > from ? "up" : "down" }) },
    );
  const m = allocatorMetrics(metrics, allocator, () => poolManager?.target);
  const signals = new SignalBook(SIGNAL_KEEP_MS);
  const subscriptions = collect(nc, allocator, signals, logger, ctx.onGarbled);
  const loop = startControlLoop(allocator, config.controlPeriodMs, (s) => {
    m.reconcileSeconds.observe(s);
    void poolManager?.step(Date.now());
  });

  const member = await serveMember(ctx, {
    role: "allocator",
    register: (server) => server.addService(AllocatorAdminDefinition, adminHandlers(allocator, logger)),
  });

  return {
    ready: member.ready,
    shutdown: [
      ...member.shutdown,
      {
        name: "loop",
        run: () => {
          loop.stop();
          for (const s of subscriptions) s.unsubscribe();
        },
      },
      // Local backends are this process's children: they go with it. A Kubernetes pool stays.
      { name: "pool", run: () => actuator?.close() },
    ],
  };
});
