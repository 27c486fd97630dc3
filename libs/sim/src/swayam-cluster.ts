/**
 * Swayam's serving discipline, driving the production code: every simulated frontend wraps a
 * libs/swayam FrontendScaler per job (as services/frontend's SwayamScaler does, with the same options),
 * dispatches with pickBackend inside its prefix, and every backend is a libs/swayam BackendMachine. The lists
 * come from the global allocator's policy (libs/allocation), run at time 0; with a slow loop, the allocator's
 * ShareController re-plans them every tick from the predictor's forecasts (SimPredictor, the predictor's
 * forecasters) and each job's outcomes, and the shares become lists through libs/allocation's
 * shareAllocationPolicy, as in services/global-allocator. A backend taken out of a list drains (finishes what
 * it holds, unloads) and is cold for the list it joins.
 *
 * The request path is libs/swayam's dispatch machine (stepDispatch), the very code services/frontend's
 * Dispatcher runs: this class only carries out its actions over the event queue (send -> PROBE or CLAIM one hop
 * later, park -> PARK, timer -> PARK_TIMEOUT, release -> RELEASE, answer and fail -> the request completes or
 * is dropped) and feeds the outcomes back. Backends are libs/swayam BackendSlots over a BackendMachine, as in
 * services/backend-worker: busy, cold and provisioning backends refuse; a park waits in the backend's lot and a
 * slot that frees is held for the oldest live request parked there. A warm backend idle for T decommissions
 * itself (checkIdle at its idleDeadline). Each autoscaling tick warms the cold entries of the prefix (Warmer).
 *
 * Network: each hop (broker-frontend, frontend-backend and back) costs hopMs; the broker hops are constant and
 * added to the latency, the frontend-backend ones are events (the backend's state is read on arrival there).
 *
 * Simplifications, stated: the services withdraw the other parks of a round with a message (one hop); here they
 * end the moment the round ends (a backend's lot asks the machine whether the park still waits), so a backend
 * never holds a slot for a request already taken elsewhere, and park calls need no answer grace. No call fails
 * here (no backend is ever suspected). The frontend reads a backend's true state when deciding what to warm
 * (the service reads the last state the backend reported); both warm exactly the cold entries except around a
 * state change.
 */
import {
  type AllocationDecision,
  type PlannedSpec,
  type ServiceShare,
  ShareController,
  type ShareService,
  type ShareSignal,
  shareAllocationPolicy,
  shareInput,
} from "@infergrid/allocation";
import { type Lognormal, lognormalMean } from "@infergrid/core";
import {
  type ActionSink,
  BackendMachine,
  BackendSlots,
  DISPATCH_DEFAULTS,
  type DispatchAction,
  type DispatchEvent,
  type DispatchSettings,
  type DispatchState,
  type DispatchView,
  FrontendScaler,
  isParkedIn,
  newDispatch,
  PRUNE_SERVICE_QUANTILE,
  PruneBudget,
  type RefusalReason,
  type ServiceSla,
  staticPrefixLength,
  stepDispatch,
} from "@infergrid/swayam";
import { type JobSpec, type LoanHook, type LoanSurface, SIM_LIMITS, type SlowLoopSettings } from "./config.js";
import { type ClusterModel, FIRST_MODEL_EVENT, LOAN_EVENT, type Simulation } from "./engine.js";
import { meanServiceMs, servicePercentileMs } from "./policies.js";
import { SimPredictor } from "./signals.js";

const TICK = FIRST_MODEL_EVENT;
const PROBE = FIRST_MODEL_EVENT + 1;
const DONE = FIRST_MODEL_EVENT + 2;
const REPLY = FIRST_MODEL_EVENT + 3;
const REFUSED = FIRST_MODEL_EVENT + 4;
const LOADED = FIRST_MODEL_EVENT + 6;
const IDLE = FIRST_MODEL_EVENT + 7;
const SLOW = FIRST_MODEL_EVENT + 8;
const PARK = FIRST_MODEL_EVENT + 9;
const READY = FIRST_MODEL_EVENT + 10;
const CLAIM = FIRST_MODEL_EVENT + 11;
const RELEASE = FIRST_MODEL_EVENT + 12;
const PARK_COLD = FIRST_MODEL_EVENT + 13;
const PARK_TIMEOUT = FIRST_MODEL_EVENT + 14;
const PARK_DRAINING = FIRST_MODEL_EVENT + 15;

