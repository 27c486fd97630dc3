import { createModelRuntime, InvalidModelInputError, type ModelRuntime, type ModelSpec } from "@infergrid/models";
import { backend, control } from "@infergrid/proto";
import { GrpcStatusError, grpc, type Logger } from "@infergrid/runtime";
import { type BackendPhase, BackendSecondsMeter, type BackendState } from "@infergrid/swayam";
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

export function toModelSpec(model: control.ModelSpec.$Properties | null | undefined, defaultThreads: number): ModelSpec {
  if (model?.kind === control.ModelKind.MODEL_KIND_ONNX) {
    return { kind: "onnx", model: model.onnxModel ?? "", intraOpThreads: model.intraOpThreads || defaultThreads };
  }
  const p = model?.profile;
  return {
    kind: "emulated",
    profile: { shape: p?.shape ?? 0, loc: p?.locMs ?? 0, scale: p?.scaleMs ?? 0 },
    coldStartMs: model?.coldStartMs ?? 0,
  };
}

export interface WorkerEvents {
  /** The backend idled T and went cold: it is back in the global pool. */
  onDecommissioned(service: string): void;
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
  /** Backend-seconds as Swayam counts them: time not cold, provisioning included. */
  readonly meter = new BackendSecondsMeter();

  constructor(
    readonly id: string,
    private readonly machine: BackendState,
    private readonly defaultThreads: number,
    private readonly logger: Logger,
    private readonly events: WorkerEvents,
    private readonly now: () => number = Date.now,
  ) {}

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
      // Reassigned: finish what is in flight for the old service, then drop its model.
      if (before && this.machine.drain(this.now())) void this.unload();
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
    const spec = toModelSpec(model, this.defaultThreads);
    try {
      const runtime = createModelRuntime(spec);
      const { coldStartMs } = await runtime.load();
      this.runtime = runtime;
      this.lastColdStartMs = coldStartMs;
      this.machine.loadFinished(this.now());
      this.logger.info({ model: runtime.name, coldStartMs: Math.round(coldStartMs) }, "model loaded (cold start)");
    } catch (err) {
      this.machine.loadFailed(this.now());
      this.meter.observe(this.id, this.machine.state, this.now());
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
    const acquired = this.machine.tryAcquire(now, req.frontendId ?? "");
    if (!acquired.accepted)
      return { status: REFUSAL[acquired.reason] ?? backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY, report: this.report() };
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
    if (this.machine.release(this.now())) void this.unload();
  }

  /** Called by a timer: decommissions the backend when it has idled T. */
  checkIdle(): void {
    if (!this.machine.checkIdle(this.now())) return;
    this.meter.observe(this.id, this.machine.state, this.now());
    const service = this.service;
    this.returnedVersion = Number(this.assignment?.version ?? 0);
    void this.unload();
    this.logger.info({ service }, "idle for T: decommissioned, back to the pool");
    this.events.onDecommissioned(service);
  }
}
