import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { inputsProblem, NOT_RUN_KEY, SenderLag, type TensorInput } from "@infergrid/dataplane";
import { batchOf, type LatencyProfile, serviceMs } from "@infergrid/kairos";
import {
  createModelRuntime,
  type InferResult,
  InvalidModelInputError,
  type ModelRuntime,
  type ModelRuntimeDeps,
  type ModelSpec,
  type TensorValue,
} from "@infergrid/models";
import { backend, control } from "@infergrid/proto";
import { bearerTokenMatches, GrpcStatusError, grpc, type Logger } from "@infergrid/runtime";
import {
  admittedRequests,
  type BackendMachine,
  type BackendPhase,
  BackendSecondsMeter,
  BackendSlots,
  BatchFormer,
  type BatchStep,
} from "@infergrid/swayam";
import { inTime, processingMs } from "@infergrid/themis";
import { type BatchAnswer, runBatch } from "./batch-run.js";
import { MAX_BATCH_BOUND } from "./config.js";
import { fromTensorMap, toTensorMap } from "./tensors.js";

/** An Execute as the worker takes it: decoded by the server (values in Float32Arrays), or built by a caller. */
export type ExecuteInput = Omit<backend.ExecuteRequest.$Properties, "inputs"> & {
  inputs?: Record<string, TensorInput | null> | null;
  /** Set by the server's decoder when the bytes were not an ExecuteRequest. */
  undecodable?: string;
  /**
   * The call's gRPC deadline as the server read it when the call arrived, a wall-clock time (Infinity or absent:
   * none). With it, `deadline_unix_ms` is read as a time on the frontend's clock, by that clock's lag.
   */
  callDeadline?: number;
  /** The caller's connection (grpc-js's getPeer), whose clock's lag is learned apart from other callers'. */
  caller?: string;
};

const STATE: Record<BackendPhase, backend.BackendState> = {
  cold: backend.BackendState.BACKEND_STATE_COLD,
  provisioning: backend.BackendState.BACKEND_STATE_PROVISIONING,
  "warm-idle": backend.BackendState.BACKEND_STATE_WARM_IDLE,
  busy: backend.BackendState.BACKEND_STATE_BUSY,
  draining: backend.BackendState.BACKEND_STATE_DRAINING,
};

const REFUSAL: Record<string, backend.ExecuteStatus> = {
  busy: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY,
  cold: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_COLD,
  provisioning: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_PROVISIONING,
  draining: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_DRAINING,
};

/** This backend's type's latency profile in a model profiled per instance type; undefined if it has none. */
export function ownProfile(model: control.ModelSpec.$Properties | null | undefined, instanceType: string): LatencyProfile | undefined {
  const mine = model?.instanceProfiles?.find((t) => t.instanceType === instanceType);
  return mine && { points: (mine.points ?? []).map((pt) => ({ batch: pt.batch ?? 0, meanMs: pt.meanMs ?? 0, p99Ms: pt.p99Ms ?? 0 })) };
}

/** The model's Themis profile with its defaults applied, or undefined when it has none. */
function themisOf(model: control.ModelSpec.$Properties | null | undefined) {
  const t = model?.themis;
  return t ? { gamma: t.gamma ?? 0, eps: t.eps ?? 0, delta: t.delta ?? 0, eta: t.eta ?? 0, spread: t.spread ?? 0 } : undefined;
}

/**
 * The runtime spec for an assignment's model on this backend. A model with per-instance-type profiles
 * (Kairos) runs on this backend's type's profile; a type it has none for is an error (the allocator assigns
 * such a service only backends of its listed types, so this means the two disagree).
 */
