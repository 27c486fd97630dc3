/**
 * One service on sized, batching backends in virtual time (Themis, Razavi et al.): each backend has c cores
 * (within the node's limit) and a batch size b, and serves a batch of k in l(k, c) (Eq. 1). A controller ticks
 * every `tickMs` with the rate observed over the last tick and the largest per-tick rate of the last
 * `peakWindowMs` as the predicted peak (the observed max; the paper's LSTM forecasts the next 10 s's max), steps
 * a libs/themis policy and applies its decision: resizes in place (effective after the measured resize time),
 * new backends (warm after the cold start), removals (a warm backend drains what it accepted).
 *
 * Dispatch: join the least loaded warm backend, load = (queued + in flight + 1) / h(b, c), each with its own
 * FIFO queue (the frontend's). The backend's accept/refuse is libs/swayam's BackendMachine (at most b in flight,
 * as the backend-worker runs it with batching) and its batches form in libs/swayam's BatchFormer, the code the
 * real backend-worker runs; a refused request waits in its queue until a slot frees. A request not started
 * `dropAfterMs` after its arrival is dropped.
 *
 * Cost: core-seconds, the sum over backends of their cores x time over [0, durationMs), from the moment a backend
 * is asked for (provisioning included) until it is removed or drained; during a resize the larger of the old and
 * new sizes is charged.
 */
import { admittedRequests, BackendMachine, BatchFormer, type BatchStep } from "@infergrid/swayam";
import {
  processingMs,
  type ScalingMode,
  type ScalingPolicy,
  type StartingBackend,
  type ThemisProfile,
  type TickInput,
  type TransitionState,
  throughputPerS,
  type WarmBackend,
} from "@infergrid/themis";
import { EventQueue } from "./event-queue.js";

export interface ThemisClusterSetting {
  profile: ThemisProfile;
  sloMs: number;
  maxCores: number;
  maxBatch: number;
  coldStartMs: number;
  /** Time an in-place resize to `cores` takes before the next batch runs on them, ms. */
  resizeMs: (cores: number) => number;
  /** A partial batch's wait on an idle model: `slack` = SLO - l(b, c), or fixed ms. */
  batchTimeout: "slack" | number;
  dropAfterMs: number;
  tickMs: number;
  peakWindowMs: number;
  /** Arrivals stop and cost is counted until here. */
  durationMs: number;
  /** The backends warm at time 0. */
  initial: { count: number; cores: number; batch: number };
  /** Keep one record per tick. */
  timeline?: boolean;
}

export interface ThemisTick {
  tMs: number;
  ratePerS: number;
  predictedPeakPerS: number;
  mode: ScalingMode;
  /** Cores asked of each warm backend. */
  warmCores: number[];
  starting: number;
  /** Violations (late completions and drops) since the previous tick. */
  late: number;
  reason: string;
}

export interface ThemisRunResult {
  policy: string;
  requests: number;
  completed: number;
  dropped: number;
  /** Requests over the SLO end to end, dropped ones included. */
  violations: number;
  violationRate: number;
  p50Ms: number;
  /** Over completed requests. */
  p99Ms: number;
  coreSeconds: number;
  /** In-place core changes (each backend's, each time). */
  resizes: number;
  coldStarts: number;
  /** Most cores held at once. */
  peakCores: number;
  timeline?: ThemisTick[];
}

const ARRIVAL = 1;
const DONE = 2;
const TIMER = 3;
const READY = 4;
const RESIZED = 5;
const TICK = 6;
const FRONTEND = "sim";
const SERVICE = "svc";

interface Backend {
  readonly idx: number;
  readonly id: string;
  phase: "starting" | "warm" | "draining" | "gone";
  /** Cores the next batch runs on. */
  cores: number;
  /** Cores asked for (the policy's view). */
  asked: number;
  charged: number;
  chargedSince: number;
  resizeSeq: number;
  batch: number;
  /** The batch size asked with a core change: applied once the cores are (the backend-worker's order). */
  askedBatch: number;
  readonly readyAtMs: number;
  readonly machine: BackendMachine;
  readonly former: BatchFormer<number>;
  queue: number[];
  head: number;
  running: readonly number[] | undefined;
}

