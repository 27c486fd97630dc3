/**
 * Best-effort jobs on backends loaned from inference (FaPES, Zhao et al., SoCC'24), attached to the Swayam cluster
 * as its loan controller (config.ts LoanHook). Every decision is libs/fapes's: which free backends go to which
 * job and which loans come back (`planLoans` with a reclaim strategy), how many spares inference keeps
 * (`HeadroomLearner`), and what a reclaimed backend does with its item (`reclaimedItem`). This file only carries
 * them out over the event queue and keeps the books.
 *
 * The job model, stated: a job is a bag of identical items (a batch-inference shard); each backend it holds runs
 * one item at a time, and an item's completion is checkpointed, so a done item is never run again. A backend
 * newly given to a job works after `launchMs` (container creation and model download). The job is synchronous,
 * like data-parallel training: when one of its backends is reclaimed (a preemption) its other backends stop,
 * their in-flight items are lost (re-run later, counted as abandoned), and they restart from the checkpoint
 * after `restartMs`. A reclaimed backend finishes its item within the grace period or abandons it (reclaimedItem);
 * only then does it go back to inference's pool, and it is cold there.
 */
import type { ServiceShare } from "@infergrid/allocation";
import { seededRandom } from "@infergrid/core";
import {
  FLOORS_SPARE,
  floorsTotal,
  HARVEST_DEFAULTS,
  HarvestGate,
  type HarvestJob,
  type HarvestOptions,
  HEADROOM_DEFAULTS,
  HeadroomLearner,
  harvestJob,
  inferenceNeed,
  LOAN_FLOOR_PLAN,
  type LoanedServer,
  type LoanJob,
  loanShare,
  type NeedRule,
  PeakWindow,
  planLoans,
  type ReclaimStrategy,
  reclaimedItem,
  ServiceFloors,
  type ServiceLoad,
  withFloors,
} from "@infergrid/fapes";
import type { ForecastPlan } from "@infergrid/faro";
import type { LoanHook, LoanSurface } from "./config.js";
import { LOAN_EVENT, type Simulation } from "./engine.js";
import type { FapesJobStream, JobItems } from "./fapes-scenario.js";
import { meanServiceMs } from "./policies.js";

const JOB_ARRIVES = LOAN_EVENT;
const READY = LOAN_EVENT + 1;
const ITEM_DONE = LOAN_EVENT + 2;
const GRACE_OVER = LOAN_EVENT + 3;
const CONTROL = LOAN_EVENT + 4;
const HARVEST_READY = LOAN_EVENT + 5;
const HARVEST_DONE = LOAN_EVENT + 6;
const HARVEST_CHECK = LOAN_EVENT + 7;
/** The global allocator's control period (`--control-period-ms`): its loan step runs every control step. */
export const LOAN_CONTROL_PERIOD_MS = 2_000;

/** One best-effort job of the stream. */
export interface FapesJob {
  name: string;
  submittedAtMs: number;
  items: number;
  priority: number;
}

/** How a run lends: not at all (inference watched only), a fixed partition, or loans with a need rule and a reclaim strategy. */
export type LoanMode =
  | { kind: "observe" }
  | { kind: "dedicated"; inferenceBackends: number }
  | {
      kind: "loan";
      /** How much inference keeps (libs/fapes inferenceNeed), the plan being the slow loop's demand. */
      need: NeedRule;
      strategy: ReclaimStrategy;
      /** Loan steps every control period (as the allocator) rather than at slow-loop ticks only. */
      control?: boolean;
      /** A fall of the need is followed only once it has held this long (PeakWindow; per service under `floors`); 0: at once. */
      holdMs?: number;
      /** `floors` only: the floors leave out the rate's need (the held shares alone), an ablation. */
      sharesOnly?: boolean;
      /** Warm inference backends also run items in their idle time (libs/fapes HarvestGate); undefined: they do not. */
      harvest?: HarvestSettings;
    };

/** Harvesting in the simulator: the gate's options and what a stop adds to the inference request that caused it. */
export interface HarvestSettings {
  gate: HarvestOptions;
  /** Added to the compute of a request that stopped a running best-effort item, ms (`bench:harvest-pause`). */
  pauseMs: number;
}

export const HARVEST_SETTINGS: HarvestSettings = { gate: HARVEST_DEFAULTS, pauseMs: 0 };

