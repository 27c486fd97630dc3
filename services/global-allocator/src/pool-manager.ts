import { checkPoolSizing, type PoolSizingOptions, planPoolSize } from "@infergrid/allocation";
import type { PoolActuator } from "@infergrid/pool-actuator";
import type { Logger } from "@infergrid/runtime";
import type { Allocator } from "./allocator.js";

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

  constructor(
    private readonly allocator: Allocator,
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
    try {
      // Read back every time: someone (kubectl scale, a rollout) may have changed it.
      const requested = await this.actuator.currentSize();
      this.requested = requested;
      const decision = planPoolSize({ now, demand: view.demand, requested, free: view.free }, this.options);
      if (decision.size === requested) return;
      this.allocator.retire(decision.removeFirst);
      this.logger.info(
        { from: requested, to: decision.size, removeFirst: decision.removeFirst, reason: decision.reason, actuator: this.actuator.kind },
        "resizing the backend pool",
      );
      await this.actuator.scaleTo(decision.size, { removeFirst: decision.removeFirst });
      this.requested = decision.size;
      this.hooks.onScaled?.(requested, decision.size);
    } catch (err) {
      this.logger.warn({ err, actuator: this.actuator.kind }, "pool resize failed; retrying on a later step");
    } finally {
      this.busy = false;
    }
  }
}
