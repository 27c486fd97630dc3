import { setTimeout as sleep } from "node:timers/promises";
import type { ClaimedItem } from "@infergrid/control-plane";
import type { Random } from "@infergrid/core";
import { FAPES_GRACE_MS, hungItemLimitMs, reclaimedItem } from "@infergrid/fapes";
import type { InferResult, ModelRuntime } from "@infergrid/models";
import { backend, type control } from "@infergrid/proto";
import type { Logger } from "@infergrid/runtime";
import { digestOutputs, itemRandom, jobItemInputs } from "./job-item.js";

/** The part of the job store a runner uses (JobStore in production). */
export interface JobItems {
  claim(name: string, options: { maxWaitMs: number }): Promise<ClaimedItem | undefined>;
  hasResult(job: string, item: number): Promise<boolean>;
  recordResult(result: control.IJobItemResult): Promise<"recorded" | "exists">;
}

/**
 * How an item claimed by this backend ended: recorded (done), recorded by someone else first (redone: it
 * was computed twice), found recorded before computing (skipped: a redelivery after a crash between record
 * and ack), let go unrecorded (abandoned: reclaimed, or shutting down), or its model failed (failed).
 */
export type ItemOutcome = "done" | "redone" | "skipped" | "abandoned" | "failed";

export interface JobRunnerOptions {
  backendId: string;
  items: JobItems;
  logger: Logger;
  /** The job's model, drawing an emulated model's service times from `random` (the runner seeds it per item). */
  createRuntime(model: control.ModelSpec.$Properties | null | undefined, random: Random): ModelRuntime;
  /** What an item of this job is expected to take before one has been timed here. */
  nominalItemMs(spec: control.BestEffortJobSpec.$Properties): number;
  onItem?(job: string, outcome: ItemOutcome, wallMs: number): void;
  /** The job this backend works for changed (a heartbeat now tells the allocator at once). */
  onJobChanged?(job: string): void;
  now?: () => number;
  /** How long one claim waits for an item (default 1000 ms): also how soon an idle runner sees a reclaim. */
  claimWaitMs?: number;
  /** Pause after a failure talking to NATS or running the model (default 500 ms). */
  retryMs?: number;
  /** Awaited before each claim: a harvesting backend claims only while its best-effort process may run. */
  readyToClaim?(): Promise<void>;
  /** A clock that runs only while an item may compute (a harvester's process is stopped at times; default `now`). */
  computeClock?: () => number;
  /** How long an item may compute, on `computeClock`, before it counts as hung (default libs/fapes hungItemLimitMs). */
  hungAfterMs?: (expectedMs: number) => number;
}

/** How long unloading a model that hung may take before the runner goes on without it. */
const UNLOAD_AFTER_HANG_MS = 5_000;

type Phase = "loading" | "running" | "releasing";

interface Session {
  readonly job: string;
  readonly spec: control.BestEffortJobSpec.$Properties;
  graceMs: number;
  phase: Phase;
  /** Reclaimed (or shutting down): no new claim; the item in flight ends by `deadlineMs` at the latest. */
  stopping: boolean;
  /** Let go: the heartbeat already says job "" while the model is unloaded. */
  letGo: boolean;
  deadlineMs: number | undefined;
  deadlineTimer: NodeJS.Timeout | undefined;
  inFlight: { readonly item: number; readonly startedMs: number; abandon(): void } | undefined;
  /** The model call of an abandoned item may still run: the model is unloaded only after it. */
  computing: Promise<unknown>;
  /** It ended without being reclaimed (its model cannot run here): not started again for the same assignment. */
  failed: boolean;
  /** A model call hung: the model is unloaded without waiting for that call. */
  hung: boolean;
  ended: Promise<void>;
  /** Resolves when it lets go (the item in flight recorded or given back). */
  letGone: Promise<void>;
  onLetGo: () => void;
}

interface JobCounts {
  done: number;
  redone: number;
  timedMs: number;
  timed: number;
}

