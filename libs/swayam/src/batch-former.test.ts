import { describe, expect, it } from "vitest";
import { admittedRequests, BatchFormer, MAX_ADMITTED_BATCHES } from "./batch-former.js";

describe("BatchFormer", () => {
  it("with b = 1 and no timeout runs each request alone, the next at the previous one's finish", () => {
    const f = new BatchFormer<string>({ maxBatch: 1, timeoutMs: 0 });
    expect(f.add(0, "a")).toEqual({ run: ["a"] });
    expect(f.add(1, "b")).toEqual({});
    expect(f.running).toBe(1);
    expect(f.waiting).toBe(1);
    expect(f.finished(5)).toEqual({ run: ["b"] });
    expect(f.finished(9)).toEqual({});
    expect(f.running).toBe(0);
  });

  it("closes at b: a partial batch waits on an idle model until the b-th request", () => {
    const f = new BatchFormer<string>({ maxBatch: 3, timeoutMs: Number.POSITIVE_INFINITY });
    expect(f.add(0, "a")).toEqual({});
    expect(f.add(10, "b")).toEqual({});
    expect(f.timer(1e9)).toEqual({});
    expect(f.add(20, "c")).toEqual({ run: ["a", "b", "c"] });
    expect(f.waiting).toBe(0);
    expect(f.running).toBe(3);
  });

  it("closes timeoutMs after its first request, and a timer at the deadline always fires", () => {
    const f = new BatchFormer<string>({ maxBatch: 4, timeoutMs: 50 });
    expect(f.add(100.1, "a")).toEqual({ timerAt: 150.1 });
    // A later request keeps the first one's deadline.
    expect(f.add(120, "b")).toEqual({ timerAt: 150.1 });
    expect(f.timer(150)).toEqual({ timerAt: 150.1 });
    expect(f.timer(f.deadline() ?? Number.NaN)).toEqual({ run: ["a", "b"] });
    // A stale timer for the batch that has run does nothing.
    expect(f.timer(151)).toEqual({});
  });

  it("a zero timeout runs whatever formed as soon as the model is idle", () => {
    const f = new BatchFormer<number>({ maxBatch: 4, timeoutMs: 0 });
    expect(f.add(0, 1)).toEqual({ run: [1] });
    f.add(1, 2);
    f.add(2, 3);
    expect(f.finished(3)).toEqual({ run: [2, 3] });
  });

  it("the next batch forms while one runs and runs at its finish when full or timed out", () => {
    const f = new BatchFormer<string>({ maxBatch: 2, timeoutMs: 30 });
    f.add(0, "a");
    expect(f.add(5, "b")).toEqual({ run: ["a", "b"] });
    // While a batch runs no timer is asked for: the next batch cannot start before the finish anyway.
    expect(f.add(10, "c")).toEqual({});
    expect(f.timer(40)).toEqual({});
    // c has waited 35 >= 30 by the finish: it runs alone.
    expect(f.finished(45)).toEqual({ run: ["c"] });
    f.add(50, "d");
    // d waited only 10 at c's finish: it waits for its own deadline, or a partner.
    expect(f.finished(60)).toEqual({ timerAt: 80 });
    expect(f.add(70, "e")).toEqual({ run: ["d", "e"] });
  });

  it("a full batch formed during a run starts at the finish; more than b wait for the following one", () => {
    const f = new BatchFormer<number>({ maxBatch: 2, timeoutMs: Number.POSITIVE_INFINITY });
    f.add(0, 1);
    f.add(0, 2);
    for (const [t, x] of [
      [1, 3],
      [2, 4],
      [3, 5],
    ] as const)
      expect(f.add(t, x)).toEqual({});
    expect(f.finished(10)).toEqual({ run: [3, 4] });
    expect(f.finished(20)).toEqual({});
    expect(f.waiting).toBe(1);
  });

  it("resize mid-batch applies to the next batch; waiting requests are kept", () => {
    const f = new BatchFormer<number>({ maxBatch: 4, timeoutMs: Number.POSITIVE_INFINITY });
    for (let i = 1; i <= 4; i++) f.add(i, i);
    expect(f.running).toBe(4);
    // Shrink while the batch of 4 runs: it is unaffected.
    expect(f.resize(5, 2)).toEqual({});
    expect(f.running).toBe(4);
    for (let i = 5; i <= 7; i++) f.add(i, i);
    expect(f.finished(10)).toEqual({ run: [5, 6] });
    expect(f.maxBatch).toBe(2);
    // Growing lets a partial batch wait for more; shrinking below what waits closes it on an idle model.
    expect(f.finished(11)).toEqual({});
    expect(f.resize(12, 3)).toEqual({});
    f.add(13, 8);
    expect(f.resize(14, 1)).toEqual({ run: [7] });
    expect(f.finished(15)).toEqual({ run: [8] });
  });

  it("resize can change the timeout: a shorter one closes a batch whose wait already exceeds it", () => {
    const f = new BatchFormer<string>({ maxBatch: 3, timeoutMs: 100 });
    expect(f.add(0, "a")).toEqual({ timerAt: 100 });
    expect(f.resize(40, 3, 20)).toEqual({ run: ["a"] });
  });

  it("a withdrawn request leaves the forming batch", () => {
    const f = new BatchFormer<string>({ maxBatch: 2, timeoutMs: 100 });
    f.add(0, "a");
    expect(f.withdraw(1, "a")).toEqual({ removed: true, step: {} });
    expect(f.withdraw(1, "a").removed).toBe(false);
    expect(f.add(2, "b")).toEqual({ timerAt: 102 });
  });

  it("rejects a batch size below 1 or a negative timeout", () => {
    expect(() => new BatchFormer({ maxBatch: 0, timeoutMs: 0 })).toThrow(/maxBatch/);
    expect(() => new BatchFormer({ maxBatch: 1.5, timeoutMs: 0 })).toThrow(/maxBatch/);
    expect(() => new BatchFormer({ maxBatch: 1, timeoutMs: -1 })).toThrow(/timeoutMs/);
  });
});

describe("admittedRequests", () => {
  it("is one without batching (Swayam's backend never queues) and a batch running plus one forming with it", () => {
    expect(admittedRequests(1)).toBe(1);
    expect(admittedRequests(4)).toBe(8);
  });

  it("for a backend sized by Themis, is the batches it finishes within half the SLO, at least 2 and at most the cap", () => {
    // ResNet-18 on 8 cores at batch 1: 7.8 ms a batch, SLO 1000 ms -> 64 batches wait at most 500 ms.
    expect(admittedRequests(1, { batchMs: 7.8, sloMs: 1000 })).toBe(64);
    expect(admittedRequests(4, { batchMs: 100, sloMs: 1000 })).toBe(20);
    // A batch longer than the SLO still runs one and forms the next.
    expect(admittedRequests(16, { batchMs: 1090, sloMs: 1000 })).toBe(32);
    expect(admittedRequests(1, { batchMs: 0.01, sloMs: 1000 })).toBe(MAX_ADMITTED_BATCHES);
    // No SLO known (an assignment that does not carry it): a batch running and one forming.
    expect(admittedRequests(1, { batchMs: 7.8, sloMs: 0 })).toBe(2);
  });
});