export function toModelSpec(
  model: control.ModelSpec.$Properties | null | undefined,
  defaultThreads: number,
  instanceType = "",
  cores = 1,
): ModelSpec {
  if (model?.kind === control.ModelKind.MODEL_KIND_ONNX) {
    return { kind: "onnx", model: model.onnxModel ?? "", intraOpThreads: model.intraOpThreads || defaultThreads };
  }
  const p = model?.profile;
  const typed = model?.instanceProfiles ?? [];
  const batchProfile = ownProfile(model, instanceType);
  if (typed.length > 0 && batchProfile === undefined) {
    throw new Error(
      `the model has profiles for instance types ${typed.map((t) => t.instanceType).join(", ")}, not for this backend's type "${instanceType}"`,
    );
  }
  const t = themisOf(model);
  return {
    kind: "emulated",
    profile: { shape: p?.shape ?? 0, loc: p?.locMs ?? 0, scale: p?.scaleMs ?? 0 },
    ...(batchProfile === undefined ? {} : { batchProfile }),
    ...(t ? { themis: t, cores } : {}),
    coldStartMs: model?.coldStartMs ?? 0,
  };
}

const PARK_REFUSAL: Record<"cold" | "draining", backend.ParkStatus> = {
  cold: backend.ParkStatus.PARK_STATUS_REFUSED_COLD,
  draining: backend.ParkStatus.PARK_STATUS_REFUSED_DRAINING,
};

/** A Park call waiting for a slot. */
interface ParkedCall {
  parkId: string;
  frontendId: string;
  done: boolean;
  answer(status: backend.ParkStatus, holdId?: string): void;
}

/** A slot held for a parked request until its Execute (or Release) comes, or holdMs passes. */
interface Hold {
  parkId: string;
  timer: NodeJS.Timeout;
}

/** An accepted Execute waiting in (or running with) its batch. */
interface PendingExecute {
  inputs: Record<string, TensorValue>;
  /** Its rows (its inputs' first dimension): what it adds to its batch's l(b, c). */
  rows: number;
  resolve(reply: backend.ExecuteReply.$Properties): void;
  reject(err: unknown): void;
}

export interface WorkerOptions {
  /** How long a slot held for a parked request waits for its Execute before it is given back. */
  holdMs: number;
  /** The instance type this backend runs on (it picks its model's profile for that type). */
  instanceType?: string;
  /** Cores the model runs on (Themis's c; default 1). */
  cores?: number;
  /** This node's limit on cores: Resize accepts 1..maxCores (default: max(cores, 1)). */
  maxCores?: number;
  /**
   * Batch size b (default 1): up to b accepted requests run as one model call; the machine admits
   * admittedRequests(b) (a batch running and the next forming). With b = 1 and a machine of concurrency above 1, requests run independently, as before batching.
   */
  maxBatch?: number;
  /** How long a partial batch waits on an idle model (ms; default 0: not at all; Infinity: until b). */
  batchTimeoutMs?: number;
  /** The token Resize calls must carry; without one, Resize is disabled. */
  controlToken?: string;
  /** What the model runtime is built with (tests inject a sleep). */
  modelDeps?: ModelRuntimeDeps;
}

export interface WorkerEvents {
  /** The backend idled T and went cold: it is back in the global pool. */
  onDecommissioned(service: string): void;
  /** A slot held for a parked request ended: used by its Execute, given back by a Release, or expired unused. */
  onHoldEnded(how: "executed" | "released" | "expired"): void;
  /** A batch ran: its requests and the model's compute time (not called for requests run independently). */
  onBatch?(size: number, computeMs: number): void;
  /** An Execute came after its caller's deadline and was refused unrun. */
  onLate?(): void;
  /**
   * A call refused unrun because its rows alone take longer on this backend than its caller allows (Themis
   * profile; themis in-time.ts).
   */
  onTooLong?(): void;
  /** The model starts computing requests ("start") or is done with them ("end"): harvesting stops and resumes on these. */
  onCompute?(phase: "start" | "end"): void;
}

/**
 * The backend's imperative shell: the pure state machine decides, this class loads models,
 * runs requests and answers. Every reply carries the state and the distinct-frontends count.
 */
