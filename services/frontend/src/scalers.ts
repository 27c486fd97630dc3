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

export function createScaler(config: FrontendConfig): ServiceScaler {
  return config.scaling === "static" ? new StaticScaler() : new SwayamScaler(config);
}
