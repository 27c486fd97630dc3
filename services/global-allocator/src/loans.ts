import type { RefusedResult, ResultCheck } from "@infergrid/control-plane";
import { seededRandom } from "@infergrid/core";
import {
  FLOORS_SPARE,
  floorsTotal,
  HeadroomLearner,
  type HeadroomSettings,
  inferenceNeed,
  type LoanedServer,
  type LoanJob,
  type NeedRule,
  PeakWindow,
  planLoans,
  type ReclaimStrategy,
  ServiceFloors,
  type ServiceLoad,
} from "@infergrid/fapes";
import { backend, control } from "@infergrid/proto";
import { GrpcStatusError, grpc, type Logger } from "@infergrid/runtime";
import { normalizeJobSpec, sameJobSpec } from "./job-spec.js";

/** Items and backends named per problem when refused results are logged. */
const ITEMS_LOGGED = 5;

/** What the loan manager needs of the job store (libs/control-plane's JobStore). */
export interface JobsPort {
  getJob(name: string): Promise<{ job: control.BestEffortJob; revision: number } | undefined>;
  putJob(job: control.IBestEffortJob, revision?: number): Promise<number>;
  listJobs(): Promise<control.BestEffortJob[]>;
  ensureItems(spec: control.IBestEffortJobSpec, keepGoing?: () => boolean): Promise<void>;
  progress(name: string): Promise<{ done: number; pending: number; inFlight: number }>;
  audit(name: string, items: number, check?: ResultCheck): Promise<{ accepted: number; refused: RefusedResult[]; digest: Uint8Array }>;
  redo(name: string, refused: readonly Pick<RefusedResult, "key" | "item">[]): Promise<void>;
  removeItems(name: string): Promise<void>;
  /** A done job's results leave the bucket backends write (its audit copied them where only the allocator writes). */
  retireResults(name: string): Promise<void>;
  forgetJob(name: string): Promise<void>;
}

/** How the loan manager writes a backend's assignment (the allocator's one writer of them). */
export type AssignJob = (backendId: string, job: string, spec: control.BestEffortJobSpec.$Properties | null) => Promise<void>;

export interface LoanOptions {
  /** How many backends inference keeps before anything is lent (libs/fapes inferenceNeed). */
  need: NeedRule;
  /** Which loaned backends go back first when inference needs them. */
  strategy: ReclaimStrategy;
  /** How long a reclaimed backend has to let go of its item (FaPES: 15 s). */
  graceMs: number;
  /** How inference's spare backends are learned (the lead time: grace plus a cold start). */
  headroom: HeadroomSettings;
  /** A fall of inference's need is followed (more lent) only once it has held this long. */
  holdMs: number;
  /** How often each unfinished job's progress is read from the store. */
  progressPeriodMs: number;
  /** A reclaimed backend that never reports letting go is counted as back after this long (it died, say). */
  returnTimeoutMs: number;
  /** Seeds the random reclaim. */
  seed: number;
  /** A job finished (succeeded or cancelled) this long ago is forgotten: its record and results go, its name is free. */
  finishedRetentionMs: number;
  /**
   * Checks a result's seal (--signed-heartbeats: HeartbeatVerifier.jobResultProblem). Given, a job is done only
   * when every result is sealed by the backend it names and that backend worked for the job; the others are
   * removed and their items done again. Without it a result's backend name is the backend's word, so only
   * results that do not read are refused.
   */
  resultProblem?: ResultCheck;
}

export const LOAN_DEFAULTS: Omit<LoanOptions, "headroom"> = {
  need: "plan-in-use-headroom",
  strategy: "fewest-preemptions",
  holdMs: 300_000,
  graceMs: 15_000,
  progressPeriodMs: 2_000,
  returnTimeoutMs: 45_000,
  seed: 1,
  finishedRetentionMs: 86_400_000,
};

interface Loan {
  job: string;
  since: number;
  /** When it was asked back (NaN: still loaned). */
  returningSince: number;
  /** The backend has reported working for the job (or, returning, reported letting go). */
  heard: boolean;
}