export class Worker {
  private assignment: control.BackendAssignment | undefined;
  /** Set when it decommissioned itself: until the allocator assigns it again, it serves no one. */
  private returnedVersion: number | undefined;
  private runtime: ModelRuntime | undefined;
  private lastColdStartMs = 0;
  /** Bumped by every load and reassignment: a load that finishes after a newer one started is discarded. */
  private loadGeneration = 0;
  /** Backend-seconds as Swayam counts them: time not cold, provisioning included. */
  readonly meter = new BackendSecondsMeter();
  /** Requests parked here and the slots held for them (libs/swayam BackendSlots: the simulator runs the same). */
  private readonly slots: BackendSlots<ParkedCall>;
  private readonly holds = new Map<string, Hold>();
  /** The latest park of each request (by park id), to withdraw it. */
  private readonly parkedById = new Map<string, ParkedCall>();
  /** Accepted requests form batches here (libs/swayam BatchFormer: the simulator runs the same). */
  private readonly former: BatchFormer<PendingExecute>;
  /** Concurrency above 1 without batching: each request runs on its own, as before batching existed. */
  private readonly independent: boolean;
  private cores: number;
  private readonly maxCores: number;
  private batchTimer: NodeJS.Timeout | undefined;
  private batchTimerAt: number | undefined;
  /** Resize calls apply one after another. */
  private resizing: Promise<unknown> = Promise.resolve();

  /** The lags of the frontends' clocks, by connection: how their deadlines are read. */
  private readonly senders = new SenderLag();
  /** Rows admitted and waiting for their batch, and when the running batch is expected to end (Themis profile). */
  private waitingRows = 0;
  private runningEndsAt: number | undefined;

  constructor(
    readonly id: string,
    private readonly machine: BackendMachine,
    private readonly defaultThreads: number,
    private readonly logger: Logger,
    private readonly events: WorkerEvents,
    private readonly options: WorkerOptions,
    private readonly now: () => number = Date.now,
    /** How far `now`'s clock is ahead of the wall clock, which callers' deadlines are read on (main.ts: SteadyClock.wallOffset). */
    private readonly wallOffset: () => number = () => 0,
  ) {
    this.slots = new BackendSlots(machine, { isLive: (c) => !c.done, frontendOf: (c) => c.frontendId });
    const maxBatch = options.maxBatch ?? 1;
    this.independent = maxBatch === 1 && machine.concurrency > 1;
    if (!this.independent) machine.resize(admittedRequests(maxBatch));
    this.former = new BatchFormer({ maxBatch, timeoutMs: options.batchTimeoutMs ?? 0 });
    this.cores = options.cores ?? 1;
    this.maxCores = options.maxCores ?? Math.max(this.cores, 1);
    if (!(Number.isInteger(this.cores) && this.cores >= 1 && this.cores <= this.maxCores))
      throw new RangeError(`cores must be an integer in 1..${this.maxCores}, got ${this.cores}`);
  }

  activeSeconds(): number {
    const now = this.now();
    this.meter.observe(this.id, this.machine.state, now);
    return this.meter.totalSeconds(now);
  }

  get service(): string {
    const a = this.assignment;
    if (!a || Number(a.version) === this.returnedVersion) return "";
    return a.service;
  }

  report(): backend.BackendReport.$Properties {
    const now = this.now();
    this.meter.observe(this.id, this.machine.state, now);
    return {
      backendId: this.id,
      state: STATE[this.machine.state],
      frontendsSeen: this.machine.frontendsSeen(now),
      service: this.service,
      reportedAtUnixMs: now,
      cores: this.runtime?.cores ?? this.cores,
      maxBatch: this.former.maxBatch,
      batchTimeoutMs: this.former.timeoutMs,
    };
  }

  onAssignment(a: control.BackendAssignment | undefined): void {
    const before = this.service;
    this.assignment = a?.service ? a : undefined;
    if (this.service !== before) {
      this.logger.info({ from: before || "(pool)", to: this.service || "(pool)" }, "assignment changed");
      // Reassigned: finish what is in flight for the old service, then drop its model; whoever is parked
      // here for it is told at once, and parks elsewhere.
      this.loadGeneration += 1;
      if (before && this.machine.drain(this.now())) void this.unload();
      // Draining takes no new request, so a partial batch would wait for its b-th forever: it runs as it is.
      else if (before) this.applyStep(this.former.resize(this.now(), this.former.maxBatch, 0));
      this.refuseParked(backend.ParkStatus.PARK_STATUS_REFUSED_DRAINING);
      this.admit();
    }
  }