/**
 * Each job's arrivals over the last `spanMs`, counted in one-second buckets: the rate the frontends' load
 * reports give the allocator (services/global-allocator SignalBook.latestRatePerS over the same span).
 */
class RecentRates {
  private readonly counts: Int32Array;
  private readonly second: Float64Array;
  private readonly buckets: number;

  constructor(
    jobs: number,
    private readonly spanMs: number,
  ) {
    this.buckets = Math.max(1, Math.ceil(spanMs / 1000));
    this.counts = new Int32Array(jobs * this.buckets);
    this.second = new Float64Array(jobs * this.buckets).fill(-1);
  }

  arrival(j: number, now: number): void {
    const sec = Math.floor(now / 1000);
    const i = j * this.buckets + (sec % this.buckets);
    if (this.second[i] !== sec) {
      this.second[i] = sec;
      this.counts[i] = 0;
    }
    this.counts[i] = (this.counts[i] as number) + 1;
  }

  /** Requests per second of job j over the last span, the current second included. */
  ratePerS(j: number, now: number): number {
    const sec = Math.floor(now / 1000);
    let n = 0;
    for (let k = 0; k < this.buckets; k++) {
      const i = j * this.buckets + k;
      if ((this.second[i] as number) > sec - this.buckets) n += this.counts[i] as number;
    }
    return n / (this.spanMs / 1000);
  }
}

function drawItems(items: JobItems, u: () => number): number {
  if (items.kind === "uniform") return items.min + Math.min(items.max - items.min, Math.floor(u() * (items.max - items.min + 1)));
  // Box-Muller from two uniforms.
  const z = Math.sqrt(-2 * Math.log(Math.max(1e-12, u()))) * Math.cos(2 * Math.PI * u());
  return Math.max(1, Math.min(items.max, Math.round(items.median * Math.exp(items.sigma * z))));
}

/** The job stream of a seed: Poisson arrivals until `untilMinute` (or the end), sizes and priorities drawn with them. */
export function jobArrivals(stream: FapesJobStream, durationMs: number, seed: number): FapesJob[] {
  const random = seededRandom(seed * 7919 + 11);
  const u = () => random.uniform();
  const until = Math.min(durationMs, stream.untilMinute === undefined ? durationMs : stream.untilMinute * 60_000);
  const meanGapMs = 3_600_000 / stream.arrivalsPerHour;
  const jobs: FapesJob[] = [];
  for (let t = -Math.log(1 - u()) * meanGapMs; t < until; t += -Math.log(1 - u()) * meanGapMs) {
    const items = drawItems(stream.items, u);
    const priority = stream.priorities[Math.min(stream.priorities.length - 1, Math.floor(u() * stream.priorities.length))] ?? 0;
    jobs.push({ name: `be${String(jobs.length).padStart(3, "0")}`, submittedAtMs: t, items, priority });
  }
  return jobs;
}

export interface FapesJobOutcome {
  name: string;
  submittedAtMs: number;
  items: number;
  priority: number;
  /** First backend given; undefined: never started. */
  startedAtMs?: number;
  /** Last item done; undefined: not done by the end. */
  doneAtMs?: number;
  itemsDone: number;
  preemptions: number;
}

export interface FapesRunStats {
  jobs: FapesJobOutcome[];
  preemptions: number;
  /** Loaned backends taken back for inference. */
  reclaimed: number;
  itemsDone: number;
  /** Items run to completion again after being done: must be 0 (checkpointed per item). */
  itemsRedone: number;
  /** In-flight items stopped (a reclaim past the grace period, or a preempted job's other backends) and run again. */
  itemsAbandoned: number;
  /** Backend-time running items, abandoned parts included, ms. */
  itemBusyMs: number;
  /** Backend-time held by a job (from its loan or assignment until it let go), ms. */
  heldMs: number;
  /** The most backends inference held in use at a slow-loop tick. */
  peakInferenceInUse: number;
  /** Times the loans and lists were checked disjoint (the invariant holds, or the run threw). */
  invariantChecks: number;
  /** Compute time of inference's completed requests, ms. */
  inferenceComputeMs: number;
  /** Harvesting: items done in warm inference backends' idle time (of itemsDone). */
  harvestItemsDone: number;
  /** Harvesting: stopped items given up (of itemsAbandoned). */
  harvestItemsAbandoned: number;
  /** Harvesting: inference requests that stopped a running item, each paying `pauseMs`. */
  harvestStops: number;
}

