/**
 * The allocator's Themis shell: per service whose model has a Themis profile, one transition machine from
 * libs/themis, ticked every second. It is the only writer of that service's backend sizes (resize calls)
 * and of its list length, so a resize never flaps between frontends (they never resize). Every decision is
 * the machine's; this class gathers its inputs, applies its outputs, and remembers what it asked for.
 */
import type { Logger } from "@infergrid/runtime";
import {
  type ScalingPolicy,
  type ThemisProfile,
  type TickDecision,
  type TransitionState,
  themisPolicy,
  throughputPerS,
} from "@infergrid/themis";
import type { ForecastView } from "./signals.js";

/** One entry of the service's list as the allocator sees it from heartbeats. */
export interface ListedBackend {
  id: string;
  /** Warm (idle or busy) for this service: it serves now. */
  warm: boolean;
  /** Its size as its last heartbeat reports it (1 / 1 before it has reported one). */
  cores: number;
  maxBatch: number;
}

/** A service the controller sizes, as of this tick. */
export interface ThemisService {
  name: string;
  profile: ThemisProfile;
  sloMs: number;
  /** A new backend's model load (the spec's cold start): when a starting one is expected to serve. */
  coldStartMs: number;
  /** The list as it stands, in order. */
  list: readonly ListedBackend[];
  /** The most backends its list may hold (the spec's max_backends; 0: only the cluster's capacity bounds it). */
  maxBackends: number;
}

/** Where the peak of the next window came from: the predictor's forecast, or the largest rate just observed. */
export type PeakSource = "forecast" | "observed";

export interface ThemisInputs {
  /** The service's global arrival rate now (the frontends' latest load reports, summed), req/s. */
  ratePerS(service: string, now: number): number | undefined;
  /** The upper quantile of the predictor's forecast over [now, now + horizonMs], req/s; undefined without a fresh one. */
  forecastPeakPerS(service: string, now: number, horizonMs: number): number | undefined;
}

export interface ThemisOutputs {
  /** Resizes a backend in place (the pool actuator); resolves once the backend has accepted it. */
  resize(backendId: string, cores: number, maxBatch: number): Promise<void>;
  /** Told of every resize sent ("up"/"down": the cores; "batch": only the batch changed) and every one that failed. */
  onResize?(what: "up" | "down" | "batch" | "failed"): void;
}

export interface ThemisControllerOptions {
  /** The most cores one backend may have (its node's). */
  nodeCores: number;
  /** The largest batch a backend may be given (at most the workers' own bound). */
  maxBatch: number;
  /** The cluster's capacity in backends: no list grows beyond it. */
  maxListLength: number;
  /** The window whose peak is planned for (Themis: the next 10 s). */
  horizonMs: number;
  /** A resize the heartbeats do not show applied after this long is asked again. */
  resizeRetryMs: number;
  /** The transition rule every service's machine runs (libs/themis; this system's default: `themisPolicy()`). */
  policy?: ScalingPolicy;
}

/** What the allocator applies to a service's list: its length, and which entries leave it first. */
export interface ListTarget {
  length: number;
  remove: readonly string[];
}

interface Asked {
  cores: number;
  maxBatch: number;
  at: number;
}

interface ServiceState {
  machine: TransitionState;
  /** Observed rates of the last horizon, for the peak when there is no forecast. */
  rates: { at: number; ratePerS: number }[];
  target: ListTarget | undefined;
  last: TickDecision | undefined;
  /** When each entry not yet warm was first seen in the list (its expected ready time counts from there). */
  listedSince: Map<string, number>;
  /** The last tick's rate was beyond the ceiling (warned once per spell). */
  clamped: boolean;
}

export interface ThemisTickReport {
  service: string;
  ratePerS: number;
  peakPerS: number;
  peakSource: PeakSource;
  decision: TickDecision;
  resized: { id: string; cores: number; maxBatch: number }[];
}

export class ThemisController {
  private readonly services = new Map<string, ServiceState>();
  /** Per backend, the size last asked of it (until its heartbeats show it, or the retry time passes). */
  private readonly asked = new Map<string, Asked>();
  private readonly policy: ScalingPolicy;

