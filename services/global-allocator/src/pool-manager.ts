import { checkPoolSizing, type PoolSizingOptions, planPoolSize } from "@infergrid/allocation";
import { type PoolActuator, TypedPools } from "@infergrid/pool-actuator";
import type { Logger } from "@infergrid/runtime";
import type { Allocator } from "./allocator.js";

/** What the pool manager reads and asks of the allocator. */
export type PoolManagerAllocator = Pick<Allocator, "poolView" | "typedTotals" | "retire" | "unretire" | "instanceTypeOf">;

export interface PoolManagerHooks {
  onScaled?(from: number, to: number): void;
}

/**
 * Makes the platform's pool (processes, a Kubernetes workload) the size the allocator's lists ask
 * for. One resize at a time; a failed one is logged and retried on a later step. Backends chosen
 * for removal are retired first, so the allocator does not hand them to a list meanwhile.
 */
export class PoolManager {
  private requested: number | undefined;
  private busy = false;
  /** Per type, since when the plan has wanted its pool smaller (a shrink waits out the scale-down delay). */
  private readonly shrinkSince = new Map<string, number>();

  constructor(
    private readonly allocator: PoolManagerAllocator,
    private readonly actuator: PoolActuator,
    private readonly options: PoolSizingOptions,
    private readonly logger: Logger,
    private readonly hooks: PoolManagerHooks = {},
  ) {
    checkPoolSizing(options);
  }

  get target(): number | undefined {
    return this.requested;
  }

  /** One sizing step; resolves when the platform has accepted the resize (or it failed). */
  async step(now: number): Promise<void> {
    if (this.busy) return;
    const view = this.allocator.poolView(now);
    if (!view) return;
    this.busy = true;
    /** Backends retired for this step's resize: given back to the allocator if it fails. */
    const retired: string[] = [];
    try {
      const totals = this.allocator.typedTotals();
      if (totals && this.actuator instanceof TypedPools) {
        await this.stepTypes(now, this.actuator, totals, view.free, retired);
        return;
      }
      // Read back every time: someone (kubectl scale, a rollout) may have changed it.
      const requested = await this.actuator.currentSize();
      this.requested = requested;
      const decision = planPoolSize({ now, demand: view.demand, requested, free: view.free }, this.options);
      if (decision.size === requested) return;
      this.allocator.retire(decision.removeFirst, now);
      retired.push(...decision.removeFirst);
      this.logger.info(
        { from: requested, to: decision.size, removeFirst: decision.removeFirst, reason: decision.reason, actuator: this.actuator.kind },
        "resizing the backend pool",
      );
      await this.actuator.scaleTo(decision.size, { removeFirst: decision.removeFirst });
      this.requested = decision.size;
      this.hooks.onScaled?.(requested, decision.size);
    } catch (err) {
      this.allocator.unretire(retired);
      this.logger.warn({ err, actuator: this.actuator.kind }, "pool resize failed; retrying on a later step");
    } finally {
      this.busy = false;
    }
  }

  /**
   * The per-type plan (each service's Kairos configuration, summed) sizes each type's pool: growth at once,
   * a shrink once the plan has wanted it for the scale-down delay, taking the type's free backends first.
   * Types the price list has but the pools do not are left out (they cannot be started here).
   */
  private async stepTypes(
    now: number,
    pools: TypedPools,
    totals: ReadonlyMap<string, number>,
    free: readonly { id: string; since: number }[],
    retired: string[],
  ): Promise<void> {
    const current = await pools.currentSizes();
    const changed = new Map<string, number>();
    const removeFirst: string[] = [];
    for (const [type, size] of current) {
      const wanted = Math.max(totals.get(type) ?? 0, 0);
      if (wanted >= size) this.shrinkSince.delete(type);
      if (wanted > size) changed.set(type, wanted);
      if (wanted >= size) continue;
      const since = this.shrinkSince.get(type) ?? now;
      this.shrinkSince.set(type, since);
      if (now - since < this.options.scaleDownDelayMs) continue;
      changed.set(type, wanted);
      removeFirst.push(
        ...free
          .filter((f) => this.allocator.instanceTypeOf(f.id) === type)
          .slice(0, size - wanted)
          .map((f) => f.id),
      );
    }
    this.requested = [...current].reduce((sum, [type, n]) => sum + (changed.get(type) ?? n), 0);
    if (changed.size === 0) return;
    this.allocator.retire(removeFirst, now);
    retired.push(...removeFirst);
    this.logger.info(
      { from: Object.fromEntries(current), to: Object.fromEntries(changed), removeFirst, actuator: this.actuator.kind },
      "resizing the per-type pools to the services' configurations",
    );
    const before = [...current].reduce((sum, [, n]) => sum + n, 0);
    await pools.scaleTypesTo(changed, { removeFirst });
    this.hooks.onScaled?.(before, this.requested);
    for (const type of changed.keys()) this.shrinkSince.delete(type);
  }
}