interface JobRecord {
  job: control.BestEffortJob;
  revision: number;
  progress: { done: number; pending: number; inFlight: number } | undefined;
  progressAt: number;
  /** Something changed that the store has not seen yet. */
  dirty: boolean;
  /** Per backend, the items it reported redone for this job (heartbeats carry running totals). */
  redone: Map<string, number>;
  /** Its items are in the work queue (ensureItems succeeded since this allocator started, or submitted it). */
  itemsPublished: boolean;
  /**
   * The digest of its results when the last audit found every one good and one for every item (cleared by any
   * change of progress): recorded in the job when it is called done.
   */
  audited: Uint8Array | undefined;
  /** An audit's outcome, for the next step to apply: the audit runs beside the steps, which own the job record. */
  auditDone: { accepted: number; refused: number; digest: Uint8Array } | undefined;
}

/** What the allocator tells the loan manager each control step. */
export interface LoanView {
  /** Live backends. */
  live: readonly string[];
  /** Live backends in no list, not retiring and not loaned: what may be loaned, in the order to loan them. */
  free: readonly string[];
  /** Backends the inference services' plan asks for (the allocation's demand). */
  demand: number;
  /** Backends inference uses now: warm, busy or starting in a list. */
  inUse: number;
  /** A backend's last reported state. */
  stateOf(id: string): backend.BackendState | undefined;
  /**
   * Per service, its share, the rate its frontends reported over the last lead time and its SLO: what the
   * `floors` rule keeps for each (libs/fapes ServiceFloors). Unused by the other rules.
   */
  services?: readonly ServiceLoad[];
}

const S = control.JobState;
const finished = (state: control.JobState) => state === S.JOB_STATE_SUCCEEDED || state === S.JOB_STATE_CANCELLED;

/**
 * Best-effort jobs and the backends loaned to them (FaPES), run by the allocator inside its control step. The
 * decisions are libs/fapes's (`planLoans`, the reclaim strategies, the learned headroom); this keeps the state
 * they need (which backend is loaned to which job, which are on their way back), the job records in the store,
 * and turns decisions into assignments. The allocation plans its lists over the backends this does not hold, so
 * a reclaimed backend reaches a list only once it has let go of its job.
 */
export class LoanManager {
  private readonly jobs = new Map<string, JobRecord>();
  private readonly loans = new Map<string, Loan>();
  /** Serving backends harvesting for a job, as their last heartbeat said. */
  private readonly harvesters = new Map<string, string>();
  /**
   * Items being published, by job. Outside the allocator's one queue of changes: a job of a million items takes
   * tens of seconds to publish, and the lists, registrations and cancels must not wait for it.
   */
  private readonly publishing = new Map<string, Promise<void>>();
  /** Audits of jobs' results under way, by job: beside the control step too (a job of a million items is read whole). */
  private readonly auditing = new Map<string, Promise<void>>();
  private readonly headroom: HeadroomLearner;
  private readonly hold: PeakWindow;
  /** The `floors` rule's per-service floors (the hold is theirs, per service). */
  private readonly serviceFloors: ServiceFloors | undefined;
  private readonly random;
  private lastNeed = 0;

  constructor(
    private readonly store: JobsPort,
    private readonly assign: AssignJob,
    private readonly logger: Logger,
    private readonly options: LoanOptions,
    private readonly hooks: { onPreempted?(job: string): void } = {},
  ) {
    this.headroom = new HeadroomLearner(options.headroom);
    const floors = options.need === "floors";
    this.hold = new PeakWindow(floors ? 0 : options.holdMs);
    this.serviceFloors = floors ? new ServiceFloors(options.holdMs) : undefined;
    this.random = seededRandom(options.seed);
  }

