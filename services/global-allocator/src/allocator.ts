import {
  type AllocationPolicy,
  type InstanceTypePrice,
  instanceTypeFilter,
  planTypedCapacity,
  summarizeInstanceTypes,
  type TypedCapacityPlan,
} from "@infergrid/allocation";
import { instanceIdProblem, MembershipTable } from "@infergrid/control-plane";
import { lognormalMean } from "@infergrid/core";
import type { ServiceLoad } from "@infergrid/fapes";
import { servingProblem } from "@infergrid/kairos";
import { backend, control } from "@infergrid/proto";
import { GrpcStatusError, grpc, type Logger } from "@infergrid/runtime";
import type { Actuator } from "./actuator.js";
import { type JobsPort, LoanManager, type LoanOptions } from "./loans.js";
import { BackendPool } from "./pool.js";
import { normalizeSpec, type SpecDefaults, sameSpec, serviceModelOf } from "./spec.js";
import type { ListTarget, ThemisService } from "./themis-controller.js";

export interface AllocatorOptions {
  /** The clock the allocator's own writes are stamped with (main.ts: a SteadyClock, which a wall-clock step does not move). */
  now: () => number;
  ttlMs: number;
  /** How long a fresh assignment may go unacknowledged before "cold, no service" means "returned". */
  graceMs: number;
  /** After a restart with a non-empty registry: how long to listen before touching any list. */
  settleMs: number;
  /**
   * Hearing no heartbeat at all (not even the allocator's own, which it receives like any other)
   * for this long means NATS is away, not that the cluster died: lists are frozen until heartbeats
   * return, and then members get settleMs to beat again. Must be under the ttl.
   */
  deafAfterMs: number;
  /** After a deaf spell: how long members get to beat again before any list changes (at least settleMs). */
  resumeSettleMs: number;
  memberForgetMs: number;
  specDefaults: SpecDefaults;
  /** The instance-type price list (empty: none configured): prices the cluster state, checks specs' profiles. */
  instanceTypes?: readonly InstanceTypePrice[];
  /**
   * The cluster's cost budget, USD/h (with a price list): specs profiled per type are refused when nothing
   * within it serves them, and while every service is profiled per type the shares are spent as Kairos
   * configurations (per-type list counts and pool sizes).
   */
  budgetPerHour?: number;
  objective: string;
  policy: AllocationPolicy;
  /** What the slow loop planned for a service, published with the plan. */
  describe?: (service: string) => { predictedRatePerS: number; share?: number; utility?: number } | undefined;
  /** The slow loop's last predictive solve, published with the plan. */
  lastSolve?: () => { objective: number; upperBound: number; solveMs: number; at: number } | undefined;
  /** The query sizes the frontends reported for a service (Kairos's bound is computed on them once there are enough). */
  batchesOf?: (service: string) => readonly number[];
  /**
   * The list the Themis controller wants for a service whose model has a Themis profile (its length, and the
   * entries that leave first); undefined: the policy sizes it as any other. min_warm is then the whole list.
   */
  listTarget?: (service: string) => ListTarget | undefined;
  /** Best-effort jobs on loaned backends (FaPES): the job store and the loan settings; undefined: no loaning. */
  jobs?: { store: JobsPort; loan: LoanOptions; onPreempted?(job: string): void };
  /**
   * The loans' `floors` rule: a service's share of the slow loop's plan, the rate its frontends reported over the
   * last lead time and its mean service time (undefined: unknown), and the allocation policy with the shares
   * raised to the floors (libs/fapes withFloors), so that each floor is kept by its own service's list.
   */
  loadOf?: (service: string, now: number) => { share?: number; ratePerS?: number; serviceTimeMs?: number };
  policyWithFloors?: (floors: ReadonlyMap<string, number>) => AllocationPolicy;
}

interface ServiceRecord {
  entry: control.ServiceEntry;
  revision: number;
}

interface AssignmentRecord {
  service: string;
  version: number;
  /** When it was written (the allocator's clock, as stored in the registry). */
  updatedAt: number;
  /** The backend has reported this service since: from now on "cold, no service" means it left it. */
  acknowledged: boolean;
  /** Local time from which the grace runs (the write, or the restart that found it). */
  since: number;
}

interface PendingReturn {
  service: string;
  reason: string;
}

/** How long a backend picked for removal is kept out of the lists if the platform does not remove it. */
export const RETIRE_TIMEOUT_MS = 300_000;

export interface PoolSnapshot {
  poolSize: number;
  free: number;
  listLengths: Map<string, number>;
}

/** What sizes the pool: the lists' demand and the free backends, as of the last control step. */
export interface PoolView {
  demand: number;
  live: number;
  free: { id: string; since: number }[];
}

const ev = control.PoolEventKind;
/** Reported query sizes a service needs before its configuration is computed on them instead of the assumed mix. */
const MIN_MEASURED_BATCHES = 1000;
/** With measured query sizes, a service's configuration is recomputed at most this often. */
const TYPED_REPLAN_MS = 60_000;