/** Park messages carry (round, target, backend) in one number: backends and park targets below these bounds. */
const BACKEND_SLOTS = SIM_LIMITS.backends;
const TARGET_SLOTS = 8;
const parkMessage = (round: number, target: number, b: number) => (round * TARGET_SLOTS + target) * BACKEND_SLOTS + b;
const messageBackend = (m: number) => m % BACKEND_SLOTS;
const messageTarget = (m: number) => Math.floor(m / BACKEND_SLOTS) % TARGET_SLOTS;
const messageRound = (m: number) => Math.floor(m / (BACKEND_SLOTS * TARGET_SLOTS));
/** A parking-lot entry: request slot, round (mod ROUND_SLOTS, enough to tell a slot's live round from old ones) and target. */
const ROUND_SLOTS = 4096;
const lotItem = (req: number, round: number, target: number) => (req * ROUND_SLOTS + (round % ROUND_SLOTS)) * TARGET_SLOTS + target;
const itemRequest = (item: number) => Math.floor(item / (ROUND_SLOTS * TARGET_SLOTS));
const itemRound = (item: number) => Math.floor(item / TARGET_SLOTS) % ROUND_SLOTS;
const itemTarget = (item: number) => item % TARGET_SLOTS;

const IDLE_SLACK_MS = 0.001;

const REASONS: RefusalReason[] = ["busy", "cold", "provisioning", "draining"];
const REFUSALS: DispatchEvent<number>[] = REASONS.map((reason) => ({ kind: "refused", reason }));
const ARRIVED: DispatchEvent<number> = { kind: "arrived" };
const ANSWERED: DispatchEvent<number> = { kind: "answered" };

/**
 * One dispatch step's actions, in storage kept from step to step: an array emptied with `length = 0` after every
 * step gave up its storage, and the next step's first push allocated a new one.
 */
class ActionBuffer implements ActionSink<number, number> {
  readonly items: DispatchAction<number, number>[] = [];
  count = 0;

  push(action: DispatchAction<number, number>): void {
    this.items[this.count++] = action;
  }
}

export interface SwayamSnapshot {
  /** n per frontend per job at the end (frontend-major). */
  n: number[][];
  lists: string[][];
}

export class SwayamCluster implements ClusterModel, LoanSurface {
  private readonly J: number;
  private readonly F: number;
  private readonly backends: BackendMachine[];
  /** Per backend, late binding over its machine: the requests parked there, as lotItem numbers. */
  private readonly slots: BackendSlots<number>[];
  private readonly backendIds: string[];
  /** The list a backend is in (-1: free). */
  private readonly backendJob: Int32Array;
  /** The job a backend is loaded (or loading) for: its backend-seconds go there. */
  private readonly chargedTo: Int32Array;
  private readonly since: Float64Array;
  private readonly idlePending: Uint8Array;
  private lists: Int32Array[] = [];
  private readonly scalers: FrontendScaler[] = [];
  private readonly nCache: Int32Array;
  private readonly frontendIds: string[];
  private readonly rr: Int32Array;
  private minWarm: number[] = [];
  private readonly slas: ServiceSla[];
  private readonly priors: (Lognormal | undefined)[];
  private readonly names: string[];
  private readonly brokerMs: number;
  private readonly expectedServiceMs: number[];
  private readonly pruneServiceMs: number[];
  /** Per frontend and job (frontend-major), what pruning may still drop; undefined without pruning. */
  private readonly pruneBudgets: PruneBudget[] | undefined;
  private readonly slowLoop: SlowLoopSettings | undefined;
  private readonly predictor: SimPredictor | undefined;
  private readonly controller: ShareController | undefined;
  /** The loans' second plan, at their floor quantile (libs/fapes LOAN_FLOOR_PLAN), fed what the first is fed. */
  private readonly floorController: ShareController | undefined;
  private readonly planned: PlannedSpec[];
  /** Per request slot, its dispatch machine state (reused by the slot's next request). */
  private readonly flights: DispatchState<number>[] = [];
  private readonly settings: DispatchSettings;
  /** The view a dispatch step decides on, refilled per step (entries are backend numbers, holds too). */
  private readonly view: DispatchView<number>;
  private viewList: Int32Array = new Int32Array(0);
  private readonly actions = new ActionBuffer();
  /** Best-effort jobs' loans (FaPES); undefined: none, and nothing below depends on them. */
  private readonly loans: LoanHook | undefined;
  /** Backends loaned or on their way back: out of the pool the lists are planned over. */
  private readonly withheld: Uint8Array;
  private withheldCount = 0;
  /** Bumped whenever a plan changes a list, a backend's list or a warm floor. */
  private listsVersion = 0;
  /** The shares of the last plan that changed nothing, and the lists' version it left (planFromShares). */
  private steadyPlan: { key: number[]; version: number } | undefined;

