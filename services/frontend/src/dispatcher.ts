import { randomUUID } from "node:crypto";
import { type Random, SteadyClock } from "@infergrid/core";
import { NOT_RUN_KEY, unavailableMetadata } from "@infergrid/dataplane";
import { batchOf, requestCost, serviceMs } from "@infergrid/kairos";
import {
  BackendServiceDefinition,
  backend,
  RoutedExecuteDefinition,
  type RoutedExecuteReply,
  type RoutedInferRequest,
  type TensorShape,
} from "@infergrid/proto";
import { type ClientCache, GrpcStatusError, grpc, type Logger, statusOf, unaryCall } from "@infergrid/runtime";
import {
  DISPATCH_DEFAULTS,
  type DispatchAction,
  type DispatchEvent,
  type DispatchRefusal,
  type DispatchSettings,
  type DispatchState,
  type DispatchView,
  newDispatch,
  type ParkEnding,
  stepDispatch,
} from "@infergrid/swayam";
import type { BackendTracker } from "./backend-tracker.js";
import type { BackendRef, ServiceView } from "./service-table.js";

export interface DispatchTarget {
  frontendId: string;
  entry: ServiceView;
  n: number;
  /** The service time Swayam's pruning assumes; undefined when the service does not prune. */
  pruneServiceMs: number | undefined;
}

export interface DispatchResult {
  reply: RoutedExecuteReply;
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

/** What the frontend learns from any backend's answer (Execute or Park). */
export interface BackendAnswer {
  report?: backend.BackendReport.$Properties | null;
  computeMs?: number;
}

export interface DispatchHooks {
  onReply(backendId: string, reply: BackendAnswer, now: number): void;
  onRefusedCold(index: number): void;
}

/** A slot a backend holds for the request (late binding). */
interface HeldSlot extends BackendRef {
  holdId: string;
}

/** Floor of the per-attempt timeout derived from a service's latency threshold. */
const MIN_ATTEMPT_TIMEOUT_MS = 1000;

/** Errors no other backend would avoid: the request itself is at fault. */
const NO_RETRY = new Set([
  grpc.status.INVALID_ARGUMENT,
  grpc.status.NOT_FOUND,
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.FAILED_PRECONDITION,
]);

const REFUSAL: ReadonlyMap<backend.ExecuteStatus, DispatchRefusal> = new Map([
  [backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_BUSY, "busy"],
  [backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_COLD, "cold"],
  [backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_PROVISIONING, "provisioning"],
  [backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_DRAINING, "draining"],
  [backend.ExecuteStatus.EXECUTE_STATUS_REFUSED_NOT_ASSIGNED, "not-assigned"],
]);

const PARK_ENDING: ReadonlyMap<backend.ParkStatus, ParkEnding> = new Map([
  [backend.ParkStatus.PARK_STATUS_TIMED_OUT, "timed-out"],
  [backend.ParkStatus.PARK_STATUS_REFUSED_COLD, "cold"],
  [backend.ParkStatus.PARK_STATUS_REFUSED_DRAINING, "draining"],
  [backend.ParkStatus.PARK_STATUS_REFUSED_NOT_ASSIGNED, "not-assigned"],
  [backend.ParkStatus.PARK_STATUS_WITHDRAWN, "withdrawn"],
]);

const FAILURE_CODE = {
  unavailable: grpc.status.UNAVAILABLE,
  "deadline-exceeded": grpc.status.DEADLINE_EXCEEDED,
  pruned: grpc.status.DEADLINE_EXCEEDED,
  cancelled: grpc.status.CANCELLED,
} as const;

/**
 * Runs libs/swayam's dispatch machine over gRPC and timers: every decision (which entry, when to retry, park
 * or give up) is the machine's; this class makes the calls it asks for and feeds their outcomes back.
 */
export class Dispatcher {
  private readonly settings: DispatchSettings;
  /**
   * When each backend is believed free, from the Executes this frontend sent (Kairos's remaining time of a
   * busy instance, as far as this frontend knows: the others' requests show up as refusals and parking).
   */
  readonly busyUntil = new Map<string, number>();

  constructor(
    readonly clients: ClientCache,
    readonly tracker: BackendTracker,
    readonly random: Random,
    readonly options: DispatcherOptions,
    readonly logger: Logger,
    /** The frontend's clock: arrivals, deadlines and the machine's timers; a step of the wall clock does not move it. */
    readonly clock: SteadyClock = new SteadyClock(),
  ) {
    this.settings = { ...DISPATCH_DEFAULTS, retryGapMs: options.retryGapMs, parkWindowMs: options.parkWindowMs };
  }