  /** After a restart: the jobs as stored, and the backends the registry says are loaned. */
  restore(jobs: readonly control.BestEffortJob[], assignments: readonly control.BackendAssignment[], now: number): void {
    for (const job of jobs) {
      const name = job.spec?.name ?? "";
      if (name)
        this.jobs.set(name, {
          job,
          revision: 0,
          progress: undefined,
          progressAt: Number.NEGATIVE_INFINITY,
          dirty: false,
          redone: new Map(),
          // A restart between a job's record and its items finds the record: the next step publishes them.
          itemsPublished: false,
          audited: undefined,
          auditDone: undefined,
        });
    }
    for (const a of assignments) {
      if (!a.job) continue;
      const record = this.jobs.get(a.job);
      // A loan to a job that ended or is unknown is asked back at once.
      const returning = !record || finished(record.job.state);
      this.loans.set(a.backendId, { job: a.job, since: now, returningSince: returning ? now : Number.NaN, heard: false });
    }
    if (jobs.length > 0) this.logger.info({ jobs: jobs.length, loans: this.loans.size }, "restored best-effort jobs");
  }

  /** Reads the store's revisions of the jobs restored (compare-and-set needs them). */
  async load(): Promise<void> {
    for (const [name, r] of this.jobs) {
      const found = await this.store.getJob(name);
      if (found) {
        r.job = found.job;
        r.revision = found.revision;
      }
    }
  }

  // ---- admin ---------------------------------------------------------------------------------

  async submit(
    input: control.BestEffortJobSpec.$Properties | null | undefined,
    now: number,
  ): Promise<{ job: control.BestEffortJob; created: boolean }> {
    const spec = normalizeJobSpec(input);
    const existing = this.jobs.get(spec.name);
    if (existing) {
      if (existing.job.spec && sameJobSpec(existing.job.spec, spec)) return { job: this.view(existing), created: false };
      throw new GrpcStatusError(grpc.status.ALREADY_EXISTS, `a different job named ${spec.name} exists; cancel it or pick another name`);
    }
    const job = control.BestEffortJob.create({ spec, state: S.JOB_STATE_QUEUED, submittedAtUnixMs: now });
    let revision: number;
    try {
      revision = await this.store.putJob(job, 0);
    } catch (err) {
      throw new GrpcStatusError(grpc.status.ABORTED, `job ${spec.name} was written concurrently; retry (${String(err)})`);
    }
    // Record first, items second: if publishing them fails (or the allocator restarts between the two), the
    // record is there and each step tries again; a client retrying the same submission gets the job.
    const record: JobRecord = {
      job,
      revision,
      progress: undefined,
      progressAt: Number.NEGATIVE_INFINITY,
      dirty: false,
      redone: new Map(),
      itemsPublished: false,
      audited: undefined,
      auditDone: undefined,
    };
    this.jobs.set(spec.name, record);
    this.logger.info({ job: spec.name, items: spec.items, minBackends: spec.minBackends, maxBackends: spec.maxBackends }, "job submitted");
    this.publishItems(record);
    return { job: this.view(record), created: true };
  }

  get(name: string): control.BestEffortJob {
    const r = this.jobs.get(name);
    if (!r) throw new GrpcStatusError(grpc.status.NOT_FOUND, `no job named ${JSON.stringify(name)}`);
    return this.view(r);
  }

  list(): control.BestEffortJob[] {
    return [...this.jobs.keys()].sort().map((n) => this.view(this.jobs.get(n) as JobRecord));
  }

  async cancel(name: string, now: number): Promise<control.BestEffortJob> {
    const r = this.jobs.get(name);
    if (!r) throw new GrpcStatusError(grpc.status.NOT_FOUND, `no job named ${JSON.stringify(name)}`);
    if (!finished(r.job.state)) {
      r.job.state = S.JOB_STATE_CANCELLED;
      r.job.finishedAtUnixMs = now;
      r.dirty = true;
      this.logger.info({ job: name }, "job cancelled");
    }
    // Done again on a cancel of a cancelled job: a retry after a failure here (NATS away) finishes the work,
    // where it used to answer at once and leave the items queued and the loans with the job.
    if (r.job.state === S.JOB_STATE_CANCELLED) {
      await this.store.removeItems(name);
      for (const [id, loan] of this.loans) if (loan.job === name && Number.isNaN(loan.returningSince)) await this.askBack(id, loan, now);
      await this.flush(r);
    }
    return this.view(r);
  }