  constructor(private readonly sim: Simulation) {
    const c = sim.config;
    this.J = c.jobs.length;
    this.F = Math.max(1, c.swayam.frontends);
    this.backends = [];
    this.backendIds = [];
    for (let i = 0; i < c.capacity; i++) {
      this.backends.push(new BackendMachine({ concurrency: 1, idleTimeoutMs: c.idleTimeoutMs, frontendWindowMs: c.swayam.tSetupMs }));
      this.backendIds.push(`b${String(i).padStart(4, "0")}`);
    }
    if (c.capacity > BACKEND_SLOTS) throw new Error(`swayam cluster: at most ${BACKEND_SLOTS} backends`);
    const r = sim.requests;
    this.slots = this.backends.map(
      (machine) =>
        new BackendSlots<number>(machine, {
          isLive: (item) => this.isLive(item),
          frontendOf: (item) => this.frontendIds[r.frontend[itemRequest(item)] as number] as string,
          serviceOf: (item) => this.names[r.job[itemRequest(item)] as number],
        }),
    );
    this.backendJob = new Int32Array(c.capacity).fill(-1);
    this.chargedTo = new Int32Array(c.capacity).fill(-1);
    this.since = new Float64Array(c.capacity).fill(Number.NaN);
    this.idlePending = new Uint8Array(c.capacity);
    this.nCache = new Int32Array(this.F * this.J);
    this.frontendIds = Array.from({ length: this.F }, (_, f) => `f${f}`);
    this.rr = new Int32Array(this.J);
    this.names = c.jobs.map((j) => j.name);
    this.slas = c.jobs.map((j) => ({ rtMaxMs: j.sloMs, slMin: j.slMin, burstFactor: j.burstFactor }));
    this.priors = c.jobs.map((j) => (j.serviceTime.kind === "lognormal" ? j.serviceTime.dist : undefined));
    this.brokerMs = 2 * c.hopMs;
    // services/frontend prunes with the backends' smoothed compute time, which settles at the mean.
    this.expectedServiceMs = c.jobs.map((j) => meanServiceMs(j.serviceTime));
    // ...and judges lateness with the recent compute times' PRUNE_SERVICE_QUANTILE, which settles at the profile's.
    this.pruneServiceMs = c.jobs.map((j) => servicePercentileMs(j.serviceTime, PRUNE_SERVICE_QUANTILE));
    const budget = c.swayam.pruneBudget;
    this.pruneBudgets =
      c.swayam.prune === true && budget !== undefined
        ? Array.from({ length: this.F * this.J }, (_, i) => new PruneBudget(1 - (c.jobs[i % this.J] as JobSpec).slMin, budget))
        : undefined;
    this.slowLoop = c.swayam.slowLoop;
    this.settings = {
      ...DISPATCH_DEFAULTS,
      retryGapMs: c.swayam.retryGapMs,
      parkWindowMs: c.swayam.park?.windowMs ?? 0,
      parkAnswerGraceMs: 0,
    };
    if (this.settings.parkFanout > TARGET_SLOTS) throw new Error(`swayam cluster: park fanout above ${TARGET_SLOTS}`);
    this.view = {
      now: 0,
      n: 0,
      listLength: 0,
      key: (i) => this.viewList[i] as number,
      rtMaxMs: 0,
      pruneServiceMs: undefined,
      random: sim.dispatchRandom,
    };
    // Under the slow loop a service registers without a cap (the real services' default): its share is the
    // loop's to set. Without it, the experiment's list lengths are the caps of the static split.
    this.planned = c.jobs.map((job, j) => ({
      name: job.name,
      minBackends: 1,
      maxBackends: this.slowLoop ? 0 : (c.swayam.listLengths[j] ?? 0),
      initialBackends: c.swayam.minWarm[j] ?? 1,
      latencyThresholdMs: job.sloMs,
      percentile: job.slMin * 100,
      ...(job.serviceTime.kind === "lognormal" ? { profileMeanMs: lognormalMean(job.serviceTime.dist) } : {}),
    }));
    if (this.slowLoop) {
      this.predictor = new SimPredictor(c.jobs, this.slowLoop.predictor);
      this.controller = new ShareController({ ...this.slowLoop.controller, stepMs: this.slowLoop.predictor.stepMs });
    }
    this.withheld = new Uint8Array(c.capacity);
    this.loans = c.swayam.loans?.(sim, this);
    const floorPlan = this.loans?.floorPlan;
    if (this.slowLoop && floorPlan !== undefined)
      this.floorController = new ShareController({ ...this.slowLoop.controller, stepMs: this.slowLoop.predictor.stepMs, plan: floorPlan });
  }

