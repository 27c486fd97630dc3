/**
 * The baselines' serving discipline: replicas behind a load balancer, with queues, as Kubernetes, Knative and
 * Ray Serve route requests (config.ts Routing says which router does what). A controller ticks every policy
 * period, aggregates each job's metrics over the policy's windows (libs/baselines CumulativeWindow), calls the
 * policy's pure decide, and reconciles: new replicas start (a cold start, then ready), surplus ones stop.
 *
 * Reconciliation, as a ReplicaSet controller and the scheduler would do it:
 *  - scale-up creates replicas while the cluster has capacity; the rest wait as pending and are created when
 *    capacity frees (jobs take turns, the first job rotating every tick, so no job always wins);
 *  - scale-down removes starting replicas first (newest first), then the ready ones with the fewest ongoing
 *    requests (newest first on ties), like the ReplicaSet's deletion ranking (not-ready before ready, then
 *    shorter-lived); a removed ready replica leaves the routing at once and finishes what it holds (graceful
 *    termination), holding its backend until then.
 * Requests that wait longer than dropAfterMs before starting are dropped (the client gave up): violations.
 * With a queue cap (config.metrics.queueCap, Faro's router: 50), a job holds at most that many waiting
 * requests (in its router queue and its replicas' queues together); an arrival that would wait while the job
 * already has that many waiting is dropped at once (tail drop, Faro's HTTP 503): a violation.
 * Every request pays 4 network hops (ingress to router to replica and back), a constant here.
 *
 * The controller is either one policy per job (each decides its job alone) or one central policy deciding
 * every job at once from all jobs' observations (Faro's autoscaler); the reconciliation is the same. Signals a
 * policy asks for beyond the windowed averages are gathered only then: each job's outcomes since the last
 * tick (sim.live; this controller is the only one that takes its windows) and the predictor's forecasts
 * (a SimPredictor fed every arrival).
 */
import {
  type AnyClusterScalingPolicy,
  type AnyScalingPolicy,
  CumulativeWindow,
  type MetricWindows,
  type Observation,
  type ObservedSignals,
} from "@infergrid/baselines";
import { randomInt } from "@infergrid/core";
import type { Routing } from "./config.js";
import { type ClusterModel, FIRST_MODEL_EVENT, type Simulation } from "./engine.js";
import { DEFAULT_SIM_PREDICTOR, SimPredictor } from "./signals.js";

const TICK = FIRST_MODEL_EVENT;
const READY = FIRST_MODEL_EVENT + 1;
const DONE = FIRST_MODEL_EVENT + 2;

const STARTING = 0;
const SERVING = 1;
const TERMINATING = 2;
const GONE = 3;

/** A FIFO of request ids that reuses its array. */
class Fifo {
  private items: number[] = [];
  private head = 0;
  get length(): number {
    return this.items.length - this.head;
  }
  push(x: number): void {
    this.items.push(x);
  }
  shift(): number | undefined {
    if (this.head >= this.items.length) return undefined;
    const x = this.items[this.head++];
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return x;
  }
}

interface Replica {
  id: number;
  job: number;
  state: number;
  busy: boolean;
  queue: Fifo;
  since: number;
  /** Position in its job's ready list, or -1. */
  readyIdx: number;
}

interface JobState {
  /** Undefined under a central policy. */
  policy: AnyScalingPolicy | undefined;
  policyState: unknown;
  windows: MetricWindows;
  observes: ObservedSignals;
  target: number;
  /** Starting and serving replicas (not terminating). */
  active: Replica[];
  ready: Replica[];
  central: Fifo;
  inSystem: number;
  busy: number;
  lastT: number;
  cumBusy: number;
  cumReady: number;
  cumIn: number;
  arrivals: number;
  wBusy: CumulativeWindow;
  wReady: CumulativeWindow;
  wIn: CumulativeWindow;
  wArr: CumulativeWindow;
}

export class BalancedCluster implements ClusterModel {
  private readonly jobs: JobState[];
  private readonly replicas: Replica[] = [];
  private used = 0;
  private rotate = 0;
  private readonly routing: Routing;
  private readonly periodMs: number;
  private readonly fixedMs: number;
  private readonly central: AnyClusterScalingPolicy | undefined;
  private centralState: unknown;
  private readonly predictor: SimPredictor | undefined;
  /** Waiting requests a job may hold (config.metrics.queueCap); infinite: no cap. */
  private readonly queueCap: number;

