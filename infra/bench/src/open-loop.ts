import { percentile } from "./closed-loop.js";

export interface OpenLoopResult {
  sent: number;
  answered: number;
  errors: number;
  p50Ms: number;
  p99Ms: number;
  /** The measured requests' latencies, ms, ascending. */
  latencies: number[];
}

/**
 * Requests sent at a fixed rate, evenly spaced, whatever the answers do (open loop), for `durationMs` after an
 * unmeasured warm-up. Below saturation the latencies are what each hop adds, not the queue a closed loop builds
 * when it keeps the CPU busy. A send that falls behind its schedule (a busy event loop) goes out at once.
 */
export async function openLoop(
  call: () => Promise<unknown>,
  ratePerSec: number,
  warmupMs: number,
  durationMs: number,
  /** Called as the first measured request goes out, and once the last measured one has ended (a CPU meter's window). */
  window: { onStart?(): void; onEnd?(): void } = {},
): Promise<OpenLoopResult> {
  if (!(ratePerSec > 0)) throw new Error(`rate must be positive, got ${ratePerSec}`);
  const gapMs = 1000 / ratePerSec;
  const latencies: number[] = [];
  const pending: Promise<void>[] = [];
  let sent = 0;
  let errors = 0;
  const start = performance.now();
  const measureFrom = start + warmupMs;
  const end = measureFrom + durationMs;
  for (let i = 0; ; i++) {
    const at = start + i * gapMs;
    if (at >= end) break;
    const wait = at - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const measured = at >= measureFrom;
    if (measured && sent === 0) window.onStart?.();
    if (measured) sent += 1;
    const t0 = performance.now();
    pending.push(
      call().then(
        () => {
          if (measured) latencies.push(performance.now() - t0);
        },
        () => {
          if (measured) errors += 1;
        },
      ),
    );
  }
  await Promise.all(pending);
  window.onEnd?.();
  latencies.sort((a, b) => a - b);
  return { sent, answered: latencies.length, errors, p50Ms: percentile(latencies, 0.5), p99Ms: percentile(latencies, 0.99), latencies };
}

/**
 * Several windows of one open loop as one: counts summed, percentiles over every latency. A p99 over one 10 s
 * window rests on a hundred or so requests, and a pause of the load generator's own collector that falls in it
 * (every few seconds, 5-17 ms) moves it by milliseconds; windows taken in turn with the other path's spread those
 * pauses over both.
 */
export function pooled(results: readonly OpenLoopResult[]): OpenLoopResult {
  if (results.length === 0) throw new Error("no open-loop windows to pool");
  const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const sum = (f: (r: OpenLoopResult) => number) => results.reduce((a, r) => a + f(r), 0);
  return {
    sent: sum((r) => r.sent),
    answered: sum((r) => r.answered),
    errors: sum((r) => r.errors),
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    latencies,
  };
}