  start(): void {
    const c = this.sim.config;
    const s = c.swayam;
    this.lists = c.jobs.map(() => new Int32Array(0));
    this.loans?.start();
    this.applyPlan(s.allocate(this.allocationInput()));

    for (let f = 0; f < this.F; f++) {
      for (let j = 0; j < this.J; j++) {
        const list = this.lists[j] as Int32Array;
        const initialN = Math.min(list.length, Math.max(1, s.bootstrap[j] ?? 1, this.minWarm[j] ?? 1));
        this.scalers.push(
          new FrontendScaler({
            tSetupMs: s.tSetupMs,
            rateWindowMs: s.rateWindowMs,
            rateHistoryMs: s.rateHistoryMs,
            scaleInCooldownMs: s.scaleInCooldownMs,
            probeCostMs: (s.modelRttMs ?? 2 * c.hopMs) + s.retryGapMs,
            fixedDelayMs: s.modelRttMs ?? 2 * c.hopMs,
            initialN,
            ...(s.countingLeadMs ? { countingSince: -s.countingLeadMs } : {}),
            ...(s.learnedHeadroom === true ? { learnedHeadroom: true } : {}),
          }),
        );
        this.nCache[f * this.J + j] = initialN;
      }
    }
    // Bootstrap: the first entries of each list are warm at time 0 (not cold starts).
    for (let j = 0; j < this.J; j++) {
      const list = this.lists[j] as Int32Array;
      const warm = Math.min(list.length, Math.max(s.bootstrap[j] ?? 1, 0));
      for (let i = 0; i < warm; i++) {
        const b = list[i] as number;
        const be = this.backends[b] as BackendMachine;
        be.warmUp(0, this.names[j] as string);
        be.loadFinished(0);
        this.since[b] = 0;
        this.chargedTo[b] = j;
        this.ensureIdleCheck(b);
      }
    }
    // Frontends' timers are not synchronised: stagger them over one period.
    for (let f = 0; f < this.F; f++) this.sim.schedule((f * s.autoscaleMs) / this.F, TICK, f);
    if (this.slowLoop) this.sim.schedule(this.slowLoop.tickMs, SLOW, 0);
  }

  arrive(req: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const j = r.job[req] as number;
    const f = (this.rr[j] as number) % this.F;
    this.rr[j] = f + 1;
    r.frontend[req] = f;
    this.predictor?.arrival(j, sim.now);
    this.loans?.arrival?.(j, sim.now);
    (this.scalers[f * this.J + j] as FrontendScaler).recordArrival(sim.now);
    this.pruneBudgets?.[f * this.J + j]?.recordArrival(sim.now);
    this.flights[req] = newDispatch(sim.now, sim.now + sim.config.dropAfterMs, this.flights[req]);
    this.step(req, ARRIVED);
  }

  handle(kind: number, a: number, b: number): void {
    switch (kind) {
      case PROBE:
        this.probe(a);
        return;
      case DONE:
        this.done(a);
        return;
      case REPLY:
        this.reply(a, b);
        return;
      case REFUSED:
        this.refused(a, b);
        return;
      case LOADED: {
        (this.backends[a] as BackendMachine).loadFinished(this.sim.now);
        this.loans?.backendWarm?.(a, this.sim.now);
        this.serveParked(a);
        this.ensureIdleCheck(a);
        return;
      }
      case PARK:
        this.parkAt(a, b);
        return;
      case READY:
        this.ready(a, b);
        return;
      case CLAIM:
        this.compute(a, this.sim.requests.backend[a] as number);
        return;
      case RELEASE:
        this.freeSlot(a);
        return;
      case PARK_COLD:
      case PARK_DRAINING:
        this.step(a, {
          kind: "park-ended",
          round: messageRound(b),
          target: messageTarget(b),
          how: kind === PARK_COLD ? "cold" : "draining",
        });
        return;
      case PARK_TIMEOUT:
        this.step(a, { kind: "timer", round: b });
        return;
      case IDLE:
        this.idle(a);
        return;
      case TICK:
        this.tick(a);
        return;
      case SLOW:
        this.replan();
        return;
      default:
        if (kind >= LOAN_EVENT && this.loans !== undefined) {
          this.loans.handle(kind, a, b);
          return;
        }
        throw new Error(`swayam cluster: unknown event kind ${kind}`);
    }
  }

  /** Feeds one event to the request's dispatch machine and carries out what it decides. */
  private step(req: number, ev: DispatchEvent<number>): void {
    const sim = this.sim;
    const r = sim.requests;
    const j = r.job[req] as number;
    const list = this.lists[j] as Int32Array;
    const v = this.view;
    v.now = sim.now;
    v.n = this.nCache[(r.frontend[req] as number) * this.J + j] as number;
    v.listLength = list.length;
    this.viewList = list;
    v.rtMaxMs = (this.slas[j] as ServiceSla).rtMaxMs;
    const budget = this.pruneBudgets?.[(r.frontend[req] as number) * this.J + j];
    v.pruneServiceMs =
      sim.config.swayam.prune === true &&
      (budget?.allows(sim.now, sim.now - (r.arrival[req] as number), (this.slas[j] as ServiceSla).rtMaxMs) ?? true)
        ? this.pruneServiceMs[j]
        : undefined;
    const out = this.actions;
    stepDispatch(this.flights[req] as DispatchState<number>, ev, v, this.settings, out);
    for (let i = 0; i < out.count; i++) this.act(req, j, out.items[i] as DispatchAction<number, number>);
    out.count = 0;
  }