  constructor(
    private readonly inputs: ThemisInputs,
    private readonly outputs: ThemisOutputs,
    private readonly options: ThemisControllerOptions,
    private readonly logger: Logger,
  ) {
    this.policy = options.policy ?? themisPolicy();
  }

  /** The list the machine wants for `service`; undefined for a service it does not size (yet). */
  target(service: string): ListTarget | undefined {
    return this.services.get(service)?.target;
  }

  /** Whether `service` is sized by this controller. */
  sizes(service: string): boolean {
    return this.services.has(service);
  }

  /** The machine's last decision for `service` (its mode, for the cluster state and logs). */
  lastDecision(service: string): TickDecision | undefined {
    return this.services.get(service)?.last;
  }

  /**
   * One tick over the Themis services: each machine steps once on the current rate, the peak of the next
   * window and the warm and starting backends; resizes go out at once, the list target is kept for the
   * allocator's next reconcile. Services no longer given are forgotten.
   */
  tick(now: number, services: readonly ThemisService[]): ThemisTickReport[] {
    const names = new Set(services.map((s) => s.name));
    for (const name of [...this.services.keys()]) if (!names.has(name)) this.services.delete(name);
    const listed = new Set(services.flatMap((s) => s.list.map((b) => b.id)));
    for (const id of [...this.asked.keys()]) if (!listed.has(id)) this.asked.delete(id);
    return services.flatMap((s) => {
      const report = this.step(now, s);
      return report ? [report] : [];
    });
  }

  /**
   * The rate the service's longest possible list serves as the one-core replicas the machine starts for load
   * (at the largest batch): planned for, it fills that list, and no more.
   */
  private ceilingPerS(s: ThemisService): number {
    const length = s.maxBackends > 0 ? Math.min(s.maxBackends, this.options.maxListLength) : this.options.maxListLength;
    return Math.max(1, length) * throughputPerS(s.profile, this.options.maxBatch, 1);
  }

  private step(now: number, s: ThemisService): ThemisTickReport | undefined {
    let state = this.services.get(s.name);
    if (!state) {
      state = {
        machine: this.policy.initialState(),
        rates: [],
        target: undefined,
        last: undefined,
        listedSince: new Map(),
        clamped: false,
      };
      this.services.set(s.name, state);
    }
    const reported = this.inputs.ratePerS(s.name, now);
    // No load report yet: nothing to size from; the list keeps what it has.
    if (reported === undefined) return undefined;
    // More than the largest list could serve is planned as that much: the rates are the frontends' word, and
    // a report claiming billions a second must not make the machine plan (and build) billions of backends.
    const ceiling = this.ceilingPerS(s);
    const rate = Math.min(reported, ceiling);
    if (reported > ceiling && !state.clamped) {
      this.logger.warn(
        { service: s.name, ratePerS: reported, ceilingPerS: ceiling },
        "reported rate beyond what the largest list serves; planned at that",
      );
    }
    state.clamped = reported > ceiling;
    state.rates = state.rates.filter((r) => now - r.at <= this.options.horizonMs);
    state.rates.push({ at: now, ratePerS: rate });
    const forecast = this.inputs.forecastPeakPerS(s.name, now, this.options.horizonMs);
    const peakSource: PeakSource = forecast === undefined ? "observed" : "forecast";
    const peak = Math.min(forecast ?? Math.max(...state.rates.map((r) => r.ratePerS)), ceiling);

    // A backend is planned at the size it was asked for until its heartbeats show it (the resize applies
    // at its next batch): the machine must not decide again from a size that is already on its way.
    const sized = s.list.map((b) => ({ ...b, ...this.pending(b, now) }));
    const since = state.listedSince;
    for (const id of [...since.keys()]) if (!sized.some((b) => b.id === id && !b.warm)) since.delete(id);
    for (const b of sized) if (!b.warm && !since.has(b.id)) since.set(b.id, now);
    // Listed but not warm yet, and asked for but not listed yet (the pool is still starting them).
    const starting = [
      ...sized.filter((b) => !b.warm).map((b) => ({ id: b.id, cores: b.cores, readyAtMs: (since.get(b.id) ?? now) + s.coldStartMs })),
      ...Array.from({ length: Math.max(0, (state.target?.length ?? 0) - s.list.length) }, (_, i) => ({
        id: `${UNLISTED}${i}`,
        cores: 1,
        readyAtMs: now + s.coldStartMs,
      })),
    ];
    const { state: next, decision } = this.policy.step(state.machine, {
      nowMs: now,
      ratePerS: rate,
      predictedPeakPerS: peak,
      warm: sized.filter((b) => b.warm).map((b) => ({ id: b.id, cores: b.cores, batch: b.maxBatch })),
      starting,
      service: { profile: s.profile, sloMs: s.sloMs, maxCores: this.options.nodeCores, maxBatch: this.options.maxBatch },
    });
    state.machine = next;
    state.last = decision;

    const resized: ThemisTickReport["resized"] = [];
    for (const t of decision.targets) {
      const b = sized.find((x) => x.id === t.id);
      if (!b || (b.cores === t.cores && b.maxBatch === t.batch)) continue;
      this.ask(t.id, t.cores, t.batch, b.cores, now);
      resized.push({ id: t.id, cores: t.cores, maxBatch: t.batch });
    }
    // An entry not listed yet that the machine drops is one fewer to ask the pool for.
    const remove = decision.remove.filter((id) => s.list.some((b) => b.id === id));
    const unlisted = starting.length - sized.filter((b) => !b.warm).length;
    const length = Math.max(1, s.list.length + unlisted - decision.remove.length + decision.start.length);
    const previous = state.target;
    state.target = { length, remove };
    if (resized.length > 0 || previous?.length !== length || remove.length > 0 || previous === undefined) {
      this.logger.info(
        { service: s.name, mode: decision.mode, ratePerS: round(rate), peakPerS: round(peak), peakSource, length, remove, resized },
        decision.reason,
      );
    }
    return { service: s.name, ratePerS: rate, peakPerS: peak, peakSource, decision, resized };
  }

