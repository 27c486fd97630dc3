import { staticPrefixLength } from "@infergrid/swayam";
import type { ServiceView } from "./service-table.js";

export interface ScaleInputs {
  service: ServiceView;
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

/** n = the allocator's min_warm (or the spec's initial size), or what `prefix` says: no scaling of its own. */
export class StaticScaler implements ServiceScaler {
  n = 1;
  private frontends = 1;

  constructor(
    private readonly prefix: (service: ScaleInputs["service"]) => number = (s) =>
      staticPrefixLength(s.minWarm, s.initialBackends, s.backends.length),
    private readonly reason = "static",
  ) {}

  recordArrival(): void {}

  observeReply(_backendId: string, frontendsSeen: number): void {
    this.frontends = Math.max(1, frontendsSeen);
  }

  decide(_now: number, { service }: ScaleInputs): ScaleOutcome {
    this.n = this.prefix(service);
    return { n: this.n, reason: this.reason, frontendsEstimate: this.frontends, globalRatePerSec: 0, shortfall: 0 };
  }
}
