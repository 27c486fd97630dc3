import { InferenceServiceDefinition, type inference } from "@infergrid/proto";
import { type grpc, isServiceError, unaryCall } from "@infergrid/runtime";

export interface Outcome {
  sentAt: number;
  doneAt: number;
  ok: boolean;
  code: string;
  attempts: number;
  backendId: string;
}

/**
 * Open-loop load through the broker at a settable rate, recording every request's outcome.
 * Requests are sent on schedule whatever happens to earlier ones, as real clients do.
 */
export class LoadDriver {
  readonly outcomes: Outcome[] = [];
  private inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private sent = 0;
  private carry = 0;

  constructor(
    private readonly client: grpc.Client,
    private readonly request: () => inference.InferRequest.$Properties,
    private ratePerSec: number,
    private readonly timeoutMs = 10_000,
  ) {}

  start(): this {
    const tickMs = 20;
    this.timer = setInterval(() => {
      this.carry += (this.ratePerSec * tickMs) / 1000;
      while (this.carry >= 1) {
        this.carry -= 1;
        this.fire();
      }
    }, tickMs);
    return this;
  }

  setRate(ratePerSec: number): void {
    this.ratePerSec = ratePerSec;
  }

  get sentCount(): number {
    return this.sent;
  }

  private fire(): void {
    this.sent += 1;
    const sentAt = Date.now();
    const p = unaryCall(this.client, InferenceServiceDefinition.Infer, this.request(), { deadline: sentAt + this.timeoutMs }).then(
      (res) => {
        this.outcomes.push({
          sentAt,
          doneAt: Date.now(),
          ok: true,
          code: "OK",
          attempts: res.timing?.attempts ?? 0,
          backendId: res.backendId ?? "",
        });
      },
      (err: unknown) => {
        this.outcomes.push({
          sentAt,
          doneAt: Date.now(),
          ok: false,
          code: isServiceError(err) ? String(err.code) : "thrown",
          attempts: 0,
          backendId: "",
        });
      },
    );
    const tracked = p.finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.inFlight]);
  }

  /** Failed requests by gRPC status code name. */
  failureCodes(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const o of this.outcomes) if (!o.ok) out[o.code] = (out[o.code] ?? 0) + 1;
    return out;
  }

  /** Requests sent at or after `from` that failed or took longer than `rtMaxMs`, by send time. */
  misses(from: number, rtMaxMs: number): Outcome[] {
    return this.outcomes.filter((o) => o.sentAt >= from && (!o.ok || o.doneAt - o.sentAt > rtMaxMs)).sort((a, b) => a.sentAt - b.sentAt);
  }

  /** sent = answered + failed, or some request was lost. */
  counts(): { sent: number; answered: number; failed: number; lost: number } {
    const answered = this.outcomes.filter((o) => o.ok).length;
    const failed = this.outcomes.length - answered;
    return { sent: this.sent, answered, failed, lost: this.sent - answered - failed };
  }

  /**
   * The first time after `from` at which the last `window` requests (by send time) had at least
   * `slMin` of them answered within `rtMaxMs`, and stayed so for the rest of the run.
   */
  recoveredAt(from: number, rtMaxMs: number, slMin: number, window: number): number | undefined {
    const sorted = this.outcomes.filter((o) => o.sentAt >= from).sort((a, b) => a.sentAt - b.sentAt);
    const hit = sorted.map((o) => (o.ok && o.doneAt - o.sentAt <= rtMaxMs ? 1 : 0));
    let recovered: number | undefined;
    let sum = 0;
    for (let i = 0; i < hit.length; i++) {
      sum += hit[i] ?? 0;
      if (i >= window) sum -= hit[i - window] ?? 0;
      if (i + 1 < window) continue;
      const ok = sum >= Math.ceil(slMin * window - 1e-9);
      if (ok && recovered === undefined) recovered = sorted[i]?.sentAt;
      if (!ok) recovered = undefined;
    }
    return recovered;
  }
}
