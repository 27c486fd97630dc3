import { type Clock, RestartBackoff, type RestartBackoffOptions, systemClock } from "@infergrid/core";
import { type ChildHandle, type ExitStatus, killLeftovers } from "./processes.js";

/**
 * The local cluster's supervisor: a process that dies is started again with the same command, environment
 * and log file (appended to), after a wait that grows while it keeps dying (@infergrid/core RestartBackoff,
 * Kubernetes' CrashLoopBackOff), as a Deployment's Pod would be. Once the cluster stops (Ctrl-C, SIGTERM, the
 * end of the run) nothing is started again: a wait under way is cancelled, a start under way is abandoned
 * and its process killed.
 */

/** What the live progress shows. */
export type SupervisionEvent =
  | {
      kind: "exited";
      name: string;
      pid: number;
      status: ExitStatus | undefined;
      ranMs: number;
      /** The restart this exit leads to (1 for the first), and when; undefined: it stays down (--no-restart). */
      restart: { number: number; inMs: number } | undefined;
    }
  | { kind: "restarted"; name: string; pid: number; previousPid: number; restarts: number }
  | { kind: "restart-failed"; name: string; reason: string; restart: { number: number; inMs: number } };

export interface SupervisorOptions {
  backoff: RestartBackoffOptions;
  /** false: a process that dies is reported and stays down (--no-restart). */
  restart: boolean;
  onEvent?: (event: SupervisionEvent) => void;
  clock?: Clock;
  /** Ends what is left of a dead process's group (processes.ts killLeftovers; tests pass their own). */
  killLeftovers?: (pid: number) => void;
}

/** A supervised process: the handle of whichever process runs it now. */
export interface Supervised<H extends ChildHandle = ChildHandle> extends ChildHandle {
  /** The process running now (or the last one). */
  current(): H;
  /** Restarts so far. */
  readonly restarts: number;
  /** Every pid it ran as, the first start's first. */
  readonly pids: readonly number[];
}

/** Starts the process again, as it was started, and resolves once it is ready; `signal` abandons the start. */
export type Relaunch<H extends ChildHandle> = (previous: H, signal: AbortSignal) => Promise<H>;

export interface RestartCounts {
  total: number;
  /** Processes restarted at least once, by name, in start order. */
  byProcess: Record<string, number>;
  /** Processes that died and were left down (--no-restart). */
  notRestarted: string[];
}

export class Supervisor {
  private readonly slots: Slot<ChildHandle>[] = [];
  private readonly clock: Clock;

  constructor(private readonly options: SupervisorOptions) {
    this.clock = options.clock ?? systemClock;
  }

  /** Watches `first` (started and ready) from now on; `relaunch` starts it again. */
  supervise<H extends ChildHandle>(first: H, relaunch: Relaunch<H>): Supervised<H> {
    const slot = new Slot<H>(first, relaunch, new RestartBackoff(this.options.backoff, this.clock), this.options);
    this.slots.push(slot as unknown as Slot<ChildHandle>);
    return slot;
  }

  /** The cluster is stopping: no restart from now on (waits under way are cancelled, starts abandoned). */
  stopRestarts(): void {
    for (const s of this.slots) s.stopRestarts();
  }

  restarts(): RestartCounts {
    const byProcess: Record<string, number> = {};
    for (const s of this.slots) if (s.restarts > 0) byProcess[s.name] = s.restarts;
    const notRestarted = this.slots.filter((s) => s.leftDown).map((s) => s.name);
    return { total: Object.values(byProcess).reduce((a, n) => a + n, 0), byProcess, notRestarted };
  }
}

class Slot<H extends ChildHandle> implements Supervised<H> {
  private child: H;
  private timer: NodeJS.Timeout | undefined;
  /** A start under way: aborting it kills its process; `done` settles once it is running or gone. */
  private starting: { abort: AbortController; done: Promise<void> } | undefined;
  private readonly pidList: number[];
  private killed = false;
  /** It died and was left down (--no-restart). */
  leftDown = false;
  private readonly finished: Promise<void>;
  private resolveFinished: () => void = () => {};

  constructor(
    first: H,
    private readonly relaunch: Relaunch<H>,
    private readonly policy: RestartBackoff,
    private readonly options: SupervisorOptions,
  ) {
    this.child = first;
    this.pidList = [first.pid];
    this.finished = new Promise((r) => {
      this.resolveFinished = r;
    });
    this.watch(first);
  }

  get name(): string {
    return this.child.name;
  }
  get logPath(): string {
    return this.child.logPath;
  }
  get pid(): number {
    return this.child.pid;
  }
  get ready(): Record<string, string> {
    return this.child.ready;
  }
  /** Resolves once the cluster stopped it and its last process is gone. */
  get exited(): Promise<void> {
    return this.finished;
  }
  get restarts(): number {
    return this.policy.restarts;
  }
  get pids(): readonly number[] {
    return [...this.pidList];
  }
  current(): H {
    return this.child;
  }
  isRunning(): boolean {
    return this.child.isRunning();
  }
  exitStatus(): ExitStatus | undefined {
    return this.child.exitStatus();
  }

