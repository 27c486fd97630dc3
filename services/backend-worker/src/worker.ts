import { randomUUID } from "node:crypto";
import { type LatencyProfile, serviceMs } from "@infergrid/kairos";
import { createModelRuntime, InvalidModelInputError, type ModelRuntime, type ModelSpec } from "@infergrid/models";
import { backend, control } from "@infergrid/proto";
import { GrpcStatusError, grpc, type Logger } from "@infergrid/runtime";
import { type BackendMachine, type BackendPhase, BackendSecondsMeter, BackendSlots } from "@infergrid/swayam";
import { fromTensorMap, toTensorMap } from "./tensors.js";

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
function ownProfile(model: control.ModelSpec.$Properties | null | undefined, instanceType: string): LatencyProfile | undefined {
  const mine = model?.instanceProfiles?.find((t) => t.instanceType === instanceType);
  return mine && { points: (mine.points ?? []).map((pt) => ({ batch: pt.batch ?? 0, meanMs: pt.meanMs ?? 0, p99Ms: pt.p99Ms ?? 0 })) };
}

/**
 * The runtime spec for an assignment's model on this backend. A model with per-instance-type profiles
 * (Kairos) runs on this backend's type's profile; a type it has none for is an error (the allocator assigns
 * such a service only backends of its listed types, so this means the two disagree).
 */
export function toModelSpec(model: control.ModelSpec.$Properties | null | undefined, defaultThreads: number, instanceType = ""): ModelSpec {
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
  return {
    kind: "emulated",
    profile: { shape: p?.shape ?? 0, loc: p?.locMs ?? 0, scale: p?.scaleMs ?? 0 },
    ...(batchProfile === undefined ? {} : { batchProfile }),
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

export interface WorkerOptions {
  /** How long a slot held for a parked request waits for its Execute before it is given back. */
  holdMs: number;
  /** The instance type this backend runs on (it picks its model's profile for that type). */
  instanceType?: string;
}

export interface WorkerEvents {
  /** The backend idled T and went cold: it is back in the global pool. */
  onDecommissioned(service: string): void;
  /** A slot held for a parked request ended: used by its Execute, given back by a Release, or expired unused. */
  onHoldEnded(how: "executed" | "released" | "expired"): void;
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

  constructor(
    readonly id: string,
    private readonly machine: BackendMachine,
    private readonly defaultThreads: number,
    private readonly logger: Logger,
    private readonly events: WorkerEvents,
    private readonly options: WorkerOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.slots = new BackendSlots(machine, { isLive: (c) => !c.done, frontendOf: (c) => c.frontendId });
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
      this.refuseParked(backend.ParkStatus.PARK_STATUS_REFUSED_DRAINING);
    }
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
    try {
      const runtime = createModelRuntime(toModelSpec(model, this.defaultThreads, this.options.instanceType));
      const { coldStartMs } = await runtime.load();
      if (generation !== this.loadGeneration) {
        // Reassigned (or warmed up anew) while it loaded: this model serves no one.
        await runtime.unload().catch((err: unknown) => this.logger.warn({ err }, "unload failed"));
        return;
      }
      this.runtime = runtime;
      this.lastColdStartMs = coldStartMs;
      this.machine.loadFinished(this.now());
      this.logger.info({ model: runtime.name, coldStartMs: Math.round(coldStartMs) }, "model loaded (cold start)");
      this.serveParked();
    } catch (err) {
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

  async execute(req: backend.ExecuteRequest.$Properties): Promise<backend.ExecuteReply.$Properties> {
    const now = this.now();
    if (!req.service || req.service !== this.service) {
      return { status: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_NOT_ASSIGNED, report: this.report() };
    }
    if (req.holdId) {
      // The slot was acquired when the hold was made; an unknown hold has expired and its slot moved on.
      if (!this.takeHold(req.holdId)) return { status: backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY, report: this.report() };
      this.events.onHoldEnded("executed");
    } else {
      const acquired = this.machine.tryAcquire(now, req.frontendId ?? "");
      if (!acquired.accepted)
        return { status: REFUSAL[acquired.reason] ?? backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY, report: this.report() };
    }
    const runtime = this.runtime;
    try {
      if (!runtime) throw new GrpcStatusError(grpc.status.INTERNAL, "warm backend has no model loaded");
      const result = await runtime.infer(fromTensorMap(req.inputs));
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