interface JobState {
  spec: FapesJob;
  todo: number[];
  done: Uint8Array;
  doneCount: number;
  held: Set<number>;
  /** Its items that harvesting backends hold (running or stopped). */
  harvestItems: number;
  startedAtMs?: number;
  doneAtMs?: number;
  preemptions: number;
}

/** Phases of a backend given to a job. */
const NONE = 0;
const STARTING = 1; // launching, or paused to restart: working after its READY event
const RUNNING = 2;
const RETURNING = 3; // reclaimed, finishing its item within the grace period

export class FapesLoans implements LoanHook {
  private readonly jobs: JobState[];
  private readonly byName = new Map<string, number>();
  private readonly owner: Int32Array;
  private readonly phase: Uint8Array;
  private readonly item: Int32Array;
  private readonly itemStart: Float64Array;
  private readonly heldSince: Float64Array;
  private readonly gen: Int32Array;
  /** A dedicated partition's backends (withheld for good), not given to any job now. */
  private readonly partitionFree = new Set<number>();
  private readonly headroom = new HeadroomLearner();
  private readonly hold: PeakWindow;
  private readonly random;
  private need: number;
  private demand: number | undefined;
  /** `floors`: the per-service floors, the shares of the last plan, and the arrivals they read the rate from. */
  private readonly floors: ServiceFloors | undefined;
  readonly floorPlan: ForecastPlan | undefined;
  private shares: ReadonlyMap<string, ServiceShare> | undefined;
  private floorShares: ReadonlyMap<string, ServiceShare> | undefined;
  private readonly rates: RecentRates | undefined;
  private arrivedJobs = 0;
  /** Harvesting, per backend: its gate while warm, the job and item it runs, the item's progress. */
  private readonly harvest: HarvestSettings | undefined;
  private readonly gates: (HarvestGate | undefined)[];
  private readonly hJob: Int32Array;
  private readonly hItem: Int32Array;
  private readonly hDoneMs: Float64Array;
  /** When the item last started running; NaN: stopped, or not running one. */
  private readonly hRunSince: Float64Array;
  /** The job's process is launched (its model loaded) from this time on. */
  private readonly hReadyAt: Float64Array;
  private readonly hGen: Int32Array;
  private readonly hCheckAt: Float64Array;
  readonly stats: FapesRunStats;

  constructor(
    private readonly sim: Simulation,
    private readonly cluster: LoanSurface,
    jobs: readonly FapesJob[],
    private readonly stream: FapesJobStream,
    private readonly mode: LoanMode,
  ) {
    const n = cluster.backendCount;
    this.owner = new Int32Array(n).fill(-1);
    this.phase = new Uint8Array(n);
    this.item = new Int32Array(n).fill(-1);
    this.itemStart = new Float64Array(n);
    this.heldSince = new Float64Array(n).fill(Number.NaN);
    this.gen = new Int32Array(n);
    this.random = seededRandom(sim.config.seed * 7919 + 13);
    this.harvest = mode.kind === "loan" ? mode.harvest : undefined;
    this.gates = new Array<HarvestGate | undefined>(n).fill(undefined);
    this.hJob = new Int32Array(n).fill(-1);
    this.hItem = new Int32Array(n).fill(-1);
    this.hDoneMs = new Float64Array(n);
    this.hRunSince = new Float64Array(n).fill(Number.NaN);
    this.hReadyAt = new Float64Array(n);
    this.hGen = new Int32Array(n);
    this.hCheckAt = new Float64Array(n).fill(Number.NaN);
    const floors = mode.kind === "loan" && mode.need === "floors";
    // Under floors the hold is per service (ServiceFloors), not on the total: holding the total instead let a
    // service's lull lend its backends (fapes-48 seed 1: 0.050 % violations against 0.041 %).
    this.hold = new PeakWindow(mode.kind === "loan" && !floors ? (mode.holdMs ?? 0) : 0);
    this.floors = floors ? new ServiceFloors(mode.kind === "loan" ? (mode.holdMs ?? 0) : 0) : undefined;
    this.floorPlan = floors ? LOAN_FLOOR_PLAN : undefined;
    // The rate over one reclaim lead time (grace plus a cold start), as the allocator reads it.
    this.rates = floors ? new RecentRates(sim.config.jobs.length, HEADROOM_DEFAULTS.leadTimeMs) : undefined;
    // No loans before inference has a plan: until then it may need every backend.
    this.need = n;
    this.jobs = jobs.map((spec, i) => {
      this.byName.set(spec.name, i);
      return {
        spec,
        todo: Array.from({ length: spec.items }, (_, k) => spec.items - 1 - k),
        done: new Uint8Array(spec.items),
        doneCount: 0,
        held: new Set<number>(),
        harvestItems: 0,
        preemptions: 0,
      };
    });
    this.stats = {
      jobs: [],
      preemptions: 0,
      reclaimed: 0,
      itemsDone: 0,
      itemsRedone: 0,
      itemsAbandoned: 0,
      itemBusyMs: 0,
      heldMs: 0,
      peakInferenceInUse: 0,
      invariantChecks: 0,
      inferenceComputeMs: 0,
      harvestItemsDone: 0,
      harvestItemsAbandoned: 0,
      harvestStops: 0,
    };
  }

