import type { ResultCheck } from "@infergrid/control-plane";
import { FLOORS_SPARE, rateNeed } from "@infergrid/fapes";
import { backend, control } from "@infergrid/proto";
import { createLogger, GrpcStatusError } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { type JobsPort, LOAN_DEFAULTS, LoanManager, type LoanOptions, type LoanView } from "./loans.js";

const logger = createLogger("test", "loans", "silent");
const B = backend.BackendState;

/**
 * The job store as a map: the loan manager's bookkeeping is tested here; the real JetStream store is tested in
 * libs/control-plane and the whole path on real processes in e2e.
 */
class MemoryJobs implements JobsPort {
  readonly records = new Map<string, { job: control.BestEffortJob; revision: number }>();
  readonly progressOf = new Map<string, { done: number; pending: number; inFlight: number }>();
  readonly removed: string[] = [];
  /** Calls of each kind that fail next, as JetStream does when NATS is away. */
  readonly failing = { ensureItems: 0, removeItems: 0 };
  async getJob(name: string) {
    return this.records.get(name);
  }
  async putJob(job: control.IBestEffortJob, revision?: number): Promise<number> {
    const name = job.spec?.name ?? "";
    const current = this.records.get(name);
    if (revision === 0 && current) throw new Error("exists");
    if (revision !== undefined && revision > 0 && current?.revision !== revision) throw new Error("wrong revision");
    const next = (current?.revision ?? 0) + 1;
    this.records.set(name, { job: control.BestEffortJob.create(job), revision: next });
    return next;
  }
  async listJobs() {
    return [...this.records.values()].map((r) => r.job);
  }
  /** Set: publishing waits for it before its last window, as a long job's publishing takes a while. */
  slowPublish: Promise<void> | undefined;
  async ensureItems(spec: control.IBestEffortJobSpec, keepGoing: () => boolean = () => true) {
    if (this.failing.ensureItems > 0 && this.failing.ensureItems--) throw new Error("publish ack timed out");
    if (this.slowPublish) await this.slowPublish;
    if (!keepGoing()) return;
    if (!this.progressOf.has(spec.name ?? "")) this.progressOf.set(spec.name ?? "", { done: 0, pending: spec.items ?? 0, inFlight: 0 });
  }
  async progress(name: string) {
    return this.progressOf.get(name) ?? { done: 0, pending: 0, inFlight: 0 };
  }
  async removeItems(name: string) {
    if (this.failing.removeItems > 0 && this.failing.removeItems--) throw new Error("purge timed out");
    this.removed.push(name);
  }
  readonly retired: string[] = [];
  async retireResults(name: string) {
    this.retired.push(name);
  }
  async forgetJob(name: string) {
    this.records.delete(name);
    this.progressOf.delete(name);
  }
  /** Per job, its recorded results (unset: its progress's done count, all of them good). */
  readonly resultsOf = new Map<string, control.JobItemResult[]>();
  readonly redone: { job: string; keys: string[] }[] = [];
  async audit(name: string, items: number, check?: ResultCheck) {
    const results = this.resultsOf.get(name);
    // A digest that tells the audits apart: the job and what it counted.
    const digestOf = (accepted: number) => Buffer.from(`${name}/${accepted}`);
    if (!results) {
      const accepted = this.progressOf.get(name)?.done ?? 0;
      return { accepted, refused: [], digest: digestOf(accepted) };
    }
    const refused = results.flatMap((r) => {
      const problem = r.item >= items ? "no such item" : check?.(r, control.JobItemResult.encode(r).finish());
      return problem === undefined
        ? []
        : [{ key: `${name}.${r.item}`, item: r.item < items ? r.item : undefined, backendId: r.backendId, problem }];
    });
    return { accepted: results.length - refused.length, refused, digest: digestOf(results.length - refused.length) };
  }
  async redo(name: string, refused: readonly { key: string; item: number | undefined }[]) {
    this.redone.push({ job: name, keys: refused.map((f) => f.key) });
    const keys = new Set(refused.map((f) => f.key));
    this.resultsOf.set(
      name,
      (this.resultsOf.get(name) ?? []).filter((r) => !keys.has(`${name}.${r.item}`)),
    );
    const p = this.progressOf.get(name);
    const back = refused.filter((f) => f.item !== undefined).length;
    if (p) this.progressOf.set(name, { ...p, done: p.done - refused.length, pending: p.pending + back });
  }
}

