import type { Clock } from "@infergrid/core";
import { BackendServiceDefinition, backend } from "@infergrid/proto";
import { type ClientCache, type Logger, statusOf, unaryCall } from "@infergrid/runtime";
import type { BackendTracker } from "./backend-tracker.js";
import type { BackendRef } from "./service-table.js";

const WARM = new Set([backend.BackendState.BACKEND_STATE_WARM_IDLE, backend.BackendState.BACKEND_STATE_BUSY]);

/**
 * Sends warm-up requests (idempotent on the backend) to the entries of a prefix that are not
 * known to be warm. Scale-out, replacing a failed backend and a freshly assigned one all come
 * down to this. A backend is asked again only after `resendMs`.
 */
export class Warmer {
  private readonly lastSent = new Map<string, number>();

  constructor(
    private readonly clients: ClientCache,
    private readonly tracker: BackendTracker,
    private readonly frontendId: string,
    private readonly resendMs: number,
    private readonly logger: Logger,
    private readonly onWarmUp: () => void,
    /** The frontend's clock (the one `warm` is given `now` on): the tracker's times are on it. */
    private readonly clock: Clock,
  ) {}

  warm(service: string, refs: readonly BackendRef[], now: number, force = false): void {
    for (const ref of refs) {
      if (!force && WARM.has(this.tracker.state(ref.backendId))) continue;
      if (!this.tracker.usable(ref.backendId, now)) continue;
      const last = this.lastSent.get(ref.backendId) ?? Number.NEGATIVE_INFINITY;
      if (!force && now - last < this.resendMs) continue;
      this.lastSent.set(ref.backendId, now);
      this.onWarmUp();
      unaryCall(
        this.clients.get(ref.address),
        BackendServiceDefinition.WarmUp,
        { service, frontendId: this.frontendId },
        { deadline: Date.now() + 5000 },
      ).then(
        (reply) => this.tracker.report(ref.backendId, reply.report, this.clock.now()),
        (err: unknown) => {
          this.tracker.markFailed(ref.backendId, this.clock.now());
          this.logger.warn({ backend: ref.backendId, err: statusOf(err).details }, "warm-up failed");
        },
      );
    }
  }

  forgetExcept(ids: Iterable<string>): void {
    const keep = new Set(ids);
    for (const id of this.lastSent.keys()) if (!keep.has(id)) this.lastSent.delete(id);
  }
}
