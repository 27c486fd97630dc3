import { control } from "@infergrid/proto";
import { FrontendScaler, SWAYAM_DEFAULTS } from "@infergrid/swayam";
import type { FrontendConfig } from "./config.js";
import { type ScaleInputs, type ScaleOutcome, type ServiceScaler, StaticScaler } from "./service-scaler.js";

/** Swayam's per-service policy (libs/swayam FrontendScaler) behind the frontend's scaler seam. */
export class SwayamScaler implements ServiceScaler {
  private readonly policy: FrontendScaler;

  constructor(config: FrontendConfig) {
    this.policy = new FrontendScaler({
      tSetupMs: config.tSetupMs,
      rateWindowMs: config.rateWindowMs,
      rateHistoryMs: config.rateHistoryMs,
      rateBucketMs: Math.min(config.rateWindowMs, Math.max(1000, config.rateWindowMs / 10)),
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
    this.policy.observeReply(backendId, frontendsSeen, computeMs, now);
  }

  decide(now: number, inputs: ScaleInputs): ScaleOutcome {
    const sla = inputs.spec.sla;
    const model = inputs.spec.model;
    const profile = model?.kind === control.ModelKind.MODEL_KIND_EMULATED ? model.profile : undefined;
    const out = this.policy.decide(now, {
      sla: {
        rtMaxMs: sla?.latencyThresholdMs || 1000,
        slMin: (sla?.percentile || SWAYAM_DEFAULTS.slMin * 100) / 100,
        burstFactor: sla?.burstFactor || SWAYAM_DEFAULTS.burstFactor,
      },
      listLength: inputs.listLength,
      minWarm: inputs.minWarm,
      ...(inputs.usable ? { usable: inputs.usable } : {}),
      ...(profile ? { serviceTimePrior: { shape: profile.shape ?? 0, loc: profile.locMs ?? 0, scale: profile.scaleMs ?? 0 } } : {}),
    });
    return {
      n: out.n,
      reason: out.reason,
      frontendsEstimate: out.frontendsEstimate,
      globalRatePerSec: out.globalRatePerSec,
      shortfall: Number.isFinite(out.sizing.shortfall) ? out.sizing.shortfall : inputs.listLength,
    };
  }
}

export function createScaler(config: FrontendConfig): ServiceScaler {
  return config.scaling === "static" ? new StaticScaler() : new SwayamScaler(config);
}
