/**
 * What one simulation run is: the jobs, the cluster, the network, and the policy under test. Everything is
 * in milliseconds of virtual time. Scenarios (scenario.ts, run-experiment.ts) build these from a trace.
 */
import type { AllocationPolicy, ServiceShare, ShareControllerOptions } from "@infergrid/allocation";
import type { AnyClusterScalingPolicy, AnyScalingPolicy } from "@infergrid/baselines";
import type { Lognormal } from "@infergrid/core";
import type { ForecastPlan } from "@infergrid/faro";
import type { PruneBudgetSettings } from "@infergrid/swayam";
import type { Simulation } from "./engine.js";
import type { SimPredictorOptions } from "./signals.js";

/**
 * What one simulation may hold. Past these a run fails for lack of memory or runs for hours, so a scenario
 * asking for more is refused where it is read, naming the field. `backends` is also the width of the Swayam
 * cluster's message encoding.
 */
export const SIM_LIMITS = {
  backends: 4096,
  frontends: 1024,
  /** Requests one run replays (each costs about 40 bytes of typed arrays). */
  requests: 100_000_000,
  /** Bins of each per-bin series. */
  bins: 1_000_000,
  /** Ticks of one periodic timer (autoscaler, controller, predictor) over the run. */
  ticks: 10_000_000,
  /** Retries of one request before it is dropped (dropAfterMs / retryGapMs). */
  retries: 10_000,
} as const;

export type ServiceTimeSpec =
  | { kind: "lognormal"; dist: Lognormal }
  | { kind: "exponential"; meanMs: number }
  | { kind: "deterministic"; ms: number };

export interface JobSpec {
  name: string;
  serviceTime: ServiceTimeSpec;
  /** Latency threshold of the SLO (Swayam's RT_max, Faro's SLO), ms. */
  sloMs: number;
  /** SLO percentile as a fraction (Swayam's SL_min), e.g. 0.99. */
  slMin: number;
  /** Swayam's burst factor U. */
  burstFactor: number;
}

/**
 * How requests meet replicas in the baselines' mode (the load balancer in front of a Kubernetes Service,
 * Knative's activator, Ray Serve's router):
 *  - "random": uniform over ready replicas, each with its own FIFO queue (kube-proxy iptables mode picks an
 *    endpoint with `-m statistic --mode random`);
 *  - "first-available": one FIFO queue per job, served by the first replica with a free slot (Knative's
 *    activator with container-concurrency <= 3 uses its firstAvailableLBPolicy and buffers requests);
 *  - "power-of-two": two random ready replicas, the one with fewer ongoing requests, each holding at most
 *    maxOngoing (Ray Serve's PowerOfTwoChoicesRequestRouter, max_ongoing_requests 5); requests that find both
 *    full wait at the router until a slot frees.
 */
export type Routing = { kind: "random" } | { kind: "first-available" } | { kind: "power-of-two"; maxOngoing: number };

/** The policy families; each is the production code, wrapped by the matching cluster model. */
export type PolicySpec =
  | {
      kind: "swayam";
      name: string;
      scaling: "swayam" | "static";
      /** Lists re-planned by the slow loop (the experiment's SlowLoopSettings); otherwise fixed at time 0. */
      slowLoop?: boolean;
      /** Pruning of requests that can no longer meet RT_max: within each minute's tail (PruneBudget), or every one (Swayam's). */
      prune?: "budget" | "always";
      /** The frontends' fast reaction and learned warm headroom (this system's services' default). */
      learnedHeadroom?: boolean;
      /** Late binding: refused requests park at the prefix (libs/swayam ParkingLot) instead of probing again. */
      park?: boolean;
    }
  | ({
      kind: "autoscaler";
      name: string;
      routing: Routing;
      /** Replicas each job starts with (warm at time 0). */
      initialReplicas: number[];
      /** The predictor run for policies that read forecasts (default DEFAULT_SIM_PREDICTOR); unused otherwise. */
      predictor?: SimPredictorOptions;
    } & (
      | {
          /** One policy per job (state is per job); built by the experiment. */
          policies: AnyScalingPolicy[];
          central?: undefined;
        }
      | {
          /** One controller deciding every job's replicas at once (Faro's autoscaler), in place of per-job policies. */
          central: AnyClusterScalingPolicy;
          policies?: undefined;
        }
    ))
  | { kind: "clairvoyant"; name: string; variant: "A1" | "A2" };

