import type { ServiceRegistry } from "@infergrid/control-plane";
import type { Lognormal } from "@infergrid/core";
import { type LatencyProfile, profileProblem, type TypedPricing, typedPricing } from "@infergrid/kairos";
import { control } from "@infergrid/proto";
import type { Logger } from "@infergrid/runtime";
import { type ServiceSla, SWAYAM_DEFAULTS } from "@infergrid/swayam";

export interface BackendRef {
  backendId: string;
  address: string;
  /** The backend's instance type, as the allocator listed it ("" when unknown). */
  instanceType: string;
}

/**
 * A registry entry as the frontend uses it: plain, fully typed values, every default applied here and nowhere
 * else. The allocator validates specs before it writes them; an entry that still lacks a latency threshold is
 * not served (there is nothing to size or dispatch it against).
 */
export interface ServiceView {
  name: string;
  spec: control.ServiceSpec;
  sla: ServiceSla;
  /** Swayam's pruning: refused requests that can no longer meet RT_max are dropped. */
  pruneLate: boolean;
  /** The spec's initial list length (the static scaler's floor). */
  initialBackends: number;
  /** The registered service-time profile of an emulated model, the scaler's prior until samples come in. */
  serviceTimePrior: Lognormal | undefined;
  backends: BackendRef[];
  version: number;
  minWarm: number;
  /**
   * Heterogeneous pools (Kairos): the model's latency per instance type against batch size, priced for
   * placing requests; undefined when the model has no per-type profiles (Swayam's random placement).
   */
  pricing: TypedPricing | undefined;
}

/** The entry as a ServiceView, or why it cannot be served. */
export function toView(name: string, entry: control.ServiceEntry): ServiceView | string {
  const spec = control.ServiceSpec.fromObject((entry.spec ?? {}) as Record<string, unknown>);
  const sla = spec.sla;
  const rtMaxMs = sla?.latencyThresholdMs ?? 0;
  if (!(Number.isFinite(rtMaxMs) && rtMaxMs > 0)) return `spec.sla.latencyThresholdMs must be positive (got ${rtMaxMs})`;
  const percentile = sla?.percentile || SWAYAM_DEFAULTS.slMin * 100;
  if (!(percentile > 0 && percentile < 100)) return `spec.sla.percentile must be in (0, 100) (got ${percentile})`;
  const profile = spec.model?.kind === control.ModelKind.MODEL_KIND_EMULATED ? spec.model.profile : undefined;
  const typed = new Map<string, LatencyProfile>();
  for (const [i, t] of (spec.model?.instanceProfiles ?? []).entries()) {
    const points = (t.points ?? []).map((p) => ({ batch: p.batch ?? 0, meanMs: p.meanMs ?? 0, p99Ms: p.p99Ms ?? 0 }));
    const problem = profileProblem(points);
    if (!t.instanceType || typed.has(t.instanceType) || problem !== undefined) {
      const what = problem ?? `instanceType: ${t.instanceType ? `${t.instanceType} given twice` : "empty"}`;
      return `spec.model.instanceProfiles[${i}].${what}`;
    }
    typed.set(t.instanceType, { points });
  }
  return {
    name,
    spec,
    sla: { rtMaxMs, slMin: percentile / 100, burstFactor: sla?.burstFactor || SWAYAM_DEFAULTS.burstFactor },
    pruneLate: spec.pruneLate === true,
    initialBackends: Math.max(1, spec.initialBackends || 1),
    serviceTimePrior: profile ? { shape: profile.shape ?? 0, loc: profile.locMs ?? 0, scale: profile.scaleMs ?? 0 } : undefined,
    backends: entry.backends
      .map((b) => ({ backendId: b.backendId ?? "", address: b.address ?? "", instanceType: b.instanceType ?? "" }))
      .filter((b) => b.backendId && b.address),
    version: Number(entry.version),
    minWarm: entry.minWarm,
    pricing: typed.size === 0 ? undefined : typedPricing(typed, rtMaxMs),
  };
}

/**
 * The frontend's copy of the registry: every service's spec and ordered backend list, as the
 * allocator last wrote it. All frontends watch the same versioned KV entries, which is what lets
 * them agree on who B_1..B_n are without talking to each other.
 */
export class ServiceTable {
  private readonly entries = new Map<string, ServiceView>();
  private stopWatch: (() => void) | undefined;

  constructor(
    private readonly registry: ServiceRegistry,
    private readonly logger: Logger,
    private readonly onChange: (name: string, view: ServiceView | undefined) => void,
  ) {}

  start(): void {
    this.stopWatch = this.registry.watchServices((name, entry) => {
      const previous = this.entries.get(name);
      if (!entry) {
        if (previous) this.logger.info({ service: name }, "service removed");
        this.entries.delete(name);
        this.onChange(name, undefined);
        return;
      }
      const view = toView(name, entry);
      if (typeof view === "string") {
        this.logger.warn({ service: name, problem: view }, "registry entry not served");
        return;
      }
      if (previous && previous.version > view.version) return;
      if (!previous || previous.version !== view.version) {
        this.logger.info({ service: name, version: view.version, backends: view.backends.length }, "ordered list updated");
      }
      this.entries.set(name, view);
      this.onChange(name, view);
    });
  }

  stop(): void {
    this.stopWatch?.();
  }

  get(name: string): ServiceView | undefined {
    return this.entries.get(name);
  }

  names(): string[] {
    return [...this.entries.keys()].sort();
  }

  addresses(): string[] {
    return [...this.entries.values()].flatMap((e) => e.backends.map((b) => b.address));
  }
}
