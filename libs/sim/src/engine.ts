/**
 * The simulation core shared by every cluster model: the virtual clock, the event queue, the table of
 * requests in flight, the arrival pump and the metrics. A cluster model (Swayam's, the load-balanced one of
 * the baselines, the clairvoyant one) owns the rest of the state and handles its own event kinds.
 *
 * Determinism: three seeded streams, one each for arrivals, service times and dispatch. Service times are
 * drawn in arrival order from their own stream, so for a given seed every policy sees the same requests with
 * the same service times (common random numbers: differences between policies are not sampling noise).
 */
import { type Random, sampleExponential, sampleLognormal, seededRandom } from "@infergrid/core";
import type { ArrivalEvent, ArrivalFeed, JobSpec, ServiceTimeSpec, SimConfig } from "./config.js";
import { EventQueue } from "./event-queue.js";
import { Metrics } from "./metrics.js";
import { LiveSignals } from "./signals.js";

/** Event kinds below this are the engine's; cluster models number theirs from it. */
export const FIRST_MODEL_EVENT = 8;
/** Event kinds from here on are a loan controller's (config.ts LoanHook), whichever cluster model carries it. */
export const LOAN_EVENT = 64;
const ARRIVAL = 1;
/** The event queue's in-order lanes: events one hop after now, and the arrival stream (in time order by nature). */
const HOP_LANE = 0;
const ARRIVAL_LANE = 1;

export interface ClusterModel {
  /** Schedules the model's first events (ticks, pre-warmed backends). */
  start(): void;
  /** A request entered the system at sim.now. */
  arrive(req: number): void;
  handle(kind: number, a: number, b: number): void;
  /** Closes what is still open (occupancy intervals) at the end of the run. */
  finish(endMs: number): void;
}

/** Requests in flight in struct-of-arrays form; slots are reused. */
export class RequestTable {
  arrival = new Float64Array(1024);
  service = new Float64Array(1024);
  job = new Int32Array(1024);
  frontend = new Int32Array(1024);
  target = new Int32Array(1024);
  /** The backend a request was sent to (Swayam mode: lists may change while it is there). */
  backend = new Int32Array(1024);
  attempts = new Int32Array(1024);
  private free: number[] = [];
  private next = 0;
  inFlight = 0;

  alloc(): number {
    this.inFlight++;
    const id = this.free.pop();
    if (id !== undefined) return id;
    if (this.next === this.arrival.length) this.grow();
    return this.next++;
  }

  release(id: number): void {
    this.inFlight--;
    this.free.push(id);
  }

  private grow(): void {
    const cap = this.arrival.length * 2;
    const f64 = (a: Float64Array) => {
      const b = new Float64Array(cap);
      b.set(a);
      return b;
    };
    const i32 = (a: Int32Array) => {
      const b = new Int32Array(cap);
      b.set(a);
      return b;
    };
    this.arrival = f64(this.arrival);
    this.service = f64(this.service);
    this.job = i32(this.job);
    this.frontend = i32(this.frontend);
    this.target = i32(this.target);
    this.backend = i32(this.backend);
    this.attempts = i32(this.attempts);
  }
}

export type ServiceSampler = (random: Random) => number;

export function serviceSampler(spec: ServiceTimeSpec): ServiceSampler {
  switch (spec.kind) {
    case "lognormal": {
      const d = spec.dist;
      return (r) => sampleLognormal(r, d);
    }
    case "exponential": {
      const rate = 1 / spec.meanMs;
      return (r) => sampleExponential(r, rate);
    }
    case "deterministic": {
      const ms = spec.ms;
      return () => ms;
    }
  }
}

/** An iterator of arrival events as a feed. */
class IteratorFeed implements ArrivalFeed {
  atMs = Number.NaN;
  jobIndex = -1;

  constructor(private readonly events: Iterator<ArrivalEvent>) {}

  advance(): boolean {
    const r = this.events.next();
    if (r.done === true) return false;
    this.atMs = r.value.atMs;
    this.jobIndex = r.value.job;
    return true;
  }
}

