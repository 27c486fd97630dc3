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

  const m = allocatorMetrics(metrics, allocator);
  const subscriptions = collect(nc, allocator, logger, ctx.onGarbled);
  const loop = startControlLoop(allocator, config.controlPeriodMs, (s) => m.reconcileSeconds.observe(s));

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
    ],
  };
});