  start(): void {
    const n = this.cluster.backendCount;
    if (this.mode.kind === "dedicated") {
      const keep = Math.max(1, Math.min(n, this.mode.inferenceBackends));
      const partition: number[] = [];
      for (let b = keep; b < n; b++) partition.push(b);
      this.cluster.withhold(partition);
      for (const b of partition) this.partitionFree.add(b);
      this.need = keep;
    }
    // An observing run schedules nothing: it must stay event for event the run without loans.
    if (this.mode.kind !== "observe") for (const [i, j] of this.jobs.entries()) this.at(j.spec.submittedAtMs, JOB_ARRIVES, i);
    if (this.mode.kind === "loan" && this.mode.control) this.at(LOAN_CONTROL_PERIOD_MS, CONTROL, 0);
  }

  inferenceCapacity(): number {
    return this.mode.kind === "dedicated" ? this.need : this.cluster.backendCount;
  }

  arrival(job: number, now: number): void {
    this.rates?.arrival(job, now);
  }

  /** The shares raised to the floors while jobs borrow (as the allocator's LoanManager.floors); the plan's otherwise. */
  planShares(shares: ReadonlyMap<string, ServiceShare>): ReadonlyMap<string, ServiceShare> {
    if (!this.floors || !this.borrowing()) return shares;
    let withheld = 0;
    for (let b = 0; b < this.owner.length; b++) if ((this.owner[b] as number) >= 0 || this.phase[b] === RETURNING) withheld++;
    return withFloors(shares, this.floors.floors, this.cluster.backendCount - withheld);
  }

  /** A backend is loaned or on its way back, or a job that arrived is not done. */
  private borrowing(): boolean {
    for (let b = 0; b < this.owner.length; b++) if ((this.owner[b] as number) >= 0 || this.phase[b] === RETURNING) return true;
    for (let i = 0; i < this.arrivedJobs; i++) if ((this.jobs[i] as JobState).doneAtMs === undefined) return true;
    return false;
  }

  onSlowTick(
    now: number,
    demand: number | undefined,
    shares?: ReadonlyMap<string, ServiceShare>,
    floorShares?: ReadonlyMap<string, ServiceShare>,
  ): void {
    if (floorShares !== undefined) this.floorShares = floorShares;
    const inUse = this.cluster.inferenceInUse();
    this.stats.peakInferenceInUse = Math.max(this.stats.peakInferenceInUse, inUse);
    if (this.mode.kind !== "loan") {
      if (this.mode.kind === "dedicated") this.step(now);
      return;
    }
    if (demand !== undefined) this.demand = demand;
    if (shares !== undefined) this.shares = shares;
    this.judge(now, inUse);
    this.step(now);
  }

  /** What inference needs now, by the mode's rule, from the last plan and the backends in use. */
  private judge(now: number, inUse: number): void {
    if (this.mode.kind !== "loan") return;
    if (this.floors) {
      const shares = this.shares;
      const sharesOnly = this.mode.sharesOnly === true;
      const services: ServiceLoad[] = this.sim.config.jobs.map((job, j) => ({
        name: job.name,
        share: loanShare(shares?.get(job.name)?.share, this.floorShares?.get(job.name)?.share),
        ratePerS: sharesOnly ? undefined : this.rates?.ratePerS(j, now),
        serviceMs: meanServiceMs(job.serviceTime),
        sloMs: job.sloMs,
        percentile: job.slMin * 100,
      }));
      const floors = this.floors.observe(now, services);
      // Until the first plan inference may need every backend.
      if (shares !== undefined) this.need = floorsTotal(floors);
      return;
    }
    const demand = this.demand;
    this.headroom.observe(now, inUse, demand ?? 0);
    if (demand === undefined) return;
    this.need = this.hold.observe(now, inferenceNeed(this.mode.need, demand, inUse, this.headroom.headroom()));
  }