  /**
   * Starts putting an unfinished job's items in the work queue, once, without waiting for it; a failure is logged
   * and the next step starts again. A job cancelled meanwhile stops the publishing, and what went out is removed.
   */
  private publishItems(r: JobRecord): void {
    const spec = r.job.spec;
    const name = spec?.name ?? "";
    if (r.itemsPublished || !spec || finished(r.job.state) || this.publishing.has(name)) return;
    const publishing = (async () => {
      try {
        await this.store.ensureItems(spec, () => !finished(r.job.state));
        if (finished(r.job.state)) await this.store.removeItems(name);
        else r.itemsPublished = true;
      } catch (err) {
        this.logger.warn({ err, job: name }, "publishing the job's items failed; trying again next step");
      }
    })().finally(() => this.publishing.delete(name));
    this.publishing.set(name, publishing);
  }

  /** Jobs finished longer ago than the retention, with no backend still letting go of them, are forgotten. */
  private async forgetFinished(now: number): Promise<void> {
    for (const [name, r] of [...this.jobs]) {
      if (!finished(r.job.state) || !(now - Number(r.job.finishedAtUnixMs) > this.options.finishedRetentionMs)) continue;
      if (this.publishing.has(name) || [...this.loans.values()].some((l) => l.job === name)) continue;
      try {
        await this.store.forgetJob(name);
        this.jobs.delete(name);
        this.logger.info({ job: name, finishedAtUnixMs: Number(r.job.finishedAtUnixMs) }, "finished job forgotten");
      } catch (err) {
        this.logger.warn({ err, job: name }, "forgetting a finished job failed; trying again next step");
      }
    }
  }

  /** Resolves once the items being published now are out (or failed). */
  async published(): Promise<void> {
    await Promise.all(this.publishing.values());
  }

  // ---- inputs ----------------------------------------------------------------------------------

  /** A backend's heartbeat: whether it took its loan, let go of it, and its item counts. */
  onBackendReport(id: string, report: backend.BackendReport.$Properties): void {
    const harvest = report.harvestJob ?? "";
    const before = this.harvesters.get(id) ?? "";
    if (harvest !== before) {
      if (harvest) this.harvesters.set(id, harvest);
      else this.harvesters.delete(id);
      this.touch(before);
      this.touch(harvest);
    }
    if (harvest) this.addWorker(harvest, id);
    const loan = this.loans.get(id);
    if (report.job) {
      this.addWorker(report.job, id);
      const r = this.jobs.get(report.job);
      if (r) {
        const before = r.redone.get(id) ?? 0;
        const redone = report.jobItemsRedone ?? 0;
        if (redone !== before) {
          r.redone.set(id, redone);
          r.dirty = true;
        }
      }
    }
    if (!loan) return;
    if (Number.isNaN(loan.returningSince)) {
      if (report.job === loan.job) loan.heard = true;
    } else if (report.job === "" && report.state !== backend.BackendState.BACKEND_STATE_BUSY) {
      loan.heard = true;
    }
  }

  /** Backends the allocation must not plan with: loaned, or on their way back. */
  held(): ReadonlySet<string> {
    return new Set(this.loans.keys());
  }

  /** The job a backend is loaned to ("" for none), for the cluster state. */
  jobOf(id: string): string {
    const loan = this.loans.get(id);
    return loan && Number.isNaN(loan.returningSince) ? loan.job : "";
  }

  /** Backends loaned now and the time they were loaned (the pool manager may remove them like free ones). */
  loanedSince(): { id: string; since: number }[] {
    return [...this.loans].filter(([, l]) => Number.isNaN(l.returningSince)).map(([id, l]) => ({ id, since: l.since }));
  }

  /** What inference was last judged to need (demand or use, plus the learned headroom; or the floors' sum). */
  inferenceNeed(): number {
    return this.lastNeed;
  }