export interface SwayamSettings {
  frontends: number;
  /** Period of each frontend's autoscaling decision. */
  autoscaleMs: number;
  /** Delta: the gap before a refused request is retried. */
  retryGapMs: number;
  tSetupMs: number;
  rateWindowMs: number;
  rateHistoryMs: number;
  scaleInCooldownMs: number;
  /**
   * How long the frontends counted arrivals before the run's first one (0 or undefined: counting starts with it).
   * infra/local's readiness probes reach the frontends a few seconds before its load, so their first rate
   * windows hold that quiet, and the regression sees the load's onset as a steep ramp.
   */
  countingLeadMs?: number;
  /**
   * d1 + d2 as the frontends' sizing model assumes it (services/frontend networkRttMs); undefined: 2 x hopMs,
   * the simulated round trip. They differ when hopMs stands for a measured overhead the services do not configure.
   */
  modelRttMs?: number;
  /** The static allocator's inputs: each job's list length (0 = an equal share) and its warm floor. */
  listLengths: number[];
  minWarm: number[];
  /** Entries warm at time 0 per job (Swayam bootstraps a few; the Faro evaluation starts each job at 1). */
  bootstrap: number[];
  /** The global allocator's static policy (libs/allocation), run at time 0 (and whenever the slow loop has no plan). */
  allocate: AllocationPolicy;
  /** Swayam's pruning (a service's pruneLate): a refused request that can no longer meet RT_max is dropped. */
  prune?: boolean;
  /** Which late requests pruning may drop (libs/swayam PruneBudget); undefined: every one (Swayam's). */
  pruneBudget?: PruneBudgetSettings;
  /** The frontends' fast reaction and learned warm headroom (libs/swayam FrontendScaler learnedHeadroom). */
  learnedHeadroom?: boolean;
  /**
   * Late binding (libs/swayam ParkingLot): a refused request parks at every prefix entry at once and the first
   * backend to free takes the oldest parked request. windowMs: how long a park round lasts before the request
   * probes again (and so finds entries that joined the prefix meanwhile). Undefined: Swayam's probing.
   */
  park?: { windowMs: number };
  /** The slow loop (predictor + the allocator's ShareController) re-planning the lists; undefined: lists fixed at time 0. */
  slowLoop?: SlowLoopSettings;
  /**
   * Backends loaned to best-effort jobs (FaPES, fapes-cluster.ts), built once per run; undefined: none, and the
   * cluster behaves exactly as without this field.
   */
  loans?: (sim: Simulation, cluster: LoanSurface) => LoanHook;
}

/** What the Swayam cluster lets a loan controller see and do (swayam-cluster.ts). */
export interface LoanSurface {
  readonly backendCount: number;
  backendId(b: number): string;
  /** Whether backend b is in some job's list. */
  inList(b: number): boolean;
  /** Whether backend b holds or is loading a model, or is draining (not free to lend without disturbing inference). */
  inUse(b: number): boolean;
  /** What inference uses now: per job, the longest prefix of its list a frontend dispatches to, summed. */
  inferenceInUse(): number;
  /**
   * Backends inference can lend without cutting a request short: cold ones in no list, then, from the lists' tails,
   * the cold or warm and idle entries past every frontend's prefix (`prefix`), or past the job's share of the slow
   * loop's plan (`share`: what FaPES lends, everything beyond the plan, the fast loop's burst room included), and
   * past the job's floor when `floors` names one.
   */
  lendCandidates(past: "prefix" | "share", floors?: ReadonlyMap<string, number>): number[];
  /** Takes cold or idle backends out of the pool inference plans over, re-plans the lists without them and unloads them. */
  withhold(backends: readonly number[]): void;
  /** Gives backends back to the pool (their job let go of them); the lists are re-planned at once. */
  giveBack(backends: readonly number[]): void;
}

