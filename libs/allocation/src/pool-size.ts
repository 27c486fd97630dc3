/**
 * How many backends the pool should hold: what the services' lists ask for plus some headroom,
 * inside the cluster's bounds. Growing is immediate (a backend needs a cold start before it can
 * serve, so waiting only lengthens the shortfall); shrinking removes only backends that have sat in
 * no list for a while, so a backend freed by one service and wanted by another a step later is not
 * destroyed and re-created. Pure: the allocator passes in what it knows.
 */

export interface PoolSizingOptions {
  /** The pool never shrinks below this. */
  minSize: number;
  /** The cluster's capacity in backends: the pool never grows beyond it. */
  maxSize: number;
  /** Free backends kept on top of the lists' demand, so a list can grow without waiting for a cold start. */
  headroom: number;
  /** A free backend is removed only after sitting in no list this long. */
  scaleDownDelayMs: number;
}

export interface PoolSizingInput {
  now: number;
  /** Backends the services' lists ask for in total. */
  demand: number;
  /** The size last asked of the platform. */
  requested: number;
  /** Live backends in no list, with the time each became free. */
  free: readonly { id: string; since: number }[];
}

export interface PoolSizingDecision {
  size: number;
  /** Backends to remove first when shrinking: the longest free. */
  removeFirst: string[];
  reason: string;
}

export function checkPoolSizing(o: PoolSizingOptions): void {
  for (const [k, v] of Object.entries(o)) {
    if (!Number.isFinite(v) || v < 0) throw new RangeError(`pool sizing ${k} must be a non-negative number, got ${v}`);
  }
  if (!Number.isInteger(o.minSize) || !Number.isInteger(o.maxSize) || !Number.isInteger(o.headroom)) {
    throw new RangeError("pool sizing minSize, maxSize and headroom must be integers");
  }
  if (o.maxSize < o.minSize) throw new RangeError(`pool maxSize ${o.maxSize} is below minSize ${o.minSize}`);
}

export function planPoolSize(input: PoolSizingInput, o: PoolSizingOptions): PoolSizingDecision {
  const target = Math.min(o.maxSize, Math.max(o.minSize, Math.ceil(input.demand) + o.headroom));
  if (target > input.requested) return { size: target, removeFirst: [], reason: `lists ask for ${input.demand} + ${o.headroom} headroom` };
  if (target === input.requested) return { size: input.requested, removeFirst: [], reason: "at target" };
  const idle = input.free
    .filter((f) => input.now - f.since >= o.scaleDownDelayMs)
    .sort((a, b) => a.since - b.since || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((f) => f.id);
  const size = Math.max(target, input.requested - idle.length);
  if (size === input.requested) return { size, removeFirst: [], reason: "above target, but no backend free for long enough" };
  return {
    size,
    removeFirst: idle.slice(0, input.requested - size),
    reason: `${input.requested - size} backends free for ${o.scaleDownDelayMs} ms`,
  };
}