const model = { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.1, locMs: 0, scaleMs: 10 } };
const spec = (name: string, over: Partial<control.IBestEffortJobSpec> = {}) => ({ name, model, items: 100, maxBackends: 3, ...over });

function setup(options: Partial<LoanOptions> = {}) {
  const store = new MemoryJobs();
  const assigned = new Map<string, string>();
  const preempted: string[] = [];
  const loans = new LoanManager(
    store,
    async (id, job) => {
      assigned.set(id, job);
    },
    logger,
    { ...LOAN_DEFAULTS, holdMs: 0, progressPeriodMs: 0, headroom: { leadTimeMs: 30_000, memoryMs: 600_000, floor: 1 }, ...options },
    { onPreempted: (j) => preempted.push(j) },
  );
  const ids = ["b1", "b2", "b3", "b4", "b5", "b6"];
  const view = (over: Partial<LoanView> = {}): LoanView => ({
    live: ids,
    free: ids.filter((id) => !loans.held().has(id)).slice(2),
    demand: 2,
    inUse: 2,
    stateOf: () => B.BACKEND_STATE_BUSY,
    ...over,
  });
  return { store, assigned, preempted, loans, view };
}

describe("the allocator's loans", () => {
  it("refuses a bad spec naming the field, and a different job under a used name", async () => {
    const { loans } = setup();
    await expect(loans.submit({ ...spec("a"), items: 0 }, 0)).rejects.toThrow(/spec\.items/);
    await expect(loans.submit({ ...spec("A b") }, 0)).rejects.toThrow(/spec\.name/);
    await expect(loans.submit({ ...spec("a"), minBackends: 5, maxBackends: 2 }, 0)).rejects.toThrow(/max_backends/);
    expect((await loans.submit(spec("a"), 0)).created).toBe(true);
    expect((await loans.submit(spec("a"), 1)).created).toBe(false);
    await expect(loans.submit(spec("a", { items: 7 }), 2)).rejects.toBeInstanceOf(GrpcStatusError);
  });

  it("lends what inference does not need, reclaims with a preemption when it needs more, and frees on the backend's word", async () => {
    const { loans, view, assigned, preempted, store } = setup();
    await loans.submit(spec("a"), 0);
    // 6 live, inference needs 2 + 1 spare: 3 to lend, the job takes up to 3.
    expect(await loans.step(1_000, view())).toBe(0);
    expect([...assigned].filter(([, j]) => j === "a")).toHaveLength(3);
    expect(loans.get("a").state).toBe(control.JobState.JOB_STATE_RUNNING);
    expect(store.records.get("a")?.job.backends).toHaveLength(3);
    // Inference uses 4 where its plan asked 2: need 4 + the learned rise beyond the plan (2) = 6: all three loans come
    // back, one preemption.
    await loans.step(2_000, view({ inUse: 4 }));
    expect(loans.get("a").backends).toEqual([]);
    expect(loans.get("a").preemptions).toBe(1);
    expect(preempted).toEqual(["a"]);
    expect([...assigned.values()].every((j) => j === "")).toBe(true);
    // Returning backends stay out of the lists until they report letting go.
    expect(loans.held().size).toBe(3);
    for (const id of loans.held()) loans.onBackendReport(id, { job: "", state: B.BACKEND_STATE_COLD });
    expect(await loans.step(3_000, view({ inUse: 4 }))).toBe(0);
    expect(loans.held().size).toBe(0);
  });

  it("under the floors rule keeps each service's floor and a spare, and takes loans back when a service's rate rises", async () => {
    const store = new MemoryJobs();
    const assigned = new Map<string, string>();
    const loans = new LoanManager(
      store,
      async (id, job) => {
        assigned.set(id, job);
      },
      logger,
      {
        ...LOAN_DEFAULTS,
        need: "floors",
        holdMs: 60_000,
        progressPeriodMs: 0,
        headroom: { leadTimeMs: 30_000, memoryMs: 600_000, floor: 1 },
      },
    );
    const ids = ["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"];
    const svc = (name: string, share: number | undefined, ratePerS: number) => ({
      name,
      share,
      ratePerS,
      serviceMs: 165,
      sloMs: 720,
      percentile: 99,
    });
    const view = (services: LoanView["services"]): LoanView => ({
      live: ids,
      free: ids.filter((id) => !loans.held().has(id)).slice(3),
      demand: 3,
      inUse: 3,
      stateOf: () => B.BACKEND_STATE_BUSY,
      services,
    });
    // No job: no floors, the lists follow the plan alone.
    await loans.step(500, view([svc("s", 2, 0), svc("t", 1, 0)]));
    expect(loans.floors().size).toBe(0);
    await loans.submit(spec("a", { maxBackends: 8 }), 0);
    // A service the plan has not reached yet: nothing is lent.
    await loans.step(1_000, view([svc("s", 2, 0), svc("t", undefined, 0)]));
    expect(loans.held().size).toBe(0);
    // Floors 2 + 1 and the spare: 8 - 3 - FLOORS_SPARE lent.
    await loans.step(2_000, view([svc("s", 2, 0), svc("t", 1, 0)]));
    expect(loans.get("a").backends).toHaveLength(8 - 3 - FLOORS_SPARE);
    expect(loans.floors()).toEqual(
      new Map([
        ["s", 2],
        ["t", 1],
      ]),
    );
    // s's frontends report 24 req/s before the plan moves: its floor is Faro's M/D/c need at that rate, and the
    // loans beyond floors and spare come back at this step.
    const burst = rateNeed(svc("s", 2, 24));
    expect(burst).toBeGreaterThan(3);
    await loans.step(4_000, view([svc("s", 2, 24), svc("t", 1, 0)]));
    expect(loans.floors().get("s")).toBe(burst);
    expect(loans.inferenceNeed()).toBe(burst + 1);
    // Taken back down to what is left beyond the need (not the need plus the spare).
    expect(loans.get("a").backends).toHaveLength(8 - burst - 1);
    expect(loans.get("a").preemptions).toBe(1);
    // The rate falls: the floor holds for the window, so nothing is lent again yet.
    await loans.step(6_000, view([svc("s", 2, 1), svc("t", 1, 0)]));
    expect(loans.floors().get("s")).toBe(burst);
  });

  it("finishes a job when every item is recorded and gives its backends back", async () => {
    const { loans, view, store } = setup();
    await loans.submit(spec("a"), 0);
    await loans.step(1_000, view());
    store.progressOf.set("a", { done: 100, pending: 0, inFlight: 0 });
    await loans.step(2_000, view());
    // Done once its results are audited, beside the step: the next step finishes it.
    expect(loans.get("a").state).toBe(control.JobState.JOB_STATE_RUNNING);
    await loans.audits();
    await loans.step(2_100, view());
    const a = loans.get("a");
    expect(a.state).toBe(control.JobState.JOB_STATE_SUCCEEDED);
    expect(a.itemsDone).toBe(100);
    expect(Number(a.finishedAtUnixMs)).toBe(2_100);
    // The digest of the audit that passed, for readers to check the results against later.
    expect(Buffer.from(a.resultsDigest).toString()).toBe("a/100");
    expect(store.removed).toEqual(["a"]);
    // Its results leave the bucket backends write: readers take the audited copy.
    expect(store.retired).toEqual(["a"]);
    expect(loans.jobOf("b3")).toBe("");
  });

  it("under signed results, counts only results sealed by a backend that worked for the job; the others are done again", async () => {
    // The seal's own checks are HeartbeatVerifier's (its tests); here a digest stands for a bad seal.
    const { loans, view, store } = setup({ resultProblem: (r) => (r.digest === "unsealed" ? "unsigned" : undefined) });
    await loans.submit(spec("a"), 0);
    await loans.step(1_000, view());
    const loaned = [...loans.held()].sort();
    expect(loaned).toEqual(["b3", "b4", "b5"]);
    loans.onBackendReport("b1", { service: "svc", harvestJob: "a", state: B.BACKEND_STATE_WARM_IDLE });
    const result = (item: number, backendId: string, digest = "d") => control.JobItemResult.create({ job: "a", item, backendId, digest });
    const results = Array.from({ length: 100 }, (_, i) => result(i, loaned[i % 3] as string));
    results[5] = result(5, "b9");
    results[6] = result(6, "b4", "unsealed");
    results[7] = result(7, "b1");
    // A key past the job's items, sealed by a worker: it must not stand in for a missing item.
    results.push(result(100, "b3"));
    results.splice(9, 1);
    store.resultsOf.set("a", results);
    store.progressOf.set("a", { done: 100, pending: 0, inFlight: 0 });
    // The audit runs beside the step; its verdict is acted on by the next.
    await loans.step(2_000, view());
    await loans.audits();
    await loans.step(2_100, view());
    const a = loans.get("a");
    expect(a.state).toBe(control.JobState.JOB_STATE_RUNNING);
    expect(store.redone).toEqual([{ job: "a", keys: ["a.5", "a.6", "a.100"] }]);
    expect(a.itemsRefused).toBe(3);
    expect(a.itemsDone).toBe(97);
    // Who worked for it is kept with the job, for an allocator that restarts.
    expect([...(store.records.get("a")?.job.workers ?? [])].sort()).toEqual(["b1", "b3", "b4", "b5"]);
    // Done again, by a loaned backend: the job is done.
    store.resultsOf.set("a", [...(store.resultsOf.get("a") ?? []), result(5, "b3"), result(6, "b4"), result(9, "b5")]);
    store.progressOf.set("a", { done: 100, pending: 0, inFlight: 0 });
    await loans.step(3_000, view());
    await loans.audits();
    await loans.step(3_100, view());
    expect(loans.get("a").state).toBe(control.JobState.JOB_STATE_SUCCEEDED);
    expect(loans.get("a").itemsDone).toBe(100);
  });

  it("without signed results, counts a result whatever backend it names", async () => {
    const { loans, view, store } = setup();
    await loans.submit(spec("a"), 0);
    store.resultsOf.set(
      "a",
      Array.from({ length: 100 }, (_, i) => control.JobItemResult.create({ job: "a", item: i, backendId: "b9" })),
    );
    store.progressOf.set("a", { done: 100, pending: 0, inFlight: 0 });
    await loans.step(1_000, view());
    await loans.audits();
    await loans.step(1_100, view());
    expect(loans.get("a").state).toBe(control.JobState.JOB_STATE_SUCCEEDED);
    expect(store.redone).toEqual([]);
  });

  it("shows the serving backends harvesting for a job, and runs a job its harvesters started without a loan", async () => {
    const { loans, view, store } = setup();
    await loans.submit(spec("h"), 0);
    // Nothing to lend: every backend is inference's.
    const busy = view({ free: [], demand: 6, inUse: 6 });
    await loans.step(1_000, busy);
    expect(loans.get("h").state).toBe(control.JobState.JOB_STATE_QUEUED);
    loans.onBackendReport("b1", { service: "svc", harvestJob: "h", state: B.BACKEND_STATE_WARM_IDLE });
    loans.onBackendReport("b2", { service: "svc", harvestJob: "h", state: B.BACKEND_STATE_BUSY });
    store.progressOf.set("h", { done: 3, pending: 96, inFlight: 1 });
    await loans.step(2_000, busy);
    const h = loans.get("h");
    expect(h.harvesting).toEqual(["b1", "b2"]);
    expect(h.backends).toEqual([]);
    expect(h.state).toBe(control.JobState.JOB_STATE_RUNNING);
    expect(Number(h.startedAtUnixMs)).toBe(2_000);
    expect(store.records.get("h")?.job.harvesting).toEqual(["b1", "b2"]);
    // One stops harvesting, one leaves the cluster.
    loans.onBackendReport("b1", { service: "svc", harvestJob: "", state: B.BACKEND_STATE_BUSY });
    await loans.step(3_000, view({ ...busy, live: ["b1", "b3", "b4", "b5", "b6"] }));
    expect(loans.get("h").harvesting).toEqual([]);
    expect(store.records.get("h")?.job.harvesting).toEqual([]);
  });

  it("a job whose items could not be published is still the job: retried submissions get it, and a step publishes them", async () => {
    const { loans, view, store, assigned } = setup();
    store.failing.ensureItems = 2;
    expect((await loans.submit(spec("a"), 0)).created).toBe(true);
    expect(store.progressOf.has("a")).toBe(false);
    // The client retries: the same job, not "written concurrently" forever.
    expect((await loans.submit(spec("a"), 1)).created).toBe(false);
    await loans.step(1_000, view()); // the second failure: logged, tried again next step
    await loans.published();
    expect(store.progressOf.has("a")).toBe(false);
    await loans.step(2_000, view());
    await loans.published();
    expect(store.progressOf.get("a")?.pending).toBe(100);
    expect([...assigned.values()].filter((j) => j === "a").length).toBeGreaterThan(0);
  });

  it("publishes a job's items without holding up a submission, and a cancel during it stops it and removes what went out", async () => {
    const { loans, store } = setup();
    let release: () => void = () => undefined;
    store.slowPublish = new Promise((resolve) => {
      release = resolve;
    });
    // Answered before the items are out (a million items take tens of seconds to publish).
    expect((await loans.submit(spec("a"), 0)).created).toBe(true);
    expect(store.progressOf.has("a")).toBe(false);
    expect((await loans.cancel("a", 1_000)).state).toBe(control.JobState.JOB_STATE_CANCELLED);
    expect(store.removed).toEqual(["a"]);
    release();
    await loans.published();
    // Stopped before it made the items claimable, and what it had published removed again.
    expect(store.progressOf.has("a")).toBe(false);
    expect(store.removed).toEqual(["a", "a"]);
  });

  it("forgets a job finished longer ago than the retention, once no backend holds it; its name is free again", async () => {
    const { loans, view, store, assigned } = setup();
    await loans.submit(spec("a"), 0);
    await loans.step(1_000, view());
    expect([...assigned.values()].filter((j) => j === "a")).toHaveLength(3);
    await loans.cancel("a", 2_000);
    const day = LOAN_DEFAULTS.finishedRetentionMs;
    // The loans are asked back but not yet returned (no heartbeat says so): the job is kept.
    await loans.step(2_000 + day + 1, view());
    expect(loans.get("a").state).toBe(control.JobState.JOB_STATE_CANCELLED);
    for (const id of assigned.keys()) loans.onBackendReport(id, { service: "", job: "", state: B.BACKEND_STATE_COLD });
    await loans.step(2_000 + day + 2, view());
    expect(() => loans.get("a")).toThrow(/no job named/);
    expect(store.records.has("a")).toBe(false);
    expect(loans.list()).toEqual([]);
    // The same name with another spec: a new job, not ALREADY_EXISTS.
    expect((await loans.submit(spec("a", { items: 7 }), 3_000 + day)).created).toBe(true);
    // A job finished within the retention stays.
    await loans.cancel("a", 4_000 + day);
    await loans.step(5_000 + day, view());
    expect(loans.get("a").spec?.items).toBe(7);
  });

  it("a cancel that failed half-way is finished by the next one: items removed, loans asked back", async () => {
    const { loans, view, store, assigned } = setup();
    await loans.submit(spec("a"), 0);
    await loans.step(1_000, view());
    expect([...assigned.values()].filter((j) => j === "a")).toHaveLength(3);
    store.failing.removeItems = 1;
    await expect(loans.cancel("a", 2_000)).rejects.toThrow(/purge timed out/);
    expect(loans.get("a").state).toBe(control.JobState.JOB_STATE_CANCELLED);
    expect((await loans.cancel("a", 3_000)).state).toBe(control.JobState.JOB_STATE_CANCELLED);
    expect(store.removed).toEqual(["a"]);
    expect([...assigned.values()].filter((j) => j === "a")).toEqual([]);
  });

  it("serves jobs by priority, and cancels one", async () => {
    const { loans, view, assigned } = setup();
    await loans.submit(spec("low", { maxBackends: 3 }), 0);
    await loans.submit(spec("high", { maxBackends: 2, priority: 5 }), 1);
    await loans.step(1_000, view());
    expect([...assigned.values()].sort()).toEqual(["high", "high", "low"]);
    const cancelled = await loans.cancel("low", 2_000);
    expect(cancelled.state).toBe(control.JobState.JOB_STATE_CANCELLED);
    expect(cancelled.backends).toEqual([]);
    await expect(loans.cancel("nope", 0)).rejects.toThrow(/no job named/);
  });

  it("forgets a loaned backend that left, and after a restart takes loans back from the assignments", async () => {
    const { loans, view, store } = setup();
    await loans.submit(spec("a"), 0);
    await loans.step(1_000, view());
    await loans.step(2_000, view({ live: ["b1", "b2", "b4", "b5", "b6"] }));
    // b3 left: 5 live, inference keeps 3, so the two loans left stay and none is added.
    expect(loans.get("a").backends).toEqual(["b4", "b5"]);

    const again = setup();
    again.loans.restore(
      [...store.records.values()].map((r) => r.job),
      [control.BackendAssignment.create({ backendId: "b4", job: "a" }), control.BackendAssignment.create({ backendId: "b6", job: "gone" })],
      5_000,
    );
    expect(again.loans.jobOf("b4")).toBe("a");
    // A loan to a job the store does not know is on its way back.
    expect(again.loans.jobOf("b6")).toBe("");
    expect(again.loans.held().has("b6")).toBe(true);
  });
});
