import { grpc } from "@infergrid/runtime";
/** Percentile by nearest rank over a sorted copy. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

function errorKey(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "number") return grpc.status[code] ?? String(code);
  return err instanceof Error ? err.message : String(err);
}

export interface LoopResult {
  requests: number;
  errors: number;
  /** Errors by gRPC status name (or the error's message when it carries no code). */
  errorsByCode: Record<string, number>;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
}

/**
 * `concurrency` workers each send the next request as soon as the last one is answered, for
 * `durationMs` after a warm-up that is not measured. `window` is told when the measured window opens and closes.
 */
export async function closedLoop(
  call: () => Promise<unknown>,
  concurrency: number,
  warmupMs: number,
  durationMs: number,
  window: { onStart?(): void; onEnd?(): void } = {},
): Promise<LoopResult> {
  const latencies: number[] = [];
  let errors = 0;
  const errorsByCode: Record<string, number> = {};
  let measuring = false;
  let stop = false;
  const worker = async () => {
    while (!stop) {
      const t0 = performance.now();
      try {
        await call();
        if (measuring) latencies.push(performance.now() - t0);
      } catch (err) {
        if (measuring) {
          errors += 1;
          const key = errorKey(err);
          errorsByCode[key] = (errorsByCode[key] ?? 0) + 1;
        }
      }
    }
  };
  const workers = Array.from({ length: concurrency }, () => worker());
  await new Promise((r) => setTimeout(r, warmupMs));
  measuring = true;
  window.onStart?.();
  const started = performance.now();
  await new Promise((r) => setTimeout(r, durationMs));
  measuring = false;
  window.onEnd?.();
  const seconds = (performance.now() - started) / 1000;
  stop = true;
  await Promise.all(workers);
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    errorsByCode,
    seconds,
    perSecond: latencies.length / seconds,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    meanMs: latencies.length > 0 ? latencies.reduce((a, b) => a + b, 0) / latencies.length : Number.NaN,
  };
}
