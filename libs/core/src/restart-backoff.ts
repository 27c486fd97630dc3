import type { Clock } from "./clock.js";

/**
 * When to restart a process that died, as Kubernetes' kubelet does for a Pod's container (CrashLoopBackOff):
 * the first restart waits `initialMs`, each further one `factor` times longer, up to `maxMs`; a process that
 * ran `resetAfterMs` before it died is trusted again and waits `initialMs`. There is no limit on restarts
 * (a Deployment never gives up either), only on how often they happen.
 */
export interface RestartBackoffOptions {
  /** The wait before the first restart (and after a run of `resetAfterMs` or more). */
  initialMs: number;
  /** Each crash in a row multiplies the wait by this. */
  factor: number;
  /** The longest wait. */
  maxMs: number;
  /** A process that ran this long before it died starts again from `initialMs`. */
  resetAfterMs: number;
}

/** Kubernetes' numbers (kubelet: 10 s doubling to 5 min, reset after 10 min of running fine). */
export const KUBERNETES_CRASH_LOOP_BACKOFF: RestartBackoffOptions = {
  initialMs: 10_000,
  factor: 2,
  maxMs: 300_000,
  resetAfterMs: 600_000,
};

/** What to do about a process that has just exited. */
export type RestartDecision =
  | {
      restart: true;
      /** Wait this long, then start it again. */
      delayMs: number;
      /** How long the process that exited had run. */
      ranMs: number;
      /** The run was long enough to reset the backoff to `initialMs`. */
      reset: boolean;
    }
  | { restart: false; reason: "stopping" };

export type RestartPhase = "running" | "waiting" | "stopped";

/**
 * The restart policy of one supervised process, a pure state machine over an injected clock: the shell
 * reports `exited()` and starts the process again once `msUntilRestart()` is 0 and `restart()` says so.
 *
 *   running --exited()--> waiting --restart()--> running
 *      \                     |
 *       `----- stop() -------+--> stopped (final: exits and restarts are refused)
 *
 * `stop()` is the cluster stopping (Ctrl-C, SIGTERM, the end of the run): from then on an exit is expected
 * and nothing is started again, not even a restart whose wait is under way.
 */
export class RestartBackoff {
  private state: RestartPhase = "running";
  private since: number;
  private until = 0;
  private nextDelayMs: number;
  private count = 0;

  constructor(
    private readonly options: RestartBackoffOptions,
    private readonly clock: Clock,
  ) {
    const { initialMs, factor, maxMs, resetAfterMs } = options;
    if (!(initialMs > 0) || !(factor >= 1) || !(maxMs >= initialMs) || !(resetAfterMs >= 0)) {
      throw new RangeError(`bad restart backoff: ${JSON.stringify(options)}`);
    }
    this.since = clock.now();
    this.nextDelayMs = initialMs;
  }

  get phase(): RestartPhase {
    return this.state;
  }

  /** Restarts so far. */
  get restarts(): number {
    return this.count;
  }

  /** The process exited: restart it after the returned delay, or not at all while stopping. */
  exited(): RestartDecision {
    if (this.state === "stopped") return { restart: false, reason: "stopping" };
    if (this.state === "waiting") throw new Error("exited() while waiting to restart: no process was running");
    const now = this.clock.now();
    const ranMs = now - this.since;
    const reset = ranMs >= this.options.resetAfterMs;
    const delayMs = reset ? this.options.initialMs : this.nextDelayMs;
    this.nextDelayMs = Math.min(this.options.maxMs, delayMs * this.options.factor);
    this.state = "waiting";
    this.until = now + delayMs;
    return { restart: true, delayMs, ranMs, reset };
  }

  /** While waiting: how long until the restart is due (0: now). Infinity when stopped, 0 when running. */
  msUntilRestart(): number {
    if (this.state === "stopped") return Number.POSITIVE_INFINITY;
    if (this.state === "running") return 0;
    return Math.max(0, this.until - this.clock.now());
  }

  /**
   * The shell is about to start the process again: true (and the restart is counted, the process running
   * from now) if a restart is due; false if stopping, if none is pending, or if the wait is not over.
   */
  restart(): boolean {
    if (this.state !== "waiting" || this.clock.now() < this.until) return false;
    this.count++;
    this.state = "running";
    this.since = this.clock.now();
    return true;
  }

  /** The cluster is stopping: no restart from now on. */
  stop(): void {
    this.state = "stopped";
  }
}
