/**
 * One frontend's autoscaler for one service: Swayam's protocol end to end (Gujarati et al.,
 * Middleware'17, sections 4.2 to 4.4). It counts first arrivals, predicts the local rate
 * t_setup ahead, multiplies by n_F (learned from the counts backends piggyback on replies) and
 * by U inside decideScale, sizes n with the response-time model over the service times backends
 * report, and regulates scale-in. The frontend service and the simulator both drive this class,
 * so what is evaluated is what runs.
 *
 * Choices where the paper is silent:
 *  - Service times: the empirical distribution of the last `maxSamples` compute times once at
 *    least `minEmpiricalSamples` are in (no parametric assumption), before that the prior (the
 *    registered profile) if any, else a lognormal fitted to what there is, else `defaultServiceMs`.
 *  - The rate prediction is never below the current local rate: a regression on a falling
 *    trend may predict less than what arrives now, and under-sizing is the costly error.
 *  - Instance types (Kairos): when replies say which type served them and a prefix mixes types, each
 *    entry is weighted by how fast its type serves the requests it gets (E[S] over its type's mean of its
 *    last `maxSamples` compute times), so a prefix of few fast and many cheap entries is sized by what it
 *    serves, not by its length; the convolution keeps the pooled distribution, which is what a request
 *    sees under the matching.
 */
import { fitLognormal, type Lognormal } from "@infergrid/core";
import { BurstHeadroom, type BurstHeadroomSettings } from "./burst-headroom.js";
import { FrontendCountEstimator } from "./frontend-count.js";
import { SWAYAM_DEFAULTS } from "./parameters.js";
import type { UsablePredicate } from "./prefix-dispatch.js";
import { RateHistory } from "./rate-history.js";
import { ascendingServiceTime, meanServiceTimeMs, type ServiceTime, type SizingResult } from "./response-time-model.js";
import { decideScale, initialScaleState, type ScaleReason, type ScaleState } from "./scaling-decision.js";

export interface FrontendScalerOptions {
  tSetupMs?: number;
  rateWindowMs?: number;
  rateHistoryMs?: number;
  rateBucketMs?: number;
  scaleInCooldownMs?: number;
  /** d1 + d2 + delta: what one extra probe costs (ms). */
  probeCostMs: number;
  /** Delay every request pays once (network to and from the backend, ms). */
  fixedDelayMs?: number;
  maxSamples?: number;
  minEmpiricalSamples?: number;
  defaultServiceMs?: number;
  /** Initial n before the first decision (Swayam bootstraps with a few warm backends). */
  initialN?: number;
  /** When arrival counting began (ms); default: the first arrival (libs/swayam RateHistory origin). */
  countingSince?: number;
  /**
   * This system's fast reaction and learned warm headroom (learnedHeadroomFor(tSetupMs)); false or undefined:
   * Swayam's windows and U alone.
   */
  learnedHeadroom?: boolean;
}

/**
 * The rate over the last `spanMs` (the current partial bucket included), less `noiseSigmas` standard
 * deviations of its Poisson count, also sizes n: Swayam's 100 s windows take a window to follow a burst that
 * rises at once (an Azure function going from a request every few minutes to 10 a second within a minute), and
 * the noise allowance keeps a quiet service's chance clusters of requests from growing n.
 */
export interface FastReactionSettings {
  readonly spanMs: number;
  readonly noiseSigmas: number;
}

/**
 * This system's fast reaction and burst headroom, on the frontend's own clock (t_setup; Swayam's evaluation and
 * the simulator: 10 s): the fast rate over one t_setup less 2 standard deviations of its count; rises over two
 * t_setup (a backend warmed at a burst's first decision serves after a decision period plus a set-up), beyond 3
 * standard deviations, remembered for 2160 t_setup (six hours at 10 s), learned only once the frontend has counted
 * one rate history (FrontendScaler: its first is the service's onset; on the real local cluster the load's
 * first seconds, learned as a burst, held 13 % more backend-seconds than the simulator predicted, which learned
 * nothing there: libs/sim fidelity.int.test.ts). Measured on the Azure functions' days 8-9
 * (minutes 0-719, seed 1, docs/results.md), the burstiest function (fn08) missed its SLO for 5.3 % of its
 * requests (the cluster: 293 backend-hours) against 15.7 % with Swayam's windows alone; the fast rate over
 * 2 t_setup, 5.8 % (293); without its noise allowance, 4.0 % but 314 backend-hours, the quiet functions' n
 * grown by chance clusters of requests; rises over one t_setup only learned too little (a burst of this trace
 * ramps over a minute or two, and the first decision sees part of it). Those runs learned a rise less its noise
 * allowance; BurstHeadroom now learns a burst's rise whole (fn08 over both days, 3 seeds: 2.2 % late, 5.6 % before).
 * An hour's memory forgot fn08's bursts in its quiet spells and met the next one cold: remembered six hours, fn08
 * is 0.3 % late and meets the percentile in 95 % of its windows (73 % with an hour) for 9 % more of its
 * backend-hours; a day's memory, 96 % for 5 % more of the cluster's (docs/results.md, 2026-11-27).
 */