/**
 * The allocator's state and its one writer. It is the single active allocator (Kubernetes runs
 * one replica): it keeps every service entry and assignment it wrote in memory and writes the
 * registry with compare-and-set, so a second writer shows up as a conflict instead of a silent
 * overwrite. Every mutation runs through one queue, so lists change one step at a time.
 */
export class Allocator {
  private readonly services = new Map<string, ServiceRecord>();
  private readonly assignments = new Map<string, AssignmentRecord>();
  private readonly pool: BackendPool;
  private readonly members: MembershipTable<control.Role>;
  private readonly pendingReturns = new Map<string, PendingReturn>();
  private queue: Promise<unknown> = Promise.resolve();
  private settleUntil = 0;
  /** The last heartbeat of any role, from anyone (0 = none yet). */
  private lastHeard = 0;
  private deaf = false;
  private planSeq = 0;
  /** Free backends (in no list) and since when, as of the last control step. */
  private readonly freeSince = new Map<string, number>();
  private lastDemand = 0;
  /** Backends picked for removal from the pool, and since when: kept out of every list until they are gone. */
  private readonly retiring = new Map<string, number>();
  private planned = false;
  /** The last per-type plan (Kairos configurations of the services' budget shares); undefined when not typed. */
  private typedPlan: TypedCapacityPlan | undefined;
  private typedPlanKey = "";
  private typedInputs = "";
  private typedPlannedAt = Number.NEGATIVE_INFINITY;
  /** Per backend, the size its last heartbeat reported (cores, largest batch). */
  private readonly sizes = new Map<string, { cores: number; maxBatch: number }>();
  /** Best-effort jobs and their loaned backends; undefined when loaning is off. */
  private readonly loans: LoanManager | undefined;
  /** Asks the control loop for a reconcile soon (membership changed). */
  wake: () => void = () => {};

  constructor(
    private readonly actuator: Actuator,
    private readonly logger: Logger,
    private readonly options: AllocatorOptions,
  ) {
    this.pool = new BackendPool(options.ttlMs);
    this.members = new MembershipTable<control.Role>(options.ttlMs);
    const jobs = options.jobs;
    this.loans =
      jobs &&
      new LoanManager(
        jobs.store,
        (id, job, spec) => this.writeLoan(id, job, spec, options.now()),
        logger.child({ component: "loans" }),
        jobs.loan,
        jobs.onPreempted ? { onPreempted: jobs.onPreempted } : {},
      );
  }

  /** After a restart: the stored jobs and the loans the registry's assignments show; then their store revisions. */
  async restoreJobs(jobs: readonly control.BestEffortJob[], assignments: readonly control.BackendAssignment[], now: number): Promise<void> {
    if (!this.loans) return;
    this.loans.restore(jobs, assignments, now);
    await this.loans.load();
  }

  /** Takes over the registry as found: lists keep their order, their backends get a ttl to show up. */
  restore(services: readonly ServiceRecord[], assignments: readonly control.BackendAssignment[], now: number): void {
    for (const s of services) {
      const name = s.entry.spec?.name ?? "";
      this.services.set(name, s);
      for (const ref of s.entry.backends) this.pool.seed(ref.backendId ?? "", ref.address ?? "", ref.instanceType ?? "", name, now);
    }
    for (const a of assignments) {
      this.assignments.set(a.backendId, {
        service: a.service,
        version: Number(a.version),
        updatedAt: Number(a.updatedAtUnixMs),
        acknowledged: false,
        since: now,
      });
    }
    if (services.length > 0 || assignments.length > 0) this.settleUntil = now + this.options.settleMs;
    this.logger.info(
      { services: services.length, assignments: assignments.length, settleMs: this.options.settleMs },
      "restored from registry",
    );
  }

  // ---- inputs ------------------------------------------------------------------------------

  onBackendHeartbeat(hb: control.Heartbeat, now: number): void {
    this.heard(now);
    const idProblem = instanceIdProblem(hb.id);
    if (idProblem) {
      this.logger.warn({ problem: idProblem }, "ignored a backend heartbeat with a bad id");
      return;
    }
    const verdict = this.pool.observe(hb, now);
    if (verdict === "joined") {
      this.logger.info({ backend: hb.id, address: hb.address }, "backend joined the pool");
      this.actuator.poolEvent({ kind: ev.POOL_EVENT_KIND_JOINED, backendId: hb.id, atUnixMs: now, reason: "first heartbeat" });
      this.wake();
    } else if (verdict === "draining") {
      this.wake();
    }
    const a = this.assignments.get(hb.id);
    const report = hb.backend;
    if (report) this.sizes.set(hb.id, { cores: Math.max(1, report.cores || 1), maxBatch: Math.max(1, report.maxBatch || 1) });
    if (report) this.loans?.onBackendReport(hb.id, report);
    if (!a?.service || !report) return;
    if (report.service === a.service) {
      a.acknowledged = true;
      return;
    }
    // Cold with no service: either it has not seen its assignment yet, or it idled T and
    // decommissioned itself. Only the second once it has acknowledged it (or the grace passed).
    // This is the only way a backend returns itself, and the allocator alone announces it (RETURNED).
    if (
      report.service === "" &&
      report.state === backend.BackendState.BACKEND_STATE_COLD &&
      (a.acknowledged || now - a.since > this.options.graceMs)
    ) {
      this.markReturned(hb.id, { service: a.service, reason: "reported cold without a service" });
    }
  }