  /**
   * Under the `floors` rule, each service's floor of the last step while jobs borrow (a loan held or a job not
   * finished): its list is planned with at least that many. Empty otherwise: with nothing to lend the lists follow
   * the plan alone, as without loans.
   */
  floors(): ReadonlyMap<string, number> {
    const borrowing = this.loans.size > 0 || [...this.jobs.values()].some((r) => !finished(r.job.state));
    return borrowing ? (this.serviceFloors?.floors ?? new Map()) : new Map();
  }

  // ---- the step --------------------------------------------------------------------------------

  /**
   * One loan step: ends loans of backends that left, takes back the returned ones, reads progress, finishes
   * jobs that are done, then plans (libs/fapes planLoans) and writes the new loans and reclaims. Returns how
   * many backends the lists should give up because jobs want more than is free (they are lent on a later
   * step, once out of the lists).
   */
  async step(now: number, view: LoanView): Promise<number> {
    for (const r of this.jobs.values()) this.publishItems(r);
    await this.forgetFinished(now);
    const live = new Set(view.live);
    for (const [id, job] of [...this.harvesters])
      if (!live.has(id)) {
        this.harvesters.delete(id);
        this.touch(job);
      }
    for (const [id, loan] of [...this.loans]) {
      if (!live.has(id)) {
        this.loans.delete(id);
        this.logger.info({ backend: id, job: loan.job }, "a loaned backend left; its item goes back to the job");
        this.touch(loan.job);
        continue;
      }
      if (!Number.isNaN(loan.returningSince) && (loan.heard || now - loan.returningSince > this.options.returnTimeoutMs)) {
        this.loans.delete(id);
        this.logger.info(
          { backend: id, job: loan.job, afterMs: now - loan.returningSince, reported: loan.heard },
          "loaned backend is back",
        );
      }
    }
    await this.readProgress(now);

    this.headroom.observe(now, view.inUse, view.demand);
    let need: number;
    if (this.serviceFloors) {
      const services = view.services ?? [];
      const floors = this.serviceFloors.observe(now, services);
      // Before the slow loop has planned every service inference may need every backend.
      need = services.length > 0 && services.every((s) => s.share !== undefined) ? floorsTotal(floors) : view.live.length;
    } else {
      need = this.hold.observe(now, inferenceNeed(this.options.need, view.demand, view.inUse, this.headroom.headroom()));
    }
    this.lastNeed = need;

    const active = [...this.jobs.values()].filter((r) => !finished(r.job.state));
    const loanedTo = (name: string) => [...this.loans.values()].filter((l) => l.job === name && Number.isNaN(l.returningSince)).length;
    const loans: LoanedServer[] = [];
    for (const [id, loan] of this.loans) {
      if (!Number.isNaN(loan.returningSince)) continue;
      const r = this.jobs.get(loan.job);
      const p = r?.progress;
      // Idle: its job has nothing left to hand out and this backend is not computing an item.
      const idle = !p || (p.pending === 0 && view.stateOf(id) !== backend.BackendState.BACKEND_STATE_BUSY);
      loans.push({ id, jobs: idle ? [] : [loan.job] });
    }
    const returning = [...this.loans.values()].filter((l) => !Number.isNaN(l.returningSince)).length;
    const jobs: LoanJob[] = active.map((r) => {
      const spec = r.job.spec as control.BestEffortJobSpec;
      const p = r.progress;
      return {
        name: spec.name,
        priority: spec.priority,
        submittedAtMs: Number(r.job.submittedAtUnixMs),
        minBackends: spec.minBackends,
        maxBackends: spec.maxBackends,
        held: loanedTo(spec.name),
        // Before its progress is known a job can use what its spec allows.
        remaining: p ? p.pending + p.inFlight : spec.items,
      };
    });
    const decision = planLoans(
      {
        live: view.live.length,
        inferenceNeed: need,
        loans,
        returning,
        free: view.free,
        jobs,
        ...(this.serviceFloors ? { spare: FLOORS_SPARE } : {}),
      },
      { strategy: this.options.strategy, random: this.random },
    );
    if (active.length > 0)
      this.logger.debug(
        {
          need,
          demand: view.demand,
          inUse: view.inUse,
          free: view.free.length,
          loaned: loans.length,
          returning,
          lent: decision.loans.length,
          toFree: decision.toFree,
        },
        "loan step",
      );
    for (const id of decision.released) {
      const loan = this.loans.get(id);
      if (loan) await this.askBack(id, loan, now);
    }
    if (decision.reclaim.servers.length > 0) {
      this.logger.info(
        { need, backends: decision.reclaim.servers, preempted: decision.reclaim.preempted, strategy: this.options.strategy },
        "reclaiming loaned backends for inference",
      );
      for (const name of decision.reclaim.preempted) {
        const r = this.jobs.get(name);
        if (!r) continue;
        r.job.preemptions += 1;
        r.dirty = true;
        this.hooks.onPreempted?.(name);
      }
      for (const id of decision.reclaim.servers) {
        const loan = this.loans.get(id);
        if (loan) await this.askBack(id, loan, now);
      }
    }
    for (const { backend: id, job } of decision.loans) {
      const r = this.jobs.get(job);
      if (!r?.job.spec) continue;
      await this.assign(id, job, r.job.spec);
      this.loans.set(id, { job, since: now, returningSince: Number.NaN, heard: false });
      this.addWorker(job, id);
      if (r.job.state === S.JOB_STATE_QUEUED) {
        r.job.state = S.JOB_STATE_RUNNING;
        r.job.startedAtUnixMs = now;
      }
      r.dirty = true;
      this.logger.info({ backend: id, job }, "backend loaned to a best-effort job");
    }
    for (const r of this.jobs.values()) if (r.dirty) await this.flush(r);
    return decision.toFree;
  }

