import { OBJECTIVE_NAMES, SLOW_LOOP_DEFAULTS } from "@infergrid/allocation";
import { field } from "@infergrid/runtime";
import { z } from "zod";

export const allocatorConfig = z.object({
  controlPeriodMs: field.ms(2_000).describe("period of the allocation loop (reconcile the lists with the plan, publish the plan)"),
  backendTtlMs: field
    .ms(0)
    .describe("a backend silent this long leaves the pool and its list (0 = 3 x heartbeatMs, the heartbeat period all members share)"),
  assignmentGraceMs: field
    .ms(0)
    .describe("a backend reporting cold with no service this long after its assignment has returned to the pool (0 = the ttl)"),
  settleMs: field
    .ms(0)
    .describe("after a restart with a non-empty registry, wait this long for heartbeats before changing lists (0 = the ttl)"),
  memberForgetMs: field.ms(60_000).describe("members of any role silent this long are dropped from the cluster state"),
  defaultInitialBackends: field.int(5, 0).describe("initial_backends of a spec that gives 0 (Swayam bootstraps with 5)"),
  defaultMinBackends: field.int(1, 0).describe("min_backends of a spec that gives 0"),
  defaultBurstFactor: field.number(2, 1).describe("burst_factor U of a spec that gives 0"),
  policy: z
    .enum(["static", "faro"])
    .default("static")
    .describe("how the pool is shared: static (capped or equal lists) or faro (the hybrid loop over forecasts and SLO violations)"),
  objective: z.enum(OBJECTIVE_NAMES).default(SLOW_LOOP_DEFAULTS.objective).describe("faro: the cluster objective the shares maximise"),
  solvePeriodMs: field.ms(SLOW_LOOP_DEFAULTS.solvePeriodMs).describe("faro: between predictive solves (Faro: 5 min)"),
  reactiveTickMs: field
    .ms(SLOW_LOOP_DEFAULTS.reactiveTickMs)
    .describe("faro: period of the reactive stage; SLO violations are judged over each tick"),
  reactiveTicks: field
    .int(SLOW_LOOP_DEFAULTS.reactiveTicks, 1)
    .describe("faro: consecutive violating ticks before a service's share grows by one"),
  planQuantile: field
    .number(SLOW_LOOP_DEFAULTS.planQuantile, 0, 1)
    .describe("faro: forecast quantile planned for (Faro's artifact: 0.6; 1 = the highest quantile published)"),
  plannedColdStartMs: field
    .ms(SLOW_LOOP_DEFAULTS.plannedColdStartMs)
    .describe("faro: capacity added now is planned to serve only after this"),
  forecastMaxAgeMs: field.ms(120_000).describe("faro: a forecast older than this is not planned from (the observed rate is)"),
  poolActuator: z
    .enum(["none", "local", "kubernetes"])
    .default("none")
    .describe("who grows and shrinks the backend pool: nobody (a fixed pool), local processes, or a Kubernetes workload"),
  poolWorkload: field.string("deployment/backend").describe("kubernetes: the pool's workload, deployment/<name> or statefulset/<name>"),
  poolNamespace: field.string("default").describe("kubernetes: the pool's namespace"),
  poolBackendEntry: field
    .optionalString()
    .describe("local: the backend-worker's compiled entry (default: services/backend-worker/dist/main.js beside this service)"),
  poolMinSize: field.int(1, 0).describe("the pool never shrinks below this many backends"),
  poolMaxSize: field.int(16, 0).describe("the cluster's capacity in backends: the pool never grows beyond it"),
  poolHeadroom: field.int(1, 0).describe("free backends kept on top of what the lists ask for"),
  poolScaleDownDelayMs: field.ms(60_000).describe("a backend in no list this long may be removed from the pool"),
});

export type AllocatorConfig = z.infer<typeof allocatorConfig>;

/** The time constants with their defaults resolved. */
export function timing(config: AllocatorConfig & { heartbeatMs: number }): {
  ttlMs: number;
  graceMs: number;
  settleMs: number;
  resumeSettleMs: number;
  deafAfterMs: number;
} {
  const ttlMs = config.backendTtlMs > 0 ? config.backendTtlMs : 3 * config.heartbeatMs;
  const settleMs = config.settleMs > 0 ? config.settleMs : ttlMs;
  return {
    // Two of the allocator's own heartbeat periods, capped below the ttl so deafness is noticed
    // before the silence could be read as backends leaving.
    deafAfterMs: Math.min(2 * config.heartbeatMs, 0.75 * ttlMs),
    ttlMs,
    graceMs: config.assignmentGraceMs > 0 ? config.assignmentGraceMs : ttlMs,
    settleMs,
    // After a NATS outage every member reconnects on its own schedule (reconnect waits, DNS of a
    // restarted server): in the container drill the last backend beat again 1.1-1.5 s after the first,
    // as long as a 1.5 s ttl, and one was once dropped from its list for it. Four ttls cover that.
    resumeSettleMs: Math.max(settleMs, 4 * ttlMs),
  };
}
