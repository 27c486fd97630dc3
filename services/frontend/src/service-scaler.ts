import type { control } from "@infergrid/proto";

export interface ScaleInputs {
  spec: control.ServiceSpec;
  listLength: number;
  /** The allocator's floor on n for this service. */
  minWarm: number;
  /** Whether list entry i may take requests (failed backends are skipped by every frontend alike). */
  usable?: (index: number) => boolean;
}

export interface ScaleOutcome {
  n: number;
  reason: string;
  frontendsEstimate: number;
  globalRatePerSec: number;
  /** Backends the model wants beyond the list's length (0 when the list suffices). */
  shortfall: number;
}

/** Per-service autoscaling state inside a frontend; the policy behind it is pure library code. */
export interface ServiceScaler {
  recordArrival(now: number): void;
  observeReply(backendId: string, frontendsSeen: number, computeMs: number | undefined, now: number): void;
  decide(now: number, inputs: ScaleInputs): ScaleOutcome;
  readonly n: number;
}

/** n = the allocator's min_warm (or the spec's initial size): no scaling of its own. */
export class StaticScaler implements ServiceScaler {
  n = 1;
  private frontends = 1;

  recordArrival(): void {}

  observeReply(_backendId: string, frontendsSeen: number): void {
    this.frontends = Math.max(1, frontendsSeen);
  }

  decide(_now: number, inputs: ScaleInputs): ScaleOutcome {
    const want = Math.max(inputs.minWarm, inputs.spec.initialBackends || 1, 1);
    this.n = Math.max(1, Math.min(want, inputs.listLength));
    return { n: this.n, reason: "static", frontendsEstimate: this.frontends, globalRatePerSec: 0, shortfall: 0 };
  }
}
