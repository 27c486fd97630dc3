/**
 * Swayam's serving discipline, driving the production code: every simulated frontend wraps a
 * libs/swayam FrontendScaler per job (as services/frontend's SwayamScaler does, with the same options),
 * dispatches with pickBackend inside its prefix, and every backend is a libs/swayam BackendState. The lists
 * come from the global allocator's policy (libs/allocation), run at time 0; with a slow loop, the allocator's
 * ShareController re-plans them every tick from the predictor's forecasts (SimPredictor, the predictor's
 * forecasters) and each job's outcomes, and the shares become lists through libs/allocation's
 * shareAllocationPolicy, as in services/global-allocator. A backend taken out of a list drains (finishes what
 * it holds, unloads) and is cold for the list it joins.
 *
 * Mirrors services/frontend: the broker spreads each job's requests round robin over the frontends; a
 * refused request is retried on another prefix entry after delta; once every prefix entry refused, the tried
 * set is cleared and the next round starts after libs/swayam's roundBackoffMs on top of delta (young requests
 * back off, urgent ones do not; Dispatcher.dispatch); a refusal "cold" warms that entry; each autoscaling
 * tick warms the cold entries of the prefix (Warmer). Backends never queue: busy, cold and provisioning
 * backends refuse. A warm backend idle for T decommissions itself (checkIdle at its idleDeadline).
 *
 * Network: each hop (broker-frontend, frontend-backend and back) costs hopMs; the broker hops are constant and
 * added to the latency, the frontend-backend ones are events (the backend's state is read on arrival there).
 *
 * Late binding (park): as services/frontend and services/backend-worker (libs/swayam ParkingLot). A request
 * refused busy or provisioning probes the rest of its prefix at once, and once every entry has refused parks
 * at PARK_DEFAULTS.fanout entries of it (at random) for PARK_DEFAULTS.windowMs; a backend with a free
 * slot holds it for the oldest live request parked there and tells its frontend (READY, one hop); the first
 * READY of a round takes the request (CLAIM, one hop, then service), later ones are released. Simplification:
 * the services withdraw the other parks with a message (one hop); here they end the moment the request is
 * taken (its epoch moves on), so a backend never holds a slot for a request already taken elsewhere.
 *
 * Simplification: the frontend reads a backend's true state when deciding what to warm (the service reads the
 * last state the backend reported); both warm exactly the cold entries except around a state change.
 */
import {
  type AllocationDecision,
  type PlannedSpec,
  ShareController,
  type ShareService,
  type ShareSignal,
  shareAllocationPolicy,
  shareInput,
} from "@infergrid/allocation";
import { type Lognormal, lognormalMean } from "@infergrid/core";
import {
  BackendState,
  effectivePrefix,
  FrontendScaler,
  hasUntried,
  isPastSaving,
  PARK_DEFAULTS,
  ParkingLot,
  PRUNE_SERVICE_QUANTILE,
  parkTargets,
  pickBackend,
  type RefusalReason,
  ROUND_BACKOFF_DEFAULTS,
  type RoundBackoffOptions,
  roundBackoffMs,
  type ServiceSla,
} from "@infergrid/swayam";
import type { SlowLoopSettings } from "./config.js";
import { type ClusterModel, FIRST_MODEL_EVENT, type Simulation } from "./engine.js";
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
const PARK_REFUSED = FIRST_MODEL_EVENT + 13;
const PARK_TIMEOUT = FIRST_MODEL_EVENT + 14;

/** Park messages carry (epoch, backend) in one number: backends below this bound. */
const BACKEND_SLOTS = 4096;

/** A park message's (epoch, backend) as one event argument. */
const packPark = (epoch: number, b: number) => epoch * BACKEND_SLOTS + b;
const parkEpoch = (packed: number) => Math.floor(packed / BACKEND_SLOTS);
const parkBackend = (packed: number) => packed % BACKEND_SLOTS;
/** A parking-lot entry: the request slot and its epoch (mod BACKEND_SLOTS, enough to tell rounds apart). */
const lotKey = (req: number, epoch: number) => req * BACKEND_SLOTS + (epoch % BACKEND_SLOTS);
const lotRequest = (key: number) => Math.floor(key / BACKEND_SLOTS);

const IDLE_SLACK_MS = 0.001;

const REASONS: RefusalReason[] = ["busy", "cold", "provisioning", "draining"];
const EMPTY: ReadonlySet<number> = new Set<number>();
const ALWAYS = () => true;

export interface SwayamSnapshot {
  /** n per frontend per job at the end (frontend-major). */
  n: number[][];
  lists: string[][];
}