export interface RunStats {
  events: number;
  requests: number;
  wallMs: number;
}

export class Simulation {
  readonly queue = new EventQueue(4096);
  readonly requests = new RequestTable();
  readonly metrics: Metrics;
  /** What controllers inside the cluster model may observe while the run goes on. */
  readonly live: LiveSignals;
  readonly dispatchRandom: Random;
  private readonly serviceRandom: Random;
  private readonly samplers: ServiceSampler[];
  private model: ClusterModel | undefined;
  private readonly source: ArrivalFeed;
  now = 0;
  events = 0;
  arrivals = 0;

  constructor(
    readonly config: SimConfig,
    arrivals: ArrivalFeed | Iterator<ArrivalEvent>,
  ) {
    this.source = "advance" in arrivals ? arrivals : new IteratorFeed(arrivals);
    this.metrics = new Metrics(config.jobs, config.durationMs, config.binMs, config.metrics);
    this.live = new LiveSignals(config.jobs);
    this.serviceRandom = seededRandom(config.seed * 7919 + 2);
    this.dispatchRandom = seededRandom(config.seed * 7919 + 3);
    this.samplers = config.jobs.map((j) => serviceSampler(j.serviceTime));
  }

  get jobs(): readonly JobSpec[] {
    return this.config.jobs;
  }

  attach(model: ClusterModel): void {
    this.model = model;
  }

  schedule(time: number, kind: number, a: number, b = 0): void {
    this.queue.push(time, kind, a, b);
  }

  /** schedule, for an event a constant delay after now (a network hop): the same order, at less cost (EventQueue.pushInOrder). */
  scheduleInOrder(time: number, kind: number, a: number, b = 0): void {
    this.queue.pushInOrder(time, kind, a, b, HOP_LANE);
  }

  /** A request finished, seen by its client `latencyMs` after it arrived. Frees the request. */
  complete(req: number, latencyMs: number): void {
    const job = this.requests.job[req] as number;
    const serviceMs = this.requests.service[req] as number;
    this.metrics.completed(job, this.now, latencyMs, serviceMs, this.requests.arrival[req] as number);
    this.live.completed(job, latencyMs, serviceMs);
    this.requests.release(req);
  }

  /** A request gave up (deadline passed before it could start) or was refused (a full queue): a violation. Frees the request. */
  drop(req: number): void {
    this.metrics.recordDrop(this.requests.job[req] as number, this.now, this.requests.arrival[req] as number);
    this.live.dropped(this.requests.job[req] as number);
    this.requests.release(req);
  }

  /** Pulls the next arrival within the run and schedules it. */
  private pump(): void {
    const s = this.source;
    if (!s.advance() || !(s.atMs < this.config.durationMs)) return;
    this.queue.pushInOrder(s.atMs, ARRIVAL, s.jobIndex, 0, ARRIVAL_LANE);
  }

  run(progress?: (simMs: number) => void, progressEveryMs = 60_000): RunStats {
    const model = this.model;
    if (model === undefined) throw new Error("no cluster model attached");
    const started = performance.now();
    model.start();
    this.pump();
    const q = this.queue;
    let nextProgress = progressEveryMs;
    while (q.pop()) {
      const t = q.time;
      this.now = t;
      this.events++;
      if (t >= nextProgress) {
        progress?.(t);
        nextProgress = t + progressEveryMs;
      }
      if (q.kind === ARRIVAL) {
        const job = q.a;
        const req = this.requests.alloc();
        this.requests.arrival[req] = t;
        this.requests.job[req] = job;
        this.requests.attempts[req] = 0;
        this.requests.service[req] = (this.samplers[job] as ServiceSampler)(this.serviceRandom);
        this.metrics.arrival(job, t);
        this.live.arrival(job);
        this.arrivals++;
        model.arrive(req);
        this.pump();
      } else model.handle(q.kind, q.a, q.b);
    }
    model.finish(this.config.durationMs);
    progress?.(this.config.durationMs);
    return { events: this.events, requests: this.arrivals, wallMs: performance.now() - started };
  }
}