/** The assignment's job, if it is one: a backend with a service is not loaned, whatever else it says. */
function jobOf(a: control.BackendAssignment | undefined): control.BackendAssignment | undefined {
  return a && !a.service && a.job ? a : undefined;
}

/**
 * A loaned backend's work (FaPES): while its assignment names a job, it loads the job's model and runs the
 * job's items one at a time: claim, skip if already recorded, compute from (seed, item), record once, ack.
 * Reclaimed (the job leaves its assignment) it claims no more and lets the item in flight go as
 * libs/fapes `reclaimedItem` says: finished when it ends within the grace period, abandoned (nak'd, so another
 * backend takes it at once) when it would not, or at the deadline if it runs late. Then it unloads the model
 * and reports no job. A NATS outage never loses an item: an unacked item comes back after its ack wait, and a
 * recorded one is skipped then.
 */
export class JobRunner {
  private session: Session | undefined;
  /** The job assignment to start once the current session has ended. */
  private wanted: control.BackendAssignment | undefined;
  private readonly counts = new Map<string, JobCounts>();
  /** The random the model draws from; switched to each item's own stream before the item runs. */
  private itemStream: Random = itemRandom(0, 0, "time");
  private readonly modelRandom: Random = { uniform: () => this.itemStream.uniform() };
  private readonly now: () => number;
  private readonly computeClock: () => number;
  private readonly hungAfterMs: (expectedMs: number) => number;
  private readonly claimWaitMs: number;
  private readonly retryMs: number;
  private stopped = false;

  constructor(private readonly options: JobRunnerOptions) {
    this.now = options.now ?? Date.now;
    this.computeClock = options.computeClock ?? this.now;
    this.hungAfterMs = options.hungAfterMs ?? hungItemLimitMs;
    this.claimWaitMs = options.claimWaitMs ?? 1000;
    this.retryMs = options.retryMs ?? 500;
  }

  /** The job it works for ("" when none, or once it has let go of a reclaimed one). */
  get job(): string {
    const s = this.session;
    return s && !s.letGo ? s.job : "";
  }

  /**
   * The job fields of its heartbeat. While on a job it reports provisioning (loading the job's model), busy
   * (running items) or draining (reclaimed, letting go), so no one takes it for an idle inference backend.
   */
  report(): Pick<backend.BackendReport.$Properties, "job" | "jobItemsDone" | "jobItemsRedone" | "state"> {
    const s = this.session;
    if (!s || s.letGo) return { job: "", jobItemsDone: 0, jobItemsRedone: 0 };
    const c = this.counts.get(s.job);
    const state =
      s.phase === "loading"
        ? backend.BackendState.BACKEND_STATE_PROVISIONING
        : s.phase === "running" && !s.stopping
          ? backend.BackendState.BACKEND_STATE_BUSY
          : backend.BackendState.BACKEND_STATE_DRAINING;
    return { job: s.job, jobItemsDone: c?.done ?? 0, jobItemsRedone: c?.redone ?? 0, state };
  }

  /** Whether an item is claimed and not yet recorded or given back. */
  get itemInFlight(): boolean {
    return this.session?.inFlight !== undefined;
  }

  /** Gives the item in flight back now (unrecorded; another backend takes it), and goes on claiming. */
  abandonInFlight(): void {
    this.session?.inFlight?.abandon();
  }

  /** Items this backend recorded and redid for a job since it started. */
  countsOf(job: string): { done: number; redone: number } {
    const c = this.counts.get(job);
    return { done: c?.done ?? 0, redone: c?.redone ?? 0 };
  }

  onAssignment(a: control.BackendAssignment | undefined): void {
    if (this.stopped) return;
    const want = jobOf(a);
    this.wanted = want;
    const s = this.session;
    if (s && !s.stopping && want?.job === s.job) {
      s.graceMs = graceOf(want);
      return;
    }
    if (s) {
      if (!s.stopping) this.options.logger.info({ job: s.job, to: want?.job || a?.service || "(pool)" }, "reclaimed from the job");
      this.letGoOf(s, s.graceMs);
      return;
    }
    if (want) this.start(want);
  }