export function learnedHeadroomFor(tSetupMs: number): { fast: FastReactionSettings; burst: BurstHeadroomSettings } {
  return {
    fast: { spanMs: tSetupMs, noiseSigmas: 2 },
    burst: { riseMs: 2 * tSetupMs, spanMs: tSetupMs, memoryMs: 2160 * tSetupMs, noiseSigmas: 3 },
  };
}

export interface ServiceSla {
  rtMaxMs: number;
  /** Fraction, e.g. 0.99. */
  slMin: number;
  burstFactor: number;
}

export interface FrontendScaleInputs {
  sla: ServiceSla;
  listLength: number;
  minWarm: number;
  usable?: UsablePredicate;
  /** The registered service-time profile, used until enough samples are in. */
  serviceTimePrior?: Lognormal;
  /** The instance type of list entry i (undefined: unknown), to weigh a prefix that mixes types. */
  entryType?: (index: number) => string | undefined;
}

export interface FrontendScaleOutcome {
  n: number;
  warmUp: number[];
  reason: ScaleReason;
  frontendsEstimate: number;
  localRatePerSec: number;
  globalRatePerSec: number;
  sizing: SizingResult;
  /** The learned warm headroom sized for on top of the predicted rate (req/s; 0 without one). */
  headroomRatePerSec: number;
}

/** Replies of a type before its mean weighs its entries. */
const MIN_TYPED_SAMPLES = 20;

export class FrontendScaler {
  private readonly rates: RateHistory;
  private readonly frontends: FrontendCountEstimator;
  /** The learned warm headroom; undefined: none (Swayam's U alone). */
  private readonly burst: BurstHeadroom | undefined;
  private readonly fast: FastReactionSettings | undefined;
  private readonly samples: number[] = [];
  private sampleCursor = 0;
  /** A frozen copy of the samples, renewed every `refreshEvery` new ones: the model caches per object. */
  private snapshot: ServiceTime | undefined;
  private samplesSinceSnapshot = 0;
  /**
   * The snapshot's samples in ascending order, and what came and went since. Renewing a snapshot merges these
   * few changes into it (linear) instead of sorting every sample again, which was the largest single cost of
   * a simulated day; the model skips its own sort for input that is already in order.
   */
  private sortedSnapshot: Float64Array | undefined;
  /** Samples added and evicted since the sorted snapshot, `addedCount` and `evictedCount` of them (reused buffers). */
  private readonly added: Float64Array;
  private readonly evicted: Float64Array;
  private addedCount = 0;
  private evictedCount = 0;
  private state: ScaleState | undefined;
  /** Per instance type, its last `maxSamples` compute times (a ring) and their sum. */
  private readonly byType = new Map<string, { samples: number[]; cursor: number; sum: number }>();
  private readonly opts: Required<Omit<FrontendScalerOptions, "rateBucketMs" | "countingSince" | "learnedHeadroom">> & {
    rateBucketMs: number | undefined;
  };

  constructor(options: FrontendScalerOptions) {
    this.opts = {
      tSetupMs: options.tSetupMs ?? SWAYAM_DEFAULTS.tSetupMs,
      rateWindowMs: options.rateWindowMs ?? SWAYAM_DEFAULTS.rateWindowMs,
      rateHistoryMs: options.rateHistoryMs ?? SWAYAM_DEFAULTS.rateHistoryMs,
      rateBucketMs: options.rateBucketMs,
      scaleInCooldownMs: options.scaleInCooldownMs ?? SWAYAM_DEFAULTS.scaleInCooldownMs,
      probeCostMs: options.probeCostMs,
      fixedDelayMs: options.fixedDelayMs ?? 0,
      maxSamples: options.maxSamples ?? 500,
      minEmpiricalSamples: options.minEmpiricalSamples ?? 100,
      defaultServiceMs: options.defaultServiceMs ?? 100,
      initialN: options.initialN ?? 1,
    };
    this.rates = new RateHistory({
      windowMs: this.opts.rateWindowMs,
      historyMs: this.opts.rateHistoryMs,
      ...(this.opts.rateBucketMs === undefined ? {} : { bucketMs: this.opts.rateBucketMs }),
      ...(options.countingSince === undefined ? {} : { origin: options.countingSince }),
    });
    this.frontends = new FrontendCountEstimator({ freshnessMs: this.opts.tSetupMs });
    const learned = options.learnedHeadroom === true ? learnedHeadroomFor(this.opts.tSetupMs) : undefined;
    this.fast = learned?.fast;
    // A service's first rate history is its onset, not a burst: rises are learned once one history is in.
    this.burst = learned ? new BurstHeadroom({ ...learned.burst, settleMs: this.opts.rateHistoryMs }) : undefined;
    // At most half the buffer plus one is ever pending (observeReply forgets the sorted snapshot past that), and
    // an eviction is recorded only beside an addition.
    const pending = Math.floor(this.opts.maxSamples / 2) + 1;
    this.added = new Float64Array(pending);
    this.evicted = new Float64Array(pending);
  }