  private act(req: number, j: number, a: DispatchAction<number, number>): void {
    const sim = this.sim;
    const hop = sim.config.hopMs;
    switch (a.kind) {
      case "send":
        sim.requests.attempts[req] = a.attempt;
        // Sent at once, it is one hop away like every other message; after a pause, it is out of that order.
        if (a.hold !== undefined) {
          sim.requests.backend[req] = a.hold;
          if (a.delayMs === 0) sim.scheduleInOrder(sim.now + a.delayMs + hop, CLAIM, req);
          else sim.schedule(sim.now + a.delayMs + hop, CLAIM, req);
        } else {
          sim.requests.backend[req] = a.entry;
          if (a.delayMs === 0) sim.scheduleInOrder(sim.now + a.delayMs + hop, PROBE, req);
          else sim.schedule(sim.now + a.delayMs + hop, PROBE, req);
        }
        return;
      case "park":
        for (let t = 0; t < a.entries.length; t++)
          sim.scheduleInOrder(sim.now + hop, PARK, req, parkMessage(a.round, t, a.entries[t] as number));
        return;
      case "timer":
        sim.schedule(a.at, PARK_TIMEOUT, req, a.round);
        return;
      case "release":
        sim.scheduleInOrder(sim.now + hop, RELEASE, a.hold);
        return;
      case "warm":
        if (this.backendJob[a.entry] === j) this.warm(a.entry, j);
        return;
      case "answer":
        sim.complete(req, sim.now - (sim.requests.arrival[req] as number) + this.brokerMs);
        return;
      case "fail":
        this.pruneBudgets?.[(sim.requests.frontend[req] as number) * this.J + j]?.recordDrop(sim.now);
        sim.drop(req);
        return;
      case "withdraw": // instant here: the backends' lots see the round is over (isLive)
      case "suspect": // no call fails in the simulator
        return;
    }
  }

  private probe(req: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const j = r.job[req] as number;
    const b = r.backend[req] as number;
    const be = this.backends[b] as BackendMachine;
    const res = be.tryAcquire(sim.now, this.frontendIds[r.frontend[req] as number] as string, this.names[j]);
    if (res.accepted) {
      this.compute(req, b);
      return;
    }
    const fs = be.frontendsSeen(sim.now);
    sim.scheduleInOrder(sim.now + sim.config.hopMs, REFUSED, req, fs * 8 + REASONS.indexOf(res.reason));
  }

  /** The request starts computing on backend b (a harvesting backend first stops its best-effort work). */
  private compute(req: number, b: number): void {
    const sim = this.sim;
    const extra = this.loans?.computeStarts?.(b, sim.now) ?? 0;
    sim.schedule(sim.now + (sim.requests.service[req] as number) + extra, DONE, req);
  }

  private done(req: number): void {
    const sim = this.sim;
    const b = sim.requests.backend[req] as number;
    this.loans?.computeEnds?.(b, sim.now);
    this.freeSlot(b);
    sim.scheduleInOrder(sim.now + sim.config.hopMs, REPLY, req, (this.backends[b] as BackendMachine).frontendsSeen(sim.now));
  }

  private reply(req: number, frontendsSeen: number): void {
    const sim = this.sim;
    const r = sim.requests;
    this.observe(req, r.backend[req] as number, frontendsSeen, r.service[req] as number);
    this.step(req, ANSWERED);
  }

  private refused(req: number, code: number): void {
    this.observe(req, this.sim.requests.backend[req] as number, Math.floor(code / 8), undefined);
    this.step(req, REFUSALS[code % 8] as DispatchEvent<number>);
  }

  /** A backend's reply reaches the request's frontend: its scaler learns n_F (and the service time). */
  private observe(req: number, b: number, frontendsSeen: number, serviceMs: number | undefined): void {
    const r = this.sim.requests;
    const scaler = this.scalers[(r.frontend[req] as number) * this.J + (r.job[req] as number)] as FrontendScaler;
    scaler.observeReply(this.backendIds[b] as string, frontendsSeen, serviceMs, this.sim.now);
  }

  /** A park reaches its backend: a slot held for it now, parked in the backend's lot, or refused. */
  private parkAt(req: number, message: number): void {
    const sim = this.sim;
    const round = messageRound(message);
    if (!isParkedIn(this.flights[req] as DispatchState<number>, round)) return; // withdrawn on the way
    const b = messageBackend(message);
    const outcome = (this.slots[b] as BackendSlots<number>).park(
      sim.now,
      lotItem(req, round, messageTarget(message)),
      sim.requests.arrival[req] as number,
    );
    if (outcome === "held") sim.scheduleInOrder(sim.now + sim.config.hopMs, READY, req, message);
    else if (outcome !== "parked")
      sim.scheduleInOrder(sim.now + sim.config.hopMs, outcome === "cold" ? PARK_COLD : PARK_DRAINING, req, message);
  }

