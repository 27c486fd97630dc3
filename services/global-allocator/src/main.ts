import { OBJECTIVES, planStaticAllocation } from "@infergrid/allocation";
import { heartbeatVerifier, JobStore, ServiceRegistry, serveMember } from "@infergrid/control-plane";
import { SteadyClock } from "@infergrid/core";
import { LOAN_FLOOR_PLAN, loanShare } from "@infergrid/fapes";
import { AllocatorAdminDefinition } from "@infergrid/proto";
import { type CommonConfig, runService, type ServiceContext, type StartedService } from "@infergrid/runtime";
import { themisPolicy } from "@infergrid/themis";
import { RegistryActuator, readRegistry } from "./actuator.js";
import { adminHandlers, adminOnly } from "./admin.js";
import { Allocator } from "./allocator.js";
import { collect } from "./collector.js";
import { type AllocatorConfig, allocatorConfig, configProblems, timing } from "./config.js";
import { LOAN_DEFAULTS } from "./loans.js";
import { startControlLoop } from "./loop.js";
import { allocatorMetrics } from "./metrics.js";
import { plannedSpec, SharePlanner } from "./planner.js";
import { createPoolActuator } from "./pool-actuator.js";
import { PoolManager } from "./pool-manager.js";
import { SignalBook } from "./signals.js";
import { forecastPeak, ThemisController } from "./themis-controller.js";

/** Load reports are kept this long: the reactive step looks at the last control periods only. */
const SIGNAL_KEEP_MS = 5 * 60_000;
/** Planned service time of a service with no profile in its spec and no measurements yet. */
const DEFAULT_SERVICE_TIME_MS = 100;
/** A frontend's load report older than this says nothing of the rate now (frontends report every second). */
const THEMIS_RATE_MAX_AGE_MS = 3_000;
/** The same for the loans' floors, which read the rate over one reclaim lead time. */
const LOAN_RATE_MAX_AGE_MS = 3_000;
/** A resize the heartbeats do not show applied after this long is asked again (heartbeats come every 0.5-1 s). */
const THEMIS_RESIZE_RETRY_MS = 3_000;