  /**
   * Shutting down: as a reclaim, with at most `graceCapMs` for the item in flight (the process must have nak'd
   * it before its shutdown deadline, or the item waits out its ack wait). Resolves once it let go of the item:
   * a model call still running for an abandoned item is not waited for (the process is about to exit).
   */
  async stop(graceCapMs: number): Promise<void> {
    this.stopped = true;
    this.wanted = undefined;
    const s = this.session;
    if (!s) return;
    this.letGoOf(s, Math.min(s.graceMs, Math.max(0, graceCapMs)));
    await Promise.race([s.ended, s.letGone]);
  }

  private start(a: control.BackendAssignment): void {
    const spec = a.jobSpec ?? { name: a.job };
    const s: Session = {
      job: a.job,
      spec,
      graceMs: graceOf(a),
      phase: "loading",
      stopping: false,
      letGo: false,
      deadlineMs: undefined,
      deadlineTimer: undefined,
      inFlight: undefined,
      computing: Promise.resolve(),
      failed: false,
      hung: false,
      ended: Promise.resolve(),
      letGone: Promise.resolve(),
      onLetGo: () => undefined,
    };
    s.letGone = new Promise((resolve) => {
      s.onLetGo = resolve;
    });
    this.session = s;
    this.options.logger.info({ job: s.job, items: spec.items, itemBatch: spec.itemBatch, graceMs: s.graceMs }, "loaned to a job");
    this.options.onJobChanged?.(s.job);
    s.ended = this.run(s).finally(() => this.ended(s));
  }

  /** Stops claiming; the item in flight is finished by the deadline or abandoned now, as the grace rule says. */
  private letGoOf(s: Session, graceMs: number): void {
    const now = this.now();
    s.stopping = true;
    const item = s.inFlight;
    // No item in flight: the loop sees `stopping` when its claim returns (within claimWaitMs) and lets go.
    if (!item) return;
    const decision = reclaimedItem(item.startedMs, this.expectedMs(s), now, graceMs);
    if (decision.action === "abandon") {
      this.options.logger.info({ job: s.job, item: item.item }, "reclaimed: abandoning the item in flight");
      item.abandon();
      return;
    }
    // Called again (shutdown during a reclaim): only ever sooner.
    if (s.deadlineMs !== undefined && s.deadlineMs <= decision.deadlineMs) return;
    s.deadlineMs = decision.deadlineMs;
    clearTimeout(s.deadlineTimer);
    s.deadlineTimer = setTimeout(
      () => {
        this.options.logger.warn({ job: s.job, item: s.inFlight?.item }, "grace period over: abandoning the item in flight");
        s.inFlight?.abandon();
      },
      Math.max(0, decision.deadlineMs - now),
    );
    this.options.logger.info(
      { job: s.job, item: item.item, deadlineInMs: decision.deadlineMs - now },
      "reclaimed: finishing the item in flight",
    );
  }

  private markLetGo(s: Session): void {
    if (s.letGo) return;
    s.letGo = true;
    s.onLetGo();
    this.options.onJobChanged?.("");
  }

  /** The mean time of this job's items here so far, or the model's nominal time before the first. */
  private expectedMs(s: Session): number {
    const c = this.counts.get(s.job);
    return c && c.timed > 0 ? c.timedMs / c.timed : this.options.nominalItemMs(s.spec);
  }

  private countsFor(job: string): JobCounts {
    let c = this.counts.get(job);
    if (!c) {
      c = { done: 0, redone: 0, timedMs: 0, timed: 0 };
      this.counts.set(job, c);
    }
    return c;
  }