  /** Free slots of backend b are held for the oldest requests parked there; each one's frontend is told. */
  private serveParked(b: number): void {
    const held = (this.slots[b] as BackendSlots<number>).serve(this.sim.now);
    for (const item of held) {
      const req = itemRequest(item);
      const round = (this.flights[req] as DispatchState<number>).round;
      this.sim.scheduleInOrder(this.sim.now + this.sim.config.hopMs, READY, req, parkMessage(round, itemTarget(item), b));
    }
  }

  /** A backend holds a slot for the request: its dispatch machine takes it or gives it back. */
  private ready(req: number, message: number): void {
    const b = messageBackend(message);
    this.observe(req, b, (this.backends[b] as BackendMachine).frontendsSeen(this.sim.now), undefined);
    this.step(req, { kind: "held", round: messageRound(message), target: messageTarget(message), hold: b });
  }

  /** A slot frees (its request is done, or a held slot comes back): it goes to the oldest parked request, if any. */
  private freeSlot(b: number): void {
    if ((this.slots[b] as BackendSlots<number>).release(this.sim.now)) {
      this.wentCold(b);
      return;
    }
    this.serveParked(b);
    this.ensureIdleCheck(b);
  }

  private warm(b: number, j: number): void {
    const sim = this.sim;
    const be = this.backends[b] as BackendMachine;
    if (!be.warmUp(sim.now, this.names[j] as string).startLoad) return;
    sim.metrics.coldStart(j);
    this.since[b] = sim.now;
    this.chargedTo[b] = j;
    sim.schedule(sim.now + sim.config.coldStartMs, LOADED, b);
  }

  private ensureIdleCheck(b: number): void {
    if (this.idlePending[b] === 1) return;
    const deadline = (this.backends[b] as BackendMachine).idleDeadline();
    if (deadline === undefined) return;
    this.idlePending[b] = 1;
    // checkIdle tests now - idleSince < T, which can hold at now = idleSince + T by one rounding step; a check
    // exactly at idleDeadline() could then reschedule itself forever at the same instant. A microsecond later is safe.
    const now = this.sim.now;
    this.sim.schedule(Math.max(deadline, now) + IDLE_SLACK_MS, IDLE, b);
  }

  private idle(b: number): void {
    this.idlePending[b] = 0;
    const be = this.backends[b] as BackendMachine;
    if (be.checkIdle(this.sim.now)) {
      this.wentCold(b);
      return;
    }
    this.ensureIdleCheck(b);
  }

  /** A backend went cold (decommissioned itself, or finished draining): its occupancy ends. */
  private wentCold(b: number): void {
    this.loans?.backendCold?.(b, this.sim.now);
    const since = this.since[b] as number;
    if (!Number.isNaN(since)) this.sim.metrics.occupancy(this.chargedTo[b] as number, since, this.sim.now);
    this.since[b] = Number.NaN;
    // Requests parked here get their refusal (a cold backend holds no slot for anyone).
    const sim = this.sim;
    for (const item of (this.slots[b] as BackendSlots<number>).evict()) {
      const req = itemRequest(item);
      const round = (this.flights[req] as DispatchState<number>).round;
      sim.scheduleInOrder(sim.now + sim.config.hopMs, PARK_COLD, req, parkMessage(round, itemTarget(item), b));
    }
  }

  /** Whether a parked entry's request still waits in the round it parked in. */
  private isLive(item: number): boolean {
    const st = this.flights[itemRequest(item)];
    return st !== undefined && st.phase === "parked" && st.round % ROUND_SLOTS === itemRound(item);
  }

  private allocationInput() {
    const inLists = new Set<number>();
    for (const l of this.lists) for (const b of l) inLists.add(b);
    const w = this.withheld;
    return {
      services: this.planned.map((p, j) => ({
        name: p.name,
        minBackends: p.minBackends,
        maxBackends: p.maxBackends,
        initialBackends: p.initialBackends,
        currentList: Array.from(
          (this.lists[j] as Int32Array).filter((b) => w[b] === 0),
          (b) => this.backendIds[b] as string,
        ),
      })),
      freeBackends: this.backendIds.filter((_, b) => !inLists.has(b) && w[b] === 0),
      poolSize: this.backends.length - this.withheldCount,
    };
  }

  // LoanSurface: what a loan controller (fapes-cluster.ts) sees and does.

  get backendCount(): number {
    return this.backends.length;
  }

  backendId(b: number): string {
    return this.backendIds[b] as string;
  }

  inList(b: number): boolean {
    return (this.backendJob[b] as number) >= 0;
  }

  inUse(b: number): boolean {
    return (this.backends[b] as BackendMachine).state !== "cold";
  }

