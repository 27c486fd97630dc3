/** One member of the backend pool as the platform sees it (a process, a pod). */
export interface PoolMember {
  /** The backend's instance id: what it reports in heartbeats (the pod name on Kubernetes). */
  id: string;
  /** Started and announced/passed its readiness check. */
  ready: boolean;
  /** Being stopped (SIGTERM sent, pod terminating): no longer counted in the size. */
  terminating: boolean;
  /**
   * The cores it runs on now, when the platform says (on Kubernetes the CPU limit the kubelet reports as
   * applied, which may be fractional; locally what the backend last confirmed).
   */
  cores?: number;
}

export interface ScaleOptions {
  /**
   * Ids of backends to remove first when shrinking (idle or decommissioned ones), so a shrink
   * never takes a busy backend while an idle one is left.
   */
  removeFirst?: readonly string[];
}

/** A resize that took effect (Themis's in-place vertical scaling). */
export interface ResizeResult {
  memberId: string;
  /** The cores in effect now. */
  cores: number;
  /** The backend's batch size now, when the backend itself was told (its Resize reply). */
  maxBatch?: number;
  /** Wall time from the call until the new size was in effect (the platform's and the backend's part). */
  elapsedMs: number;
  /** How long the backend's model took to change its cores (its own measure), when the backend was told. */
  modelResizeMs?: number;
}

/** Why a resize did not happen; the member keeps the size it had. */
export type ResizeFailure =
  /** Beyond what its node can give it (allocatable CPU less the other pods' requests, or the configured node limit). */
  | "capacity"
  /** The kubelet found it infeasible (above the node's allocatable CPU). */
  | "infeasible"
  /** The kubelet deferred it, or did not apply it, within the time allowed; it was undone. */
  | "timeout"
  /** The member is gone (or not in this pool). */
  | "gone"
  /** A CPU resize would restart the backend (its resize policy), which is not in place. */
  | "restarts"
  /** The backend refused the new size, or could not be reached, after the platform applied it. */
  | "backend";

export class ResizeError extends Error {
  constructor(
    message: string,
    readonly reason: ResizeFailure,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "ResizeError";
  }
}

/**
 * Tells a backend its new size through its own API (the backend-worker's authenticated Resize RPC), so its
 * model's threads follow. Resolves with the size the backend reports in effect.
 */
export type BackendResizer = (target: {
  memberId: string;
  /** host:port of the backend's gRPC server. */
  address: string;
  cores: number;
  maxBatch?: number;
}) => Promise<{ cores: number; maxBatch: number; resizeMs: number }>;

/**
 * How the global-allocator grows and shrinks the backend pool, whatever runs it. The allocator
 * decides sizes; an actuator only makes the platform match them, and is idempotent: asking for the
 * current size again changes nothing.
 */
export interface PoolActuator {
  readonly kind: "local" | "kubernetes";
  /** The size asked for last (on Kubernetes, the workload's spec.replicas). */
  currentSize(): Promise<number>;
  /** Makes the pool `n` backends (n >= 0, an integer). Resolves once the platform has accepted it. */
  scaleTo(n: number, options?: ScaleOptions): Promise<void>;
  /** The pool's members now, including ones not yet ready. */
  members(): Promise<PoolMember[]>;
  /**
   * Gives one member `cores` cores in place (no restart), and a batch size of `maxBatch` when given.
   * Resolves once the new size is in effect; rejects with a message saying why not (beyond its node's
   * capacity, the member gone, the platform refusing), in which case the member keeps its size.
   */
  resize(memberId: string, cores: number, maxBatch?: number): Promise<ResizeResult>;
  /** Releases what the actuator holds (the local one stops its processes). */
  close(): Promise<void>;
}

export function checkSize(n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`pool size must be a non-negative integer, got ${n}`);
}

export function checkCores(cores: number): void {
  if (!Number.isInteger(cores) || cores < 1) throw new RangeError(`cores must be a positive integer, got ${cores}`);
}

export function checkBatch(maxBatch: number | undefined): void {
  if (maxBatch !== undefined && (!Number.isInteger(maxBatch) || maxBatch < 1))
    throw new RangeError(`maxBatch must be a positive integer, got ${maxBatch}`);
}