  handle(kind: number, a: number, b: number): void {
    const now = this.sim.now;
    switch (kind) {
      case JOB_ARRIVES:
        this.arrivedJobs = Math.max(this.arrivedJobs, a + 1);
        this.step(now);
        this.harvestIdle(now);
        return;
      case HARVEST_READY:
        if (this.hGen[a] === b) this.harvestNext(a, now);
        return;
      case HARVEST_DONE:
        if (this.hGen[a] === b) this.harvestItemDone(a, now);
        return;
      case HARVEST_CHECK:
        if (this.hCheckAt[a] === now) {
          this.hCheckAt[a] = Number.NaN;
          this.harvestCheck(a, now);
        }
        return;
      case READY:
        if (this.gen[a] === b && this.phase[a] === STARTING) this.startItem(a, now);
        return;
      case ITEM_DONE:
        if (this.gen[a] === b) this.itemDone(a, now);
        return;
      case CONTROL:
        this.judge(now, this.cluster.inferenceInUse());
        this.step(now);
        this.at(now + LOAN_CONTROL_PERIOD_MS, CONTROL, 0);
        return;
      case GRACE_OVER:
        if (this.gen[a] === b && this.phase[a] === RETURNING) {
          this.abandonItem(a, now);
          this.letGo(a, now);
        }
        return;
      default:
        throw new Error(`fapes: unknown event kind ${kind}`);
    }
  }

  /** The run ends at durationMs (the engine runs until no event is left): nothing of the jobs' is scheduled past it. */
  private at(timeMs: number, kind: number, a: number, b = 0): void {
    if (timeMs < this.sim.config.durationMs) this.sim.schedule(timeMs, kind, a, b);
  }

  /** One loan step (libs/fapes planLoans) over the jobs that have arrived, carried out. */
  private step(now: number): void {
    const loans: LoanedServer[] = [];
    let returning = 0;
    for (let b = 0; b < this.owner.length; b++) {
      if (this.phase[b] === RETURNING) returning++;
      else if ((this.owner[b] as number) >= 0)
        loans.push({ id: String(b), jobs: [this.jobs[this.owner[b] as number]?.spec.name as string] });
    }
    const waiting: LoanJob[] = [];
    for (let i = 0; i < this.arrivedJobs; i++) {
      const j = this.jobs[i] as JobState;
      if (j.doneAtMs !== undefined || j.todo.length === 0) continue;
      waiting.push({
        name: j.spec.name,
        priority: j.spec.priority,
        submittedAtMs: j.spec.submittedAtMs,
        minBackends: this.stream.minBackends,
        maxBackends: this.stream.maxBackends,
        held: j.held.size,
        remaining: j.todo.length + this.runningOf(j) + j.harvestItems,
      });
    }
    const free =
      this.mode.kind === "dedicated"
        ? [...this.partitionFree]
        : this.cluster.lendCandidates(
            this.mode.kind === "loan" && this.mode.need !== "plan-in-use-headroom" ? "share" : "prefix",
            this.floors?.floors,
          );
    const decision = planLoans(
      {
        live: this.cluster.backendCount,
        inferenceNeed: this.need,
        loans,
        returning,
        free: free.map(String),
        jobs: waiting,
        ...(this.floors ? { spare: FLOORS_SPARE } : {}),
      },
      { strategy: this.mode.kind === "loan" ? this.mode.strategy : "fewest-preemptions", random: this.random },
    );
    if (this.mode.kind === "dedicated" && decision.reclaim.servers.length > 0)
      throw new Error("fapes: a dedicated partition reclaimed a backend");
    // Reclaims first: the grace rule on the backends taken, then the preempted jobs' other backends stop.
    for (const id of decision.reclaim.servers) this.reclaim(Number(id), now);
    for (const name of decision.reclaim.preempted) this.preempt(this.byName.get(name) as number, now);
    for (const id of decision.released) this.letGo(Number(id), now);
    const given = decision.loans.map((l) => ({ b: Number(l.backend), job: this.byName.get(l.job) as number }));
    if (this.mode.kind === "dedicated") for (const g of given) this.partitionFree.delete(g.b);
    else this.cluster.withhold(given.map((g) => g.b));
    for (const g of given) this.give(g.b, g.job, now);
    this.checkDisjoint();
  }