/** A loan controller attached to the Swayam cluster: its events are the kinds from LOAN_EVENT on. */
export interface LoanHook {
  /** At time 0, before the first lists are made (a fixed partition withholds its backends here). */
  start(): void;
  /** The capacity the slow loop's ShareController plans over (the whole cluster unless a partition keeps some). */
  inferenceCapacity(): number;
  /** The forecast plan of a second share plan the loans' floors read (libs/fapes LOAN_FLOOR_PLAN); undefined: none. */
  readonly floorPlan?: ForecastPlan;
  /**
   * After each slow-loop tick's share plan (`demand`: the sum of the shares, undefined without a plan), before the
   * lists are planned; `floorShares`, the second plan's shares when floorPlan asks for one.
   */
  onSlowTick(
    now: number,
    demand: number | undefined,
    shares?: ReadonlyMap<string, ServiceShare>,
    floorShares?: ReadonlyMap<string, ServiceShare>,
  ): void;
  /** A request of job j arrived (the frontends' load reports, as the allocator hears them). */
  arrival?(job: number, now: number): void;
  /** The shares the lists are planned with while jobs borrow (the plan's, or raised to per-service floors). */
  planShares?(shares: ReadonlyMap<string, ServiceShare>): ReadonlyMap<string, ServiceShare>;
  /**
   * An inference request starts computing on backend b (harvesting, libs/fapes HarvestGate): what its compute takes
   * longer, ms (stopping a best-effort process that ran there).
   */
  computeStarts?(b: number, now: number): number;
  /** The request computing on backend b is done. */
  computeEnds?(b: number, now: number): void;
  /** Backend b is warm (its model loaded) and in inference's lists: it may harvest. */
  backendWarm?(b: number, now: number): void;
  /** Backend b went cold (decommissioned, drained or withheld): whatever it harvested stops. */
  backendCold?(b: number, now: number): void;
  handle(kind: number, a: number, b: number): void;
  finish(endMs: number): void;
}

export interface SlowLoopSettings {
  /** The allocator's ShareController (the forecast step comes from the predictor). */
  controller: Omit<ShareControllerOptions, "stepMs">;
  /** The reactive tick (the allocator's --reactive-tick-ms): outcomes are judged over each. */
  tickMs: number;
  predictor: SimPredictorOptions;
}

/**
 * How the metrics are defined where the papers differ (a scenario's `metrics`; metrics.ts says how each is
 * computed). The queue cap applies in the balanced cluster (the baselines' router with queues) only.
 */
export interface MetricsDefinition {
  /** "bucketed": libs/workload LatencyHistogram (0.5 % relative error; per-minute p99s in 12 % buckets); "exact": sorted latencies. */
  p99: "bucketed" | "exact";
  /** The minute a request's outcome counts in: when it completed (or was dropped), or when it arrived. */
  binBy: "completion" | "arrival";
  /**
   * Waiting requests a job may hold in the balanced cluster (router and replica queues) before new arrivals are
   * dropped at once (Faro's simulator: 50); undefined: no cap. Swayam's and the clairvoyant clusters ignore it.
   */
  queueCap?: number;
}

export interface SimConfig {
  jobs: JobSpec[];
  /** Backends in the cluster (the pool every policy shares). */
  capacity: number;
  /** Arrivals stop here; metrics and backend-seconds are counted over [0, durationMs). */
  durationMs: number;
  /** One-way network delay of each hop (broker-frontend, frontend-backend; load balancer-replica), ms. */
  hopMs: number;
  /** Time from a backend's start (or warm-up) to serving: the cold start, ms. */
  coldStartMs: number;
  /** T: a warm idle backend decommissions itself after this (Swayam mode, ClairA2). */
  idleTimeoutMs: number;
  /** A request not started within this of its arrival is dropped (the client's deadline); a violation. */
  dropAfterMs: number;
  /** Width of the time bins of the series (plots). */
  binMs: number;
  seed: number;
  policy: PolicySpec;
  swayam: SwayamSettings;
  /** The metrics' definitions (a scenario's `metrics`); undefined: bucketed p99, binned by completion, no queue cap. */
  metrics?: MetricsDefinition;
}

export interface ArrivalEvent {
  atMs: number;
  job: number;
}

/**
 * Arrivals in time order, one at a time in the fields (libs/workload ArrivalCursor is one): what the engine pulls
 * without an object per arrival. An Iterator<ArrivalEvent> will also do (engine.ts wraps it).
 */
export interface ArrivalFeed {
  /** Moves to the next arrival; false when there is none. */
  advance(): boolean;
  readonly atMs: number;
  /** The arrival's job: its index in SimConfig.jobs. */
  readonly jobIndex: number;
}
