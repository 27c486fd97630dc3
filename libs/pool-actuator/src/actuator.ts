/** One member of the backend pool as the platform sees it (a process, a pod). */
export interface PoolMember {
  /** The backend's instance id: what it reports in heartbeats (the pod name on Kubernetes). */
  id: string;
  /** Started and announced/passed its readiness check. */
  ready: boolean;
  /** Being stopped (SIGTERM sent, pod terminating): no longer counted in the size. */
  terminating: boolean;
}

export interface ScaleOptions {
  /**
   * Ids of backends to remove first when shrinking (idle or decommissioned ones), so a shrink
   * never takes a busy backend while an idle one is left.
   */
  removeFirst?: readonly string[];
}

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
  /** Releases what the actuator holds (the local one stops its processes). */
  close(): Promise<void>;
}

export function checkSize(n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`pool size must be a non-negative integer, got ${n}`);
}
