import { setTimeout as sleep } from "node:timers/promises";
import type { ClaimedItem } from "@infergrid/control-plane";
import { createModelRuntime, type ModelRuntime } from "@infergrid/models";
import { backend, control } from "@infergrid/proto";
import { createLogger } from "@infergrid/runtime";
import { eventually } from "@infergrid/testkit";
import { describe, expect, it } from "vitest";
import { type ItemOutcome, type JobItems, JobRunner, type JobRunnerOptions } from "./job-runner.js";

const logger = createLogger("test", "job-runner", "silent");

/** An in-memory job store: a queue of items, results written once, and a log of acks and naks. */
class FakeItems implements JobItems {
  readonly queue: number[] = [];
  readonly results = new Map<number, control.IJobItemResult>();
  readonly log: string[] = [];
  failRecords = 0;

  async claim(_name: string, options: { maxWaitMs: number }): Promise<ClaimedItem | undefined> {
    const item = this.queue.shift();
    if (item === undefined) {
      await sleep(options.maxWaitMs);
      return undefined;
    }
    return {
      item,
      redelivered: false,
      ackWaitMs: 1000,
      done: async () => void this.log.push(`ack ${item}`),
      abandon: async () => {
        this.log.push(`nak ${item}`);
        this.queue.unshift(item);
      },
      working: () => undefined,
    };
  }

  async hasResult(_job: string, item: number): Promise<boolean> {
    return this.results.has(item);
  }

  async recordResult(r: control.IJobItemResult): Promise<"recorded" | "exists"> {
    if (this.failRecords > 0) {
      this.failRecords -= 1;
      throw new Error("nats away");
    }
    const item = r.item ?? 0;
    if (this.results.has(item)) return "exists";
    this.results.set(item, r);
    return "recorded";
  }
}

function runner(items: FakeItems, itemMs: number, nominalMs = itemMs) {
  const outcomes: [number, ItemOutcome][] = [];
  const jobs: string[] = [];
  let n = 0;
  const r = new JobRunner({
    backendId: "b1",
    items,
    logger,
    createRuntime: (model, random) =>
      createModelRuntime(
        { kind: "emulated", profile: { shape: 0, loc: model?.profile?.locMs ?? itemMs, scale: 0 }, coldStartMs: 0 },
        { random },
      ),
    nominalItemMs: () => nominalMs,
    onItem: (_job, outcome) => outcomes.push([n++, outcome]),
    onJobChanged: (job) => jobs.push(job),
    claimWaitMs: 10,
    retryMs: 10,
  });
  return { r, outcomes: () => outcomes.map(([, o]) => o), jobs };
}

const spec = (items: number, locMs: number): control.BestEffortJobSpec.$Properties => ({
  name: "j",
  items,
  itemBatch: 1,
  seed: 3,
  model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { locMs } },
});
const loan = (s: control.BestEffortJobSpec.$Properties, graceMs = 0, version = 1) =>
  control.BackendAssignment.create({ backendId: "b1", job: s.name, jobSpec: s, graceMs, version });
const reclaim = (version = 2) => control.BackendAssignment.create({ backendId: "b1", service: "svc", version });

/** A model whose calls never end (a hung runtime), counting its calls and unloads. */
function hangingRuntime() {
  const counts = { calls: 0, unloads: 0 };
  const runtime: ModelRuntime = {
    name: "hangs",
    load: async () => ({ coldStartMs: 0 }),
    infer: () => {
      counts.calls++;
      return new Promise(() => undefined);
    },
    unload: async () => {
      counts.unloads++;
    },
  };
  return { runtime, counts };
}

/** A runner on a hanging model, its items of 5 ms nominally; `options` sets when an item counts as hung. */
function hangingRunner(items: FakeItems, options: Partial<JobRunnerOptions>) {
  const { runtime, counts } = hangingRuntime();
  const outcomes: ItemOutcome[] = [];
  const jobs: string[] = [];
  const r = new JobRunner({
    backendId: "b1",
    items,
    logger,
    createRuntime: () => runtime,
    nominalItemMs: () => 5,
    onItem: (_job, outcome) => outcomes.push(outcome),
    onJobChanged: (job) => jobs.push(job),
    claimWaitMs: 10,
    retryMs: 10,
    ...options,
  });
  return { r, counts, outcomes, jobs };
}