  /**
   * Shutting down: a partial batch runs as it is now, and so does every request after (no wait for a batch to
   * fill: with an infinite batch timeout the requests admitted would otherwise wait for good and be cut off by the
   * server's forced shutdown); parked calls are told at once, and park elsewhere.
   */
  drainForShutdown(): void {
    this.applyStep(this.former.resize(this.now(), this.former.maxBatch, 0));
    this.refuseParked(backend.ParkStatus.PARK_STATUS_REFUSED_DRAINING);
  }

  /**
   * Sets how many requests the machine admits (admittedRequests): a service whose model has a Themis profile
   * is sized by a batching-aware policy, so its backend admits the batches it can finish within half the SLO
   * (at its current batch size and cores: called again after every resize).
   */
  private admit(): void {
    if (this.independent) return;
    const themis = themisOf(this.assignment?.model);
    const b = this.former.maxBatch;
    const pipelining = themis && { batchMs: processingMs(themis, b, this.cores), sloMs: this.assignment?.latencySloMs ?? 0 };
    const admitted = admittedRequests(b, pipelining);
    if (admitted === this.machine.concurrency) return;
    this.machine.resize(admitted);
    this.serveParked();
  }

  warmUp(req: backend.WarmUpRequest.$Properties): backend.WarmUpReply.$Properties {
    const service = req.service ?? "";
    if (!service || service !== this.service) return { report: this.report(), accepted: false, coldStartMs: 0 };
    const { startLoad } = this.machine.warmUp(this.now(), service);
    if (startLoad) void this.load(this.assignment?.model);
    return { report: this.report(), accepted: true, coldStartMs: this.lastColdStartMs };
  }

  private async load(model: control.ModelSpec.$Properties | null | undefined): Promise<void> {
    this.loadGeneration += 1;
    const generation = this.loadGeneration;
    let runtime: ModelRuntime | undefined;
    try {
      runtime = createModelRuntime(toModelSpec(model, this.defaultThreads, this.options.instanceType, this.cores), this.options.modelDeps);
      const { coldStartMs } = await runtime.load();
      // A Resize that came while it loaded: the model must run on the size the backend now reports.
      if (runtime.resize && runtime.cores !== undefined && runtime.cores !== this.cores) await runtime.resize(this.cores);
      if (generation !== this.loadGeneration) {
        // Reassigned (or warmed up anew) while it loaded: this model serves no one.
        await runtime.unload().catch((err: unknown) => this.logger.warn({ err }, "unload failed"));
        return;
      }
      this.runtime = runtime;
      this.lastColdStartMs = coldStartMs;
      // The configured wait again, in case a drain set it to none.
      this.former.resize(this.now(), this.former.maxBatch, this.options.batchTimeoutMs ?? 0);
      this.machine.loadFinished(this.now());
      this.logger.info({ model: runtime.name, coldStartMs: Math.round(coldStartMs) }, "model loaded (cold start)");
      this.serveParked();
    } catch (err) {
      // Loaded, then failed (a resize to the reported cores, say): what it loaded is not kept running unused.
      if (runtime && runtime !== this.runtime) await runtime.unload().catch((e: unknown) => this.logger.warn({ err: e }, "unload failed"));
      if (generation !== this.loadGeneration) return;
      this.machine.loadFailed(this.now());
      this.meter.observe(this.id, this.machine.state, this.now());
      this.refuseParked(backend.ParkStatus.PARK_STATUS_REFUSED_COLD);
      this.logger.error({ err }, "model load failed");
    }
  }

  private async unload(): Promise<void> {
    const r = this.runtime;
    this.runtime = undefined;
    if (r) await r.unload().catch((err: unknown) => this.logger.warn({ err }, "unload failed"));
  }