  private runningOf(j: JobState): number {
    let n = 0;
    for (const b of j.held) if (this.phase[b] === RUNNING) n++;
    return n;
  }

  private give(b: number, job: number, now: number): void {
    const j = this.jobs[job] as JobState;
    this.owner[b] = job;
    j.held.add(b);
    j.startedAtMs ??= now;
    this.heldSince[b] = now;
    this.pause(b, now + this.stream.launchMs);
  }

  private pause(b: number, untilMs: number): void {
    this.phase[b] = STARTING;
    this.item[b] = -1;
    const g = (this.gen[b] as number) + 1;
    this.gen[b] = g;
    this.at(untilMs, READY, b, g);
  }

  private startItem(b: number, now: number): void {
    const j = this.jobs[this.owner[b] as number] as JobState;
    const next = j.todo.pop();
    if (next === undefined) {
      this.letGo(b, now);
      return;
    }
    this.phase[b] = RUNNING;
    this.item[b] = next;
    this.itemStart[b] = now;
    const g = (this.gen[b] as number) + 1;
    this.gen[b] = g;
    this.at(now + this.stream.itemMs, ITEM_DONE, b, g);
  }

  private itemDone(b: number, now: number): void {
    const job = this.owner[b] as number;
    const j = this.jobs[job] as JobState;
    const it = this.item[b] as number;
    this.stats.itemBusyMs += now - (this.itemStart[b] as number);
    if (j.done[it] === 1) this.stats.itemsRedone++;
    else {
      j.done[it] = 1;
      j.doneCount++;
      this.stats.itemsDone++;
    }
    this.item[b] = -1;
    if (j.doneCount === j.spec.items && j.doneAtMs === undefined) j.doneAtMs = now;
    if (this.phase[b] === RETURNING) {
      this.letGo(b, now);
      return;
    }
    this.startItem(b, now);
    // A job done, or one that let a backend go, leaves backends for waiting jobs (or inference).
    if (this.owner[b] === -1) this.step(now);
  }

  /** A loan taken back for inference: FaPES's grace period for its item, then the backend returns. */
  private reclaim(b: number, now: number): void {
    this.stats.reclaimed++;
    const j = this.jobs[this.owner[b] as number] as JobState;
    j.held.delete(b);
    if (this.phase[b] !== RUNNING) {
      this.letGo(b, now);
      return;
    }
    const r = reclaimedItem(this.itemStart[b] as number, this.stream.itemMs, now, this.stream.graceMs);
    if (r.action === "abandon") {
      this.abandonItem(b, now);
      this.letGo(b, now);
      return;
    }
    this.phase[b] = RETURNING;
    this.at(r.deadlineMs, GRACE_OVER, b, this.gen[b] as number);
  }

  /** A preempted job's remaining backends lose their in-flight items and restart from the checkpoint. */
  private preempt(job: number, now: number): void {
    const j = this.jobs[job] as JobState;
    j.preemptions++;
    this.stats.preemptions++;
    for (const b of j.held) {
      if (this.phase[b] === RUNNING) this.abandonItem(b, now);
      this.pause(b, now + this.stream.restartMs);
    }
  }

  private abandonItem(b: number, now: number): void {
    const it = this.item[b] as number;
    if (it < 0) return;
    const j = this.jobs[this.owner[b] as number] as JobState;
    this.stats.itemBusyMs += now - (this.itemStart[b] as number);
    this.stats.itemsAbandoned++;
    j.todo.push(it);
    this.item[b] = -1;
  }

  /** The job lets go of backend b: back to the partition, or to inference's pool. */
  private letGo(b: number, now: number): void {
    const job = this.owner[b] as number;
    if (job >= 0) (this.jobs[job] as JobState).held.delete(b);
    this.owner[b] = -1;
    this.phase[b] = NONE;
    this.item[b] = -1;
    this.gen[b] = (this.gen[b] as number) + 1;
    this.stats.heldMs += now - (this.heldSince[b] as number);
    this.heldSince[b] = Number.NaN;
    if (this.mode.kind === "dedicated") this.partitionFree.add(b);
    else this.cluster.giveBack([b]);
    this.checkDisjoint();
  }