  private async askBack(id: string, loan: Loan, now: number): Promise<void> {
    await this.assign(id, "", null);
    loan.returningSince = now;
    loan.heard = false;
    this.touch(loan.job);
  }

  private touch(job: string): void {
    const r = this.jobs.get(job);
    if (r) r.dirty = true;
  }

  /** The backend worked for the job (a loan, or its heartbeat said so): its results may count. */
  private addWorker(job: string, id: string): void {
    const r = this.jobs.get(job);
    if (!r || r.job.workers.includes(id)) return;
    r.job.workers.push(id);
    r.dirty = true;
  }

  /**
   * Before a job whose results number its items is called done, its results are audited, beside the control step:
   * every result must count (its key names one of the job's items, it reads as that item's result, and under signed
   * results it is sealed by the backend it names and that backend worked for the job). The others are removed and
   * their items put back; the job goes on. `r.audited` is set when every result counts and every item has one.
   */
  private startAudit(name: string, r: JobRecord, items: number): void {
    if (this.auditing.has(name)) return;
    const check = this.options.resultProblem;
    const workers = new Set(r.job.workers);
    const audit = (async () => {
      try {
        const { accepted, refused, digest } = await this.store.audit(
          name,
          items,
          check &&
            ((result, raw) =>
              check(result, raw) ?? (workers.has(result.backendId) ? undefined : `backend ${result.backendId} never worked for the job`)),
        );
        // Read afresh next step: a pass completes the job then, a refusal finds its results gone from the count.
        r.progressAt = Number.NEGATIVE_INFINITY;
        if (refused.length === 0) {
          r.auditDone = { accepted, refused: 0, digest };
          return;
        }
        // One line per problem (a forger writes many results the same way), with a few of its items.
        const byProblem = new Map<string, RefusedResult[]>();
        for (const f of refused) {
          const of = byProblem.get(f.problem);
          if (of) of.push(f);
          else byProblem.set(f.problem, [f]);
        }
        for (const [problem, of] of byProblem)
          this.logger.warn(
            {
              job: name,
              problem,
              results: of.length,
              keys: of.slice(0, ITEMS_LOGGED).map((f) => f.key),
              backends: [...new Set(of.map((f) => f.backendId))].slice(0, ITEMS_LOGGED),
            },
            "refused a job result; its item is done again",
          );
        // A job cancelled meanwhile keeps its results as they are: its items are not put back.
        if (finished(r.job.state)) return;
        await this.store.redo(name, refused);
        r.auditDone = { accepted, refused: refused.length, digest };
      } catch (err) {
        this.logger.warn({ err, job: name }, "auditing the job's results failed; trying again next step");
      }
    })().finally(() => this.auditing.delete(name));
    this.auditing.set(name, audit);
  }