  onMemberHeartbeat(hb: control.Heartbeat, now: number): void {
    this.heard(now);
    if (instanceIdProblem(hb.id)) return;
    this.members.observe(hb.id, hb.address, Number(hb.startedAtUnixMs), hb.draining, hb.role, now);
  }

  private heard(now: number): void {
    if (this.deaf) {
      this.deaf = false;
      const settleMs = this.options.resumeSettleMs;
      this.settleUntil = Math.max(this.settleUntil, now + settleMs);
      this.logger.info({ silentMs: now - this.lastHeard, settleMs }, "heartbeats are back; settling before any list change");
    }
    this.lastHeard = Math.max(this.lastHeard, now);
  }

  /** True (and lists frozen) while the allocator hears no heartbeat at all. */
  isDeaf(now: number): boolean {
    if (!this.deaf && this.lastHeard > 0 && now - this.lastHeard > this.options.deafAfterMs) {
      this.deaf = true;
      this.logger.warn({ silentMs: now - this.lastHeard }, "no heartbeat from anyone (NATS away?); lists frozen until heartbeats return");
    }
    return this.deaf;
  }

  private markReturned(backendId: string, pending: PendingReturn): void {
    if (this.pendingReturns.has(backendId)) return;
    this.logger.info({ backend: backendId, service: pending.service, reason: pending.reason }, "backend returned to the pool");
    this.pendingReturns.set(backendId, pending);
    this.wake();
  }

  // ---- admin -------------------------------------------------------------------------------

  async register(
    input: control.ServiceSpec.$Properties | null | undefined,
    now: () => number,
  ): Promise<{ entry: control.ServiceEntry; created: boolean }> {
    // Checked before anything is written: a refused spec leaves no trace in the registry.
    const spec = normalizeSpec(
      input,
      this.options.specDefaults,
      (this.options.instanceTypes ?? []).map((t) => t.name),
    );
    const model = serviceModelOf(spec);
    if (model && this.options.budgetPerHour !== undefined) {
      const problem = servingProblem(model, this.options.instanceTypes ?? [], this.options.budgetPerHour);
      if (problem !== undefined)
        throw new GrpcStatusError(
          grpc.status.INVALID_ARGUMENT,
          `spec.model.instance_profiles: within the cluster's budget of ${this.options.budgetPerHour} USD/h, ${problem}`,
        );
    }
    return this.serial(async () => {
      const t = now();
      const current = this.services.get(spec.name);
      if (current && sameSpec(current.entry.spec, spec)) return { entry: current.entry, created: false };
      if (current) {
        const count = current.entry.backends.length;
        await this.writeService(
          {
            spec,
            backends: current.entry.backends,
            version: Number(current.entry.version) + 1,
            updatedAtUnixMs: t,
            minWarm: Math.min(spec.initialBackends, count),
          },
          current.revision,
        );
        // The assignments carry the model spec: keep them in step with the service's.
        for (const ref of current.entry.backends) {
          const id = ref.backendId ?? "";
          if (this.assignments.get(id)?.service === spec.name) await this.writeAssignment(id, spec.name, spec.model ?? null, t);
        }
        this.logger.info({ service: spec.name }, "service spec updated");
      } else {
        await this.writeService({ spec, backends: [], version: 1, updatedAtUnixMs: t, minWarm: 0 }, 0);
        this.logger.info({ service: spec.name }, "service registered");
      }
      await this.reconcileGuarded(now());
      const entry = this.services.get(spec.name)?.entry;
      if (!entry) throw new GrpcStatusError(grpc.status.INTERNAL, `service ${spec.name} vanished while registering`);
      return { entry, created: !current };
    });
  }

  deregister(name: string, now: () => number): Promise<boolean> {
    return this.serial(async () => {
      const current = this.services.get(name);
      if (!current) return false;
      // The list goes first, so frontends stop dispatching before backends stop accepting.
      await this.actuator.deleteService(name);
      this.services.delete(name);
      const t = now();
      for (const ref of current.entry.backends) {
        const id = ref.backendId ?? "";
        this.pendingReturns.delete(id);
        if (this.assignments.get(id)?.service !== name) continue;
        await this.writeAssignment(id, "", null, t);
        this.actuator.poolEvent({
          kind: ev.POOL_EVENT_KIND_RETURNED,
          backendId: id,
          service: name,
          atUnixMs: t,
          reason: "service deregistered",
        });
      }
      this.logger.info({ service: name, freed: current.entry.backends.length }, "service deregistered");
      await this.reconcileGuarded(now());
      return true;
    });
  }