async function serveAllocator(ctx: ServiceContext<AllocatorConfig & CommonConfig>): Promise<StartedService> {
  const { config, logger, metrics, nc } = ctx;
  // Every interval the allocator measures (silence, settling, grace, loans' timers) on a clock a step of the wall
  // clock does not move; peers' timestamps are carried onto it where they are received (collector.ts).
  const clock = new SteadyClock();
  const now = () => clock.now();
  const registry = await ServiceRegistry.open(nc, logger);
  const jobStore = config.loans === "on" ? await JobStore.open(nc, logger) : undefined;
  // One verifier for heartbeats and job results: the same CA bundle, renewed in place.
  const verifier = heartbeatVerifier(ctx);
  const { ttlMs, graceMs, settleMs, resumeSettleMs, deafAfterMs } = timing(config);
  const signals = new SignalBook(SIGNAL_KEEP_MS);
  const actuator = createPoolActuator(config, ctx.id, logger);
  // Per service whose model has a Themis profile: the only writer of its backends' sizes and its list length.
  const themis = new ThemisController(
    {
      ratePerS: (service, now) =>
        signals.latestRatePerS(service, now, THEMIS_RATE_MAX_AGE_MS + config.themisRateWindowMs, config.themisRateWindowMs),
      forecastPeakPerS: (service, now, horizonMs) =>
        config.themisPeak === "observed"
          ? undefined
          : forecastPeak(signals.forecast(service, now, config.forecastMaxAgeMs), now, horizonMs),
    },
    {
      resize: async (id, cores, maxBatch) => {
        if (!actuator) throw new Error("no pool actuator to resize backends with (--pool-actuator none)");
        await actuator.resize(id, cores, maxBatch);
      },
      onResize: (what) => m.backendResizes.inc({ what }),
    },
    {
      nodeCores: config.themisNodeCores,
      maxBatch: config.themisMaxBatch,
      maxListLength: config.poolMaxSize,
      horizonMs: config.themisHorizonMs,
      resizeRetryMs: THEMIS_RESIZE_RETRY_MS,
      policy: themisPolicy({
        stableTicks: config.themisStableTicks,
        scaleDownDelayMs: config.themisScaleDownDelayMs,
        maxUtilization: config.themisMaxUtilization,
      }),
    },
    logger.child({ component: "themis" }),
  );
  const planner =
    config.policy === "faro"
      ? new SharePlanner(
          signals,
          {
            objective: OBJECTIVES[config.objective],
            solvePeriodMs: config.solvePeriodMs,
            tickMs: config.reactiveTickMs,
            reactiveTicks: config.reactiveTicks,
            plan: config.planQuantile >= 1 ? { kind: "max" } : { kind: "quantile", q: config.planQuantile },
            coldStartMs: config.plannedColdStartMs,
            forecastMaxAgeMs: config.forecastMaxAgeMs,
            defaultServiceTimeMs: DEFAULT_SERVICE_TIME_MS,
            ...(jobStore ? { floorPlan: LOAN_FLOOR_PLAN } : {}),
          },
          logger.child({ component: "planner" }),
        )
      : undefined;
  const allocator = new Allocator(new RegistryActuator(registry, nc), logger.child({ component: "allocator" }), {
    now,
    ttlMs,
    graceMs,
    settleMs,
    resumeSettleMs,
    deafAfterMs,
    memberForgetMs: config.memberForgetMs,
    specDefaults: {
      initialBackends: config.defaultInitialBackends,
      minBackends: config.defaultMinBackends,
      burstFactor: config.defaultBurstFactor,
    },
    instanceTypes: config.instanceTypes ?? [],
    ...(config.budgetPerHour !== undefined ? { budgetPerHour: config.budgetPerHour } : {}),
    batchesOf: (n: string) => signals.batches(n),
    objective: planner ? `faro/${config.objective}` : "static",
    policy: planner?.policy ?? planStaticAllocation,
    ...(planner ? { describe: (n: string) => planner.describe(n), lastSolve: () => planner.lastSolve } : {}),
    ...(planner && jobStore
      ? {
          // The loans' floors: the larger of the plan's share and the floor plan's (libs/fapes LOAN_FLOOR_PLAN), and
          // the rate the frontends reported over one reclaim lead time.
          loadOf: (n: string, now: number) => {
            const leadMs = config.jobGraceMs + config.plannedColdStartMs;
            const share = loanShare(planner.describe(n)?.share, planner.floorShare(n));
            const ratePerS = signals.latestRatePerS(n, now, leadMs + LOAN_RATE_MAX_AGE_MS, leadMs);
            const o = signals.outcomes(n, now - leadMs);
            return {
              ...(share !== undefined ? { share } : {}),
              ...(ratePerS !== undefined ? { ratePerS } : {}),
              ...(o.completed > 0 ? { serviceTimeMs: o.serviceTimeMeanMs } : {}),
            };
          },
          policyWithFloors: (floors: ReadonlyMap<string, number>) => planner.policyWithFloors(floors),
        }
      : {}),
    listTarget: (n: string) => themis.target(n),
    ...(jobStore
      ? {
          jobs: {
            store: jobStore,
            loan: {
              ...LOAN_DEFAULTS,
              // A plan that follows the load (Faro's shares) is what inference needs; a static split is not.
              need: config.loanNeed !== "auto" ? config.loanNeed : config.policy === "faro" ? "floors" : "plan-in-use-headroom",
              strategy: config.loanReclaim,
              holdMs: config.loanHoldMs,
              finishedRetentionMs: config.jobRetentionMs,
              graceMs: config.jobGraceMs,
              // A reclaimed backend serves again after its grace period and a cold start.
              headroom: {
                leadTimeMs: config.jobGraceMs + config.plannedColdStartMs,
                memoryMs: Math.max(config.loanHeadroomMemoryMs, config.jobGraceMs + config.plannedColdStartMs),
                floor: config.loanHeadroomFloor,
              },
              returnTimeoutMs: config.jobGraceMs + 2 * ttlMs + 10_000,
              ...(verifier ? { resultProblem: (result, raw) => verifier.jobResultProblem(result, raw) } : {}),
            },
          },
        }
      : {}),
  });
  const found = await readRegistry(registry);
  allocator.restore(found.services, found.assignments, now());
  if (jobStore) await allocator.restoreJobs(await jobStore.listJobs(), found.assignments, now());

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
  const m = allocatorMetrics(metrics, allocator, () => poolManager?.target, now);
  const subscriptions = collect(nc, allocator, signals, logger, ctx.onGarbled, clock, verifier, (outcome) =>
    m.loadReports.inc({ outcome }),
  );
  const loop = startControlLoop(
    allocator,
    config.controlPeriodMs,
    (s) => {
      m.reconcileSeconds.observe(s);
      m.accrueCoreSeconds(now());
      void poolManager?.step(now());
    },
    (now) => {
      if (!planner) return;
      signals.expire(now);
      const specs = allocator.listServices().flatMap((e) => (e.spec ? [plannedSpec(e.spec)] : []));
      // With an actuator the pool can grow to the cluster's size; without, the pool is what there is.
      const capacity = actuator ? config.poolMaxSize : allocator.snapshot(now).poolSize;
      planner.tick(now, specs, capacity);
    },
    now,
  );

  const themisTimer = setInterval(() => {
    const t = now();
    const reports = themis.tick(t, allocator.themisServices(t));
    // The list targets apply on the next reconcile: ask for one now rather than a control period later.
    if (reports.length > 0) allocator.wake();
  }, config.themisTickMs);

  const member = await serveMember(ctx, {
    role: "allocator",
    register: (server) =>
      server.addService(AllocatorAdminDefinition, adminOnly(adminHandlers(allocator, logger, now), config.grpcPeerRoles)),
  });

  return {
    ready: member.ready,
    shutdown: [
      ...member.shutdown,
      {
        name: "loop",
        run: () => {
          loop.stop();
          clearInterval(themisTimer);
          for (const s of subscriptions) s.unsubscribe();
        },
      },
      // Local backends are this process's children: they go with it. A Kubernetes pool stays.
      { name: "pool", run: () => actuator?.close() },
    ],
  };
}

await runService("global-allocator", allocatorConfig, serveAllocator, configProblems);