  /**
   * `onGone` registers what to do if the caller goes away (cancelled, or past its deadline): a request still
   * waiting for its batch then leaves it and gives its slot back; one already running runs to the end. A callback,
   * not an AbortSignal: the server would build a signal (and an abort's DOMException) for every request.
   */
  async execute(req: ExecuteInput, onGone?: (leave: () => void) => void): Promise<backend.ExecuteReply.$Properties> {
    const inputs = req.undecodable ? {} : fromTensorMap(req.inputs);
    const rows = batchOf(Object.values(inputs).map((t) => t.dims));
    const refused = this.refusedBeforeRun(req, rows);
    if (refused) {
      // A request refused before it runs gives back the slot held for it at once, not when its hold expires
      // (the frontend sends no Release after a failed Execute).
      if (req.holdId && this.takeHold(req.holdId)) {
        this.events.onHoldEnded("released");
        this.release();
      }
      if (refused instanceof GrpcStatusError) throw refused;
      return refused;
    }
    const now = this.now();
    if (req.holdId) {
      // The slot was acquired when the hold was made; an unknown hold has expired and its slot moved on.
      if (!this.takeHold(req.holdId)) return { status: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY, report: this.report() };
      this.events.onHoldEnded("executed");
    } else {
      const acquired = this.machine.tryAcquire(now, req.frontendId ?? "");
      if (!acquired.accepted)
        return { status: REFUSAL[acquired.reason] ?? backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY, report: this.report() };
    }
    if (!this.independent) {
      return new Promise((resolve, reject) => {
        const item: PendingExecute = { inputs, rows, resolve, reject };
        this.waitingRows += rows;
        onGone?.(() => this.withdraw(item));
        this.applyStep(this.former.add(this.now(), item));
      });
    }
    const runtime = this.runtime;
    try {
      if (!runtime) throw new GrpcStatusError(grpc.status.INTERNAL, "warm backend has no model loaded");
      this.events.onCompute?.("start");
      let result: InferResult;
      try {
        result = await runtime.infer(inputs);
      } finally {
        this.events.onCompute?.("end");
      }
      this.release();
      return {
        status: backend.ExecuteStatus.EXECUTE_STATUS_OK,
        outputs: toTensorMap(result.outputs),
        computeMs: result.computeMs,
        report: this.report(),
      };
    } catch (err) {
      this.release();
      if (err instanceof InvalidModelInputError) throw new GrpcStatusError(grpc.status.INVALID_ARGUMENT, err.message);
      throw err;
    }
  }

  /** Why a request is not run at all (an error, or a refusal the frontend acts on); undefined when it may run. */
  private refusedBeforeRun(req: ExecuteInput, rows: number): GrpcStatusError | backend.ExecuteReply.$Properties | undefined {
    if (req.undecodable) return new GrpcStatusError(grpc.status.INVALID_ARGUMENT, req.undecodable);
    const now = this.now();
    const stamped = Number(req.deadlineUnixMs ?? 0);
    const wallOffset = this.wallOffset();
    const relative =
      req.callDeadline !== undefined && Number.isFinite(req.callDeadline) ? req.callDeadline + wallOffset : Number.POSITIVE_INFINITY;
    const deadline = this.senders.deadline(req.caller ?? req.frontendId ?? "", relative, stamped, now, wallOffset);
    if (deadline <= now) {
      // A call read late (the backend was frozen, or its event loop stalled): its caller has moved on.
      this.events.onLate?.();
      return new GrpcStatusError(
        grpc.status.DEADLINE_EXCEEDED,
        `the caller's deadline passed ${now - deadline} ms before the backend could start the request; not run`,
      );
    }
    if (!req.service || req.service !== this.service) {
      return { status: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_NOT_ASSIGNED, report: this.report() };
    }
    // The broker and the frontend check only the tensors' form on the bytes they forward; the values are
    // checked here, where they are decoded, before the request takes a slot.
    const problem = inputsProblem(req.inputs);
    if (problem) return new GrpcStatusError(grpc.status.INVALID_ARGUMENT, problem);
    return this.independent ? undefined : this.notInTime(req, rows, now, deadline);
  }