describe("JobRunner", () => {
  it("gives back an item whose model call hangs, and leaves the job without waiting for that call", async () => {
    const items = new FakeItems();
    items.queue.push(0, 1);
    const { r, counts, outcomes, jobs } = hangingRunner(items, { hungAfterMs: (expectedMs) => 20 * expectedMs });
    const t0 = Date.now();
    r.onAssignment(loan(spec(2, 5)));
    await eventually("unloaded", () => (counts.unloads === 1 ? true : undefined), 3000, 5);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
    expect(outcomes).toEqual(["failed"]);
    // Item 0 went back for another backend; item 1 was never claimed here.
    expect(items.log).toEqual(["nak 0"]);
    expect(items.queue).toEqual([0, 1]);
    expect(counts.calls).toBe(1);
    expect(jobs).toEqual(["j", ""]);
    expect(r.report()).toEqual({ job: "", jobItemsDone: 0, jobItemsRedone: 0 });
    await r.stop(0);
  });

  it("counts an item's compute time on the clock it is given: time its process stood still is not hung time", async () => {
    const items = new FakeItems();
    items.queue.push(0);
    let clock = 0;
    const { r, counts, outcomes } = hangingRunner(items, { hungAfterMs: () => 50, computeClock: () => clock });
    r.onAssignment(loan(spec(1, 5)));
    await eventually("computing", () => (counts.calls === 1 ? true : undefined), 2000, 5);
    // Six limits of wall time with the clock standing still: not hung.
    await sleep(300);
    expect(outcomes).toEqual([]);
    expect(r.itemInFlight).toBe(true);
    clock += 50;
    await eventually("given back", () => (outcomes.length === 1 ? true : undefined), 2000, 5);
    expect(outcomes).toEqual(["failed"]);
    expect(items.log).toEqual(["nak 0"]);
    await r.stop(0);
  });

  it("runs the job's items once each: skips recorded ones, records digests, reports the job and its counts", async () => {
    const items = new FakeItems();
    items.queue.push(0, 1, 2, 3);
    items.results.set(2, { job: "j", item: 2, backendId: "other" });
    const { r, outcomes, jobs } = runner(items, 5);
    r.onAssignment(loan(spec(4, 5)));
    await eventually("every item acked", () => (items.log.length === 4 ? true : undefined), 5000, 10);
    expect(items.log).toEqual(["ack 0", "ack 1", "ack 2", "ack 3"]);
    expect(outcomes()).toEqual(["done", "done", "skipped", "done"]);
    expect(items.results.get(0)).toMatchObject({ job: "j", item: 0, backendId: "b1", computeMs: 5 });
    expect(items.results.get(0)?.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(r.report()).toEqual({ job: "j", jobItemsDone: 3, jobItemsRedone: 0, state: backend.BackendState.BACKEND_STATE_BUSY });
    r.onAssignment(undefined);
    await eventually("let go", () => (r.job === "" ? true : undefined), 2000, 5);
    expect(r.report()).toEqual({ job: "", jobItemsDone: 0, jobItemsRedone: 0 });
    expect(jobs).toEqual(["j", ""]);
  });

  it("the same item computed on two backends gives the same digest", async () => {
    const a = new FakeItems();
    const b = new FakeItems();
    a.queue.push(7);
    b.queue.push(7);
    const ra = runner(a, 1).r;
    const rb = runner(b, 1).r;
    ra.onAssignment(loan(spec(8, 1)));
    rb.onAssignment(loan(spec(8, 1)));
    await eventually("both recorded", () => (a.results.has(7) && b.results.has(7) ? true : undefined), 5000, 10);
    expect(a.results.get(7)?.digest).toBe(b.results.get(7)?.digest);
    await Promise.all([ra.stop(0), rb.stop(0)]);
  });

  it("reclaimed: finishes the item in flight when it ends within the grace period, then takes no more", async () => {
    const items = new FakeItems();
    items.queue.push(0, 1, 2);
    const { r, outcomes } = runner(items, 150);
    r.onAssignment(loan(spec(3, 150), 1000));
    await sleep(50);
    const reclaimedAt = Date.now();
    r.onAssignment(reclaim());
    expect(r.report().state).toBe(backend.BackendState.BACKEND_STATE_DRAINING);
    await eventually("let go", () => (r.job === "" ? true : undefined), 2000, 5);
    expect(Date.now() - reclaimedAt).toBeLessThan(400);
    expect(items.log).toEqual(["ack 0"]);
    expect(outcomes()).toEqual(["done"]);
    expect([...items.queue]).toEqual([1, 2]);
  });

  it("reclaimed: abandons at once an item that cannot end within the grace period", async () => {
    const items = new FakeItems();
    items.queue.push(0, 1);
    const { r, outcomes } = runner(items, 500);
    r.onAssignment(loan(spec(2, 500), 100));
    await sleep(50);
    const reclaimedAt = Date.now();
    r.onAssignment(undefined);
    await eventually("nak", () => (items.log.length > 0 ? true : undefined), 2000, 5);
    expect(Date.now() - reclaimedAt).toBeLessThan(50);
    expect(items.log).toEqual(["nak 0"]);
    expect(outcomes()).toEqual(["abandoned"]);
    expect(items.results.size).toBe(0);
    await eventually("let go", () => (r.job === "" ? true : undefined), 2000, 5);
  });

  it("reclaimed: abandons an item that runs past the grace period at the deadline", async () => {
    const items = new FakeItems();
    items.queue.push(0);
    // Expected to take 20 ms, takes 400: finished at first, given back when the 100 ms grace ends.
    const { r, outcomes } = runner(items, 400, 20);
    r.onAssignment(loan(spec(1, 400), 100));
    await sleep(30);
    const reclaimedAt = Date.now();
    r.onAssignment(undefined);
    await eventually("nak", () => (items.log.length > 0 ? true : undefined), 2000, 5);
    const waited = Date.now() - reclaimedAt;
    expect(waited).toBeGreaterThanOrEqual(90);
    expect(waited).toBeLessThan(300);
    expect(outcomes()).toEqual(["abandoned"]);
  });

  it("shutting down is a reclaim with the grace capped", async () => {
    const items = new FakeItems();
    items.queue.push(0);
    const { r } = runner(items, 300, 20);
    r.onAssignment(loan(spec(1, 300), 10_000));
    await sleep(30);
    const stoppedAt = Date.now();
    await r.stop(50);
    expect(Date.now() - stoppedAt).toBeLessThan(250);
    expect(items.log).toEqual(["nak 0"]);
    r.onAssignment(loan(spec(1, 300), 10_000, 3));
    await sleep(30);
    expect(r.job).toBe("");
  });

  it("records through a NATS outage, counts an item recorded by someone else as redone, and moves to a new job", async () => {
    const items = new FakeItems();
    items.queue.push(0, 1);
    items.failRecords = 3;
    const { r, outcomes, jobs } = runner(items, 5);
    const first = spec(2, 5);
    // Item 1 gets recorded by another backend while this one computes it.
    const record = items.recordResult.bind(items);
    items.recordResult = async (res) => {
      if (res.item === 1 && !items.results.has(1)) items.results.set(1, { job: "j", item: 1, backendId: "other" });
      return record(res);
    };
    r.onAssignment(loan(first));
    await eventually("both acked", () => (items.log.length === 2 ? true : undefined), 5000, 10);
    expect(outcomes()).toEqual(["done", "redone"]);
    expect(r.report()).toMatchObject({ job: "j", jobItemsDone: 1, jobItemsRedone: 1 });
    r.onAssignment(loan({ ...first, name: "k" }, 0, 2));
    await eventually("on the new job", () => (r.job === "k" ? true : undefined), 2000, 5);
    expect(jobs).toEqual(["j", "", "k"]);
    await r.stop(0);
  });
});