  /** Resolves once the audits under way now are done (or failed). */
  async audits(): Promise<void> {
    await Promise.all(this.auditing.values());
  }

  private async readProgress(now: number): Promise<void> {
    for (const [name, r] of this.jobs) {
      const audit = r.auditDone;
      if (audit) {
        r.auditDone = undefined;
        if (audit.refused > 0) {
          r.job.itemsRefused += audit.refused;
          r.dirty = true;
        } else r.audited = audit.accepted >= (r.job.spec?.items ?? 0) ? audit.digest : undefined;
      }
      if (finished(r.job.state) || now - r.progressAt < this.options.progressPeriodMs) continue;
      try {
        const p = await this.store.progress(name);
        r.progress = p;
        r.progressAt = now;
        if (p.done !== r.job.itemsDone) {
          r.job.itemsDone = p.done;
          r.dirty = true;
          r.audited = undefined;
        }
        // Harvesting backends may start a job no loan has: it runs once its items do.
        if (r.job.state === S.JOB_STATE_QUEUED && (p.done > 0 || p.inFlight > 0)) {
          r.job.state = S.JOB_STATE_RUNNING;
          r.job.startedAtUnixMs = now;
          r.dirty = true;
        }
        const items = r.job.spec?.items ?? 0;
        if (p.done >= items && !r.audited) this.startAudit(name, r, items);
        else if (p.done >= items && r.audited && !this.auditing.has(name)) {
          r.job.state = S.JOB_STATE_SUCCEEDED;
          r.job.resultsDigest = r.audited;
          r.job.finishedAtUnixMs = now;
          r.dirty = true;
          await this.store.removeItems(name);
          await this.store.retireResults(name);
          for (const [id, loan] of this.loans)
            if (loan.job === name && Number.isNaN(loan.returningSince)) await this.askBack(id, loan, now);
          this.logger.info(
            { job: name, items, preemptions: r.job.preemptions, completionMs: now - Number(r.job.submittedAtUnixMs) },
            "job completed",
          );
        }
      } catch (err) {
        this.logger.warn({ err, job: name }, "could not read a job's progress; keeping the last");
      }
    }
  }

  private view(r: JobRecord): control.BestEffortJob {
    const name = r.job.spec?.name ?? "";
    const backends = [...this.loans]
      .filter(([, l]) => l.job === name && Number.isNaN(l.returningSince))
      .map(([id]) => id)
      .sort();
    const harvesting = [...this.harvesters]
      .filter(([, job]) => job === name)
      .map(([id]) => id)
      .sort();
    const redone = [...r.redone.values()].reduce((a, b) => a + b, 0);
    return control.BestEffortJob.create({ ...r.job, backends, harvesting, itemsRedone: Math.max(r.job.itemsRedone, redone) });
  }

  private async flush(r: JobRecord): Promise<void> {
    const record = this.view(r);
    try {
      r.revision = await this.store.putJob(record, r.revision > 0 ? r.revision : undefined);
      r.job = record;
      r.dirty = false;
    } catch (err) {
      // Someone else wrote it (a second allocator, an operator): take theirs and write ours next step.
      const fresh = await this.store.getJob(r.job.spec?.name ?? "").catch(() => undefined);
      if (fresh) r.revision = fresh.revision;
      this.logger.warn({ err, job: r.job.spec?.name }, "job record write conflicted; retrying next step");
    }
  }
}