  /** The longest prefix any frontend dispatches a job's requests to, within its list. */
  private widestPrefix(j: number): number {
    let n = 0;
    for (let f = 0; f < this.F; f++) n = Math.max(n, this.nCache[f * this.J + j] as number);
    return Math.min(n, (this.lists[j] as Int32Array).length);
  }

  inferenceInUse(): number {
    let n = 0;
    for (let j = 0; j < this.J; j++) n += this.widestPrefix(j);
    return n;
  }

  lendCandidates(past: "prefix" | "share", floors?: ReadonlyMap<string, number>): number[] {
    const out: number[] = [];
    for (let b = 0; b < this.backends.length; b++) if (this.backendJob[b] === -1 && this.withheld[b] === 0 && !this.inUse(b)) out.push(b);
    const shares = this.controller?.shares;
    const keep = (j: number) => {
      const share = shares?.get(this.names[j] as string)?.share;
      const kept = past === "share" && share !== undefined ? share : this.widestPrefix(j);
      return Math.max(kept, floors?.get(this.names[j] as string) ?? 0);
    };
    // Entries past what is kept, cold or warm and idle, from the tails, round-robin over the lists so that no one
    // list is emptied before the others are trimmed.
    const tails = this.lists.map((l, j) =>
      Array.from(l.subarray(Math.min(l.length, keep(j)))).filter((b) => {
        const st = (this.backends[b] as BackendMachine).state;
        return this.withheld[b] === 0 && (st === "cold" || st === "warm-idle");
      }),
    );
    for (let more = true; more; ) {
      more = false;
      for (const t of tails) {
        const b = t.pop();
        if (b !== undefined) {
          out.push(b);
          more = true;
        }
      }
    }
    return out;
  }

  withhold(backends: readonly number[]): void {
    for (const b of backends) {
      if (this.withheld[b] === 1) throw new Error(`swayam cluster: backend ${this.backendIds[b]} is already withheld`);
      const st = (this.backends[b] as BackendMachine).state;
      if (st !== "cold" && st !== "warm-idle") throw new Error(`swayam cluster: backend ${this.backendIds[b]} is ${st}, not free to lend`);
      this.withheld[b] = 1;
      this.withheldCount++;
    }
    if (backends.length === 0) return;
    this.replanLists();
    // One warm and idle outside every list unloads now (in a list, leaving it unloaded it).
    for (const b of backends) if ((this.backends[b] as BackendMachine).drain(this.sim.now)) this.wentCold(b);
  }

  giveBack(backends: readonly number[]): void {
    for (const b of backends) {
      if (this.withheld[b] === 0) throw new Error(`swayam cluster: backend ${this.backendIds[b]} was not withheld`);
      this.withheld[b] = 0;
      this.withheldCount--;
    }
    if (backends.length > 0) this.replanLists();
  }

  /** The lists again over the pool as it is now, with the slow loop's last shares (or the static split). */
  private replanLists(): void {
    const shares = this.controller?.shares;
    this.applyPlan(
      shares !== undefined && shares.size > 0
        ? shareAllocationPolicy(this.loans?.planShares?.(shares) ?? shares)(this.allocationInput())
        : this.sim.config.swayam.allocate(this.allocationInput()),
    );
  }

  /** New lists and warm floors; a backend leaving a list drains, one joining is cold for its new job until warmed. */
  private applyPlan(plan: AllocationDecision): void {
    const index = new Map(this.backendIds.map((id, i) => [id, i]));
    const now = this.sim.now;
    const next = this.planned.map((p) => Int32Array.from(plan.lists.get(p.name) ?? [], (id) => index.get(id) ?? -1));
    const member = new Int32Array(this.backends.length).fill(-1);
    next.forEach((list, j) => {
      for (const b of list) member[b] = j;
    });
    let changed = false;
    for (let b = 0; b < this.backends.length; b++) {
      const was = this.backendJob[b] as number;
      const is = member[b] as number;
      if (was === is) continue;
      changed = true;
      this.backendJob[b] = is;
      if (was >= 0 && (this.backends[b] as BackendMachine).drain(now)) this.wentCold(b);
    }
    const minWarm = this.planned.map((p, j) => plan.minWarm.get(p.name) ?? this.sim.config.swayam.minWarm[j] ?? 1);
    for (let j = 0; j < next.length && !changed; j++) {
      const was = this.lists[j];
      const is = next[j] as Int32Array;
      changed = was === undefined || was.length !== is.length || is.some((b, i) => was[i] !== b) || this.minWarm[j] !== minWarm[j];
    }
    if (changed || next.length !== this.lists.length) this.listsVersion++;
    this.lists = next;
    this.minWarm = minWarm;
  }

