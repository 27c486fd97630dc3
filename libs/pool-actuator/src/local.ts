import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type BackendResizer,
  checkBatch,
  checkCores,
  checkSize,
  type PoolActuator,
  type PoolMember,
  ResizeError,
  type ResizeResult,
  type ScaleOptions,
} from "./actuator.js";
import { type GrpcBackendResizer, grpcBackendResizer } from "./backend-resizer.js";

export interface LocalActuatorOptions {
  /** Path of the backend-worker's compiled entry (services/backend-worker/dist/main.js). */
  entry: string;
  /** Environment for every backend on top of this process's (NATS URL, credentials, timings). */
  env?: Record<string, string>;
  /** Variables of this process's environment the children must not inherit (another identity's secrets). */
  unsetEnv?: readonly string[];
  /** The instance type every backend of this pool reports (INFERGRID_INSTANCE_TYPE); default: the backend's own. */
  instanceType?: string;
  /** Backend ids are `${idPrefix}-${n}`, n counting up from 0 and never reused. */
  idPrefix?: string;
  /** SIGTERM gives a backend this long to drain before SIGKILL. */
  stopTimeoutMs?: number;
  /** The Node binary (default: the one running this process). */
  nodePath?: string;
  /** Lines a backend prints, for the caller's log (default: dropped). */
  onLine?: (id: string, line: string) => void;
  /** Cores each backend starts on (INFERGRID_CORES; default: the backend's own, 1). */
  cores?: number;
  /**
   * The most cores one backend may be given (INFERGRID_MAX_CORES of each backend too); default: no bound
   * here, the backend's own (its --max-cores).
   */
  nodeCores?: number;
}

interface Child {
  id: string;
  process: ChildProcess;
  ready: boolean;
  terminating: boolean;
  exited: Promise<void>;
  /** From its ready line. */
  grpcAddress?: string;
  /** What it was started with, then what its Resize replies confirmed. */
  cores: number;
}

/**
 * The pool as backend-worker processes on this machine (development, the local cluster, tests).
 * A backend that exits by itself leaves the pool and no longer counts, as a pod that dies does.
 */
export class LocalProcessActuator implements PoolActuator {
  readonly kind = "local" as const;
  private readonly children = new Map<string, Child>();
  private next = 0;
  private desired = 0;
  /** scaleTo calls run one after another, so two never race on the same children. */
  private queue: Promise<void> = Promise.resolve();
  /** The secret a Resize call must carry; only this process and the backends it starts know it. */
  private readonly controlToken = randomBytes(32).toString("base64url");
  /** Backends are told their size through their Resize RPC. */
  private readonly grpc: GrpcBackendResizer = grpcBackendResizer(this.controlToken);

  constructor(private readonly options: LocalActuatorOptions) {
    if (options.cores !== undefined) checkCores(options.cores);
    if (options.nodeCores !== undefined) checkCores(options.nodeCores);
  }

  async currentSize(): Promise<number> {
    return this.desired;
  }

  async members(): Promise<PoolMember[]> {
    return [...this.children.values()].map((c) => ({
      id: c.id,
      ready: c.ready,
      terminating: c.terminating,
      cores: c.cores,
    }));
  }

  /**
   * Resizes a running backend in place through its Resize RPC (with the pool's control token): its model's
   * threads change for the next batch on; the process is not restarted.
   */
  async resize(memberId: string, cores: number, maxBatch?: number): Promise<ResizeResult> {
    checkCores(cores);
    checkBatch(maxBatch);
    const started = performance.now();
    const what = `resizing backend ${memberId} to ${cores} cores`;
    const child = this.children.get(memberId);
    if (!child || child.terminating) throw new ResizeError(`${what}: no such backend in this pool (gone?)`, "gone");
    const limit = this.options.nodeCores;
    if (limit !== undefined && cores > limit) throw new ResizeError(`${what}: beyond the node limit of ${limit} cores`, "capacity");
    if (!child.ready || child.grpcAddress === undefined) throw new ResizeError(`${what}: it is not ready yet`, "backend");
    let told: Awaited<ReturnType<BackendResizer>>;
    try {
      told = await this.grpc.resize({ memberId, address: child.grpcAddress, cores, ...(maxBatch !== undefined ? { maxBatch } : {}) });
    } catch (err) {
      throw new ResizeError(`${what}: ${err instanceof Error ? err.message : String(err)}`, "backend", { cause: err });
    }
    child.cores = told.cores;
    return { memberId, cores: told.cores, maxBatch: told.maxBatch, modelResizeMs: told.resizeMs, elapsedMs: performance.now() - started };
  }