  /**
   * A batching backend with a Themis profile answers at once what it cannot finish before the caller's deadline
   * (themis in-time.ts): a request too long for it anywhere of its size is refused unrun, DEADLINE_EXCEEDED, as a
   * late one is; one that would end late only for what waits ahead of it is refused busy, unless a slot was held
   * for it.
   */
  private notInTime(
    req: ExecuteInput,
    rows: number,
    now: number,
    deadline: number,
  ): GrpcStatusError | backend.ExecuteReply.$Properties | undefined {
    const profile = themisOf(this.assignment?.model);
    if (!profile) return undefined;
    const cores = this.runtime?.cores ?? this.cores;
    const verdict = inTime({ profile, cores, now, deadline, rows, waitingRows: this.waitingRows, runningEndsAt: this.runningEndsAt });
    if (verdict.kind === "too-long") {
      this.events.onTooLong?.();
      const md = new grpc.Metadata();
      md.set(NOT_RUN_KEY, "too-long");
      return new GrpcStatusError(
        grpc.status.DEADLINE_EXCEEDED,
        `its ${rows} rows take about ${Math.round(verdict.aloneMs)} ms on this backend (${cores} core${cores === 1 ? "" : "s"}), more than the ${Math.round(deadline - now)} ms its caller gave it; not run`,
        md,
      );
    }
    if (verdict.kind === "after-deadline" && !req.holdId)
      return { status: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY, report: this.report() };
    return undefined;
  }

  /** Runs a batch the former closed, answers each of its requests once, and starts what forms next. */
  private async runFormed(items: readonly PendingExecute[]): Promise<void> {
    const runtime = this.runtime;
    let rows = 0;
    for (const i of items) rows += i.rows;
    this.waitingRows -= rows;
    const profile = themisOf(this.assignment?.model);
    this.runningEndsAt = profile ? this.now() + processingMs(profile, rows, runtime?.cores ?? this.cores) : undefined;
    let answers: BatchAnswer[];
    try {
      if (!runtime) throw new GrpcStatusError(grpc.status.INTERNAL, "warm backend has no model loaded");
      this.events.onCompute?.("start");
      try {
        answers = await runBatch(
          runtime,
          items.map((i) => i.inputs),
        );
      } finally {
        this.events.onCompute?.("end");
      }
      if (answers.length !== items.length) throw new Error(`the model answered ${answers.length} of a batch of ${items.length}`);
    } catch (err) {
      const failure = err instanceof Error ? err : new Error(String(err));
      answers = items.map(() => failure);
    }
    const ok = answers.find((a): a is InferResult => !(a instanceof Error));
    if (ok) this.events.onBatch?.(items.length, ok.computeMs);
    for (const _ of items) this.release();
    this.runningEndsAt = undefined;
    const next = this.former.finished(this.now());
    items.forEach((item, i) => {
      const answer = answers[i] as BatchAnswer;
      if (answer instanceof InvalidModelInputError) item.reject(new GrpcStatusError(grpc.status.INVALID_ARGUMENT, answer.message));
      else if (answer instanceof Error) item.reject(answer);
      else
        item.resolve({
          status: backend.ExecuteStatus.EXECUTE_STATUS_OK,
          outputs: toTensorMap(answer.outputs),
          computeMs: answer.computeMs,
          report: this.report(),
        });
    });
    this.applyStep(next);
  }

  private withdraw(item: PendingExecute): void {
    const { removed, step } = this.former.withdraw(this.now(), item);
    if (removed) {
      this.waitingRows -= item.rows;
      this.release();
      item.reject(new GrpcStatusError(grpc.status.CANCELLED, "the caller went away before its batch ran"));
    }
    // Applied even when the item had already left: the step may close the forming batch (its deadline passed),
    // and a step dropped here is a batch that never runs, holding its slots for good.
    this.applyStep(step);
  }

  /** Starts a batch the former closed and keeps one timer at the forming batch's deadline. */
  private applyStep(step: BatchStep<PendingExecute>): void {
    if (step.run) void this.runFormed(step.run);
    const at = this.former.deadline();
    if (at === this.batchTimerAt) return;
    clearTimeout(this.batchTimer);
    this.batchTimer = undefined;
    this.batchTimerAt = at;
    if (at === undefined) return;
    // At least 1 ms: a clock that lags the timers must not make this spin.
    this.batchTimer = setTimeout(
      () => {
        this.batchTimer = undefined;
        this.batchTimerAt = undefined;
        this.applyStep(this.former.timer(this.now()));
      },
      Math.max(1, at - this.now()),
    );
  }

