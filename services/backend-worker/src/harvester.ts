/**
 * Harvesting (libs/fapes harvest.ts): while this backend serves a service, warm, its idle time runs a best-effort
 * job's items in a second process (child-runtime.ts), which the backend stops the moment an inference request
 * computes and continues once it has idled; HarvestGate decides when. The items are claimed, computed, recorded
 * once and acked as a loaned backend's are (job-runner.ts): a claim waits while the process is stopped, and an
 * item stopped too long is given back (nak'd) so another backend runs it. The backend picks its job itself, from
 * the job store (`harvestJob`: priority, then arrival, with fewer items in flight than its maximum), and lets
 * go of it at once when it stops serving (decommissioned, reassigned, loaned or shutting down).
 */
import type { JobProgress } from "@infergrid/control-plane";
import type { Random } from "@infergrid/core";
import { HARVEST_DEFAULTS, HarvestGate, type HarvestJob, type HarvestOptions, harvestJob } from "@infergrid/fapes";
import { control } from "@infergrid/proto";
import type { PausableRuntime } from "./child-runtime.js";
import { type JobItems, JobRunner, type JobRunnerOptions } from "./job-runner.js";

/** The part of the job store harvesting reads (JobStore in production). */
export interface HarvestStore extends JobItems {
  listJobs(): Promise<control.BestEffortJob[]>;
  progress(name: string): Promise<JobProgress>;
}

/** A loaned backend's runner options it shares, and what harvesting adds. */
export interface HarvesterOptions
  extends Pick<JobRunnerOptions, "backendId" | "logger" | "nominalItemMs" | "claimWaitMs" | "now" | "onItem" | "hungAfterMs"> {
  store: HarvestStore;
  /** The job's model in a process it can stop (child-runtime.ts). */
  createRuntime(model: control.ModelSpec.$Properties | null | undefined, random: Random): PausableRuntime;
  /** Whether the backend serves a service now with its model loaded (warm): only then may it harvest. */
  serving(): boolean;
  gate?: HarvestOptions;
  /** How often it looks for a job, and whether it still serves (default 2000 ms). */
  pollMs?: number;
}

const RUNNING = new Set([control.JobState.JOB_STATE_QUEUED, control.JobState.JOB_STATE_RUNNING]);
/** How long a harvester whose job has no pending item stays, while it still gets items given back by others. */
const LINGER_MS = 5_000;
/** Let go at once: an item of a backend that stops serving is given back, not finished. */
const LET_GO_MS = 1;