export class SwayamCluster implements ClusterModel {
  private readonly J: number;
  private readonly F: number;
  private readonly backends: BackendState[];
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
  private readonly slowLoop: SlowLoopSettings | undefined;
  private readonly predictor: SimPredictor | undefined;
  private readonly controller: ShareController | undefined;
  private readonly planned: PlannedSpec[];
  private readonly backoff: RoundBackoffOptions;
  /** Per backend, the requests parked there as (slot, epoch) pairs packed into one number (late binding). */
  private readonly lots: ParkingLot<number>[];

  constructor(private readonly sim: Simulation) {
    const c = sim.config;
    this.J = c.jobs.length;
    this.F = Math.max(1, c.swayam.frontends);
    this.backends = [];
    this.backendIds = [];
    for (let i = 0; i < c.capacity; i++) {
      this.backends.push(new BackendState({ concurrency: 1, idleTimeoutMs: c.idleTimeoutMs, frontendWindowMs: c.swayam.tSetupMs }));
      this.backendIds.push(`b${String(i).padStart(4, "0")}`);
    }
    if (c.capacity > BACKEND_SLOTS) throw new Error(`swayam cluster: at most ${BACKEND_SLOTS} backends`);
    this.lots = Array.from({ length: c.capacity }, () => new ParkingLot<number>());
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
    this.slowLoop = c.swayam.slowLoop;
    this.backoff = { deltaMs: c.swayam.retryGapMs, ...ROUND_BACKOFF_DEFAULTS };
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
  }

