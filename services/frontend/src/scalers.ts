import { FrontendScaler } from "@infergrid/swayam";
import type { FrontendConfig } from "./config.js";
import { type ScaleInputs, type ScaleOutcome, type ServiceScaler, StaticScaler } from "./service-scaler.js";

/** Swayam's per-service policy (libs/swayam FrontendScaler) behind the frontend's scaler seam. */
export class SwayamScaler implements ServiceScaler {
  private readonly policy: FrontendScaler;
  /** Each listed backend's instance type, as of the last decision: replies are attributed to their type. */
  private typeOf = new Map<string, string>();

  constructor(config: FrontendConfig) {
    this.policy = new FrontendScaler({
      tSetupMs: config.tSetupMs,
      rateWindowMs: config.rateWindowMs,
      rateHistoryMs: config.rateHistoryMs,
      scaleInCooldownMs: config.scaleInCooldownMs,
      probeCostMs: config.networkRttMs + config.retryGapMs,
      fixedDelayMs: config.networkRttMs,
      learnedHeadroom: config.learnedHeadroom,
    });
  }

  get n(): number {
    return this.policy.n;
  }

  recordArrival(now: number): void {
    this.policy.recordArrival(now);
  }

  observeReply(backendId: string, frontendsSeen: number, computeMs: number | undefined, now: number): void {
    this.policy.observeReply(backendId, frontendsSeen, computeMs, now, this.typeOf.get(backendId));
  }

  decide(now: number, { service, usable }: ScaleInputs): ScaleOutcome {
    const listLength = service.backends.length;
    this.typeOf = new Map(service.backends.flatMap((b) => (b.instanceType ? [[b.backendId, b.instanceType] as const] : [])));
    const out = this.policy.decide(now, {
      entryType: (i) => service.backends[i]?.instanceType || undefined,
      sla: service.sla,
      listLength,
      minWarm: service.minWarm,
      ...(usable ? { usable } : {}),
      ...(service.serviceTimePrior ? { serviceTimePrior: service.serviceTimePrior } : {}),
    });
    return {
      n: out.n,
      reason: out.reason,
      frontendsEstimate: out.frontendsEstimate,
      globalRatePerSec: out.globalRatePerSec,
      shortfall: Number.isFinite(out.sizing.shortfall) ? out.sizing.shortfall : listLength,
    };
  }
}

/**
 * A service whose model has a Themis profile is sized by the allocator's Themis controller, with the
 * batching-aware model, and every backend of its list kept warm: the frontends use the whole list (n = its
 * length) and must not size it again with Swayam's one-request-at-a-time queueing model.
 */
export class WholeListScaler extends StaticScaler {
  constructor() {
    super((service) => Math.max(1, service.backends.length), "themis: the allocator sizes the list");
  }
}

/** Whether the allocator's Themis controller sizes this service (its model has a Themis profile). */
export function sizedByThemis(service: ScaleInputs["service"]): boolean {
  return service.spec.model?.themis != null;
}

/** The configured scaler, or the whole list for a service the allocator sizes with Themis; chosen per decision from the spec. */
class PerSpecScaler implements ServiceScaler {
  private readonly whole = new WholeListScaler();
  private current: ServiceScaler;

  constructor(private readonly configured: ServiceScaler) {
    this.current = configured;
  }

  get n(): number {
    return this.current.n;
  }

  recordArrival(now: number): void {
    this.configured.recordArrival(now);
  }

  observeReply(backendId: string, frontendsSeen: number, computeMs: number | undefined, now: number): void {
    this.configured.observeReply(backendId, frontendsSeen, computeMs, now);
    this.whole.observeReply(backendId, frontendsSeen);
  }

  decide(now: number, inputs: ScaleInputs): ScaleOutcome {
    this.current = sizedByThemis(inputs.service) ? this.whole : this.configured;
    return this.current.decide(now, inputs);
  }
}

export function createScaler(config: FrontendConfig): ServiceScaler {
  return new PerSpecScaler(config.scaling === "static" ? new StaticScaler() : new SwayamScaler(config));
}