  getService(name: string): control.ServiceEntry | undefined {
    return this.services.get(name)?.entry;
  }

  listServices(): control.ServiceEntry[] {
    return [...this.services.keys()].sort().flatMap((n) => {
      const e = this.services.get(n)?.entry;
      return e ? [e] : [];
    });
  }

  clusterState(now: number): control.ClusterState.$Properties {
    this.members.expire(now, this.options.memberForgetMs);
    const inLists = this.inLists();
    const live = this.pool.live(now);
    const perType = summarizeInstanceTypes(
      live.map((m) => ({ instanceType: m.info.instanceType, assigned: inLists.has(m.id) })),
      this.options.instanceTypes ?? [],
    );
    return {
      services: this.listServices(),
      backends: this.pool
        .all()
        .sort((a, b) => a.id.localeCompare(b.id))
        .map((m) => ({
          backendId: m.id,
          address: m.address,
          service: this.assignments.get(m.id)?.service ?? "",
          state: m.info.state,
          lastSeenUnixMs: m.lastSeen,
          instanceType: m.info.instanceType,
          cores: this.sizes.get(m.id)?.cores ?? 1,
          maxBatch: this.sizes.get(m.id)?.maxBatch ?? 1,
          job: this.loans?.jobOf(m.id) ?? "",
        })),
      members: this.members
        .all()
        .sort((a, b) => a.id.localeCompare(b.id))
        .map((m) => ({ role: m.info, id: m.id, address: m.address, lastSeenUnixMs: m.lastSeen })),
      freeBackends: live.filter((m) => !inLists.has(m.id)).length,
      atUnixMs: now,
      instanceTypes: perType.types,
      costPerHour: perType.costPerHour,
      jobs: this.loans?.list() ?? [],
      loanedBackends: this.loans?.held().size ?? 0,
    };
  }

  // ---- best-effort jobs (admin) ----------------------------------------------------------------

  private jobsOrRefuse(): LoanManager {
    if (!this.loans) throw new GrpcStatusError(grpc.status.FAILED_PRECONDITION, "best-effort jobs are off in this allocator (--loans off)");
    return this.loans;
  }

  submitJob(spec: control.BestEffortJobSpec.$Properties | null | undefined, now: () => number) {
    const loans = this.jobsOrRefuse();
    return this.serial(async () => {
      const out = await loans.submit(spec, now());
      this.wake();
      return out;
    });
  }

  getJob(name: string): control.BestEffortJob {
    return this.jobsOrRefuse().get(name);
  }

  listJobs(): control.BestEffortJob[] {
    return this.jobsOrRefuse().list();
  }

  cancelJob(name: string, now: () => number): Promise<control.BestEffortJob> {
    const loans = this.jobsOrRefuse();
    return this.serial(async () => {
      const out = await loans.cancel(name, now());
      this.wake();
      return out;
    });
  }

  /** The best-effort jobs (none when loaning is off). */
  jobsOrNone(): control.BestEffortJob[] {
    return this.loans?.list() ?? [];
  }

  /** Backends loaned to best-effort jobs, being returned included. */
  loanedCount(): number {
    return this.loans?.held().size ?? 0;
  }

  snapshot(now: number): PoolSnapshot {
    const inLists = this.inLists();
    const live = this.pool.live(now);
    return {
      poolSize: live.length,
      free: live.filter((m) => !inLists.has(m.id)).length,
      listLengths: new Map([...this.services].map(([n, s]) => [n, s.entry.backends.length])),
    };
  }

  /**
   * Backends the pool is about to lose: kept out of every list until they are gone, or for RETIRE_TIMEOUT_MS
   * (the platform may remove others instead: a StatefulSet ignores the hint, and a Deployment ranks readiness
   * above it), after which one still alive is free again.
   */
  retire(ids: readonly string[], now: number): void {
    for (const id of ids) if (!this.retiring.has(id)) this.retiring.set(id, now);
  }

  /** The resize that was to remove them failed: they stay. */
  unretire(ids: readonly string[]): void {
    for (const id of ids) this.retiring.delete(id);
  }

  /** Per instance type, the backends the last per-type plan asks the pool for; undefined when the cluster is not planned per type. */
  typedTotals(): ReadonlyMap<string, number> | undefined {
    return this.typedPlan?.totals;
  }

