/**
 * Harvesting a warm inference backend's idle time for best-effort items (beyond FaPES, which loans only whole
 * backends). A backend in an inference list is warm for its bursts and idle between requests; there, a second
 * process runs one best-effort item, and it yields the backend to inference at once: stopped (SIGSTOP) when an
 * inference request starts computing, resumed (SIGCONT) once the backend has had no request computing for
 * `resumeAfterMs`. What inference pays is the stop itself and what the stopped process left in the caches
 * (`bench:harvest-pause` measures it). An item stopped longer than `abandonAfterMs` is given up, unrecorded, so
 * that a backend busy for long does not hold an item its job could run elsewhere: it is done once, elsewhere.
 *
 * This is a state machine over the times it is told: the backend worker and the simulator both drive it.
 */
import { loanOrder } from "./loan-plan.js";

export interface HarvestOptions {
  /** Idle time, after the last inference request, before the best-effort process runs again, ms. */
  readonly resumeAfterMs: number;
  /** A stopped item older than this is given up (the job runs it elsewhere), ms. */
  readonly abandonAfterMs: number;
}

export const HARVEST_DEFAULTS: HarvestOptions = {
  // A few of Faro's inter-arrival gaps at a backend's busy end: a burst's requests do not stop and resume the
  // item for each one.
  resumeAfterMs: 50,
  // FaPES's grace period: as long as a reclaimed loan may keep its item.
  abandonAfterMs: 15_000,
};

/** What the gate asks of the best-effort process at a check. */
export type HarvestAction = "resume" | "abandon";

/** One backend's gate: whether its best-effort process may run, from the inference requests computing there. */
export class HarvestGate {
  private computing = 0;
  private stopped = false;
  private stoppedAtMs = Number.NaN;
  private idleSinceMs: number;
  private readonly startedAtMs: number;
  /** Time the process spent stopped, over the stops that ended. */
  private stoppedTotalMs = 0;
  /** The stopped item was given up: nothing to abandon again until the process resumes. */
  private abandoned = false;

  constructor(
    nowMs: number,
    private readonly options: HarvestOptions = HARVEST_DEFAULTS,
  ) {
    if (!(options.resumeAfterMs >= 0) || !(options.abandonAfterMs > 0))
      throw new RangeError(`harvest: resumeAfterMs must be >= 0 and abandonAfterMs > 0, got ${JSON.stringify(options)}`);
    this.idleSinceMs = nowMs;
    this.startedAtMs = nowMs;
  }

  /** The time the best-effort process has been allowed to run since the gate was made: a clock that stops with it. */
  runningMs(nowMs: number): number {
    const stoppedNow = this.stopped ? Math.max(0, nowMs - this.stoppedAtMs) : 0;
    return nowMs - this.startedAtMs - this.stoppedTotalMs - stoppedNow;
  }

  /** Whether the best-effort process is stopped now. */
  get isStopped(): boolean {
    return this.stopped;
  }

  /** Inference requests computing on the backend now. */
  get inferenceComputing(): number {
    return this.computing;
  }

  /** An inference request starts computing. True: stop the best-effort process now (it was running). */
  computeStarts(nowMs: number): boolean {
    this.computing++;
    if (this.stopped) return false;
    this.stopped = true;
    this.stoppedAtMs = nowMs;
    this.abandoned = false;
    return true;
  }

  /** An inference request is done computing. */
  computeEnds(nowMs: number): void {
    if (this.computing === 0) throw new Error("harvest: a request ended that never started computing");
    this.computing--;
    if (this.computing === 0) this.idleSinceMs = nowMs;
  }

  /** When `check` next has something to say (undefined: nothing until an inference request starts or ends). */
  nextCheckMs(): number | undefined {
    if (!this.stopped) return undefined;
    const resume = this.computing === 0 ? this.idleSinceMs + this.options.resumeAfterMs : Number.POSITIVE_INFINITY;
    const abandon = this.abandoned ? Number.POSITIVE_INFINITY : this.stoppedAtMs + this.options.abandonAfterMs;
    const next = Math.min(resume, abandon);
    return Number.isFinite(next) ? next : undefined;
  }

  /**
   * What to do now: "abandon" the stopped item (it stays stopped; the process takes a new item when it resumes),
   * "resume" the process, or nothing. Call it at `nextCheckMs()`; an early or repeated call is harmless.
   */
  check(nowMs: number): HarvestAction | undefined {
    if (!this.stopped) return undefined;
    if (this.computing === 0 && nowMs >= this.idleSinceMs + this.options.resumeAfterMs) {
      this.stopped = false;
      this.stoppedTotalMs += Math.max(0, nowMs - this.stoppedAtMs);
      this.stoppedAtMs = Number.NaN;
      this.abandoned = false;
      return "resume";
    }
    if (!this.abandoned && nowMs >= this.stoppedAtMs + this.options.abandonAfterMs) {
      this.abandoned = true;
      return "abandon";
    }
    return undefined;
  }
}

/**
 * A job as a harvesting backend sees it, from the job store alone (a backend knows nothing of the others):
 * its items nobody holds, and the ones held now, by loans and harvesters alike.
 */
export interface HarvestJob {
  readonly name: string;
  readonly priority: number;
  readonly submittedAtMs: number;
  readonly maxBackends: number;
  /** Items not handed out yet. */
  readonly unclaimed: number;
  /** Items handed out and not done (each held by one backend, loaned or harvesting). */
  readonly inFlight: number;
}

/**
 * The job a backend able to harvest works for: the first in loan order (priority, then arrival) with an item
 * nobody holds and fewer items in flight than its maximum of backends; undefined: none.
 */
export function harvestJob(jobs: readonly HarvestJob[]): string | undefined {
  for (const j of loanOrder(jobs)) if (j.unclaimed > 0 && j.inFlight < j.maxBackends) return j.name;
  return undefined;
}