  /**
   * The slow loop's lists from its shares. Shares usually stay put for many ticks (97 % of a faro-6h run's), and
   * the planner is a function of the shares and the lists: when both are what they were at a plan that changed
   * nothing, planning again would give that plan again and change nothing again, so it is skipped (the input,
   * the planner and applying its plan were half of the slow loop's cost beside the forecasts). Only without
   * loans, which change the pool the planner sees.
   */
  private planFromShares(shares: ReadonlyMap<string, ServiceShare>): void {
    const key: number[] = [shares.size];
    for (const p of this.planned) {
      const x = shares.get(p.name);
      key.push(x === undefined ? Number.NaN : x.share, x === undefined ? Number.NaN : x.minWarm);
    }
    const memo = this.steadyPlan;
    if (
      this.loans === undefined &&
      memo !== undefined &&
      memo.version === this.listsVersion &&
      memo.key.length === key.length &&
      memo.key.every((v, i) => Object.is(v, key[i]))
    )
      return;
    const before = this.listsVersion;
    this.applyPlan(shareAllocationPolicy(this.loans?.planShares?.(shares) ?? shares)(this.allocationInput()));
    this.steadyPlan = before === this.listsVersion ? { key, version: before } : undefined;
  }

  /** One tick of the slow loop: the allocator's ShareController over forecasts and outcomes, then new lists. */
  private replan(): void {
    const sim = this.sim;
    const now = sim.now;
    const loop = this.slowLoop as SlowLoopSettings;
    const forecasts = (this.predictor as SimPredictor).forecasts(now);
    const services: ShareService[] = [];
    const signals: ShareSignal[] = [];
    this.planned.forEach((spec, j) => {
      const o = sim.live.take(j, now);
      const input = shareInput(
        spec,
        {
          arrivals: o.arrivals,
          completed: o.completed,
          withinSlo: o.completed - (o.violations - o.dropped),
          failed: o.dropped,
          serviceTimeMeanMs: o.completed > 0 ? o.serviceMeanMs : 0,
        },
        loop.tickMs / 1000,
        forecasts[j],
        this.expectedServiceMs[j] as number,
      );
      let warm = 0;
      for (const b of this.lists[j] as Int32Array) {
        const st = (this.backends[b] as BackendMachine).state;
        if ((st === "warm-idle" || st === "busy") && this.chargedTo[b] === j) warm++;
      }
      services.push(input.service);
      signals.push({ ...input.signal, warm });
    });
    const capacity = this.loans?.inferenceCapacity() ?? this.backends.length;
    const outcome = (this.controller as ShareController).tick(now, services, signals, capacity);
    if (this.loans !== undefined) {
      let demand: number | undefined;
      if (outcome.ok) {
        demand = 0;
        for (const s of outcome.shares.values()) demand += s.share;
      }
      const fo = this.floorController?.tick(now, services, signals, capacity);
      this.loans.onSlowTick(now, demand, outcome.ok ? outcome.shares : undefined, fo?.ok ? fo.shares : undefined);
    }
    if (outcome.ok) this.planFromShares(outcome.shares);
    const next = now + loop.tickMs;
    if (next < sim.config.durationMs) sim.schedule(next, SLOW, 0);
  }

  private tick(f: number): void {
    const sim = this.sim;
    const now = sim.now;
    const scaling = sim.config.policy.kind === "swayam" ? sim.config.policy.scaling : "swayam";
    for (let j = 0; j < this.J; j++) {
      const list = this.lists[j] as Int32Array;
      let n: number;
      if (scaling === "static") {
        n = staticPrefixLength(this.minWarm[j] ?? 1, (this.planned[j] as PlannedSpec).initialBackends, list.length);
      } else {
        const prior = this.priors[j];
        // One shape for every job (an absent prior is undefined): no spread per decision.
        const out = (this.scalers[f * this.J + j] as FrontendScaler).decide(now, {
          sla: this.slas[j] as ServiceSla,
          listLength: list.length,
          minWarm: this.minWarm[j] ?? 1,
          serviceTimePrior: prior,
        });
        n = out.n;
      }
      this.nCache[f * this.J + j] = n;
      // Warmer: the prefix's cold entries get a warm-up.
      for (let i = 0; i < n && i < list.length; i++) {
        const b = list[i] as number;
        if ((this.backends[b] as BackendMachine).state === "cold") this.warm(b, j);
      }
    }
    const next = now + sim.config.swayam.autoscaleMs;
    if (next < sim.config.durationMs) sim.schedule(next, TICK, f);
  }

  finish(endMs: number): void {
    this.loans?.finish(endMs);
    for (let b = 0; b < this.backends.length; b++) {
      const since = this.since[b] as number;
      if (!Number.isNaN(since)) this.sim.metrics.occupancy(this.chargedTo[b] as number, since, endMs);
    }
  }

  snapshot(): SwayamSnapshot {
    const n: number[][] = [];
    for (let f = 0; f < this.F; f++) n.push(Array.from(this.nCache.subarray(f * this.J, (f + 1) * this.J)));
    return { n, lists: this.lists.map((l) => Array.from(l, (b) => this.backendIds[b] as string)) };
  }
}