  start(): void {
    const c = this.sim.config;
    const s = c.swayam;
    this.lists = c.jobs.map(() => new Int32Array(0));
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
            // As services/frontend SwayamScaler: one regression point per tenth of a window, at least 1 s.
            rateBucketMs: Math.min(s.rateWindowMs, Math.max(1000, s.rateWindowMs / 10)),
            scaleInCooldownMs: s.scaleInCooldownMs,
            probeCostMs: (s.modelRttMs ?? 2 * c.hopMs) + s.retryGapMs,
            fixedDelayMs: s.modelRttMs ?? 2 * c.hopMs,
            initialN,
            ...(s.countingLeadMs ? { countingSince: -s.countingLeadMs } : {}),
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
        const be = this.backends[b] as BackendState;
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
    (this.scalers[f * this.J + j] as FrontendScaler).recordArrival(sim.now);
    this.dispatch(req, 0);
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
        (this.backends[a] as BackendState).loadFinished(this.sim.now);
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
        this.sim.schedule(this.sim.now + (this.sim.requests.service[a] as number), DONE, a);
        return;
      case RELEASE:
        this.freeSlot(a);
        return;
      case PARK_REFUSED:
        this.parkRefused(a, b);
        return;
      case PARK_TIMEOUT:
        this.parkTimeout(a, b);
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
        throw new Error(`swayam cluster: unknown event kind ${kind}`);
    }
  }

  /**
   * Picks a prefix entry and sends the request there, `gapMs` from now (0 for a first attempt, delta after a
   * refusal). The pick is made when the refusal comes back, with the n in force then, and the probe is sent
   * after the gap: one event fewer per retry; only a frontend tick falling inside the 5 ms gap is seen a retry late.
   */
  private dispatch(req: number, gapMs: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const j = r.job[req] as number;
    const f = r.frontend[req] as number;
    const list = this.lists[j] as Int32Array;
    if (list.length === 0) {
      sim.drop(req);
      return;
    }
    const n = this.nCache[f * this.J + j] as number;
    const excluded = r.excluded[req];
    let at = sim.now + gapMs;
    let idx = pickBackend(n, ALWAYS, excluded ?? EMPTY, sim.dispatchRandom, list.length);
    if (idx === undefined) {
      if (excluded !== undefined && excluded.size > 0) {
        // Every prefix entry refused once: a new round after libs/swayam's round backoff (as Dispatcher.dispatch).
        excluded.clear();
        const rounds = (r.rounds[req] as number) + 1;
        r.rounds[req] = rounds;
        at += roundBackoffMs(rounds, sim.now - (r.arrival[req] as number), (this.slas[j] as ServiceSla).rtMaxMs, this.backoff);
        idx = pickBackend(n, ALWAYS, EMPTY, sim.dispatchRandom, list.length);
      }
      idx ??= 0;
    }
    const arrived = r.arrival[req] as number;
    const attempts = r.attempts[req] as number;
    if ((gapMs > 0 && at - arrived >= sim.config.dropAfterMs) || this.pruned(req, at, attempts)) {
      sim.drop(req);
      return;
    }
    r.attempts[req] = attempts + 1;
    r.target[req] = idx;
    r.backend[req] = list[idx] as number;
    sim.schedule(at + sim.config.hopMs, PROBE, req);
  }

  private probe(req: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const j = r.job[req] as number;
    const b = r.backend[req] as number;
    const be = this.backends[b] as BackendState;
    const res = be.tryAcquire(sim.now, this.frontendIds[r.frontend[req] as number] as string, this.names[j]);
    if (res.accepted) {
      sim.schedule(sim.now + (r.service[req] as number), DONE, req);
      return;
    }
    const fs = be.frontendsSeen(sim.now);
    sim.schedule(sim.now + sim.config.hopMs, REFUSED, req, fs * 8 + REASONS.indexOf(res.reason));
  }

  private done(req: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const b = r.backend[req] as number;
    this.freeSlot(b);
    sim.schedule(sim.now + sim.config.hopMs, REPLY, req, (this.backends[b] as BackendState).frontendsSeen(sim.now));
  }

  private reply(req: number, frontendsSeen: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const j = r.job[req] as number;
    const b = r.backend[req] as number;
    const scaler = this.scalers[(r.frontend[req] as number) * this.J + j] as FrontendScaler;
    scaler.observeReply(this.backendIds[b] as string, frontendsSeen, r.service[req] as number, sim.now);
    sim.complete(req, sim.now - (r.arrival[req] as number) + this.brokerMs);
  }

  private refused(req: number, code: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const j = r.job[req] as number;
    const idx = r.target[req] as number;
    const b = r.backend[req] as number;
    const scaler = this.scalers[(r.frontend[req] as number) * this.J + j] as FrontendScaler;
    scaler.observeReply(this.backendIds[b] as string, Math.floor(code / 8), undefined, sim.now);
    if (REASONS[code % 8] === "cold" && this.backendJob[b] === j) this.warm(b, j);
    let excluded = r.excluded[req];
    if (excluded === undefined) {
      excluded = new Set<number>();
      r.excluded[req] = excluded;
    }
    excluded.add(idx);
    const reason = REASONS[code % 8];
    if (sim.config.swayam.park !== undefined && (reason === "busy" || reason === "provisioning")) {
      // Late binding once every entry of the round has refused (as Dispatcher.dispatch): an untried one is probed at once.
      const n = this.nCache[(r.frontend[req] as number) * this.J + j] as number;
      if (hasUntried(n, ALWAYS, excluded, (this.lists[j] as Int32Array).length)) this.dispatch(req, 0);
      else this.parkRound(req);
    } else this.dispatch(req, sim.config.swayam.retryGapMs);
  }

  /**
   * Late binding, the frontend's side (as services/frontend's Dispatcher): the request parks at
   * PARK_DEFAULTS.fanout entries of its prefix at once, for one window; the first backend to hold a slot for it gets it.
   */
  private parkRound(req: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const j = r.job[req] as number;
    const f = r.frontend[req] as number;
    const arrived = r.arrival[req] as number;
    const rtMaxMs = (this.slas[j] as ServiceSla).rtMaxMs;
    if (sim.now - arrived >= sim.config.dropAfterMs || this.pruned(req, sim.now, 1)) {
      sim.drop(req);
      return;
    }
    const list = this.lists[j] as Int32Array;
    const prefix = parkTargets(
      effectivePrefix(this.nCache[f * this.J + j] as number, ALWAYS, list.length),
      PARK_DEFAULTS.fanout,
      sim.dispatchRandom,
    );
    if (prefix.length === 0) {
      sim.drop(req);
      return;
    }
    const epoch = (r.epoch[req] as number) + 1;
    r.epoch[req] = epoch;
    r.pending[req] = prefix.length;
    for (const idx of prefix) sim.schedule(sim.now + sim.config.hopMs, PARK, req, packPark(epoch, list[idx] as number));
    // With pruning the round ends when the request can no longer make it, so that it is dropped then.
    let windowMs = (sim.config.swayam.park as { windowMs: number }).windowMs;
    if (sim.config.swayam.prune === true) {
      windowMs = Math.min(windowMs, Math.max(0, arrived + rtMaxMs - (this.pruneServiceMs[j] as number) - sim.now));
    }
    windowMs = Math.min(windowMs, Math.max(0, arrived + sim.config.dropAfterMs - sim.now));
    sim.schedule(sim.now + windowMs, PARK_TIMEOUT, req, epoch);
  }

  /** A park reaches backend b: a free slot is held for it at once, a busy or loading backend parks it. */
  private parkAt(req: number, packed: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const epoch = parkEpoch(packed);
    const b = parkBackend(packed);
    if (r.epoch[req] !== epoch) return; // the round ended: the frontend cancelled this call
    const j = r.job[req] as number;
    const be = this.backends[b] as BackendState;
    const res = be.tryAcquire(sim.now, this.frontendIds[r.frontend[req] as number] as string, this.names[j]);
    if (res.accepted) {
      sim.schedule(sim.now + sim.config.hopMs, READY, req, packed);
      return;
    }
    if (res.reason === "busy" || res.reason === "provisioning") {
      (this.lots[b] as ParkingLot<number>).park(lotKey(req, epoch), r.arrival[req] as number);
      return;
    }
    sim.schedule(sim.now + sim.config.hopMs, PARK_REFUSED, req, packPark(epoch, b));
    if (res.reason === "cold" && this.backendJob[b] === j) this.warm(b, j);
  }

  /** A free backend holds its slot for the oldest request still parked with it and tells that request's frontend. */
  private serveParked(b: number): void {
    const be = this.backends[b] as BackendState;
    if (be.state !== "warm-idle") return;
    const sim = this.sim;
    const r = sim.requests;
    const top = (this.lots[b] as ParkingLot<number>).takeOldest((key) => this.isLive(key));
    if (top === undefined) return;
    const req = lotRequest(top.item);
    be.tryAcquire(sim.now, this.frontendIds[r.frontend[req] as number] as string, this.names[r.job[req] as number]);
    sim.schedule(sim.now + sim.config.hopMs, READY, req, packPark(r.epoch[req] as number, b));
  }

  /** A backend holds a slot for the request: the first such answer of its round takes it; later ones are released. */
  private ready(req: number, packed: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const epoch = parkEpoch(packed);
    const b = parkBackend(packed);
    if (r.epoch[req] !== epoch) {
      sim.schedule(sim.now + sim.config.hopMs, RELEASE, b);
      return;
    }
    const j = r.job[req] as number;
    const scaler = this.scalers[(r.frontend[req] as number) * this.J + j] as FrontendScaler;
    scaler.observeReply(this.backendIds[b] as string, (this.backends[b] as BackendState).frontendsSeen(sim.now), undefined, sim.now);
    r.epoch[req] = epoch + 1;
    if (this.pruned(req, sim.now, 1)) {
      sim.schedule(sim.now + sim.config.hopMs, RELEASE, b);
      sim.drop(req);
      return;
    }
    r.attempts[req] = (r.attempts[req] as number) + 1;
    r.backend[req] = b;
    sim.schedule(sim.now + sim.config.hopMs, CLAIM, req);
  }

  /** Swayam's pruning, when on: the request, refused `attempts` times, can no longer finish within RT_max from `at`. */
  private pruned(req: number, at: number, attempts: number): boolean {
    if (this.sim.config.swayam.prune !== true) return false;
    const r = this.sim.requests;
    const j = r.job[req] as number;
    return isPastSaving(at, r.arrival[req] as number, this.pruneServiceMs[j] as number, (this.slas[j] as ServiceSla).rtMaxMs, attempts);
  }

  /** A slot frees (its request is done, or a held slot comes back): it goes to the oldest parked request, if any. */
  private freeSlot(b: number): void {
    if ((this.backends[b] as BackendState).release(this.sim.now)) {
      this.wentCold(b);
      return;
    }
    this.serveParked(b);
    this.ensureIdleCheck(b);
  }

  private parkRefused(req: number, packed: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const epoch = parkEpoch(packed);
    if (r.epoch[req] !== epoch) return;
    const pending = (r.pending[req] as number) - 1;
    r.pending[req] = pending;
    if (pending > 0) return;
    // No backend of the prefix will hold a slot (all cold or draining): probe again after delta.
    r.epoch[req] = epoch + 1;
    r.excluded[req]?.clear();
    this.dispatch(req, sim.config.swayam.retryGapMs);
  }

  private parkTimeout(req: number, epoch: number): void {
    const r = this.sim.requests;
    if (r.epoch[req] !== epoch) return;
    r.epoch[req] = epoch + 1;
    r.excluded[req]?.clear();
    this.dispatch(req, 0);
  }

  private warm(b: number, j: number): void {
    const sim = this.sim;
    const be = this.backends[b] as BackendState;
    if (!be.warmUp(sim.now, this.names[j] as string).startLoad) return;
    sim.metrics.coldStart(j);
    this.since[b] = sim.now;
    this.chargedTo[b] = j;
    sim.schedule(sim.now + sim.config.coldStartMs, LOADED, b);
  }

  private ensureIdleCheck(b: number): void {
    if (this.idlePending[b] === 1) return;
    const deadline = (this.backends[b] as BackendState).idleDeadline();
    if (deadline === undefined) return;
    this.idlePending[b] = 1;
    // checkIdle tests now - idleSince < T, which can hold at now = idleSince + T by one rounding step; a check
    // exactly at idleDeadline() could then reschedule itself forever at the same instant. A microsecond later is safe.
    const now = this.sim.now;
    this.sim.schedule(Math.max(deadline, now) + IDLE_SLACK_MS, IDLE, b);
  }

  private idle(b: number): void {
    this.idlePending[b] = 0;
    const be = this.backends[b] as BackendState;
    if (be.checkIdle(this.sim.now)) {
      this.wentCold(b);
      return;
    }
    this.ensureIdleCheck(b);
  }

  /** A backend went cold (decommissioned itself, or finished draining): its occupancy ends. */
  private wentCold(b: number): void {
    const since = this.since[b] as number;
    if (!Number.isNaN(since)) this.sim.metrics.occupancy(this.chargedTo[b] as number, since, this.sim.now);
    this.since[b] = Number.NaN;
    // Requests parked here get their refusal (a cold backend holds no slot for anyone).
    const lot = this.lots[b] as ParkingLot<number>;
    if (lot.size === 0) return;
    const sim = this.sim;
    const r = sim.requests;
    for (const key of lot.retain(() => false)) {
      if (!this.isLive(key)) continue;
      const req = lotRequest(key);
      sim.schedule(sim.now + sim.config.hopMs, PARK_REFUSED, req, packPark(r.epoch[req] as number, b));
    }
  }

  /** Whether a parked entry's request still waits in the round it parked in. */
  private isLive(key: number): boolean {
    const req = lotRequest(key);
    return lotKey(req, this.sim.requests.epoch[req] as number) === key;
  }

  private allocationInput() {
    const inLists = new Set<number>();
    for (const l of this.lists) for (const b of l) inLists.add(b);
    return {
      services: this.planned.map((p, j) => ({
        name: p.name,
        minBackends: p.minBackends,
        maxBackends: p.maxBackends,
        initialBackends: p.initialBackends,
        currentList: Array.from(this.lists[j] as Int32Array, (b) => this.backendIds[b] as string),
      })),
      freeBackends: this.backendIds.filter((_, b) => !inLists.has(b)),
      poolSize: this.backends.length,
    };
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
    for (let b = 0; b < this.backends.length; b++) {
      const was = this.backendJob[b] as number;
      const is = member[b] as number;
      if (was === is) continue;
      this.backendJob[b] = is;
      if (was >= 0 && (this.backends[b] as BackendState).drain(now)) this.wentCold(b);
    }
    this.lists = next;
    this.minWarm = this.planned.map((p, j) => plan.minWarm.get(p.name) ?? this.sim.config.swayam.minWarm[j] ?? 1);
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
        const st = (this.backends[b] as BackendState).state;
        if ((st === "warm-idle" || st === "busy") && this.chargedTo[b] === j) warm++;
      }
      services.push(input.service);
      signals.push({ ...input.signal, warm });
    });
    const outcome = (this.controller as ShareController).tick(now, services, signals, this.backends.length);
    if (outcome.ok) this.applyPlan(shareAllocationPolicy(outcome.shares)(this.allocationInput()));
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
        // services/frontend StaticScaler: n = the allocator's floor (or the initial size), within the list.
        n = Math.max(0, Math.min(list.length, Math.max(this.minWarm[j] ?? 1, 1)));
      } else {
        const prior = this.priors[j];
        const out = (this.scalers[f * this.J + j] as FrontendScaler).decide(now, {
          sla: this.slas[j] as ServiceSla,
          listLength: list.length,
          minWarm: this.minWarm[j] ?? 1,
          ...(prior ? { serviceTimePrior: prior } : {}),
        });
        n = out.n;
      }
      this.nCache[f * this.J + j] = n;
      // Warmer: the prefix's cold entries get a warm-up.
      for (let i = 0; i < n && i < list.length; i++) {
        const b = list[i] as number;
        if ((this.backends[b] as BackendState).state === "cold") this.warm(b, j);
      }
    }
    const next = now + sim.config.swayam.autoscaleMs;
    if (next < sim.config.durationMs) sim.schedule(next, TICK, f);
  }

  finish(endMs: number): void {
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