  get n(): number {
    return this.state?.n ?? this.opts.initialN;
  }

  /** A first arrival (never a retry or a warm-up). */
  recordArrival(now: number, count = 1): void {
    this.rates.recordArrival(now, count);
  }

  /** Every backend reply, accepted or refused: n_F gossip, and the compute time when it ran. */
  observeReply(backendId: string, frontendsSeen: number, computeMs: number | undefined, now: number, instanceType?: string): void {
    this.frontends.observe(backendId, frontendsSeen, now);
    if (computeMs === undefined || !(computeMs >= 0)) return;
    if (instanceType) this.recordTyped(instanceType, computeMs);
    if (this.samples.length < this.opts.maxSamples) this.samples.push(computeMs);
    else {
      if (this.sortedSnapshot !== undefined) this.evicted[this.evictedCount++] = this.samples[this.sampleCursor] as number;
      this.samples[this.sampleCursor] = computeMs;
      // A compare, not a %: an integer division on every reply.
      if (++this.sampleCursor === this.opts.maxSamples) this.sampleCursor = 0;
    }
    if (this.sortedSnapshot !== undefined) {
      this.added[this.addedCount++] = computeMs;
      // Past half the buffer a merge saves little, and a sample added after the snapshot could be evicted again.
      if (this.addedCount > this.opts.maxSamples / 2) this.forgetSorted();
    }
    this.samplesSinceSnapshot += 1;
  }

  serviceTime(prior?: Lognormal): ServiceTime {
    if (this.samples.length >= this.opts.minEmpiricalSamples) {
      if (this.snapshot?.kind !== "empirical" || this.samplesSinceSnapshot >= Math.max(10, this.opts.minEmpiricalSamples / 2)) {
        const base = this.sortedSnapshot;
        const sorted =
          (base &&
            mergeAscending(
              base,
              sortSmall(this.added.subarray(0, this.addedCount)),
              sortSmall(this.evicted.subarray(0, this.evictedCount)),
            )) ??
          Float64Array.from(this.samples).sort();
        this.sortedSnapshot = sorted;
        this.addedCount = 0;
        this.evictedCount = 0;
        this.snapshot = ascendingServiceTime(sorted);
        this.samplesSinceSnapshot = 0;
      }
      return this.snapshot;
    }
    if (prior && prior.scale + prior.loc > 0) return { kind: "lognormal", dist: prior };
    const fitted = this.samples.length >= 10 ? fitLognormal(this.samples) : undefined;
    if (fitted) return { kind: "lognormal", dist: fitted };
    return { kind: "empirical", samplesMs: [this.opts.defaultServiceMs] };
  }

  private recordTyped(type: string, ms: number): void {
    let t = this.byType.get(type);
    if (t === undefined) {
      t = { samples: [], cursor: 0, sum: 0 };
      this.byType.set(type, t);
    }
    if (t.samples.length < this.opts.maxSamples) t.samples.push(ms);
    else {
      t.sum -= t.samples[t.cursor] as number;
      t.samples[t.cursor] = ms;
      t.cursor = (t.cursor + 1) % this.opts.maxSamples;
    }
    t.sum += ms;
  }

  /**
   * Each usable entry's weight in prefix order, when the list mixes at least two types measured enough
   * (`minTypedSamples` replies each, mean > 0); undefined otherwise (every entry alike).
   */
  entryWeights(
    serviceTime: ServiceTime,
    listLength: number,
    entryType: (i: number) => string | undefined,
    usable?: UsablePredicate,
  ): number[] | undefined {
    const meanMs = meanServiceTimeMs(serviceTime);
    const weightOf = new Map<string, number>();
    for (const [type, t] of this.byType) {
      const m = t.sum / t.samples.length;
      if (t.samples.length >= MIN_TYPED_SAMPLES && m > 0 && meanMs > 0) weightOf.set(type, meanMs / m);
    }
    const weights: number[] = [];
    const seen = new Set<string>();
    for (let i = 0; i < listLength; i++) {
      if (usable && !usable(i)) continue;
      const type = entryType(i);
      const w = type === undefined ? undefined : weightOf.get(type);
      if (type !== undefined && w !== undefined) seen.add(type);
      weights.push(w ?? 1);
    }
    return seen.size >= 2 ? weights : undefined;
  }