  /**
   * In-place vertical scaling (Themis): new cores and/or batch size for the next batch on. Only a caller with
   * the control token may steer a backend; without one configured, Resize is disabled.
   */
  async resize(req: backend.ResizeRequest.$Properties, metadata: grpc.Metadata): Promise<backend.ResizeReply.$Properties> {
    const token = this.options.controlToken;
    if (token === undefined) {
      throw new GrpcStatusError(
        grpc.status.UNAUTHENTICATED,
        "Resize is disabled: this backend has no control token (--control-token-file / INFERGRID_CONTROL_TOKEN)",
      );
    }
    if (!bearerTokenMatches(metadata, token))
      throw new GrpcStatusError(grpc.status.UNAUTHENTICATED, "Resize needs the control token as metadata `authorization: Bearer <token>`");
    const cores = req.cores ?? 0;
    const maxBatch = req.maxBatch ?? 0;
    if (cores !== 0 && !(cores >= 1 && cores <= this.maxCores)) {
      throw new GrpcStatusError(
        grpc.status.INVALID_ARGUMENT,
        `cores: ${cores} is outside 1..${this.maxCores} (this node's --max-cores); 0 leaves it unchanged`,
      );
    }
    if (maxBatch !== 0 && !(maxBatch >= 1 && maxBatch <= MAX_BATCH_BOUND)) {
      throw new GrpcStatusError(
        grpc.status.INVALID_ARGUMENT,
        `max_batch: ${maxBatch} is outside 1..${MAX_BATCH_BOUND}; 0 leaves it unchanged`,
      );
    }
    if (maxBatch > 1 && this.independent) {
      throw new GrpcStatusError(
        grpc.status.FAILED_PRECONDITION,
        `max_batch: this backend runs --concurrency ${this.machine.concurrency} requests independently; batching needs --concurrency 1`,
      );
    }
    const applied = this.resizing.then(() => this.applyResize(cores, maxBatch));
    this.resizing = applied.catch(() => undefined);
    return applied;
  }

  private async applyResize(cores: number, maxBatch: number): Promise<backend.ResizeReply.$Properties> {
    let resizeMs = 0;
    if (cores !== 0 && cores !== (this.runtime?.cores ?? this.cores)) {
      const runtime = this.runtime;
      if (runtime) {
        if (!runtime.resize)
          throw new GrpcStatusError(grpc.status.FAILED_PRECONDITION, `cores: model "${runtime.name}" runs on a fixed size`);
        const start = performance.now();
        await runtime.resize(cores);
        resizeMs = performance.now() - start;
      }
      this.cores = cores;
    } else if (cores !== 0) this.cores = cores;
    if (maxBatch !== 0 && maxBatch !== this.former.maxBatch) this.applyStep(this.former.resize(this.now(), maxBatch));
    this.admit();
    const report = this.report();
    this.logger.info({ cores: report.cores, maxBatch: report.maxBatch, resizeMs }, "resized in place");
    return { report, cores: report.cores ?? this.cores, maxBatch: this.former.maxBatch, resizeMs };
  }

  private release(): void {
    if (this.slots.release(this.now())) {
      void this.unload();
      this.refuseParked(backend.ParkStatus.PARK_STATUS_REFUSED_DRAINING);
    } else this.serveParked();
  }

  /**
   * What a request of `batch` items is expected to take here: the mean at that batch of this backend's
   * type's profile, when the assigned model is profiled per type (Kairos); 0 otherwise, or with no batch.
   */
  private expectedServiceMs(batch: number): number {
    if (!(batch > 0)) return 0;
    const profile = ownProfile(this.assignment?.model, this.options.instanceType ?? "");
    return profile && profile.points.length > 0 ? serviceMs(profile, batch) : 0;
  }