  private async run(s: Session): Promise<void> {
    const { logger } = this.options;
    let runtime: ModelRuntime | undefined;
    try {
      try {
        runtime = this.options.createRuntime(s.spec.model, this.modelRandom);
        const { coldStartMs } = await runtime.load();
        logger.info({ job: s.job, model: runtime.name, coldStartMs: Math.round(coldStartMs) }, "job model loaded");
      } catch (err) {
        logger.error({ err, job: s.job }, "the job's model cannot run here: leaving the job");
        s.failed = true;
        return;
      }
      s.phase = "running";
      while (!s.stopping) {
        let claimed: ClaimedItem | undefined;
        try {
          await this.options.readyToClaim?.();
          if (s.stopping) break;
          claimed = await this.options.items.claim(s.job, { maxWaitMs: this.claimWaitMs });
        } catch (err) {
          logger.warn({ err, job: s.job }, "claiming an item failed");
          await sleep(this.retryMs);
          continue;
        }
        if (!claimed) continue;
        if (s.stopping) {
          // Reclaimed while the claim waited: the item goes straight back.
          await this.abandon(s, claimed, 0);
          break;
        }
        try {
          await this.runItem(s, runtime, claimed);
        } catch (err) {
          // A fault of this worker's, not of NATS or the model: the item comes back after its ack wait.
          logger.error({ err, job: s.job, item: claimed.item }, "running the item failed");
          await sleep(this.retryMs);
        }
      }
    } finally {
      s.phase = "releasing";
      this.markLetGo(s);
      if (!s.hung) await s.computing;
      const unloaded = runtime?.unload().catch((err: unknown) => logger.warn({ err, job: s.job }, "unloading the job's model failed"));
      // A runtime stuck in one call may be stuck in its unload too: the runner does not wait for it for good.
      await (s.hung ? Promise.race([unloaded, sleep(UNLOAD_AFTER_HANG_MS)]) : unloaded);
    }
  }

  private async runItem(s: Session, runtime: ModelRuntime, claimed: ClaimedItem): Promise<void> {
    const { items, logger, backendId } = this.options;
    const { item } = claimed;
    const startedMs = this.now();
    try {
      if (await items.hasResult(s.job, item)) {
        // Recorded by a worker that died (or lost NATS) before its ack: nothing to compute.
        await claimed.done();
        this.options.onItem?.(s.job, "skipped", 0);
        logger.info({ job: s.job, item, redelivered: claimed.redelivered }, "item already recorded: acked without computing");
        return;
      }
    } catch (err) {
      // Not known whether it is recorded: let it come back (at once if the nak gets through, else after its ack wait).
      logger.warn({ err, job: s.job, item }, "cannot check the item's result: giving it back");
      await this.abandon(s, claimed, startedMs);
      await sleep(this.retryMs);
      return;
    }
    let abandonNow: () => void = () => undefined;
    const abandoned = new Promise<"abandoned">((resolve) => {
      abandonNow = () => resolve("abandoned");
    });
    if (s.stopping) {
      // Reclaimed while it looked: an item not started yet goes straight back.
      await this.abandon(s, claimed, 0);
      return;
    }
    s.inFlight = { item, startedMs, abandon: () => abandonNow() };
    const keepAlive = setInterval(() => claimed.working(), Math.max(100, claimed.ackWaitMs / 3));
    const limitMs = this.hungAfterMs(this.expectedMs(s));
    const computeStart = this.computeClock();
    let hung = false;
    let hungTimer: NodeJS.Timeout | undefined;
    // Rechecked when due, since the compute clock may have stood still meanwhile (a stopped process).
    const watch = (inMs: number) => {
      hungTimer = setTimeout(() => {
        const ranMs = this.computeClock() - computeStart;
        if (ranMs < limitMs) return watch(limitMs - ranMs);
        hung = true;
        abandonNow();
      }, inMs);
    };
    watch(limitMs);
    try {
      let computed: InferResult | "abandoned" | Error;
      try {
        const inputs = jobItemInputs(s.spec.model, s.spec.itemBatch ?? 1, s.spec.seed ?? 0, item);
        this.itemStream = itemRandom(s.spec.seed ?? 0, item, "time");
        const running = runtime.infer(inputs);
        s.computing = running.catch(() => undefined);
        computed = await Promise.race([running, abandoned]);
      } catch (err) {
        computed = err instanceof Error ? err : new Error(String(err));
      } finally {
        clearTimeout(hungTimer);
      }
      if (computed === "abandoned" && hung) {
        // Given back for another backend, and the job left: a model stuck in one call is not trusted with the next.
        logger.error({ job: s.job, item, limitMs }, "the item hung: giving it back and leaving the job");
        s.hung = true;
        s.failed = true;
        s.stopping = true;
        await this.abandon(s, claimed, startedMs, "failed");
        return;
      }
      if (computed === "abandoned") {
        await this.abandon(s, claimed, startedMs);
        return;
      }
      if (computed instanceof Error) {
        logger.error({ err: computed, job: s.job, item }, "the item failed: giving it back");
        await this.abandon(s, claimed, startedMs, "failed");
        await sleep(this.retryMs);
        return;
      }
      const result: control.IJobItemResult = {
        job: s.job,
        item,
        backendId,
        digest: digestOutputs(computed.outputs),
        computeMs: computed.computeMs,
        doneAtUnixMs: this.now(),
      };
      const recorded = await this.record(s, result, abandoned);
      if (recorded === "abandoned") {
        await this.abandon(s, claimed, startedMs);
        return;
      }
      s.inFlight = undefined;
      const wallMs = this.now() - startedMs;
      const c = this.countsFor(s.job);
      c.timedMs += wallMs;
      c.timed += 1;
      if (recorded === "exists") {
        c.redone += 1;
        logger.warn({ job: s.job, item }, "item was already recorded by another backend: computed twice");
      } else c.done += 1;
      this.options.onItem?.(s.job, recorded === "exists" ? "redone" : "done", wallMs);
      try {
        await claimed.done();
      } catch (err) {
        // Recorded: a redelivery finds the result and is acked without computing.
        logger.warn({ err, job: s.job, item }, "ack failed after the result was recorded");
      }
    } finally {
      clearInterval(keepAlive);
      s.inFlight = undefined;
    }
  }

