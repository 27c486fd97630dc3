import { setTimeout as sleep } from "node:timers/promises";
import type { Random } from "@infergrid/core";
import { unavailableMetadata } from "@infergrid/dataplane";
import { BackendServiceDefinition, backend, type inference } from "@infergrid/proto";
import { type ClientCache, GrpcStatusError, grpc, type Logger, statusOf, unaryCall } from "@infergrid/runtime";
import { isPastSaving, ROUND_BACKOFF_DEFAULTS, roundBackoffMs } from "@infergrid/swayam";
import type { BackendTracker } from "./backend-tracker.js";
import type { ServiceView } from "./service-table.js";

/** Chooses a list index inside the first n usable entries, avoiding `excluded` (Swayam's prefix rule). */
export type PickBackend = (
  n: number,
  usable: (index: number) => boolean,
  excluded: ReadonlySet<number>,
  random: Random,
  listLength: number,
) => number | undefined;

export interface DispatchTarget {
  frontendId: string;
  entry: ServiceView;
  n: number;
}

export interface DispatchResult {
  reply: backend.ExecuteReply.$Properties;
  backendId: string;
  attempts: number;
}

export interface DispatcherOptions {
  retryGapMs: number;
  attemptTimeoutMs: number;
  /** Hint given with UNAVAILABLE when nothing could take the request in time. */
  retryAfterMs: number;
  /** Time kept back before the deadline so that a give-up answer still reaches the caller in time. */
  answerReserveMs: number;
}

/** Swayam's optional pruning: a request that can no longer finish within RT_max is dropped instead of retried. */
export interface PruneRule {
  arrivedAt: number;
  rtMaxMs: number;
  expectedServiceMs: number;
}

export interface DispatchHooks {
  onReply(backendId: string, reply: backend.ExecuteReply.$Properties, now: number): void;
  onRefusedCold(index: number): void;
}

/** Floor of the per-attempt timeout derived from a service's latency threshold. */
const MIN_ATTEMPT_TIMEOUT_MS = 1000;

const NO_RETRY = new Set([
  grpc.status.INVALID_ARGUMENT,
  grpc.status.NOT_FOUND,
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.FAILED_PRECONDITION,
]);

/**
 * Random dispatch with retries inside the service's prefix. A refused request is retried on
 * another backend after the gap delta; a backend that cannot be reached is marked failed and the
 * request goes elsewhere at once. The frontend never queues: when the deadline is too close to
 * try again, the request ends with UNAVAILABLE and a retry hint.
 */
export class Dispatcher {
  constructor(
    private readonly clients: ClientCache,
    private readonly tracker: BackendTracker,
    private readonly pick: PickBackend,
    private readonly random: Random,
    private readonly options: DispatcherOptions,
    private readonly logger: Logger,
  ) {}

