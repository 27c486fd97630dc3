import { readFileSync } from "node:fs";
import { type InstanceTypePrice, OBJECTIVE_NAMES, SLOW_LOOP_DEFAULTS } from "@infergrid/allocation";
import { instanceTypeListSchema } from "@infergrid/kairos";
import { parseWorkload } from "@infergrid/pool-actuator";
import { controlTokenConfigShape, field } from "@infergrid/runtime";
import { INFERGRID_THEMIS } from "@infergrid/themis";
import { z } from "zod";

/** The price list is a Kairos catalogue's `types` (libs/kairos), so one file serves both. */
const priceList = instanceTypeListSchema;

/**
 * The instance-type price list from its option's value: a JSON list `[{name, pricePerHour, maxCount}]`
 * given inline (it starts with `[` or `{`) or the path of a JSON file holding one, or a Kairos catalogue
 * object whose `types` it takes (its other keys are not the allocator's business). Throws a message that
 * says what is wrong and where.
 */
export function parseInstanceTypes(
  value: string,
  readFile: (path: string) => string = (p) => readFileSync(p, "utf8"),
): InstanceTypePrice[] {
  const inline = /^\s*[[{]/.test(value);
  let text = value;
  if (!inline) {
    try {
      text = readFile(value.trim());
    } catch (err) {
      throw new Error(`cannot read the price list file ${value.trim()}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const where = inline ? "the inline price list" : `the price list file ${value.trim()}`;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${where} is not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const list = json !== null && typeof json === "object" && !Array.isArray(json) && "types" in json ? json.types : json;
  const parsed = priceList.safeParse(list);
  if (!parsed.success) {
    const at = (path: readonly PropertyKey[]) => path.map((k) => (typeof k === "number" ? `[${k}]` : `.${String(k)}`)).join("");
    const issues = parsed.error.issues.map((i) => (i.path.length > 0 ? `${at(i.path)}: ${i.message}` : i.message));
    throw new Error(`${where}: ${issues.join("; ")}`);
  }
  return parsed.data;
}

/** One per-type pool as configured: an instance type, and on Kubernetes the workload that holds it. */
export interface PoolTypeOption {
  instanceType: string;
  workload?: string;
}

/** `--pool-types` entries: `<type>` or `<type>=<workload>`, types distinct, workloads well-formed and distinct. */
export function parsePoolTypes(entries: readonly string[]): PoolTypeOption[] {
  const out = entries.map((entry) => {
    const eq = entry.indexOf("=");
    const instanceType = (eq < 0 ? entry : entry.slice(0, eq)).trim();
    const workload = eq < 0 ? undefined : entry.slice(eq + 1).trim();
    if (!instanceType) throw new Error(`"${entry}": the instance type is empty`);
    if (workload !== undefined) parseWorkload(workload);
    return workload === undefined ? { instanceType } : { instanceType, workload };
  });
  const twice = out.find((p, i) => out.findIndex((q) => q.instanceType === p.instanceType) !== i);
  if (twice) throw new Error(`instance type ${twice.instanceType} is given two pools`);
  const shared = out.find((p, i) => p.workload !== undefined && out.findIndex((q) => q.workload === p.workload) !== i);
  if (shared) throw new Error(`workload ${shared.workload} is given to two instance types`);
  return out;
}

const asIssue = <T>(parse: (v: string) => T) =>
  z.string().transform((v, ctx): T => {
    try {
      return parse(v);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: err instanceof Error ? err.message : String(err) });
      return z.NEVER;
    }
  });

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
  // kubernetes: a backend resized in place is told its new size through its Resize RPC, which needs the token.
  ...controlTokenConfigShape,
  poolBackendNatsUser: field
    .optionalString()
    .describe("local: the NATS user the backends it starts connect as (with --pool-backend-nats-pass-file); default: this process's own"),
  poolBackendNatsPassFile: field.optionalString().describe("local: the file holding that user's password"),
  poolBackendGrpcTlsCertFile: field
    .optionalString()
    .describe("local: the certificate the backends it starts present (with --pool-backend-grpc-tls-key-file); default: this process's own"),
  poolBackendGrpcTlsKeyFile: field.optionalString().describe("local: that certificate's key"),
  poolBackendEntry: field
    .optionalString()
    .describe("local: the backend-worker's compiled entry (default: services/backend-worker/dist/main.js beside this service)"),
  poolTypes: asIssue((v) =>
    parsePoolTypes(
      v
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean),
    ),
  )
    .default([])
    .describe(
      "one pool per instance type, in order of preference: <type>=<workload>,... with kubernetes (deployment/<name> or statefulset/<name>, instead of --pool-workload), <type>,... with local (each started with INFERGRID_INSTANCE_TYPE); empty = one pool",
    ),
  instanceTypes: asIssue((v) => parseInstanceTypes(v))
    .optional()
    .describe(
      "the instance-type price list: JSON [{name, pricePerHour, maxCount}] inline or the path of a JSON file (a Kairos catalogue's types); prices the cluster state, caps each type's pool at maxCount, and refuses service specs profiled for a type it does not name",
    ),
  budgetPerHour: z.coerce
    .number()
    .positive()
    .optional()
    .describe(
      "the cluster's cost budget, USD per hour (needs --instance-types): a service profiled per instance type is refused at registration when no configuration within it serves it, and the slow loop spends each service's share of it on the service's Kairos configuration, which sizes each type's pool and each list's per-type counts",
    ),
  themisNodeCores: field
    .int(16, 1)
    .describe("Themis: the most cores one backend may be given (its node's), for services whose model has a Themis profile"),
  themisMaxBatch: field.int(16, 1).describe("Themis: the largest batch a backend may be given (at most the workers' own bound)"),
  themisPeak: z
    .enum(["forecast", "observed"])
    .default("forecast")
    .describe(
      "Themis: the peak of the next window planned for: the forecast's top quantile over it when fresh (else the largest rate observed over the last one), or always the observed one",
    ),
  themisRateWindowMs: field
    .ms(2_000)
    .describe("Themis: the rate now is each frontend's arrivals over its latest load reports spanning this long"),
  themisStableTicks: field
    .int(INFERGRID_THEMIS.stableTicks, 1)
    .describe("Themis: K, consecutive stable ticks before moving back to 1-core replicas"),
  themisScaleDownDelayMs: field
    .ms(INFERGRID_THEMIS.scaleDownDelayMs)
    .describe("Themis: how long a surplus of replicas must hold before they are removed"),
  themisMaxUtilization: field
    .number(INFERGRID_THEMIS.maxUtilization, 0.05, 1)
    .describe("Themis: the share of a backend's modelled throughput planned as its capacity (the rest covers dispatch and noise)"),
  themisTickMs: field.ms(1_000).describe("Themis: period of the controller that resizes those services' backends and sizes their lists"),
  themisHorizonMs: field
    .ms(10_000)
    .describe(
      "Themis: the window whose predicted peak is planned for (the forecast's top quantile over it, else the largest rate seen over the last one)",
    ),
  loans: z
    .enum(["on", "off"])
    .default("on")
    .describe("best-effort jobs (FaPES): lend backends inference does not need to submitted jobs, and reclaim them when it does"),
  loanNeed: z
    .enum(["auto", "floors", "plan-headroom", "plan-in-use-headroom", "plan"])
    .default("auto")
    .describe(
      "what inference keeps before lending: per service, the larger of its share and what its reported rate needs, held --loan-hold-ms on a fall, with 2 spare (floors: auto with --policy faro, whose plan follows the load); its plan plus the learned headroom; the larger of its plan and the backends it uses, plus the headroom (auto with --policy static, whose plan does not); or the plan alone (FaPES)",
    ),
  loanReclaim: z
    .enum(["fewest-preemptions", "fapes-greedy", "random"])
    .default("fewest-preemptions")
    .describe(
      "which loaned backends go back first: the fewest jobs preempted (exact up to 16 jobs), FaPES's greedy (largest gain within the need), or random",
    ),
  loanHoldMs: field
    .ms(300_000)
    .describe("a fall of inference's need is followed (more lent) only once it has held this long; a rise is followed at once"),
  jobRetentionMs: field
    .ms(86_400_000)
    .describe(
      "a best-effort job finished (succeeded or cancelled) this long ago is forgotten: its record and results go, and its name may be used again",
    ),
  jobGraceMs: field.ms(15_000).describe("how long a reclaimed backend has to finish or abandon its job's item (FaPES: 15 s)"),
  loanHeadroomFloor: field
    .int(1, 0)
    .describe("spare backends inference always keeps beyond its plan when lending (more are learned from how fast its use rises)"),
  loanHeadroomMemoryMs: field.ms(3_600_000).describe("how far back the rises of inference's use are remembered for its spare backends"),
  poolMinSize: field.int(1, 0).describe("the pool never shrinks below this many backends"),
  poolMaxSize: field.int(16, 0).describe("the cluster's capacity in backends: the pool never grows beyond it"),
  poolHeadroom: field.int(1, 0).describe("free backends kept on top of what the lists ask for"),
  poolScaleDownDelayMs: field.ms(60_000).describe("a backend in no list this long may be removed from the pool"),
});

export type AllocatorConfig = z.infer<typeof allocatorConfig>;

/**
 * What no single option can say wrong alone, one message per problem naming the options: per-type pools
 * need an actuator and the form it takes, and name only types of the price list (a typo would start a
 * pool no service can be given).
 */
export function configProblems(
  config: Pick<AllocatorConfig, "poolActuator" | "poolTypes" | "instanceTypes"> &
    Partial<
      Pick<
        AllocatorConfig,
        "budgetPerHour" | "poolBackendNatsUser" | "poolBackendNatsPassFile" | "poolBackendGrpcTlsCertFile" | "poolBackendGrpcTlsKeyFile"
      >
    >,
): string[] {
  const problems: string[] = [];
  if ((config.poolBackendNatsUser === undefined) !== (config.poolBackendNatsPassFile === undefined))
    problems.push("--pool-backend-nats-user and --pool-backend-nats-pass-file: give both or neither");
  if ((config.poolBackendGrpcTlsCertFile === undefined) !== (config.poolBackendGrpcTlsKeyFile === undefined))
    problems.push("--pool-backend-grpc-tls-cert-file and --pool-backend-grpc-tls-key-file: give both or neither");
  if (config.budgetPerHour !== undefined && config.instanceTypes === undefined)
    problems.push("--budget-per-hour / INFERGRID_BUDGET_PER_HOUR: needs --instance-types (the budget buys instances at their prices)");
  const pools = config.poolTypes;
  if (pools.length === 0) return problems;
  if (config.poolActuator === "none") problems.push("--pool-types / INFERGRID_POOL_TYPES: needs --pool-actuator local or kubernetes");
  if (config.poolActuator === "kubernetes") {
    for (const p of pools.filter((p) => p.workload === undefined))
      problems.push(
        `--pool-types / INFERGRID_POOL_TYPES: with --pool-actuator kubernetes each entry is <type>=<workload>; ${p.instanceType} has no workload`,
      );
  }
  if (config.poolActuator === "local") {
    for (const p of pools.filter((p) => p.workload !== undefined))
      problems.push(
        `--pool-types / INFERGRID_POOL_TYPES: with --pool-actuator local entries are instance types only; ${p.instanceType}=${p.workload} names a workload`,
      );
  }
  if (config.instanceTypes) {
    const known = config.instanceTypes.map((t) => t.name);
    for (const p of pools.filter((p) => !known.includes(p.instanceType)))
      problems.push(
        `--pool-types / INFERGRID_POOL_TYPES: instance type ${p.instanceType} is not in --instance-types (it has: ${known.join(", ")})`,
      );
  }
  return problems;
}

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