  /** Records the result, retrying while NATS is away, until recorded or the item is abandoned (reclaim deadline). */
  private async record(
    s: Session,
    result: control.IJobItemResult,
    abandoned: Promise<"abandoned">,
  ): Promise<"recorded" | "exists" | "abandoned"> {
    for (;;) {
      try {
        return await Promise.race([this.options.items.recordResult(result), abandoned]);
      } catch (err) {
        this.options.logger.warn({ err, job: s.job, item: result.item }, "recording the result failed: retrying");
      }
      if ((await Promise.race([sleep(this.retryMs).then(() => "retry" as const), abandoned])) === "abandoned") return "abandoned";
    }
  }

  private async abandon(s: Session, claimed: ClaimedItem, startedMs: number, outcome: ItemOutcome = "abandoned"): Promise<void> {
    s.inFlight = undefined;
    try {
      await claimed.abandon();
    } catch (err) {
      this.options.logger.warn({ err, job: s.job, item: claimed.item }, "nak failed: the item comes back after its ack wait");
    }
    this.options.onItem?.(s.job, outcome, startedMs > 0 ? this.now() - startedMs : 0);
  }

  private ended(s: Session): void {
    clearTimeout(s.deadlineTimer);
    if (this.session !== s) return;
    this.session = undefined;
    this.options.logger.info({ job: s.job, ...this.countsOf(s.job) }, "left the job");
    const next = this.wanted;
    // A job whose model failed here waits for a new assignment (onAssignment), instead of failing in a loop.
    if (next && !this.stopped && !(s.failed && next.job === s.job)) this.start(next);
  }
}

/** The assignment's grace period, or FaPES's when it gives none. */
function graceOf(a: control.BackendAssignment): number {
  return a.graceMs > 0 ? a.graceMs : FAPES_GRACE_MS;
}