  /** No backend is both in an inference list and given to a job (or on its way back). */
  private checkDisjoint(): void {
    this.stats.invariantChecks++;
    for (let b = 0; b < this.owner.length; b++) {
      const lent = (this.owner[b] as number) >= 0 || this.phase[b] === RETURNING || this.partitionFree.has(b);
      if (lent && this.cluster.inList(b)) throw new Error(`fapes: backend ${this.cluster.backendId(b)} is both lent and in a list`);
    }
  }

  // Harvesting: warm inference backends run items in their idle time (libs/fapes HarvestGate decides when).

  computeStarts(b: number, now: number): number {
    const gate = this.gates[b];
    if (gate === undefined) return 0;
    gate.computeStarts(now);
    this.scheduleCheck(b);
    const since = this.hRunSince[b] as number;
    if (Number.isNaN(since)) return 0;
    // It was running: stopped now, its progress kept.
    this.stats.itemBusyMs += now - since;
    this.hDoneMs[b] = (this.hDoneMs[b] as number) + (now - since);
    this.hRunSince[b] = Number.NaN;
    this.hGen[b] = (this.hGen[b] as number) + 1;
    this.stats.harvestStops++;
    return (this.harvest as HarvestSettings).pauseMs;
  }

  computeEnds(b: number, now: number): void {
    const gate = this.gates[b];
    if (gate === undefined) return;
    gate.computeEnds(now);
    this.scheduleCheck(b);
  }

  backendWarm(b: number, now: number): void {
    if (this.harvest === undefined || this.gates[b] !== undefined) return;
    this.gates[b] = new HarvestGate(now, this.harvest.gate);
    this.harvestAssign(b, now);
  }

  backendCold(b: number, now: number): void {
    if (this.gates[b] === undefined) return;
    this.harvestRelease(b, now);
    this.gates[b] = undefined;
    this.hCheckAt[b] = Number.NaN;
  }

  private scheduleCheck(b: number): void {
    const next = (this.gates[b] as HarvestGate).nextCheckMs();
    if (next === undefined) return;
    const pending = this.hCheckAt[b] as number;
    if (!Number.isNaN(pending) && pending <= next) return;
    this.hCheckAt[b] = next;
    this.at(next, HARVEST_CHECK, b);
  }

  private harvestCheck(b: number, now: number): void {
    const gate = this.gates[b] as HarvestGate;
    const action = gate.check(now);
    if (action === "abandon") {
      const it = this.hItem[b] as number;
      if (it >= 0) {
        const j = this.jobs[this.hJob[b] as number] as JobState;
        j.todo.push(it);
        j.harvestItems--;
        this.hItem[b] = -1;
        this.stats.itemsAbandoned++;
        this.stats.harvestItemsAbandoned++;
        // Someone else may run it now.
        this.step(now);
      }
    } else if (action === "resume") this.harvestRun(b, now);
    this.scheduleCheck(b);
  }

  /** Warm backends harvesting for no job take one (a job arrived, or one ran out of items). */
  private harvestIdle(now: number): void {
    if (this.harvest === undefined) return;
    for (let b = 0; b < this.gates.length; b++) if (this.gates[b] !== undefined && this.hJob[b] === -1) this.harvestAssign(b, now);
  }

  private harvestAssign(b: number, now: number): void {
    const waiting: HarvestJob[] = [];
    for (let i = 0; i < this.arrivedJobs; i++) {
      const j = this.jobs[i] as JobState;
      if (j.doneAtMs !== undefined) continue;
      waiting.push({
        name: j.spec.name,
        priority: j.spec.priority,
        submittedAtMs: j.spec.submittedAtMs,
        maxBackends: this.stream.maxBackends,
        unclaimed: j.todo.length,
        inFlight: this.runningOf(j) + j.harvestItems,
      });
    }
    const name = harvestJob(waiting);
    if (name === undefined) return;
    const job = this.byName.get(name) as number;
    const j = this.jobs[job] as JobState;
    this.hJob[b] = job;
    j.startedAtMs ??= now;
    // The job's process starts beside the inference model: its container and model, as a loan's.
    this.hReadyAt[b] = now + this.stream.launchMs;
    const g = (this.hGen[b] as number) + 1;
    this.hGen[b] = g;
    this.at(now + this.stream.launchMs, HARVEST_READY, b, g);
  }