/** Runs one policy over one arrival sequence (ms, ascending). Deterministic: no randomness beyond the arrivals. */
export function runThemisCluster(setting: ThemisClusterSetting, policy: ScalingPolicy, arrivals: Iterable<number>): ThemisRunResult {
  const s = setting;
  const D = s.durationMs;
  const q = new EventQueue(1024);
  const backends: Backend[] = [];
  const arrivalAt: number[] = [];
  const latencies: number[] = [];
  const pending: number[] = [];
  let now = 0;
  let dropped = 0;
  let violations = 0;
  let coreMs = 0;
  let cores = 0;
  let peakCores = 0;
  let resizes = 0;
  let coldStarts = 0;
  let arrivedThisTick = 0;
  let lateAtLastTick = 0;
  const recentRates: number[] = [];
  const windowTicks = Math.max(1, Math.round(s.peakWindowMs / s.tickMs));
  let state: TransitionState = policy.initialState();
  const timeline: ThemisTick[] = [];
  const source = arrivals[Symbol.iterator]();

  const timeoutFor = (batch: number, c: number): number =>
    s.batchTimeout === "slack" ? Math.max(0, s.sloMs - processingMs(s.profile, batch, c)) : s.batchTimeout;

  const charge = (b: Backend, c: number): void => {
    coreMs += b.charged * (Math.min(now, D) - Math.min(b.chargedSince, D));
    cores += c - b.charged;
    if (now < D) peakCores = Math.max(peakCores, cores);
    b.charged = c;
    b.chargedSince = now;
  };

  // What the backend-worker admits for a service sized by Themis, at its batch size and cores now.
  const admitted = (batch: number, c: number): number =>
    admittedRequests(batch, { batchMs: processingMs(s.profile, batch, c), sloMs: s.sloMs });

  const newBackend = (c: number, batch: number, readyAtMs: number): Backend => {
    const machine = new BackendMachine({ concurrency: admitted(batch, c), idleTimeoutMs: Number.POSITIVE_INFINITY });
    machine.warmUp(now, SERVICE);
    const b: Backend = {
      idx: backends.length,
      id: `b${backends.length}`,
      phase: "starting",
      cores: c,
      asked: c,
      charged: 0,
      chargedSince: now,
      resizeSeq: 0,
      batch,
      askedBatch: batch,
      readyAtMs,
      machine,
      former: new BatchFormer<number>({ maxBatch: batch, timeoutMs: timeoutFor(batch, c) }),
      queue: [],
      head: 0,
      running: undefined,
    };
    backends.push(b);
    charge(b, c);
    return b;
  };

  const finishRequest = (req: number): void => {
    const latency = now - (arrivalAt[req] as number);
    latencies.push(latency);
    if (latency > s.sloMs) violations++;
  };

  const drop = (): void => {
    dropped++;
    violations++;
  };

  const apply = (b: Backend, step: BatchStep<number>): void => {
    if (step.run !== undefined) {
      b.running = step.run;
      q.push(now + processingMs(s.profile, step.run.length, b.cores), DONE, b.idx);
    }
    if (step.timerAt !== undefined) q.push(step.timerAt, TIMER, b.idx);
  };

  const pump = (b: Backend): void => {
    while (b.head < b.queue.length) {
      const req = b.queue[b.head] as number;
      if (now - (arrivalAt[req] as number) > s.dropAfterMs) {
        b.head++;
        drop();
        continue;
      }
      if (!b.machine.tryAcquire(now, FRONTEND, SERVICE).accepted) break;
      b.head++;
      apply(b, b.former.add(now, req));
    }
    if (b.head > 1024 && b.head * 2 > b.queue.length) {
      b.queue = b.queue.slice(b.head);
      b.head = 0;
    }
  };

  const dispatch = (req: number): void => {
    let best: Backend | undefined;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (const b of backends) {
      if (b.phase !== "warm") continue;
      const load = (b.queue.length - b.head + b.machine.requestsInFlight + 1) / throughputPerS(s.profile, b.batch, b.cores);
      if (load < bestLoad) {
        bestLoad = load;
        best = b;
      }
    }
    if (best === undefined) {
      pending.push(req);
      return;
    }
    best.queue.push(req);
    pump(best);
  };

  const maybeGone = (b: Backend): void => {
    if (b.phase === "draining" && b.machine.requestsInFlight === 0 && b.head >= b.queue.length) {
      b.phase = "gone";
      charge(b, 0);
    }
  };

  const setBatch = (b: Backend, batch: number): void => {
    if (batch === b.batch && b.former.timeoutMs === timeoutFor(batch, b.cores) && b.machine.concurrency === admitted(batch, b.cores))
      return;
    b.batch = batch;
    b.machine.resize(admitted(batch, b.cores));
    apply(b, b.former.resize(now, batch, timeoutFor(batch, b.cores)));
    pump(b);
  };

  const remove = (b: Backend): void => {
    if (b.phase === "starting") {
      b.phase = "gone";
      charge(b, 0);
      return;
    }
    if (b.phase !== "warm") return;
    b.phase = "draining";
    const queued = b.queue.slice(b.head);
    b.queue = [];
    b.head = 0;
    for (const req of queued) dispatch(req);
    maybeGone(b);
  };

  const tick = (): void => {
    const rate = (arrivedThisTick * 1000) / s.tickMs;
    arrivedThisTick = 0;
    recentRates.push(rate);
    if (recentRates.length > windowTicks) recentRates.shift();
    const warm: WarmBackend[] = [];
    const starting: StartingBackend[] = [];
    for (const b of backends) {
      if (b.phase === "warm") warm.push({ id: b.id, cores: b.asked, batch: b.askedBatch });
      else if (b.phase === "starting") starting.push({ id: b.id, cores: b.asked, readyAtMs: b.readyAtMs });
    }
    const input: TickInput = {
      nowMs: now,
      ratePerS: rate,
      predictedPeakPerS: Math.max(...recentRates),
      warm,
      starting,
      service: { profile: s.profile, sloMs: s.sloMs, maxCores: s.maxCores, maxBatch: s.maxBatch },
    };
    const stepped = policy.step(state, input);
    state = stepped.state;
    const d = stepped.decision;
    const byId = new Map(backends.map((b) => [b.id, b]));
    for (const t of d.targets) {
      const b = byId.get(t.id);
      if (b === undefined || b.phase !== "warm") continue;
      const c = Math.min(Math.max(1, t.cores), s.maxCores);
      b.askedBatch = Math.min(Math.max(1, t.batch), s.maxBatch);
      if (c !== b.asked) {
        resizes++;
        b.asked = c;
        b.resizeSeq++;
        charge(b, Math.max(b.cores, c));
        q.push(now + s.resizeMs(c), RESIZED, b.idx, b.resizeSeq);
      }
      // The backend-worker applies a resize's cores first, then its batch size.
      if (b.asked === b.cores) setBatch(b, b.askedBatch);
    }
    for (const id of d.remove) {
      const b = byId.get(id);
      if (b !== undefined) remove(b);
    }
    for (const n of d.start) {
      coldStarts++;
      const b = newBackend(Math.min(Math.max(1, n.cores), s.maxCores), Math.min(Math.max(1, n.batch), s.maxBatch), now + s.coldStartMs);
      q.push(b.readyAtMs, READY, b.idx);
    }
    if (s.timeline) {
      timeline.push({
        tMs: now,
        ratePerS: rate,
        predictedPeakPerS: input.predictedPeakPerS,
        mode: d.mode,
        warmCores: backends.filter((b) => b.phase === "warm").map((b) => b.asked),
        starting: backends.filter((b) => b.phase === "starting").length,
        late: violations - lateAtLastTick,
        reason: d.reason,
      });
    }
    lateAtLastTick = violations;
    if (now + s.tickMs < D) q.push(now + s.tickMs, TICK, 0);
  };

  const pumpArrival = (): void => {
    const r = source.next();
    if (r.done === true || !(r.value < D)) return;
    arrivalAt.push(r.value);
    q.push(r.value, ARRIVAL, arrivalAt.length - 1);
  };

  for (let i = 0; i < s.initial.count; i++) {
    const b = newBackend(s.initial.cores, s.initial.batch, 0);
    b.machine.loadFinished(0);
    b.phase = "warm";
  }
  if (s.tickMs < D) q.push(s.tickMs, TICK, 0);
  pumpArrival();

  while (q.pop()) {
    now = q.time;
    const b = backends[q.a];
    switch (q.kind) {
      case ARRIVAL:
        arrivedThisTick++;
        dispatch(q.a);
        pumpArrival();
        break;
      case TICK:
        tick();
        break;
      case DONE: {
        if (b === undefined || b.running === undefined) break;
        for (const req of b.running) {
          finishRequest(req);
          b.machine.release(now);
        }
        b.running = undefined;
        apply(b, b.former.finished(now));
        pump(b);
        maybeGone(b);
        break;
      }
      case TIMER:
        if (b !== undefined) apply(b, b.former.timer(now));
        break;
      case READY: {
        if (b === undefined || b.phase !== "starting") break;
        b.machine.loadFinished(now);
        b.phase = "warm";
        const waiting = pending.splice(0);
        for (const req of waiting) {
          if (now - (arrivalAt[req] as number) > s.dropAfterMs) drop();
          else dispatch(req);
        }
        break;
      }
      case RESIZED:
        if (b !== undefined && b.resizeSeq === q.b && b.phase !== "gone") {
          b.cores = b.asked;
          if (b.phase !== "draining") charge(b, b.asked);
          setBatch(b, b.askedBatch);
        }
        break;
    }
  }
  // Nothing ever became warm for these: never served.
  for (let i = 0; i < pending.length; i++) drop();
  now = D;
  for (const b of backends) if (b.phase !== "gone") charge(b, b.charged);

  const sorted = Float64Array.from(latencies).sort();
  const pct = (p: number): number =>
    sorted.length === 0 ? 0 : (sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] as number);
  const requests = arrivalAt.length;
  return {
    policy: policy.name,
    requests,
    completed: latencies.length,
    dropped,
    violations,
    violationRate: requests === 0 ? 0 : violations / requests,
    p50Ms: pct(0.5),
    p99Ms: pct(0.99),
    coreSeconds: coreMs / 1000,
    resizes,
    coldStarts,
    peakCores,
    ...(s.timeline ? { timeline } : {}),
  };
}
