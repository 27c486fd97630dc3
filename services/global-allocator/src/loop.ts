import type { Allocator } from "./allocator.js";

/**
 * Runs a reconcile every period, and soon after the allocator asks for one (membership
 * changed); requests that arrive while one is pending are folded into it.
 */
export function startControlLoop(
  allocator: Allocator,
  periodMs: number,
  onStep: (seconds: number) => void,
  beforeStep: (now: number) => void,
  now: () => number,
): { stop(): void } {
  let pending: NodeJS.Timeout | undefined;
  let stopped = false;
  const step = async () => {
    if (stopped) return;
    const start = performance.now();
    beforeStep(now());
    await allocator.reconcile(now());
    onStep((performance.now() - start) / 1000);
  };
  allocator.wake = () => {
    if (pending || stopped) return;
    pending = setTimeout(() => {
      pending = undefined;
      void step();
    }, 20);
  };
  const timer = setInterval(() => void step(), periodMs);
  void step();
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
      if (pending) clearTimeout(pending);
    },
  };
}