  /**
   * Late binding: waits for a slot held for this request (oldest parked first), up to wait_ms. `signal` aborts
   * when the frontend withdraws the call (it got a slot elsewhere).
   */
  park(req: backend.ParkRequest.$Properties, signal?: AbortSignal): Promise<backend.ParkReply.$Properties> {
    const now = this.now();
    if (!req.service || req.service !== this.service) {
      return Promise.resolve({ status: backend.ParkStatus.PARK_STATUS_REFUSED_NOT_ASSIGNED, report: this.report() });
    }
    const parkId = req.parkId ?? "";
    return new Promise((resolve) => {
      const call: ParkedCall = {
        parkId,
        frontendId: req.frontendId ?? "",
        done: false,
        answer: (status, holdId) => {
          if (call.done) return;
          call.done = true;
          clearTimeout(timer);
          if (this.parkedById.get(parkId) === call) this.parkedById.delete(parkId);
          resolve(status === backend.ParkStatus.PARK_STATUS_HELD && holdId ? this.held(holdId) : { status, report: this.report() });
        },
      };
      const outcome = this.slots.park(now, call, now - Math.max(0, req.ageMs ?? 0), this.expectedServiceMs(req.batch ?? 0));
      if (outcome === "held") {
        call.done = true;
        resolve(this.held(this.hold(parkId)));
        return;
      }
      if (outcome !== "parked") {
        call.done = true;
        resolve({ status: PARK_REFUSAL[outcome], report: this.report() });
        return;
      }
      const timer = setTimeout(() => call.answer(backend.ParkStatus.PARK_STATUS_TIMED_OUT), Math.max(1, req.waitMs ?? 0));
      const cancelled = () => call.answer(backend.ParkStatus.PARK_STATUS_WITHDRAWN);
      if (signal?.aborted) cancelled();
      else signal?.addEventListener("abort", cancelled, { once: true });
      if (!call.done && parkId) this.parkedById.set(parkId, call);
    });
  }

  /** Gives back a held slot the frontend will not use, or withdraws a request (its park and any slot held for it). */
  releaseHold(req: backend.ReleaseRequest.$Properties): backend.ReleaseReply.$Properties {
    const slots: string[] = [];
    if (req.holdId) slots.push(req.holdId);
    else if (req.parkId) {
      this.parkedById.get(req.parkId)?.answer(backend.ParkStatus.PARK_STATUS_WITHDRAWN);
      for (const [id, h] of this.holds) if (h.parkId === req.parkId) slots.push(id);
    }
    let released = false;
    for (const id of slots) {
      if (!this.takeHold(id)) continue;
      this.events.onHoldEnded("released");
      released = true;
      this.release();
    }
    return { released, report: this.report() };
  }

  /** Free slots go to the oldest requests parked here, each held until its Execute comes. */
  private serveParked(): void {
    for (const call of this.slots.serve(this.now())) call.answer(backend.ParkStatus.PARK_STATUS_HELD, this.hold(call.parkId));
  }

  private refuseParked(status: backend.ParkStatus): void {
    for (const call of this.slots.evict()) call.answer(status);
  }

  /** Holds the slot just acquired; if no Execute or Release comes in time, the slot is given back. */
  private hold(parkId: string): string {
    const id = randomUUID();
    const timer = setTimeout(() => {
      if (!this.holds.delete(id)) return;
      this.events.onHoldEnded("expired");
      this.logger.debug({ holdId: id }, "held slot not used in time: given back");
      this.release();
    }, this.options.holdMs);
    this.holds.set(id, { parkId, timer });
    return id;
  }

  private takeHold(id: string): boolean {
    const h = this.holds.get(id);
    if (!h) return false;
    clearTimeout(h.timer);
    this.holds.delete(id);
    return true;
  }

  private held(holdId: string): backend.ParkReply.$Properties {
    return { status: backend.ParkStatus.PARK_STATUS_HELD, holdId, holdMs: this.options.holdMs, report: this.report() };
  }

  /** Called by a timer: decommissions the backend when it has idled T. */
  checkIdle(): void {
    if (!this.machine.checkIdle(this.now())) return;
    this.meter.observe(this.id, this.machine.state, this.now());
    const service = this.service;
    this.refuseParked(backend.ParkStatus.PARK_STATUS_REFUSED_COLD);
    this.returnedVersion = Number(this.assignment?.version ?? 0);
    void this.unload();
    this.logger.info({ service }, "idle for T: decommissioned, back to the pool");
    this.events.onDecommissioned(service);
  }
}