  constructor(private readonly sim: Simulation) {
    const p = sim.config.policy;
    if (p.kind !== "autoscaler") throw new Error("BalancedCluster runs autoscaler policies");
    const J = sim.config.jobs.length;
    const perJob: (AnyScalingPolicy | undefined)[] = p.central ? new Array<undefined>(J).fill(undefined) : p.policies;
    if (perJob.length !== J) throw new Error("one scaling policy per job is needed");
    this.central = p.central;
    this.routing = p.routing;
    this.periodMs = p.central?.periodMs ?? p.policies?.[0]?.periodMs ?? 1000;
    this.fixedMs = 4 * sim.config.hopMs;
    this.queueCap = sim.config.metrics?.queueCap ?? Number.POSITIVE_INFINITY;
    this.jobs = perJob.map((policy) => {
      const w = (policy ?? (p.central as AnyClusterScalingPolicy)).windows;
      const cap = Math.ceil(Math.max(w.rateMs, w.concurrencyMs, w.concurrencyShortMs) / this.periodMs) + 2;
      return {
        policy,
        policyState: undefined,
        windows: w,
        observes: (policy ?? p.central)?.observes ?? {},
        target: 0,
        active: [],
        ready: [],
        central: new Fifo(),
        inSystem: 0,
        busy: 0,
        lastT: 0,
        cumBusy: 0,
        cumReady: 0,
        cumIn: 0,
        arrivals: 0,
        wBusy: new CumulativeWindow(cap),
        wReady: new CumulativeWindow(cap),
        wIn: new CumulativeWindow(cap),
        wArr: new CumulativeWindow(cap),
      };
    });
    // The predictor's model runs per job and step: only when a policy reads forecasts.
    if (this.jobs.some((js) => js.observes.forecast === true))
      this.predictor = new SimPredictor(sim.config.jobs, p.predictor ?? DEFAULT_SIM_PREDICTOR);
  }

  /** Each job's replica target (what its controller last asked for). */
  targets(): number[] {
    return this.jobs.map((js) => js.target);
  }

  start(): void {
    const p = this.sim.config.policy;
    if (p.kind !== "autoscaler") return;
    this.jobs.forEach((js, j) => {
      const initial = Math.min(p.initialReplicas[j] ?? 1, this.sim.config.capacity - this.used);
      js.target = initial;
      js.policyState = js.policy?.initialState(0, initial);
      for (let i = 0; i < initial; i++) this.makeReplica(j, true);
    });
    this.centralState = this.central?.initialState(0, this.targets(), this.clusterFacts());
    this.sim.schedule(0, TICK, 0);
  }

  private advance(js: JobState, now: number): void {
    const dt = now - js.lastT;
    if (dt > 0) {
      js.cumBusy += js.busy * dt;
      js.cumReady += js.ready.length * dt;
      js.cumIn += js.inSystem * dt;
      js.lastT = now;
    }
  }

  arrive(req: number): void {
    const sim = this.sim;
    const job = sim.requests.job[req] as number;
    const js = this.jobs[job] as JobState;
    this.predictor?.arrival(job, sim.now);
    this.advance(js, sim.now);
    js.inSystem++;
    js.arrivals++;
    const ready = js.ready;
    if (ready.length === 0) {
      this.wait(js, js.central, req);
      return;
    }
    switch (this.routing.kind) {
      case "random":
        this.enqueue(ready[randomInt(sim.dispatchRandom, ready.length)] as Replica, req, true);
        return;
      case "first-available":
        for (const r of ready) {
          if (!r.busy) {
            this.begin(r, req);
            return;
          }
        }
        this.wait(js, js.central, req);
        return;
      case "power-of-two": {
        let r = ready[0] as Replica;
        if (ready.length > 1) {
          const i = randomInt(sim.dispatchRandom, ready.length);
          let k = randomInt(sim.dispatchRandom, ready.length - 1);
          if (k >= i) k++;
          const a = ready[i] as Replica;
          const b = ready[k] as Replica;
          r = ongoing(b) < ongoing(a) ? b : a;
        }
        if (ongoing(r) < this.routing.maxOngoing) {
          this.enqueue(r, req, true);
          return;
        }
        this.wait(js, js.central, req);
        return;
      }
    }
  }

  /** Sends req to r: started if r is free, else queued there (`arriving`: a new request, subject to the queue cap). */
  private enqueue(r: Replica, req: number, arriving = false): void {
    if (!r.busy && r.queue.length === 0) {
      // A request that would be dropped here leaves the replica free for the next.
      this.begin(r, req);
    } else if (arriving) this.wait(this.jobs[r.job] as JobState, r.queue, req);
    else r.queue.push(req);
  }