  async scaleTo(n: number, options: ScaleOptions = {}): Promise<void> {
    checkSize(n);
    const run = this.queue.then(() => this.reconcile(n, options));
    this.queue = run.catch(() => undefined);
    await run;
  }

  async close(): Promise<void> {
    await this.scaleTo(0);
    this.grpc.close();
  }

  /** The process id of a live backend (drills and tests kill backends by hand). */
  pidOf(id: string): number | undefined {
    return this.children.get(id)?.process.pid;
  }

  /** Resolves when every live backend has printed its ready line (or rejects after `timeoutMs`). */
  async waitReady(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ([...this.children.values()].some((c) => !c.terminating && !c.ready)) {
      if (Date.now() > deadline) throw new Error(`backends not ready within ${timeoutMs} ms`);
      await sleep(50);
    }
  }

  private live(): Child[] {
    return [...this.children.values()].filter((c) => !c.terminating);
  }

  private async reconcile(n: number, options: ScaleOptions): Promise<void> {
    this.desired = n;
    const live = this.live();
    if (live.length < n) {
      for (let i = live.length; i < n; i++) this.startOne();
      return;
    }
    if (live.length === n) return;
    // Preferred victims first, then the newest (the oldest are the warmest and head the lists).
    const preferred = new Set(options.removeFirst ?? []);
    const order = [...live].sort((a, b) => Number(preferred.has(b.id)) - Number(preferred.has(a.id)) || this.seq(b.id) - this.seq(a.id));
    await Promise.all(order.slice(0, live.length - n).map((c) => this.stopOne(c)));
  }

  private seq(id: string): number {
    return Number(id.slice(id.lastIndexOf("-") + 1));
  }

  private startOne(): void {
    const id = `${this.options.idPrefix ?? "backend"}-${this.next++}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...this.options.env,
      ...(this.options.instanceType !== undefined ? { INFERGRID_INSTANCE_TYPE: this.options.instanceType } : {}),
      ...(this.options.cores !== undefined ? { INFERGRID_CORES: String(this.options.cores) } : {}),
      ...(this.options.nodeCores !== undefined ? { INFERGRID_MAX_CORES: String(this.options.nodeCores) } : {}),
      INFERGRID_ID: id,
      INFERGRID_CONTROL_TOKEN: this.controlToken,
    };
    // The pool's own token only: a token file inherited from this process would be a second one (refused).
    delete env.INFERGRID_CONTROL_TOKEN_FILE;
    for (const name of this.options.unsetEnv ?? []) delete env[name];
    const proc = spawn(this.options.nodePath ?? process.execPath, [this.options.entry], { env, stdio: ["ignore", "pipe", "pipe"] });
    // "error" (the binary could not be started) rejects once(): the child is gone either way.
    const exited = once(proc, "exit")
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        this.children.delete(id);
      });
    // Until it confirms a resize, it runs on what it was started with (the backend's default is 1 core).
    const child: Child = { id, process: proc, ready: false, terminating: false, exited, cores: Number(env.INFERGRID_CORES ?? 1) };
    const onLine = (line: string) => {
      // The ready line is JSON with event "ready" (libs/runtime announceReady).
      if (!child.ready && line.includes('"event":"ready"')) {
        child.ready = true;
        Object.assign(child, readyFields(line));
      }
      this.options.onLine?.(id, line);
    };
    if (proc.stdout) createInterface({ input: proc.stdout }).on("line", onLine);
    if (proc.stderr) createInterface({ input: proc.stderr }).on("line", onLine);
    this.children.set(id, child);
  }

  private async stopOne(child: Child): Promise<void> {
    child.terminating = true;
    child.process.kill("SIGTERM");
    const timeout = this.options.stopTimeoutMs ?? 10_000;
    const done = await Promise.race([child.exited.then(() => true), sleep(timeout).then(() => false)]);
    if (!done) {
      child.process.kill("SIGKILL");
      await child.exited;
    }
  }
}

/** The ready line's gRPC address, when it has one. */
function readyFields(line: string): { grpcAddress?: string } {
  try {
    const ready = JSON.parse(line) as { grpcAddress?: unknown };
    return typeof ready.grpcAddress === "string" ? { grpcAddress: ready.grpcAddress } : {};
  } catch {
    return {};
  }
}
