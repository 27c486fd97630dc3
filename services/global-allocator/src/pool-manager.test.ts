import type { PoolActuator } from "@infergrid/pool-actuator";
import { createLogger } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { PoolManager, type PoolManagerAllocator } from "./pool-manager.js";

const logger = createLogger("test", "pool-manager", "silent");
const SIZING = { minSize: 1, maxSize: 10, headroom: 1, scaleDownDelayMs: 1_000 };

/** An allocator whose lists want nothing and whose free backends have idled since 0; it records retirements. */
function allocator() {
  const retiring = new Set<string>();
  const fake: PoolManagerAllocator = {
    poolView: () => ({
      demand: 0,
      live: 5,
      free: ["b1", "b2", "b3", "b4"].map((id) => ({ id, since: 0 })),
    }),
    typedTotals: () => undefined,
    retire: (ids) => {
      for (const id of ids) retiring.add(id);
    },
    unretire: (ids) => {
      for (const id of ids) retiring.delete(id);
    },
    instanceTypeOf: () => undefined,
  };
  return { fake, retiring };
}

function actuator(fail: boolean) {
  const asked: number[] = [];
  const a = {
    kind: "kubernetes",
    currentSize: async () => 5,
    scaleTo: async (n: number) => {
      asked.push(n);
      if (fail) throw new Error("the API server said 409 three times");
    },
  } as unknown as PoolActuator;
  return { a, asked };
}

describe("PoolManager", () => {
  it("retires the backends a shrink removes first, and keeps them retired once the platform accepted it", async () => {
    const { fake, retiring } = allocator();
    const { a, asked } = actuator(false);
    await new PoolManager(fake, a, SIZING, logger).step(10_000);
    // Demand 0 + headroom 1: from 5 to 1, the four free ones first.
    expect(asked).toEqual([1]);
    expect([...retiring].sort()).toEqual(["b1", "b2", "b3", "b4"]);
  });

  it("gives the retired backends back when the resize fails: they are not stranded out of every list", async () => {
    const { fake, retiring } = allocator();
    const { a, asked } = actuator(true);
    const manager = new PoolManager(fake, a, SIZING, logger);
    await manager.step(10_000);
    expect(asked).toEqual([1]);
    expect([...retiring]).toEqual([]);
    // The next step tries again, with the same backends.
    await manager.step(11_000);
    expect(asked).toEqual([1, 1]);
    expect([...retiring]).toEqual([]);
  });
});