export class Harvester {
  private readonly runner: JobRunner;
  private readonly gate: HarvestGate;
  private readonly now: () => number;
  private runtime: PausableRuntime | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private polling = false;
  private closed = false;
  /** Resolved while the best-effort process may run (claims wait on it); replaced when it is stopped. */
  private runnable: Promise<void> = Promise.resolve();
  private allowRun: () => void = () => undefined;
  private stops = 0;
  private done = 0;
  /** When its last item ended (any way): a harvester still getting items stays with its job. */
  private lastItemAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: HarvesterOptions) {
    this.now = options.now ?? Date.now;
    this.gate = new HarvestGate(this.now(), options.gate ?? HARVEST_DEFAULTS);
    this.runner = new JobRunner({
      backendId: options.backendId,
      items: options.store,
      logger: options.logger,
      createRuntime: (model, random) => {
        const runtime = options.createRuntime(model, random);
        if (this.gate.isStopped) runtime.pause();
        this.runtime = runtime;
        return runtime;
      },
      nominalItemMs: options.nominalItemMs,
      onItem: (job, outcome, wallMs) => {
        if (outcome === "done") this.done++;
        this.lastItemAt = this.now();
        options.onItem?.(job, outcome, wallMs);
      },
      readyToClaim: () => this.runnable,
      // Time stopped for inference is not time the item could compute.
      computeClock: () => this.gate.runningMs(this.now()),
      ...(options.claimWaitMs === undefined ? {} : { claimWaitMs: options.claimWaitMs }),
      ...(options.hungAfterMs === undefined ? {} : { hungAfterMs: options.hungAfterMs }),
      now: this.now,
    });
  }

  start(): void {
    this.pollTimer = setInterval(() => void this.poll(), this.options.pollMs ?? 2000);
    void this.poll();
  }

  /** The job it harvests for ("" when none). */
  get job(): string {
    return this.runner.job;
  }

  /** Whether it holds an item now (claimed, not yet recorded or given back). */
  get itemInFlight(): boolean {
    return this.runner.itemInFlight;
  }

  report(): { harvestJob: string; harvestItemsDone: number; harvestStops: number } {
    return { harvestJob: this.runner.job, harvestItemsDone: this.done, harvestStops: this.stops };
  }

  /** An inference request starts computing here: the best-effort process stops first. */
  computeStarts(): void {
    if (this.gate.computeStarts(this.now())) {
      this.runnable = new Promise((resolve) => {
        this.allowRun = resolve;
      });
      // Paused even before its process exists: a process started while stopped starts stopped.
      if (this.runtime?.pid !== undefined) this.stops++;
      this.runtime?.pause();
    }
    this.scheduleCheck();
  }

  /** The inference request is done computing. */
  computeEnds(): void {
    this.gate.computeEnds(this.now());
    this.scheduleCheck();
  }

  /** Shutting down: the item in flight goes back at once, the process is killed. */
  async stop(): Promise<void> {
    this.closed = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.checkTimer);
    this.allowRun();
    // The runner gives the item in flight back as it is told to stop; the process is killed before waiting for
    // the runner to end, since a process stopped for a request's compute (started stopped, still loading) would
    // never load nor answer, and the runner would wait for it for good.
    const stopped = this.runner.stop(LET_GO_MS);
    this.runtime?.discard();
    await stopped;
  }

  private scheduleCheck(): void {
    clearTimeout(this.checkTimer);
    const next = this.gate.nextCheckMs();
    if (next === undefined || this.closed) return;
    this.checkTimer = setTimeout(() => this.check(), Math.max(0, next - this.now()));
  }

  private check(): void {
    const action = this.gate.check(this.now());
    if (action === "resume") {
      this.runtime?.resume();
      this.allowRun();
    } else if (action === "abandon") {
      this.options.logger.info({ job: this.runner.job }, "harvest: the best-effort item was stopped too long; giving it back");
      this.runner.abandonInFlight();
      // Its computation is not worth continuing: a new process takes the next item.
      this.runtime?.discard();
    }
    this.scheduleCheck();
  }

  private letGo(why: string): void {
    this.options.logger.info({ job: this.runner.job, why }, "harvest: letting go of the job");
    this.runner.onAssignment(undefined);
    // A claim waiting for the process to run must see the let-go; later claims still wait for the gate.
    const waiting = this.allowRun;
    if (this.gate.isStopped)
      this.runnable = new Promise((resolve) => {
        this.allowRun = resolve;
      });
    waiting();
  }

  private async poll(): Promise<void> {
    if (this.polling || this.closed) return;
    this.polling = true;
    try {
      const job = this.runner.job;
      if (!this.options.serving()) {
        if (job) this.letGo("the backend stopped serving");
        return;
      }
      if (job) {
        const records = await this.options.store.listJobs();
        const record = records.find((r) => r.spec?.name === job);
        if (!record || !RUNNING.has(record.state)) this.letGo("the job ended");
        else if (
          (await this.options.store.progress(job)).pending === 0 &&
          !this.runner.itemInFlight &&
          this.now() - this.lastItemAt > LINGER_MS
        )
          // Items given back by others (nak'd) are not pending but are claimed again: it stays while it gets some.
          this.letGo("no item left to claim");
        return;
      }
      const records = (await this.options.store.listJobs()).filter((r) => r.spec?.name && RUNNING.has(r.state));
      const jobs: HarvestJob[] = [];
      for (const r of records) {
        const spec = r.spec as control.BestEffortJobSpec;
        const p = await this.options.store.progress(spec.name);
        jobs.push({
          name: spec.name,
          priority: spec.priority,
          submittedAtMs: Number(r.submittedAtUnixMs),
          maxBackends: spec.maxBackends > 0 ? spec.maxBackends : spec.items,
          unclaimed: p.pending,
          inFlight: p.inFlight,
        });
      }
      const name = harvestJob(jobs);
      const spec = records.find((r) => r.spec?.name === name)?.spec;
      if (!name || !spec || this.closed || !this.options.serving()) return;
      this.options.logger.info({ job: name }, "harvest: working for a best-effort job in the idle time");
      this.runner.onAssignment(
        control.BackendAssignment.create({ backendId: this.options.backendId, job: name, jobSpec: spec, graceMs: LET_GO_MS }),
      );
    } catch (err) {
      this.options.logger.warn({ err }, "harvest: reading the jobs failed");
    } finally {
      this.polling = false;
    }
  }
}