  /**
   * An arriving request (already counted in js.inSystem) waits in `queue`, unless its job already holds
   * queueCap waiting requests (in system, not in service): then it is dropped at once.
   */
  private wait(js: JobState, queue: Fifo, req: number): void {
    if (js.inSystem - 1 - js.busy >= this.queueCap) {
      this.advance(js, this.sim.now);
      js.inSystem--;
      this.sim.drop(req);
      return;
    }
    queue.push(req);
  }

  /** Starts req on r, or drops it if it waited past the bound (then r stays free). Returns whether it started. */
  private begin(r: Replica, req: number): boolean {
    const sim = this.sim;
    const js = this.jobs[r.job] as JobState;
    if (sim.now - (sim.requests.arrival[req] as number) > sim.config.dropAfterMs) {
      this.advance(js, sim.now);
      js.inSystem--;
      sim.drop(req);
      return false;
    }
    this.advance(js, sim.now);
    r.busy = true;
    js.busy++;
    sim.schedule(sim.now + (sim.requests.service[req] as number), DONE, r.id, req);
    return true;
  }

  handle(kind: number, a: number, b: number): void {
    switch (kind) {
      case DONE:
        this.done(this.replicas[a] as Replica, b);
        return;
      case READY:
        this.ready(this.replicas[a] as Replica);
        return;
      case TICK:
        this.tick();
        return;
      default:
        throw new Error(`balanced cluster: unknown event kind ${kind}`);
    }
  }

  private done(r: Replica, req: number): void {
    const sim = this.sim;
    const js = this.jobs[r.job] as JobState;
    this.advance(js, sim.now);
    r.busy = false;
    js.busy--;
    js.inSystem--;
    sim.complete(req, sim.now - (sim.requests.arrival[req] as number) + this.fixedMs);
    this.feed(r);
  }

  /** Gives a free replica its next request: its own queue first, then (if it routes) the job's waiting ones. */
  private feed(r: Replica): void {
    const js = this.jobs[r.job] as JobState;
    for (;;) {
      const next = r.queue.shift();
      if (next === undefined) break;
      if (this.begin(r, next)) break;
    }
    if (r.state === SERVING) {
      const limit = this.routing.kind === "power-of-two" ? this.routing.maxOngoing : 1;
      while (js.central.length > 0 && ongoing(r) < limit) {
        const next = js.central.shift() as number;
        if (!r.busy) this.begin(r, next);
        else r.queue.push(next);
      }
    }
    if (r.state === TERMINATING && !r.busy && r.queue.length === 0) this.remove(r);
  }

  private ready(r: Replica): void {
    if (r.state !== STARTING) return;
    const js = this.jobs[r.job] as JobState;
    this.advance(js, this.sim.now);
    r.state = SERVING;
    r.readyIdx = js.ready.length;
    js.ready.push(r);
    if (this.routing.kind === "random") {
      // Requests held while no replica was ready: spread them now.
      while (js.central.length > 0) {
        const req = js.central.shift() as number;
        const ready = js.ready;
        this.enqueue(ready[randomInt(this.sim.dispatchRandom, ready.length)] as Replica, req);
      }
    }
    this.feed(r);
  }

  private makeReplica(j: number, warm: boolean): void {
    const sim = this.sim;
    const js = this.jobs[j] as JobState;
    const r: Replica = { id: this.replicas.length, job: j, state: STARTING, busy: false, queue: new Fifo(), since: sim.now, readyIdx: -1 };
    this.replicas.push(r);
    js.active.push(r);
    this.used++;
    if (warm) {
      this.advance(js, sim.now);
      r.state = SERVING;
      r.readyIdx = js.ready.length;
      js.ready.push(r);
      return;
    }
    sim.metrics.coldStart(j);
    sim.schedule(sim.now + sim.config.coldStartMs, READY, r.id);
  }

  private unready(js: JobState, r: Replica): void {
    if (r.readyIdx < 0) return;
    this.advance(js, this.sim.now);
    const last = js.ready.pop() as Replica;
    if (last !== r) {
      js.ready[r.readyIdx] = last;
      last.readyIdx = r.readyIdx;
    }
    r.readyIdx = -1;
  }

  private remove(r: Replica): void {
    if (r.state === GONE) return;
    r.state = GONE;
    this.used--;
    this.sim.metrics.occupancy(r.job, r.since, this.sim.now);
  }