  /**
   * Ends in the backend's answer, or rejects with a GrpcStatusError; exactly once. `signal`: the caller went away
   * (it rejects CANCELLED, its parks are withdrawn and its outstanding Execute is cancelled).
   */
  dispatch(
    current: () => DispatchTarget | undefined,
    request: RoutedInferRequest,
    batch: number,
    arrivedAt: number,
    deadline: number,
    hooks: DispatchHooks,
    signal?: AbortSignal,
  ): Promise<DispatchResult> {
    return new Promise((resolve, reject) => {
      new Flight(this, this.settings, current, request, batch, deadline, hooks, resolve, reject, signal).start(arrivedAt);
    });
  }

  /**
   * Gives a held slot back ({ holdId }), or withdraws a request's park and any slot held for it meanwhile
   * ({ parkId }). If this fails, the backend gives the slot back itself when the hold expires.
   */
  release(ref: BackendRef, what: backend.ReleaseRequest.$Properties): void {
    unaryCall(this.clients.get(ref.address), BackendServiceDefinition.Release, what, { deadline: Date.now() + 1000 }).catch(
      (err: unknown) => this.logger.debug({ err, backend: ref.backendId }, "release at a backend failed (its hold expires)"),
    );
  }

  /**
   * A backend that has not answered within twice the service's latency threshold has already missed it (a hung
   * or partitioned backend): the request moves on instead of waiting out the configured maximum.
   */
  attemptTimeoutMs(entry: ServiceView): number {
    return Math.min(this.options.attemptTimeoutMs, Math.max(MIN_ATTEMPT_TIMEOUT_MS, 2 * entry.sla.rtMaxMs));
  }
}

/** One request on its way through the dispatch machine. */
class Flight {
  private readonly state: DispatchState<string>;
  private readonly actions: DispatchAction<string, HeldSlot>[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private reply: { reply: RoutedExecuteReply; backendId: string } | undefined;
  /** The current park round: its id on the wire, the backends it went to, and the handle that cancels the calls. */
  private park: { round: number; parkId: string; refs: Map<string, BackendRef>; hung: AbortController } | undefined;
  private settled = false;
  private readonly onCancelled = () => this.feed({ kind: "cancelled" });

  constructor(
    private readonly d: Dispatcher,
    private readonly settings: DispatchSettings,
    private readonly current: () => DispatchTarget | undefined,
    private readonly request: RoutedInferRequest,
    /** The request's batch size: what it costs on each instance type depends on it. */
    private readonly batch: number,
    private readonly deadline: number,
    private readonly hooks: DispatchHooks,
    private readonly resolve: (r: DispatchResult) => void,
    private readonly reject: (err: unknown) => void,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.state = newDispatch(0, deadline - d.options.answerReserveMs);
  }

  start(arrivedAt: number): void {
    this.state.arrivedAt = arrivedAt;
    if (this.signal?.aborted) {
      this.feed({ kind: "cancelled" });
      return;
    }
    this.signal?.addEventListener("abort", this.onCancelled, { once: true });
    this.feed({ kind: "arrived" });
  }

  private feed(ev: DispatchEvent<HeldSlot>): void {
    const now = this.d.clock.now();
    const target = this.current();
    const list = target?.entry.backends ?? [];
    const tracker = this.d.tracker;
    const view: DispatchView<string> = {
      now,
      n: target?.n ?? 0,
      listLength: list.length,
      key: (i) => list[i]?.backendId ?? "",
      usable: (i) => tracker.usable(list[i]?.backendId ?? "", now),
      rtMaxMs: target?.entry.sla.rtMaxMs ?? Number.POSITIVE_INFINITY,
      pruneServiceMs: target?.pruneServiceMs,
      random: this.d.random,
      cost: this.costOf(target, list, now),
    };
    try {
      stepDispatch(this.state, ev, view, this.settings, this.actions);
      for (const a of this.actions.splice(0)) this.act(a, list, target);
      // A round's timer fired: whoever has not answered by now is hung; its call is cancelled (after the withdraw).
      if (ev.kind === "timer" && this.park?.round === ev.round) this.park.hung.abort();
    } catch (err) {
      this.settle(undefined, err);
    }
  }

  /** The price of each list entry for this request when the service runs on typed instances (Kairos). */
  private costOf(target: DispatchTarget | undefined, list: readonly BackendRef[], now: number): ((i: number) => number) | undefined {
    const pricing = target?.entry.pricing;
    if (pricing === undefined) return undefined;
    const waited = now - this.state.arrivedAt;
    return (i) => {
      const ref = list[i];
      if (ref === undefined) return Number.POSITIVE_INFINITY;
      const busyFor = Math.max(0, (this.d.busyUntil.get(ref.backendId) ?? 0) - now);
      return requestCost(pricing, ref.instanceType, this.batch, busyFor, waited);
    };
  }

  /** Notes the backend busy for this request's estimated service time there (typed services only). */
  private markBusy(ref: BackendRef, target: DispatchTarget, now: number): number | undefined {
    const profile = target.entry.pricing?.profiles.get(ref.instanceType);
    if (profile === undefined) return undefined;
    const until = Math.max(now, this.d.busyUntil.get(ref.backendId) ?? 0) + serviceMs(profile, this.batch);
    this.d.busyUntil.set(ref.backendId, until);
    return until;
  }

  private act(a: DispatchAction<string, HeldSlot>, list: readonly BackendRef[], target: DispatchTarget | undefined): void {
    switch (a.kind) {
      case "send": {
        const ref = a.hold ?? list[a.index];
        if (!ref || !target) throw new GrpcStatusError(grpc.status.INTERNAL, `dispatch: no list entry ${a.index}`);
        if (a.delayMs > 0) this.after(a.delayMs, () => this.execute(ref, target, a.attempt, a.hold?.holdId));
        else this.execute(ref, target, a.attempt, a.hold?.holdId);
        return;
      }
      case "park":
        if (target) this.sendParks(a, list, target);
        return;
      case "withdraw": {
        const p = this.park;
        if (!p || p.round !== a.round) return;
        // Withdrawn, not cancelled: a slot held while a cancel was on its way would be lost until its hold
        // expired; a withdrawn park's slot is given back by the backend, and a HELD reply still on its way
        // arrives and is released.
        for (const id of a.entries) {
          const ref = p.refs.get(id);
          if (ref) this.d.release(ref, { parkId: p.parkId });
        }
        return;
      }
      case "release":
        this.d.release(a.hold, { holdId: a.hold.holdId });
        return;
      case "warm":
        this.hooks.onRefusedCold(a.index);
        return;
      case "suspect":
        this.d.tracker.markFailed(a.entry, this.d.clock.now());
        return;
      case "timer":
        this.after(Math.max(0, a.at - this.d.clock.now()), () => this.feed({ kind: "timer", round: a.round }));
        return;
      case "answer":
        if (this.reply) this.settle({ ...this.reply, attempts: this.state.attempts });
        else this.settle(undefined, new GrpcStatusError(grpc.status.INTERNAL, "dispatch: answered without a reply"));
        return;
      case "fail": {
        const service = this.request.service;
        if (a.status === "rejected") {
          this.settle(undefined, new GrpcStatusError(a.code ?? grpc.status.UNKNOWN, a.message));
          return;
        }
        const code = FAILURE_CODE[a.status];
        const metadata = a.status === "unavailable" ? unavailableMetadata("frontend", this.d.options.retryAfterMs) : undefined;
        this.settle(undefined, new GrpcStatusError(code, `service ${service}: ${a.message}`, metadata));
        return;
      }
    }
  }

  /** One Execute call; its outcome goes back to the machine. */
  private execute(ref: BackendRef, target: DispatchTarget, attempt: number, holdId: string | undefined): void {
    if (this.settled) return;
    const now = this.d.clock.now();
    // Whole milliseconds: the attempt timeout follows the SLO, which may have a fraction, and the deadline is
    // written into the Execute as an integer.
    const callDeadline = Math.floor(Math.min(this.deadline, now + this.d.attemptTimeoutMs(target.entry)));
    const busyMark = this.markBusy(ref, target, now);
    const freed = () => {
      if (busyMark !== undefined && this.d.busyUntil.get(ref.backendId) === busyMark) this.d.busyUntil.delete(ref.backendId);
    };
    unaryCall(
      this.d.clients.get(ref.address),
      RoutedExecuteDefinition.Execute,
      {
        service: this.request.service,
        requestId: this.request.requestId,
        frontendId: target.frontendId,
        inputs: this.request.inputs,
        attempt,
        holdId,
        // Stamped on this process's steady clock, which the backend reads by its lag (dataplane sender-lag.ts).
        deadlineUnixMs: callDeadline,
      },
      // grpc-js takes the deadline on the wall clock and sends what is left of it. The caller's own signal: its
      // abort reaches this call after the machine has ended the request.
      { deadline: this.d.clock.toWall(callDeadline), ...(this.signal ? { signal: this.signal } : {}) },
    ).then(
      (reply) => {
        freed();
        this.hooks.onReply(ref.backendId, reply, this.d.clock.now());
        if (reply.status === backend.ExecuteStatus.EXECUTE_STATUS_OK) {
          this.reply = { reply, backendId: ref.backendId };
          this.feed({ kind: "answered" });
          return;
        }
        this.feed({ kind: "refused", reason: REFUSAL.get(reply.status ?? 0) ?? "busy" });
      },
      (err: unknown) => {
        freed();
        // Cancelled because its caller went away: nothing to learn of the backend.
        if (this.signal?.aborted) return;
        const s = statusOf(err);
        if (NO_RETRY.has(s.code)) {
          this.feed({ kind: "rejected", code: s.code, message: s.details });
          return;
        }
        if (s.code === grpc.status.DEADLINE_EXCEEDED && callDeadline === this.deadline) {
          // The request's own deadline ran out, not the backend's allowance: nothing to hold against it.
          this.feed({ kind: "expired" });
          return;
        }
        this.d.logger.warn(
          { backend: ref.backendId, code: grpc.status[s.code], details: s.details, requestId: this.request.requestId },
          "backend call failed; retrying elsewhere",
        );
        // Past the attempt's allowance (here, or the backend read it too late, or it said at once it could not make
        // it): the machine bounds how often.
        const notRun = s.code === grpc.status.DEADLINE_EXCEEDED && s.metadata.get(NOT_RUN_KEY).length > 0 ? s.details : undefined;
        this.feed({ kind: "failed", timedOut: s.code === grpc.status.DEADLINE_EXCEEDED, ...(notRun === undefined ? {} : { notRun }) });
      },
    );
  }

  /** Park calls to the round's entries at once; each answer goes back to the machine as held or park-ended. */
  private sendParks(
    a: Extract<DispatchAction<string, HeldSlot>, { kind: "park" }>,
    list: readonly BackendRef[],
    target: DispatchTarget,
  ): void {
    const waitMs = Math.max(1, Math.round(a.waitMs));
    const round = { round: a.round, parkId: randomUUID(), refs: new Map<string, BackendRef>(), hung: new AbortController() };
    this.park = round;
    a.indices.forEach((index, t) => {
      const ref = list[index];
      if (!ref) {
        this.feed({ kind: "park-ended", round: a.round, target: t, how: "error" });
        return;
      }
      round.refs.set(ref.backendId, ref);
      unaryCall(
        this.d.clients.get(ref.address),
        BackendServiceDefinition.Park,
        {
          service: this.request.service,
          parkId: round.parkId,
          frontendId: target.frontendId,
          ageMs: Math.round(a.ageMs),
          waitMs,
          batch: this.batch,
        },
        { deadline: Date.now() + waitMs + this.settings.parkAnswerGraceMs, signal: round.hung.signal },
      ).then(
        (reply) => {
          this.hooks.onReply(ref.backendId, { report: reply.report }, this.d.clock.now());
          if (reply.status === backend.ParkStatus.PARK_STATUS_HELD && reply.holdId) {
            this.feed({ kind: "held", round: a.round, target: t, hold: { ...ref, holdId: reply.holdId } });
            return;
          }
          this.feed({ kind: "park-ended", round: a.round, target: t, how: PARK_ENDING.get(reply.status ?? 0) ?? "error" });
        },
        (err: unknown) => {
          const how = statusOf(err).code === grpc.status.UNAVAILABLE ? "unreachable" : "error";
          this.feed({ kind: "park-ended", round: a.round, target: t, how });
        },
      );
    });
  }

  private after(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      run();
    }, ms);
    this.timers.add(timer);
  }

  private settle(result: DispatchResult | undefined, err?: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.signal?.removeEventListener("abort", this.onCancelled);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    if (result) this.resolve(result);
    else this.reject(err);
  }
}

/** A request's batch size: the first dimension of its inputs (libs/kairos `batchOf`). */
export function requestBatch(shapes: ReadonlyMap<string, TensorShape | null>): number {
  return batchOf([...shapes.values()].map((t) => t?.dims ?? []));
}