  /** The size a backend is on its way to, while its heartbeats do not show it yet and the retry time has not passed. */
  private pending(b: ListedBackend, now: number): { cores: number; maxBatch: number } {
    const a = this.asked.get(b.id);
    if (!a) return { cores: b.cores, maxBatch: b.maxBatch };
    if ((a.cores === b.cores && a.maxBatch === b.maxBatch) || now - a.at > this.options.resizeRetryMs) {
      this.asked.delete(b.id);
      return { cores: b.cores, maxBatch: b.maxBatch };
    }
    return { cores: a.cores, maxBatch: a.maxBatch };
  }

  private ask(id: string, cores: number, maxBatch: number, from: number, now: number): void {
    this.asked.set(id, { cores, maxBatch, at: now });
    this.outputs.onResize?.(cores > from ? "up" : cores < from ? "down" : "batch");
    this.outputs.resize(id, cores, maxBatch).catch((err: unknown) => {
      this.outputs.onResize?.("failed");
      // Forget it: the next tick plans from what the heartbeats say and asks again.
      if (this.asked.get(id)?.at === now) this.asked.delete(id);
      this.logger.warn({ backend: id, cores, maxBatch, err }, "resize failed; asked again on a later tick");
    });
  }
}

const round = (x: number) => Math.round(x * 100) / 100;
/** Ids given to backends asked of the pool but not in the list yet (never a backend's id: ids take no colon). */
const UNLISTED = "unlisted:";

/**
 * The peak the Themis controller plans for: the forecast's highest published quantile over the steps that
 * overlap [now, now + horizonMs] (step i covers [issuedAt + i*step, issuedAt + (i+1)*step)); undefined
 * without a forecast or when none of its steps reaches into the window.
 */
export function forecastPeak(f: ForecastView | undefined, now: number, horizonMs: number): number | undefined {
  const top = f?.quantiles.at(-1);
  if (!f || !top) return undefined;
  let peak: number | undefined;
  for (const [i, rate] of top.ratePerS.entries()) {
    const from = f.issuedAt + i * f.stepMs;
    if (from + f.stepMs <= now || from >= now + horizonMs) continue;
    peak = Math.max(peak ?? 0, rate);
  }
  return peak;
}