  /** The job's process is up, or its item is done: the next item, run if the gate lets it. */
  private harvestNext(b: number, now: number): void {
    // A stopped process claims nothing: it would only hold the item until it resumed.
    if ((this.gates[b] as HarvestGate).isStopped) return;
    const job = this.hJob[b] as number;
    const j = this.jobs[job] as JobState;
    const next = j.todo.pop();
    if (next === undefined) {
      this.harvestRelease(b, now);
      this.harvestAssign(b, now);
      return;
    }
    this.hItem[b] = next;
    this.hDoneMs[b] = 0;
    j.harvestItems++;
    this.harvestRun(b, now);
  }

  /** The gate lets the process run: its item goes on (or it takes one, or a job). */
  private harvestRun(b: number, now: number): void {
    if (this.hJob[b] === -1) {
      this.harvestAssign(b, now);
      return;
    }
    if (now < (this.hReadyAt[b] as number)) return; // HARVEST_READY will start it
    if (this.hItem[b] === -1) {
      this.harvestNext(b, now);
      return;
    }
    this.hRunSince[b] = now;
    const g = (this.hGen[b] as number) + 1;
    this.hGen[b] = g;
    this.at(now + this.stream.itemMs - (this.hDoneMs[b] as number), HARVEST_DONE, b, g);
  }

  private harvestItemDone(b: number, now: number): void {
    const j = this.jobs[this.hJob[b] as number] as JobState;
    const it = this.hItem[b] as number;
    this.stats.itemBusyMs += now - (this.hRunSince[b] as number);
    this.hRunSince[b] = Number.NaN;
    this.hItem[b] = -1;
    j.harvestItems--;
    if (j.done[it] === 1) this.stats.itemsRedone++;
    else {
      j.done[it] = 1;
      j.doneCount++;
      this.stats.itemsDone++;
      this.stats.harvestItemsDone++;
    }
    if (j.doneCount === j.spec.items && j.doneAtMs === undefined) {
      j.doneAtMs = now;
      this.step(now);
    }
    this.harvestNext(b, now);
  }

  /** The backend stops harvesting for its job: a running or stopped item goes back to the job, unrecorded. */
  private harvestRelease(b: number, now: number): void {
    const job = this.hJob[b] as number;
    if (job === -1) return;
    const j = this.jobs[job] as JobState;
    const since = this.hRunSince[b] as number;
    if (!Number.isNaN(since)) this.stats.itemBusyMs += now - since;
    const it = this.hItem[b] as number;
    if (it >= 0) {
      j.todo.push(it);
      j.harvestItems--;
      this.stats.itemsAbandoned++;
      this.stats.harvestItemsAbandoned++;
    }
    this.hJob[b] = -1;
    this.hItem[b] = -1;
    this.hRunSince[b] = Number.NaN;
    this.hGen[b] = (this.hGen[b] as number) + 1;
  }

  finish(endMs: number): void {
    for (let j = 0; j < this.sim.config.jobs.length; j++) this.stats.inferenceComputeMs += this.sim.metrics.computeMs(j);
    for (let b = 0; b < this.owner.length; b++) {
      const since = this.hRunSince[b] as number;
      if (!Number.isNaN(since)) this.stats.itemBusyMs += endMs - since;
      if (this.phase[b] === RUNNING || this.phase[b] === RETURNING) this.stats.itemBusyMs += endMs - (this.itemStart[b] as number);
      if (!Number.isNaN(this.heldSince[b] as number)) this.stats.heldMs += endMs - (this.heldSince[b] as number);
    }
    this.stats.jobs = this.jobs
      .filter((j) => j.spec.submittedAtMs < endMs)
      .map((j) => ({
        name: j.spec.name,
        submittedAtMs: j.spec.submittedAtMs,
        items: j.spec.items,
        priority: j.spec.priority,
        ...(j.startedAtMs === undefined ? {} : { startedAtMs: j.startedAtMs }),
        ...(j.doneAtMs === undefined ? {} : { doneAtMs: j.doneAtMs }),
        itemsDone: j.doneCount,
        preemptions: j.preemptions,
      }));
  }
}
