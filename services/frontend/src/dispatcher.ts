import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Random } from "@infergrid/core";
import { unavailableMetadata } from "@infergrid/dataplane";
import { BackendServiceDefinition, backend, type inference } from "@infergrid/proto";
import { type ClientCache, GrpcStatusError, grpc, type Logger, statusOf, unaryCall } from "@infergrid/runtime";
import {
  effectivePrefix,
  hasUntried,
  isPastSaving,
  PARK_DEFAULTS,
  parkTargets,
  ROUND_BACKOFF_DEFAULTS,
  roundBackoffMs,
} from "@infergrid/swayam";
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
  /** Late binding: how long a refused request parks at its prefix per round (0: Swayam's probing only). */
  parkWindowMs: number;
}

/** A slot a backend holds for the request (late binding). */
interface HeldSlot {
  backendId: string;
  address: string;
  holdId: string;
}

/** Past the park window, a backend's answer has this long to arrive before the round is given up. */
const PARK_ANSWER_GRACE_MS = 200;

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
    let held: HeldSlot | undefined;
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
      if (held) {
        // Run in the slot a backend holds for this request, unless it can no longer make it.
        const slot = held;
        held = undefined;
        if (prune && isPastSaving(Date.now(), prune.arrivedAt, prune.expectedServiceMs, prune.rtMaxMs, 1)) {
          this.release(slot, { holdId: slot.holdId });
          throw new GrpcStatusError(
            grpc.status.DEADLINE_EXCEEDED,
            `pruned after ${attempts} attempts: it can no longer finish within the service's ${prune.rtMaxMs} ms latency threshold`,
          );
        }
        attempts += 1;
        const outcome = await this.execute(slot, target, request, deadline, hooks, attempts, slot.holdId);
        if (outcome.kind === "ok") return { reply: outcome.reply, backendId: slot.backendId, attempts };
        if (outcome.kind === "refused") refusals += 1;
        continue;
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
      const outcome = await this.execute(ref, target, request, deadline, hooks, attempts);
      if (outcome.kind === "ok") return { reply: outcome.reply, backendId: ref.backendId, attempts };
      if (outcome.kind === "failed") {
        if (Date.now() >= giveUpAt) break;
        continue;
      }
      refusals += 1;
      if (outcome.status === backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_COLD) hooks.onRefusedCold(index);
      const parkable =
        outcome.status === backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY ||
        outcome.status === backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_PROVISIONING;
      if (parkable && this.options.parkWindowMs > 0) {
        // Late binding once every entry of the round has refused (one may be free: probe it at once).
        excluded.add(index);
        if (hasUntried(target.n, (i) => this.tracker.usable(list[i]?.backendId ?? "", now), excluded, list.length)) continue;
        // Wait at every prefix entry at once for the first slot that frees; none in the window, and the
        // request probes again (entries that joined the prefix meanwhile hold no park).
        held = await this.park(target, request, startedAt, giveUpAt, hooks, prune);
        if (held) continue;
        tried.clear();
      }
      if (!(await this.waitGap(giveUpAt))) break;
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

  /** One Execute call: the reply, or the call failed (the backend is then skipped for a while). */
  private async execute(
    ref: { backendId: string; address: string },
    target: DispatchTarget,
    request: inference.InferRequest.$Properties,
    deadline: number,
    hooks: DispatchHooks,
    attempt: number,
    holdId?: string,
  ): Promise<
    { kind: "ok"; reply: backend.ExecuteReply.$Properties } | { kind: "refused"; status: backend.ExecuteStatus } | { kind: "failed" }
  > {
    try {
      const reply = await unaryCall(
        this.clients.get(ref.address),
        BackendServiceDefinition.Execute,
        {
          service: request.service,
          requestId: request.requestId,
          frontendId: target.frontendId,
          inputs: request.inputs,
          attempt,
          ...(holdId ? { holdId } : {}),
        },
        { deadline: Math.min(deadline, Date.now() + this.attemptTimeoutMs(target.entry)) },
      );
      hooks.onReply(ref.backendId, reply, Date.now());
      if (reply.status === backend.ExecuteStatus.EXECUTE_STATUS_OK) return { kind: "ok", reply };
      return { kind: "refused", status: reply.status ?? backend.ExecuteStatus.EXECUTE_STATUS_UNSPECIFIED };
    } catch (err) {
      const s = statusOf(err);
      if (NO_RETRY.has(s.code)) throw new GrpcStatusError(s.code, s.details);
      this.tracker.markFailed(ref.backendId, Date.now());
      this.logger.warn(
        { backend: ref.backendId, code: grpc.status[s.code], details: s.details, requestId: request.requestId },
        "backend call failed; retrying elsewhere",
      );
      return { kind: "failed" };
    }
  }

  /**
   * One park round: a Park call to PARK_DEFAULTS.fanout usable entries of the prefix at once (at random); the
   * first slot held for the request wins, the other calls are withdrawn and any other slot held meanwhile is
   * released. Undefined when
   * no slot came within the window (or the request could not wait that long).
   */
  private park(
    target: DispatchTarget,
    request: inference.InferRequest.$Properties,
    startedAt: number,
    giveUpAt: number,
    hooks: DispatchHooks,
    prune: PruneRule | undefined,
  ): Promise<HeldSlot | undefined> {
    const now = Date.now();
    const list = target.entry.backends;
    const prefix = parkTargets(
      effectivePrefix(target.n, (i) => this.tracker.usable(list[i]?.backendId ?? "", now), list.length),
      PARK_DEFAULTS.fanout,
      this.random,
    );
    let waitMs = Math.min(this.options.parkWindowMs, giveUpAt - now - this.options.retryGapMs);
    if (prune) waitMs = Math.min(waitMs, prune.arrivedAt + prune.rtMaxMs - prune.expectedServiceMs - now);
    waitMs = Math.floor(waitMs);
    if (prefix.length === 0 || waitMs < 1) return Promise.resolve(undefined);
    const parkId = randomUUID();
    const hung = new AbortController();
    return new Promise<HeldSlot | undefined>((resolve) => {
      let winner: HeldSlot | undefined;
      let settled = false;
      let open = prefix.length;
      const answered = new Set<string>();
      const finish = () => {
        if (settled) return;
        settled = true;
        clearTimeout(giveUp);
        // Withdrawn, not cancelled: a slot held while a cancel was on its way would be lost until its hold
        // expired; a withdrawn request's slot is given back by the backend, and a HELD reply still on its way
        // arrives and is released.
        for (const index of prefix) {
          const ref = list[index];
          if (ref && ref.backendId !== winner?.backendId && !answered.has(ref.backendId)) this.release(ref, { parkId });
        }
        resolve(winner);
      };
      const giveUp = setTimeout(() => {
        finish();
        hung.abort();
      }, waitMs + PARK_ANSWER_GRACE_MS);
      for (const index of prefix) {
        const ref = list[index];
        if (!ref) continue;
        unaryCall(
          this.clients.get(ref.address),
          BackendServiceDefinition.Park,
          { service: request.service, parkId, frontendId: target.frontendId, ageMs: now - startedAt, waitMs },
          { deadline: now + waitMs + PARK_ANSWER_GRACE_MS, signal: hung.signal },
        )
          .then(
            (reply) => {
              answered.add(ref.backendId);
              hooks.onReply(ref.backendId, { report: reply.report }, Date.now());
              if (reply.status === backend.ParkStatus.PARK_STATUS_REFUSED_COLD) hooks.onRefusedCold(index);
              if (reply.status === backend.ParkStatus.PARK_STATUS_HELD && reply.holdId) {
                const slot = { backendId: ref.backendId, address: ref.address, holdId: reply.holdId };
                if (settled) this.release(slot, { holdId: slot.holdId });
                else {
                  winner = slot;
                  finish();
                }
              }
            },
            (err: unknown) => {
              const s = statusOf(err);
              if (s.code === grpc.status.UNAVAILABLE) this.tracker.markFailed(ref.backendId, Date.now());
            },
          )
          .finally(() => {
            open -= 1;
            if (open === 0) finish();
          });
      }
    });
  }

  /**
   * Gives a held slot back ({ holdId }), or withdraws a request's park and any slot held for it meanwhile
   * ({ parkId }). If this fails, the backend gives the slot back itself when the hold expires.
   */
  private release(ref: { backendId: string; address: string }, what: backend.ReleaseRequest.$Properties): void {
    unaryCall(this.clients.get(ref.address), BackendServiceDefinition.Release, what, { deadline: Date.now() + 1000 }).catch(
      (err: unknown) => this.logger.debug({ err, backend: ref.backendId }, "release at a backend failed (its hold expires)"),
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
