import { seededRandom } from "@infergrid/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { inferenceNeed, type LoanInput, type LoanJob, loanOrder, planLoans } from "./loan-plan.js";

const job = (name: string, over: Partial<LoanJob> = {}): LoanJob => ({
  name,
  priority: 0,
  submittedAtMs: 0,
  minBackends: 1,
  maxBackends: 10,
  held: 0,
  remaining: 100,
  ...over,
});
const settings = { strategy: "fewest-preemptions" as const, random: seededRandom(1) };
const base: LoanInput = { live: 10, inferenceNeed: 6, loans: [], returning: 0, free: [], jobs: [] };

describe("loaning", () => {
  it("lends only what inference does not need, in priority then arrival order", () => {
    const d = planLoans(
      {
        ...base,
        free: ["f1", "f2", "f3", "f4", "f5"],
        jobs: [
          job("late", { submittedAtMs: 2, maxBackends: 2 }),
          job("urgent", { priority: 5, submittedAtMs: 3, maxBackends: 2 }),
          job("early", { submittedAtMs: 1, maxBackends: 2 }),
        ],
      },
      settings,
    );
    // 10 live, 6 for inference: 4 to lend; every job first gets its minimum (1), then urgent and early grow.
    expect(d.loans).toEqual([
      { backend: "f1", job: "urgent" },
      { backend: "f2", job: "early" },
      { backend: "f3", job: "late" },
      { backend: "f4", job: "urgent" },
    ]);
    expect(d.inferencePool).toBe(6);
    expect(d.toFree).toBe(0);
    expect(d.reclaim.servers).toEqual([]);
  });

  it("asks inference to give up list backends beyond its need when jobs want more than is free", () => {
    // 10 live, inference needs 4, one backend free: one is lent, and 5 more should leave the lists.
    const d = planLoans({ ...base, inferenceNeed: 4, free: ["f1"], jobs: [job("a", { maxBackends: 8 })] }, settings);
    expect(d.loans).toEqual([{ backend: "f1", job: "a" }]);
    expect(d.toFree).toBe(5);
    expect(d.inferencePool).toBe(4);
  });

  it("keeps `spare` backends beyond the need before lending, and reclaims only below the need", () => {
    const jobs = [job("a")];
    const loan = (id: string) => ({ id, jobs: ["a"] });
    // 10 live, need 6, spare 1: 3 lent, not 4.
    const lent = planLoans({ ...base, spare: 1, free: ["f1", "f2", "f3", "f4"], jobs }, settings);
    expect(lent.loans.map((l) => l.backend)).toEqual(["f1", "f2", "f3"]);
    expect(lent.inferencePool).toBe(7);
    // With 4 on loan the need rising to 6 takes nothing back (the spare absorbs it), nor is more lent...
    const held = planLoans({ ...base, spare: 1, loans: ["l1", "l2", "l3", "l4"].map(loan), free: ["f1"], jobs }, settings);
    expect(held.reclaim.servers).toEqual([]);
    expect(held.loans).toEqual([]);
    // ...and a need of 7 takes back exactly one: the need, not the need plus the spare.
    const back = planLoans({ ...base, inferenceNeed: 7, spare: 1, loans: ["l1", "l2", "l3", "l4"].map(loan), jobs }, settings);
    expect(back.reclaim.servers).toHaveLength(1);
  });

  it("starts a job only with its minimum; a smaller one behind it may start", () => {
    const d = planLoans(
      { ...base, free: ["f1", "f2", "f3"], jobs: [job("big", { minBackends: 4 }), job("small", { submittedAtMs: 1, maxBackends: 1 })] },
      settings,
    );
    expect(d.loans).toEqual([{ backend: "f1", job: "small" }]);
  });

  it("gives a job no more backends than it has items left", () => {
    const d = planLoans({ ...base, free: ["f1", "f2", "f3", "f4"], jobs: [job("tail", { remaining: 2 })] }, settings);
    expect(d.loans.map((l) => l.backend)).toEqual(["f1", "f2"]);
  });

  it("gives back idle loans and lends them again where they are useful", () => {
    const d = planLoans(
      {
        ...base,
        loans: [
          { id: "l1", jobs: [] },
          { id: "l2", jobs: ["a"] },
        ],
        jobs: [job("a", { held: 2, remaining: 1 }), job("b", { submittedAtMs: 1 })],
      },
      settings,
    );
    expect(d.loans).toEqual([{ backend: "l1", job: "b" }]);
    expect(d.released).toEqual([]);
  });

  it("reclaims when inference needs more, idle loans first, and lends nothing in the same step", () => {
    const d = planLoans(
      {
        ...base,
        inferenceNeed: 8,
        loans: [
          { id: "l1", jobs: ["a"] },
          { id: "l2", jobs: ["a"] },
          { id: "l3", jobs: ["b"] },
          { id: "l4", jobs: [] },
        ],
        free: ["f1"],
        jobs: [job("a", { held: 2 }), job("b", { held: 1 }), job("c")],
      },
      settings,
    );
    // 10 - 8 = 2 may stay loaned: the idle l4 is given back, then one of the 3 working loans is reclaimed.
    expect(d.released).toEqual(["l4"]);
    expect(d.reclaim).toEqual({ servers: ["l3"], preempted: ["b"] });
    expect(d.loans).toEqual([]);
    expect(d.inferencePool).toBe(8 - 1);
  });

  it("counts backends on their way back as inference's already", () => {
    const d = planLoans(
      { ...base, inferenceNeed: 8, returning: 2, loans: [{ id: "l1", jobs: ["a"] }], jobs: [job("a", { held: 1 })] },
      settings,
    );
    // 10 live, 2 returning, inference needs 8: nothing is lendable, the last loan comes back too.
    expect(d.reclaim.servers).toEqual(["l1"]);
    expect(d.inferencePool).toBe(7);
  });

  it("orders jobs by priority, then submission, then name", () => {
    expect(loanOrder([job("b"), job("a"), job("z", { priority: 1 }), job("c", { submittedAtMs: -1 })]).map((j) => j.name)).toEqual([
      "z",
      "c",
      "a",
      "b",
    ]);
  });

  it("never lends more than inference leaves, and inference keeps its need whenever the pool allows", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 25 }),
        fc.array(fc.constantFrom<string>("a", "b", "c", ""), { maxLength: 12 }),
        fc.integer({ min: 0, max: 4 }),
        (live, need, loanJobs, returning) => {
          const loans = loanJobs.slice(0, Math.max(0, live - returning)).map((j, i) => ({ id: `l${i}`, jobs: j ? [j] : [] }));
          const freeCount = Math.max(0, live - returning - loans.length);
          const input: LoanInput = {
            live,
            inferenceNeed: need,
            loans,
            returning: Math.min(returning, live),
            free: Array.from({ length: freeCount }, (_, i) => `f${i}`),
            jobs: ["a", "b", "c"].map((n) => job(n, { held: loans.filter((l) => l.jobs.includes(n)).length })),
          };
          const d = planLoans(input, settings);
          const stay = loans.length - d.reclaim.servers.length - (loans.length - loans.filter((l) => l.jobs.length > 0).length);
          const onLoan = stay + d.loans.length;
          expect(onLoan).toBeLessThanOrEqual(Math.max(0, live - input.returning - need));
          expect(d.inferencePool + onLoan + d.reclaim.servers.length + input.returning + d.toFree).toBe(live);
          expect(d.inferencePool).toBeGreaterThanOrEqual(Math.min(need, live - input.returning - onLoan - d.reclaim.servers.length));
          expect(new Set(d.loans.map((l) => l.backend)).size).toBe(d.loans.length);
        },
      ),
    );
  });
});

describe("what inference keeps", () => {
  it("follows its rule: the plan, the plan and the headroom, or the larger of plan and use and the headroom", () => {
    expect(inferenceNeed("plan", 10, 14, 3)).toBe(10);
    expect(inferenceNeed("plan-headroom", 10, 14, 3)).toBe(13);
    expect(inferenceNeed("plan-in-use-headroom", 10, 14, 3)).toBe(17);
    expect(inferenceNeed("plan-in-use-headroom", 10, 4, 3)).toBe(13);
  });
});