  /**
   * The services whose model has a Themis profile, each with its list as the heartbeats show it (warm for
   * the service or not, cores and largest batch): what the Themis controller steps on.
   */
  themisServices(now: number): ThemisService[] {
    const warm = new Set([backend.BackendState.BACKEND_STATE_WARM_IDLE, backend.BackendState.BACKEND_STATE_BUSY]);
    return [...this.services.keys()].sort().flatMap((n) => {
      const spec = this.services.get(n)?.entry.spec;
      const profile = spec?.model?.themis;
      if (!spec || !profile) return [];
      return [
        {
          name: n,
          profile: { gamma: profile.gamma ?? 0, eps: profile.eps ?? 0, delta: profile.delta ?? 0, eta: profile.eta ?? 0 },
          sloMs: spec.sla?.latencyThresholdMs ?? 0,
          coldStartMs: spec.model?.coldStartMs ?? 0,
          maxBackends: spec.maxBackends ?? 0,
          list: this.idsOf(n).flatMap((id) => {
            const m = this.pool.get(id);
            if (!m || !this.pool.isLive(id, now)) return [];
            const size = this.sizes.get(id) ?? { cores: 1, maxBatch: 1 };
            return [{ id, warm: m.info.reportedService === n && warm.has(m.info.state), ...size }];
          }),
        },
      ];
    });
  }