  async dispatch(
    current: () => DispatchTarget | undefined,
    request: inference.InferRequest.$Properties,
    deadline: number,
    hooks: DispatchHooks,
    prune?: PruneRule,
  ): Promise<DispatchResult> {
    const tried = new Set<string>();
    const startedAt = Date.now();
    const giveUpAt = deadline - this.options.answerReserveMs;
    let attempts = 0;
    let refusals = 0;
    let rounds = 0;
    for (;;) {
      const now = Date.now();
      const target = current();
      if (!target) throw new GrpcStatusError(grpc.status.NOT_FOUND, `service ${JSON.stringify(request.service)} is not registered`);
      const list = target.entry.backends;
      if (list.length === 0) {
        throw new GrpcStatusError(
          grpc.status.UNAVAILABLE,
          `service ${request.service} has no backends`,
          unavailableMetadata("frontend", this.options.retryAfterMs),
        );
      }
      const excluded = new Set<number>();
      list.forEach((b, i) => {
        if (tried.has(b.backendId)) excluded.add(i);
      });
      let index = this.pick(target.n, (i) => this.tracker.usable(list[i]?.backendId ?? "", now), excluded, this.random, list.length);
      if (index === undefined && tried.size > 0) {
        // Every backend of the prefix was tried: start a new round, young requests backing off so
        // that a saturated service is not hammered by its own retries (old ones go first).
        tried.clear();
        rounds += 1;
        const rtMaxMs = target.entry.spec.sla?.latencyThresholdMs || Number.POSITIVE_INFINITY;
        const backoff = { deltaMs: this.options.retryGapMs, ...ROUND_BACKOFF_DEFAULTS };
        if (!(await this.waitGap(giveUpAt, roundBackoffMs(rounds, now - startedAt, rtMaxMs, backoff)))) break;
        continue;
      }
      if (index === undefined) {
        // Nothing usable (all failed recently): probe one of the prefix rather than give up.
        index = Math.floor(this.random.uniform() * Math.max(1, Math.min(target.n, list.length)));
      }
      const ref = list[index];
      if (!ref) break;
      if (prune && isPastSaving(Date.now(), prune.arrivedAt, prune.expectedServiceMs, prune.rtMaxMs, attempts)) {
        throw new GrpcStatusError(
          grpc.status.DEADLINE_EXCEEDED,
          `pruned after ${attempts} attempts: it can no longer finish within the service's ${prune.rtMaxMs} ms latency threshold`,
        );
      }
      if (Date.now() + this.options.retryGapMs >= giveUpAt) break;
      attempts += 1;
      tried.add(ref.backendId);
      try {
        const reply = await unaryCall(
          this.clients.get(ref.address),
          BackendServiceDefinition.Execute,
          {
            service: request.service,
            requestId: request.requestId,
            frontendId: target.frontendId,
            inputs: request.inputs,
            attempt: attempts,
          },
          { deadline: Math.min(deadline, Date.now() + this.attemptTimeoutMs(target.entry)) },
        );
        hooks.onReply(ref.backendId, reply, Date.now());
        if (reply.status === backend.ExecuteStatus.EXECUTE_STATUS_OK) return { reply, backendId: ref.backendId, attempts };
        refusals += 1;
        if (reply.status === backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_COLD) hooks.onRefusedCold(index);
        if (!(await this.waitGap(giveUpAt))) break;
      } catch (err) {
        const s = statusOf(err);
        if (NO_RETRY.has(s.code)) throw new GrpcStatusError(s.code, s.details);
        if (Date.now() >= giveUpAt) break;
        this.tracker.markFailed(ref.backendId, Date.now());
        this.logger.warn(
          { backend: ref.backendId, code: grpc.status[s.code], details: s.details, requestId: request.requestId },
          "backend call failed; retrying elsewhere",
        );
      }
    }
    if (attempts === 0 && Date.now() >= giveUpAt) {
      throw new GrpcStatusError(grpc.status.DEADLINE_EXCEEDED, "deadline passed before any backend was tried");
    }
    throw new GrpcStatusError(
      grpc.status.UNAVAILABLE,
      `no backend of ${request.service} could take the request before its deadline (${attempts} attempts, ${refusals} refusals)`,
      unavailableMetadata("frontend", this.options.retryAfterMs),
    );
  }

  /**
   * A backend that has not answered within twice the service's latency threshold has already
   * missed it (a hung or partitioned backend): the request moves on instead of waiting out the
   * configured maximum.
   */
  private attemptTimeoutMs(entry: ServiceView): number {
    const rtMax = entry.spec.sla?.latencyThresholdMs ?? 0;
    if (!(rtMax > 0)) return this.options.attemptTimeoutMs;
    return Math.min(this.options.attemptTimeoutMs, Math.max(MIN_ATTEMPT_TIMEOUT_MS, 2 * rtMax));
  }

  private async waitGap(deadline: number, gapMs = this.options.retryGapMs): Promise<boolean> {
    if (Date.now() + gapMs >= deadline) return false;
    if (gapMs > 0) await sleep(gapMs);
    return true;
  }
}