  private stop(js: JobState, r: Replica): void {
    const i = js.active.indexOf(r);
    if (i >= 0) js.active.splice(i, 1);
    if (r.state === STARTING) {
      this.remove(r);
      return;
    }
    this.unready(js, r);
    r.state = TERMINATING;
    if (!r.busy && r.queue.length === 0) this.remove(r);
  }

  private reconcile(j: number): void {
    const js = this.jobs[j] as JobState;
    const capacity = this.sim.config.capacity;
    while (js.active.length < js.target && this.used < capacity) this.makeReplica(j, false);
    if (js.active.length > js.target) {
      const victims = [...js.active]
        .sort((a, b) => {
          if (a.state !== b.state) return a.state === STARTING ? -1 : 1;
          return ongoing(a) - ongoing(b) || b.since - a.since;
        })
        .slice(0, js.active.length - js.target);
      for (const r of victims) this.stop(js, r);
      // Freed capacity goes to jobs with pending replicas.
      for (let k = 0; k < this.jobs.length; k++) {
        const other = this.jobs[k] as JobState;
        if (k !== j && other.active.length < other.target && this.used < capacity) this.reconcile(k);
      }
    }
  }

  private clusterFacts(): { capacity: number; coldStartMs: number } {
    return { capacity: this.sim.config.capacity, coldStartMs: this.sim.config.coldStartMs };
  }

  /** Job j's observation at now over its policy's windows (and the signals it asks for); pushes the windows. */
  private observe(j: number, now: number): Observation {
    const js = this.jobs[j] as JobState;
    this.advance(js, now);
    const w = js.windows;
    const readyIntegral = js.wReady.average(now, js.cumReady, w.rateMs);
    let starting = 0;
    for (const r of js.active) if (r.state === STARTING) starting++;
    const observed: Observation = {
      ready: js.ready.length,
      starting,
      target: js.target,
      utilisation: readyIntegral > 0 ? Math.min(1, js.wBusy.average(now, js.cumBusy, w.rateMs) / readyIntegral) : 0,
      requestRate: js.wArr.average(now, js.arrivals, w.rateMs) * 1000,
      concurrency: js.wIn.average(now, js.cumIn, w.concurrencyMs),
      concurrencyShort: js.wIn.average(now, js.cumIn, w.concurrencyShortMs),
    };
    if (js.observes.tick === true) {
      const o = this.sim.live.take(j, now);
      observed.tick = {
        ended: o.ended,
        dropped: o.dropped,
        violations: o.violations,
        p99Ms: o.p99Ms,
        serviceMeanMs: o.serviceMeanMs,
        arrivals: o.arrivals,
        spanMs: o.spanMs,
      };
    }
    const f = js.observes.forecast === true ? this.predictor?.forecasts(now)[j] : undefined;
    if (f !== undefined) observed.forecast = f;
    js.wBusy.push(now, js.cumBusy);
    js.wReady.push(now, js.cumReady);
    js.wIn.push(now, js.cumIn);
    js.wArr.push(now, js.arrivals);
    return observed;
  }

  private tick(): void {
    const sim = this.sim;
    const now = sim.now;
    const J = this.jobs.length;
    const central = this.central;
    if (central) {
      // Every job observed first, one decision for all, then reconciled in the rotating order.
      const observed = this.jobs.map((_, j) => this.observe(j, now));
      if (now > 0) {
        const { decisions, state } = central.decide({ now, state: this.centralState, observed, cluster: this.clusterFacts() });
        if (decisions.length !== J) throw new Error(`${central.name}: one decision per job is needed, got ${decisions.length}`);
        this.centralState = state;
        decisions.forEach((d, j) => {
          (this.jobs[j] as JobState).target = Math.max(0, d.replicas);
        });
      }
      for (let step = 0; step < J; step++) this.reconcile((this.rotate + step) % J);
    } else {
      for (let step = 0; step < J; step++) {
        const j = (this.rotate + step) % J;
        const js = this.jobs[j] as JobState;
        const observed = this.observe(j, now);
        if (now > 0 && js.policy) {
          const { decision, state } = js.policy.decide({ now, state: js.policyState, observed });
          js.policyState = state;
          js.target = Math.max(0, decision.replicas);
        }
        this.reconcile(j);
      }
    }
    this.rotate = (this.rotate + 1) % J;
    const next = now + this.periodMs;
    if (next < sim.config.durationMs) sim.schedule(next, TICK, 0);
  }

  finish(endMs: number): void {
    for (const r of this.replicas) if (r.state !== GONE) this.sim.metrics.occupancy(r.job, r.since, endMs);
  }
}

function ongoing(r: Replica): number {
  return r.queue.length + (r.busy ? 1 : 0);
}