  /** Per service, the cores its live backends hold now (as their heartbeats report them): the rate of its core-seconds. */
  coresByService(now: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const m of this.pool.live(now)) {
      const service = this.assignments.get(m.id)?.service;
      if (!service) continue;
      out.set(service, (out.get(service) ?? 0) + (this.sizes.get(m.id)?.cores ?? 1));
    }
    return out;
  }

  /** A live backend's instance type, as its heartbeats report it. */
  instanceTypeOf(backendId: string): string | undefined {
    return this.pool.get(backendId)?.info.instanceType;
  }

  /**
   * Kairos combined with the slow loop's shares: with a budget and a price list, and every service
   * profiled per type (a service that runs anywhere has no configuration to plan), each service's share of
   * the budget buys its configuration. Logged when it changes.
   */
  private planTypes(names: readonly string[], now: number): TypedCapacityPlan | undefined {
    const budget = this.options.budgetPerHour;
    const prices = this.options.instanceTypes ?? [];
    const services = names.flatMap((n) => {
      const model = serviceModelOf(this.services.get(n)?.entry.spec);
      if (!model) return [];
      const reported = this.options.batchesOf?.(n) ?? [];
      const batches = reported.length >= MIN_MEASURED_BATCHES ? reported : undefined;
      return [{ name: n, model, share: this.options.describe?.(n)?.share ?? 1, ...(batches ? { batches } : {}) }];
    });
    if (budget === undefined || prices.length === 0 || names.length === 0 || services.length < names.length) {
      if (this.typedPlan && budget !== undefined)
        this.logger.warn("a service without per-type profiles is registered: pools and lists are no longer planned per type");
      this.typedPlan = undefined;
      this.typedPlanKey = "";
      return undefined;
    }
    const inputs = JSON.stringify(services.map((x) => [x.name, x.share, x.model.qosMs, [...x.model.profiles], x.batches !== undefined]));
    // The search ranks every in-budget configuration: when the shares, the specs or the kind of query sizes
    // change, and with measured sizes at most once per re-plan period (they move with every load report).
    const measured = services.some((x) => x.batches !== undefined);
    const due = measured && now - this.typedPlannedAt >= TYPED_REPLAN_MS;
    if (this.typedPlan && inputs === this.typedInputs && !due) return this.typedPlan;
    this.typedInputs = inputs;
    this.typedPlannedAt = now;
    const plan = planTypedCapacity(services, prices, budget);
    const key = JSON.stringify([[...plan.services].map(([n, c]) => [n, [...c.counts]]), [...plan.problems]]);
    if (key !== this.typedPlanKey) {
      this.typedPlanKey = key;
      this.logger.info(
        {
          configurations: Object.fromEntries(
            [...plan.services].map(([n, c]) => [n, { ...Object.fromEntries(c.counts), costPerHour: c.costPerHour, bound: c.bound }]),
          ),
          pool: Object.fromEntries(plan.totals),
          costPerHour: plan.costPerHour,
          budgetPerHour: budget,
        },
        "planned the services' instance-type configurations",
      );
      for (const [n, why] of plan.problems)
        this.logger.warn({ service: n, problem: why }, "no configuration for a service within its share of the budget");
    }
    this.typedPlan = plan;
    return plan;
  }

  /** The pool as the last control step saw it; undefined while the allocator cannot judge it (settling, deaf, no step yet). */
  poolView(now: number): PoolView | undefined {
    if (!this.planned || this.deaf || now < this.settleUntil) return undefined;
    // A loaned backend counts as free for the pool: best-effort jobs use the pool the inference services keep,
    // and a shrink may take a loaned backend back (its job resumes from its checkpoint) instead of keeping it
    // for a job that can wait.
    return {
      demand: this.lastDemand,
      live: this.pool.live(now).length,
      free: [...[...this.freeSince].map(([id, since]) => ({ id, since })), ...(this.loans?.loanedSince() ?? [])],
    };
  }

  // ---- the control step ----------------------------------------------------------------------

  /** One control step; failures (NATS away, a registry conflict) are logged and retried next period. */
  reconcile(now: number): Promise<void> {
    return this.serial(() => this.reconcileGuarded(now));
  }

  private async reconcileGuarded(now: number): Promise<void> {
    try {
      await this.reconcileLocked(now);
    } catch (err) {
      this.logger.warn({ err }, "reconcile failed; retrying next period");
    }
  }

  private async reconcileLocked(now: number): Promise<void> {
    if (this.isDeaf(now) || now < this.settleUntil) return;
    const gone = new Set(this.pool.takeGone(now));
    // Every member ever heard of would stay otherwise (each rollout brings new pod names) until someone asks
    // for the cluster state.
    this.members.expire(now, this.options.memberForgetMs);
    for (const [id, since] of this.retiring) {
      if (gone.has(id) || now - since <= RETIRE_TIMEOUT_MS) continue;
      this.retiring.delete(id);
      this.logger.warn({ backend: id, retiredMs: now - since }, "a backend picked for removal is still in the pool; free again");
    }
    for (const id of gone) {
      this.retiring.delete(id);
      this.sizes.delete(id);
      const service = this.assignments.get(id)?.service ?? "";
      this.logger.info({ backend: id, service }, "backend left the pool");
      this.actuator.poolEvent({
        kind: ev.POOL_EVENT_KIND_LEFT,
        backendId: id,
        service,
        atUnixMs: now,
        reason: "heartbeats stopped or draining",
      });
    }
    const returned = new Map(this.pendingReturns);
    this.pendingReturns.clear();

    const names = [...this.services.keys()].sort();
    const inLists = this.inLists();
    const original = new Map(names.map((n) => [n, this.idsOf(n)]));
    // A service whose model is profiled per instance type takes only backends of those types.
    const accepts = new Map(
      names.map((n) => [
        n,
        instanceTypeFilter(
          (this.services.get(n)?.entry.spec?.model?.instanceProfiles ?? []).map((p) => p.instanceType ?? ""),
          (id) => this.pool.get(id)?.info.instanceType,
        ),
      ]),
    );
    // Lists without the backends that left or returned, or that the service cannot use (its spec gained
    // profiles): what the policy plans from.
    const cleaned = new Map(
      names.map((n) => [
        n,
        (original.get(n) ?? []).filter(
          (id) => this.pool.get(id) !== undefined && returned.get(id)?.service !== n && (accepts.get(n)?.(id) ?? true),
        ),
      ]),
    );
    const typed = this.planTypes(names, now);
    const typeOf = (id: string) => this.pool.get(id)?.info.instanceType;
    const liveIds = this.pool.live(now).map((m) => m.id);
    const listed = new Set([...cleaned.values()].flat());
    let toFree = 0;
    if (this.loans) {
      // Loans first (inference's need decides what may be lent), then the lists over what is not loaned.
      const held = this.loans.held();
      toFree = await this.loans.step(now, {
        live: liveIds,
        free: liveIds.filter((id) => !listed.has(id) && !this.retiring.has(id) && !held.has(id)),
        demand: this.lastDemand,
        inUse: [...listed].filter((id) => this.inUse(id)).length,
        stateOf: (id) => this.pool.get(id)?.info.state,
        services: this.serviceLoads(names, now),
      });
    }
    const floors = this.loans?.floors() ?? new Map<string, number>();
    const lent = this.loans?.held() ?? new Set<string>();
    // Jobs want backends that sit unused in lists: the lists give up idle tail entries (never one in use, never
    // below the spec's floor, never a Themis-sized list), which are lent once out of them.
    for (const n of names) {
      if (toFree <= 0 || this.options.listTarget?.(n)) continue;
      const list = cleaned.get(n) ?? [];
      const floor = Math.max(this.services.get(n)?.entry.spec?.minBackends ?? 0, floors.get(n) ?? 0);
      while (toFree > 0 && list.length > floor && !this.inUse(list.at(-1) as string)) {
        list.pop();
        toFree--;
      }
    }
    const policy = floors.size > 0 && this.options.policyWithFloors ? this.options.policyWithFloors(floors) : this.options.policy;
    const decision = policy({
      services: names.map((n) => {
        const spec = this.services.get(n)?.entry.spec;
        const filter = accepts.get(n);
        const themis = this.options.listTarget?.(n);
        if (themis) {
          // Themis sizes it: exactly that many (within the spec's bounds), every one kept warm, the entries it
          // names leaving first.
          const leaving = new Set(themis.remove);
          const cap = (spec?.maxBackends ?? 0) > 0 ? (spec?.maxBackends ?? 0) : Number.POSITIVE_INFINITY;
          const length = Math.min(Math.max(themis.length, spec?.minBackends ?? 0), cap);
          return {
            name: n,
            minBackends: length,
            maxBackends: length,
            initialBackends: length,
            currentList: (cleaned.get(n) ?? []).filter((id) => !leaving.has(id)),
            ...(filter ? { accepts: filter } : {}),
          };
        }
        const demand = {
          name: n,
          minBackends: spec?.minBackends ?? 0,
          maxBackends: spec?.maxBackends ?? 0,
          initialBackends: spec?.initialBackends ?? 0,
          currentList: cleaned.get(n) ?? [],
          ...(filter ? { accepts: filter } : {}),
        };
        if (!typed) return demand;
        // Its Kairos configuration sets the list: per-type counts, and the length is their sum.
        const counts = typed.services.get(n)?.counts ?? new Map<string, number>();
        const length = [...counts.values()].reduce((a, b) => a + b, 0);
        return { ...demand, maxBackends: length, minBackends: Math.min(demand.minBackends, length), typeCounts: { counts, typeOf } };
      }),
      freeBackends: liveIds.filter((id) => (!inLists.has(id) || returned.has(id)) && !this.retiring.has(id) && !lent.has(id)),
      poolSize: liveIds.filter((id) => !lent.has(id)).length,
    });

    // 1. Shrink lists first: a backend leaves its old list before it is given to another service.
    const removedFrom = new Map<string, string>();
    for (const n of names) {
      const before = original.get(n) ?? [];
      const after = new Set((cleaned.get(n) ?? []).filter((id) => (decision.lists.get(n) ?? []).includes(id)));
      const removed = before.filter((id) => !after.has(id));
      if (removed.length === 0) continue;
      for (const id of removed) removedFrom.set(id, n);
      await this.writeList(
        n,
        before.filter((id) => after.has(id)),
        now,
      );
    }

    // 2. Assignments: gone backends are forgotten; removed ones are cleared; added ones are
    // written before they appear in a list, so a backend knows its service when the first
    // warm-up arrives.
    const addedTo = new Map<string, string>();
    for (const n of names) for (const id of decision.services.get(n)?.added ?? []) addedTo.set(id, n);
    for (const [id, service] of removedFrom) {
      if (gone.has(id)) continue;
      const r = returned.get(id);
      this.actuator.poolEvent({
        kind: ev.POOL_EVENT_KIND_RETURNED,
        backendId: id,
        service,
        atUnixMs: now,
        reason: r?.reason ?? "reclaimed by the allocation",
      });
      // A backend just lent to a job already has its assignment (the loan).
      if (!addedTo.has(id) && !lent.has(id)) await this.writeAssignment(id, "", null, now);
    }
    for (const [id, record] of [...this.assignments]) {
      if (this.pool.get(id) !== undefined) continue;
      // Gone, or never seen since a restart: the key would only mislead a backend reusing the id.
      await this.actuator.deleteAssignment(id);
      this.assignments.delete(id);
      this.logger.debug({ backend: id, service: record.service }, "assignment deleted");
    }
    for (const [id, service] of addedTo)
      await this.writeAssignment(id, service, this.services.get(service)?.entry.spec?.model ?? null, now);

    // 3. Grow lists (and carry min_warm changes).
    for (const n of names) {
      const list = decision.lists.get(n) ?? [];
      const minWarm = decision.minWarm.get(n) ?? 0;
      const entry = this.services.get(n)?.entry;
      if (!entry) continue;
      const same = list.length === entry.backends.length && list.every((id, i) => entry.backends[i]?.backendId === id);
      if (same && entry.minWarm === minWarm) continue;
      await this.writeList(n, list, now, minWarm);
      for (const id of decision.services.get(n)?.added ?? [])
        this.actuator.poolEvent({
          kind: ev.POOL_EVENT_KIND_ASSIGNED,
          backendId: id,
          service: n,
          atUnixMs: now,
          reason: this.options.objective,
        });
    }

    // 4. A free backend must not hold on to an old assignment (say, written just before a crash).
    for (const id of decision.free) {
      const a = this.assignments.get(id);
      if (a?.service) await this.writeAssignment(id, "", null, now);
    }
    const freeNow = new Set(decision.free);
    for (const id of [...this.freeSince.keys()]) if (!freeNow.has(id)) this.freeSince.delete(id);
    for (const id of freeNow) if (!this.freeSince.has(id)) this.freeSince.set(id, now);
    this.lastDemand = [...decision.services.values()].reduce((sum, p) => sum + p.demand, 0);
    this.planned = true;

    this.planSeq += 1;
    const solve = this.options.lastSolve?.();
    this.actuator.plan({
      issuedAtUnixMs: now,
      seq: this.planSeq,
      services: names.map((n) => ({
        service: n,
        maxBackends: this.services.get(n)?.entry.backends.length ?? 0,
        minWarm: this.services.get(n)?.entry.minWarm ?? 0,
        predictedRatePerS: this.options.describe?.(n)?.predictedRatePerS ?? 0,
        utility: this.options.describe?.(n)?.utility ?? 0,
        share: this.options.describe?.(n)?.share ?? 0,
      })),
      poolSize: this.pool.live(now).length,
      freeBackends: decision.free.length,
      objective: this.options.objective,
      ...(solve
        ? { objectiveValue: solve.objective, objectiveUpperBound: solve.upperBound, solveMs: solve.solveMs, solvedAtUnixMs: solve.at }
        : {}),
    });
  }

  // ---- writes --------------------------------------------------------------------------------

  private async writeList(name: string, ids: readonly string[], now: number, minWarm?: number): Promise<void> {
    const current = this.services.get(name);
    if (!current) return;
    const known = new Map(current.entry.backends.map((r) => [r.backendId ?? "", r]));
    const backends = ids.map((id) => {
      const member = this.pool.get(id);
      return known.get(id) ?? { backendId: id, address: member?.address ?? "", instanceType: member?.info.instanceType ?? "" };
    });
    const spec = current.entry.spec;
    await this.writeService(
      {
        spec,
        backends,
        version: Number(current.entry.version) + 1,
        updatedAtUnixMs: now,
        minWarm: minWarm ?? Math.min(spec?.initialBackends ?? 0, backends.length),
      },
      current.revision,
    );
  }

  private async writeService(entry: control.ServiceEntry.$Properties, revision: number): Promise<void> {
    const name = entry.spec?.name ?? "";
    let newRevision: number;
    try {
      newRevision = await this.actuator.putService(entry, revision);
    } catch (err) {
      // Someone else wrote the entry: take the registry's view and let the caller retry.
      const fresh = await this.actuator.getService(name).catch(() => undefined);
      if (fresh) this.services.set(name, fresh);
      this.logger.warn({ err, service: name, revision }, "registry write conflicted");
      throw new GrpcStatusError(grpc.status.ABORTED, `registry entry of ${name} changed concurrently; retry`);
    }
    this.services.set(name, { entry: control.ServiceEntry.create(entry), revision: newRevision });
  }

  private async writeAssignment(id: string, service: string, model: control.ModelSpec.$Properties | null, now: number): Promise<void> {
    const previous = this.assignments.get(id);
    // Versions only grow, across restarts too: a backend compares them to spot a new assignment.
    const version = Math.max((previous?.version ?? 0) + 1, now);
    const latencySloMs = (service && this.services.get(service)?.entry.spec?.sla?.latencyThresholdMs) || 0;
    await this.actuator.putAssignment({ backendId: id, service, model, version, updatedAtUnixMs: now, latencySloMs });
    this.assignments.set(id, { service, version, updatedAt: now, acknowledged: false, since: now });
  }

  /** Warm, busy or loading: serving its service, or about to. */
  /** What the loans' `floors` rule reads of each service (its spec's SLO, the plan's share, the reported rate). */
  private serviceLoads(names: readonly string[], now: number): ServiceLoad[] {
    const out: ServiceLoad[] = [];
    for (const n of names) {
      const spec = this.services.get(n)?.entry.spec;
      const sloMs = spec?.sla?.latencyThresholdMs ?? 0;
      const percentile = spec?.sla?.percentile ?? 99;
      if (!(sloMs > 0) || !(percentile > 0 && percentile < 100)) continue;
      const load = this.options.loadOf?.(n, now);
      const profile = spec?.model?.profile;
      const profileMs =
        (profile?.scaleMs ?? 0) > 0
          ? lognormalMean({ shape: profile?.shape ?? 0, loc: profile?.locMs ?? 0, scale: profile?.scaleMs ?? 0 })
          : 0;
      out.push({
        name: n,
        share: load?.share,
        ratePerS: load?.ratePerS,
        serviceMs: load?.serviceTimeMs !== undefined && load.serviceTimeMs > 0 ? load.serviceTimeMs : profileMs,
        sloMs,
        percentile,
      });
    }
    return out;
  }

  private inUse(id: string): boolean {
    const state = this.pool.get(id)?.info.state;
    return (
      state === backend.BackendState.BACKEND_STATE_WARM_IDLE ||
      state === backend.BackendState.BACKEND_STATE_BUSY ||
      state === backend.BackendState.BACKEND_STATE_PROVISIONING
    );
  }

  /** A backend's loan (job set, service empty) or its return (both empty). */
  private async writeLoan(id: string, job: string, spec: control.BestEffortJobSpec.$Properties | null, now: number): Promise<void> {
    const previous = this.assignments.get(id);
    const version = Math.max((previous?.version ?? 0) + 1, now);
    await this.actuator.putAssignment({
      backendId: id,
      service: "",
      model: null,
      version,
      updatedAtUnixMs: now,
      latencySloMs: 0,
      job,
      jobSpec: spec,
      graceMs: this.options.jobs?.loan.graceMs ?? 0,
    });
    this.assignments.set(id, { service: "", version, updatedAt: now, acknowledged: false, since: now });
  }

  private idsOf(name: string): string[] {
    return (this.services.get(name)?.entry.backends ?? []).map((r) => r.backendId ?? "");
  }

  private inLists(): Set<string> {
    return new Set([...this.services.keys()].flatMap((n) => this.idsOf(n)));
  }

  private serial<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task, task);
    this.queue = run.catch(() => undefined);
    return run;
  }
}