  private emit(event: SupervisionEvent): void {
    try {
      this.options.onEvent?.(event);
    } catch {
      // A display problem must not stop supervision.
    }
  }

  private watch(child: H): void {
    void child.exited.then(() => this.onExit(child));
  }

  private onExit(child: H): void {
    if (child !== this.child) return;
    // Before anything else is started: its helpers go with it.
    (this.options.killLeftovers ?? killLeftovers)(child.pid);
    const decision = this.policy.exited();
    if (!decision.restart) return;
    if (!this.options.restart) {
      this.policy.stop();
      this.leftDown = true;
    }
    this.emit({
      kind: "exited",
      name: child.name,
      pid: child.pid,
      status: child.exitStatus(),
      ranMs: decision.ranMs,
      restart: this.options.restart ? { number: this.policy.restarts + 1, inMs: decision.delayMs } : undefined,
    });
    if (this.options.restart) this.schedule(decision.delayMs);
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.restartWhenDue();
    }, ms);
  }

  private restartWhenDue(): void {
    const left = this.policy.msUntilRestart();
    if (left === Number.POSITIVE_INFINITY) return;
    // A timer may fire a little early by the clock.
    if (left > 0) {
      this.schedule(left);
      return;
    }
    if (!this.policy.restart()) return;
    const abort = new AbortController();
    this.starting = { abort, done: this.start(abort.signal) };
  }

  private async start(signal: AbortSignal): Promise<void> {
    const previous = this.child;
    let next: H;
    try {
      next = await this.relaunch(previous, signal);
    } catch (err) {
      this.starting = undefined;
      // It died (or was abandoned) before it was ready: an exit like any other.
      const decision = this.policy.exited();
      if (!decision.restart) return;
      this.emit({
        kind: "restart-failed",
        name: previous.name,
        reason: (err instanceof Error ? err.message : String(err)).split("\n")[0] ?? "",
        restart: { number: this.policy.restarts + 1, inMs: decision.delayMs },
      });
      this.schedule(decision.delayMs);
      return;
    }
    this.starting = undefined;
    this.child = next;
    this.pidList.push(next.pid);
    if (this.policy.phase === "stopped") {
      // The cluster began stopping while it came up (a start that could not be abandoned).
      if (this.killed) next.kill();
      else await next.stop(5_000);
      return;
    }
    this.emit({ kind: "restarted", name: next.name, pid: next.pid, previousPid: previous.pid, restarts: this.policy.restarts });
    this.watch(next);
  }

  stopRestarts(): void {
    this.policy.stop();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.starting?.abort.abort();
  }

  async stop(timeoutMs: number): Promise<void> {
    this.stopRestarts();
    await this.starting?.done;
    await this.child.stop(timeoutMs);
    this.resolveFinished();
  }

  kill(): void {
    this.killed = true;
    this.stopRestarts();
    this.child.kill();
    // An abandoned start kills its process; one that came up all the same is killed in start().
    void Promise.resolve(this.starting?.done)
      .then(() => this.child.exited)
      .then(() => this.resolveFinished());
  }
}

/**
 * The environment that keeps a restarted process at the first start's ports: its ready line's gRPC and HTTP
 * addresses (ports 0 = any free port would give new ones). For the processes whose addresses the CLI holds or
 * prints (allocator, broker, console), as a Kubernetes Service keeps its address when its Pod is replaced;
 * backends and frontends are found through their heartbeats and take any free port.
 */
export function pinnedPortEnv(ready: Readonly<Record<string, string>>): Record<string, string> {
  const port = (address: string | undefined): string | undefined => {
    if (address === undefined) return undefined;
    const p = Number(address.slice(address.lastIndexOf(":") + 1));
    return Number.isInteger(p) && p > 0 ? String(p) : undefined;
  };
  const grpc = port(ready.grpcAddress);
  const http = port(ready.httpAddress);
  return { ...(grpc === undefined ? {} : { INFERGRID_GRPC_PORT: grpc }), ...(http === undefined ? {} : { INFERGRID_HTTP_PORT: http }) };
}

const seconds = (ms: number): string => (ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`);

function statusText(s: ExitStatus | undefined): string {
  if (s === undefined) return "exited";
  if (s.signal !== null) return `killed by ${s.signal}`;
  return `exited with code ${s.code}`;
}

/** One line of live progress per event. */
export function describeEvent(e: SupervisionEvent): string {
  switch (e.kind) {
    case "exited": {
      const what = `${e.name} (pid ${e.pid}) ${statusText(e.status)} after ${seconds(e.ranMs)}`;
      return e.restart === undefined
        ? `${what}; not restarted (--no-restart)`
        : `${what}; restart ${e.restart.number} in ${seconds(e.restart.inMs)}`;
    }
    case "restarted":
      return `${e.name} restarted (pid ${e.pid}, was ${e.previousPid}; ${e.restarts} restart${e.restarts === 1 ? "" : "s"})`;
    case "restart-failed":
      return `${e.name} did not come back: ${e.reason}; restart ${e.restart.number} in ${seconds(e.restart.inMs)}`;
  }
}