  private forgetSorted(): void {
    this.sortedSnapshot = undefined;
    this.addedCount = 0;
    this.evictedCount = 0;
  }

  decide(now: number, inputs: FrontendScaleInputs): FrontendScaleOutcome {
    this.state ??= initialScaleState(now, Math.min(this.opts.initialN, Math.max(0, inputs.listLength)));
    this.frontends.prune(now);
    const frontendsEstimate = this.frontends.estimate(now);
    const localRatePerSec = this.rates.localRate(now);
    const fast = this.fast ? this.rates.recentRate(now, this.fast.spanMs, this.fast.noiseSigmas) : 0;
    const predicted = Math.max(localRatePerSec, this.rates.predictRate(now, this.opts.tSetupMs), fast);
    const globalRatePerSec = predicted * frontendsEstimate;
    let headroomRate = 0;
    if (this.burst) {
      this.burst.observe(now, this.rates.recentRate(now, this.burst.spanMs), frontendsEstimate);
      headroomRate = this.burst.headroom(now);
    }
    const serviceTime = this.serviceTime(inputs.serviceTimePrior);
    const weights = inputs.entryType && this.entryWeights(serviceTime, inputs.listLength, inputs.entryType, inputs.usable);
    const { decision, state } = decideScale({
      now,
      state: this.state,
      predictedGlobalRate: globalRatePerSec,
      burstFactor: inputs.sla.burstFactor,
      headroomRate,
      // One shape whatever is given (absent fields undefined): conditional spreads here made V8 copy the objects
      // the slow way on every decision.
      sizing: {
        serviceTime,
        entryWeights: weights || undefined,
        rtMaxMs: inputs.sla.rtMaxMs,
        slMin: inputs.sla.slMin,
        probeCostMs: this.opts.probeCostMs,
        fixedDelayMs: this.opts.fixedDelayMs,
      },
      listLength: inputs.listLength,
      minWarm: inputs.minWarm,
      scaleInCooldownMs: this.opts.scaleInCooldownMs,
      usable: inputs.usable,
    });
    this.state = state;
    return {
      n: decision.n,
      warmUp: decision.warmUp,
      reason: decision.reason,
      frontendsEstimate,
      localRatePerSec,
      globalRatePerSec,
      sizing: decision.sizing,
      headroomRatePerSec: headroomRate,
    };
  }
}

/** Up to this many values, sortSmall sorts by insertion. */
const INSERTION_SORT_MAX = 64;

/**
 * xs sorted ascending in place (and returned), as xs.sort() sorts it. A renewed snapshot sorts the few dozen
 * samples that came and went since the last; V8's typed-array sort boxed every value into a temporary array,
 * and those two sorts were a seventh of a simulated frontend's decisions. Insertion sort gives the same order
 * for values that are not NaN (the only ones observeReply keeps; -0 and 0 may change places, which no
 * comparison downstream tells apart); larger inputs keep the built-in sort.
 */
export function sortSmall(xs: Float64Array): Float64Array {
  const n = xs.length;
  if (n > INSERTION_SORT_MAX) return xs.sort();
  for (let i = 1; i < n; i++) {
    const v = xs[i] as number;
    let j = i - 1;
    while (j >= 0 && (xs[j] as number) > v) {
      xs[j + 1] = xs[j] as number;
      j--;
    }
    xs[j + 1] = v;
  }
  return xs;
}

/**
 * `base` with the values of `removed` taken out and those of `added` put in, all three ascending; undefined if a
 * removed value is not in base (the caller then sorts from scratch). Typed arrays throughout: building a plain
 * array element by element, or sorting one with a comparator, cost as much as the sort this replaces.
 */
export function mergeAscending(base: Float64Array, added: Float64Array, removed: Float64Array): Float64Array | undefined {
  const nAdd = added.length;
  const nDel = removed.length;
  const out = new Float64Array(base.length + nAdd - nDel);
  let o = 0;
  let a = 0;
  let d = 0;
  for (let i = 0; i < base.length; i++) {
    const v = base[i] as number;
    if (d < nDel) {
      const r = removed[d] as number;
      if (r < v) return undefined;
      if (r === v) {
        d++;
        continue;
      }
    }
    while (a < nAdd && (added[a] as number) < v) out[o++] = added[a++] as number;
    out[o++] = v;
  }
  if (d < nDel) return undefined;
  while (a < nAdd) out[o++] = added[a++] as number;
  return out;
}
