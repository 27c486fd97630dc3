/**
 * The job store against a real nats-server with JetStream: idempotent items, claims with ack / nak /
 * redelivery after the ack wait, results written once, progress counts, and removal.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { control } from "@infergrid/proto";
import { connectNats, createLogger, makeCa, makeCert, type NatsConnection } from "@infergrid/runtime";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// testkit depends on this package; its NATS launcher depends on nothing, so it is imported by path.
import { type NatsServerHandle, startNatsServer } from "../../testkit/src/nats-server.js";
import { HeartbeatSigner, HeartbeatVerifier } from "./heartbeat-signature.js";
import { type ClaimedItem, decodeItem, encodeItem, JobStore, type ResultCheck, resultsDigest } from "./job-store.js";
import { ServiceRegistry } from "./service-registry.js";
import { JOB_ITEMS_STREAM, JOB_RESULTS_BUCKET, JOBS_BUCKET, jobItemsSubject, REGISTRY_BUCKET } from "./subjects.js";

const logger = createLogger("test", "job-store-int", "warn");
const spec = (name: string, items: number): control.IBestEffortJobSpec => ({
  name,
  items,
  itemBatch: 1,
  seed: 7,
  model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { locMs: 5 } },
});
const result = (job: string, item: number, backendId = "b1"): control.IJobItemResult => ({
  job,
  item,
  backendId,
  digest: `d${item}`,
  computeMs: 5,
  doneAtUnixMs: Date.now(),
});

describe("JobStore (real nats-server)", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let store: JobStore;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connectNats({ servers: nats.url, name: "job-store-int" }, logger);
    store = await JobStore.open(nc, logger, { ackWaitMs: 1000 });
  });

  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("encodes items as decimal text and refuses anything else", () => {
    expect(decodeItem(encodeItem(0))).toBe(0);
    expect(decodeItem(encodeItem(4_000_000_000))).toBe(4_000_000_000);
    for (const bad of ["", "-1", "01", "1.5", "1e3", " 1", "99999999999", "x"])
      expect(decodeItem(new TextEncoder().encode(bad))).toBeUndefined();
  });

  it("opens again over existing buckets and stream; stores, compares-and-sets and lists jobs", async () => {
    const again = await JobStore.open(nc, logger);
    const rev = await again.putJob({ spec: spec("alpha", 3), state: control.JobState.JOB_STATE_QUEUED }, 0);
    await expect(store.putJob({ spec: spec("alpha", 3) }, 0)).rejects.toThrow();
    await expect(store.putJob({ spec: spec("alpha", 3), state: control.JobState.JOB_STATE_RUNNING }, rev + 100)).rejects.toThrow();
    const rev2 = await store.putJob({ spec: spec("alpha", 3), state: control.JobState.JOB_STATE_RUNNING }, rev);
    const got = await store.getJob("alpha");
    expect(got?.revision).toBe(rev2);
    expect(got?.job.state).toBe(control.JobState.JOB_STATE_RUNNING);
    await store.putJob({ spec: spec("beta", 1) });
    expect((await store.listJobs()).map((j) => j.spec?.name)).toEqual(["alpha", "beta"]);
    expect(await store.getJob("nope")).toBeUndefined();
    await expect(store.getJob("Bad.Name")).rejects.toThrow(/job name/);
  });

  it("publishes items once, hands each to one claimer, redelivers abandoned and unacked ones", async () => {
    await store.ensureItems(spec("items", 5));
    await store.ensureItems(spec("items", 5));
    expect(await store.progress("items")).toEqual({ done: 0, pending: 5, inFlight: 0 });

    const a = await store.claim("items", { maxWaitMs: 1000 });
    const b = await store.claim("items", { maxWaitMs: 1000 });
    expect([a?.item, b?.item]).toEqual([0, 1]);
    expect(a?.redelivered).toBe(false);
    expect(await store.progress("items")).toEqual({ done: 0, pending: 3, inFlight: 2 });

    // Item 0: done once; recording it twice finds it there; hasResult sees it.
    expect(await store.recordResult(result("items", 0))).toBe("recorded");
    expect(await store.recordResult(result("items", 0, "b2"))).toBe("exists");
    const same = result("items", 1);
    expect(await store.recordResult(same)).toBe("recorded");
    // The same bytes again (a create whose reply was lost, retried) is its own record.
    expect(await store.recordResult(same)).toBe("recorded");
    expect(await store.hasResult("items", 0)).toBe(true);
    expect(await store.hasResult("items", 2)).toBe(false);
    await a?.done();
    expect(await store.progress("items")).toEqual({ done: 2, pending: 3, inFlight: 1 });

    // Item 1 abandoned: it comes back at once, marked redelivered (the server handles acks and naks apart from
    // pulls, so the next undelivered item may come first).
    await b?.abandon();
    const others = [];
    let again: ClaimedItem | undefined;
    for (let i = 0; i < 3 && again === undefined; i++) {
      const c = await store.claim("items", { maxWaitMs: 1000 });
      if (c?.item === 1) again = c;
      else if (c) others.push(c);
    }
    expect(again?.redelivered).toBe(true);
    expect(others.every((o) => !o.redelivered)).toBe(true);
    for (const c of [again, ...others]) await c?.done();
    const rest = [];
    for (let c = await store.claim("items", { maxWaitMs: 1000 }); c; c = await store.claim("items", { maxWaitMs: 1000 })) {
      rest.push(c);
      await c.done();
    }
    expect([...others, ...rest].map((c) => c.item).sort()).toEqual([2, 3, 4]);
    expect(await store.progress("items")).toEqual({ done: 2, pending: 0, inFlight: 0 });
    expect((await store.results("items")).map((r) => [r.item, r.backendId])).toEqual([
      [0, "b1"],
      [1, "b1"],
    ]);
  });

  it("a silent claimer loses its item after the ack wait; working() keeps it", async () => {
    await store.ensureItems(spec("ackwait", 3));
    // A store opened with the default ack wait claims with the consumer's own.
    const other = await JobStore.open(nc, logger);
    const silent = await other.claim("ackwait", { maxWaitMs: 1000 });
    expect(silent?.ackWaitMs).toBe(1000);
    const kept = await store.claim("ackwait", { maxWaitMs: 1000 });
    expect([silent?.item, kept?.item]).toEqual([0, 1]);
    const keep = setInterval(() => kept?.working(), 250);
    try {
      await new Promise((r) => setTimeout(r, 1500));
      const got = [];
      for (let i = 0; i < 2; i++) {
        const c = await store.claim("ackwait", { maxWaitMs: 1000 });
        if (c) got.push(c);
        await c?.done();
      }
      // 2 was never delivered; 0 is back after its ack wait; 1 stays with its worker.
      expect(got.map((c) => [c.item, c.redelivered]).sort()).toEqual([
        [0, true],
        [2, false],
      ]);
      expect(await store.claim("ackwait", { maxWaitMs: 1000 })).toBeUndefined();
    } finally {
      clearInterval(keep);
    }
    await kept?.done();
    expect(await store.progress("ackwait")).toEqual({ done: 0, pending: 0, inFlight: 0 });
  });

  it("publishes only items without a result, and removeItems drops the consumer and the items but keeps results", async () => {
    for (const i of [0, 2, 4]) await store.recordResult(result("partial", i));
    await store.ensureItems(spec("partial", 6));
    expect(await store.progress("partial")).toEqual({ done: 3, pending: 3, inFlight: 0 });
    const c = await store.claim("partial", { maxWaitMs: 1000 });
    expect(c?.item).toBe(1);
    await store.removeItems("partial");
    expect(await store.progress("partial")).toEqual({ done: 3, pending: 0, inFlight: 0 });
    const started = Date.now();
    expect(await store.claim("partial", { maxWaitMs: 1000 })).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect((await store.results("partial")).map((r) => r.item)).toEqual([0, 2, 4]);
    // Made claimable again (resubmitted): the three without a result, once each.
    await store.ensureItems(spec("partial", 6));
    expect(await store.progress("partial")).toEqual({ done: 3, pending: 3, inFlight: 0 });
  });

  it("stops publishing when told to (a cancel meanwhile), leaving no consumer; a later call starts over", async () => {
    let windows = 0;
    // 600 items are three windows of publishes: stopped before the second.
    await store.ensureItems(spec("stopped", 600), () => windows++ < 1);
    expect(await store.progress("stopped")).toEqual({ done: 0, pending: 0, inFlight: 0 });
    expect(await store.claim("stopped", { maxWaitMs: 200 })).toBeUndefined();
    await store.ensureItems(spec("stopped", 600));
    expect(await store.progress("stopped")).toEqual({ done: 0, pending: 600, inFlight: 0 });
  });

  it("forgets a job: its items, its results and its record go, other jobs' stay, and the name may be used again", async () => {
    for (const name of ["gone", "gone-too"]) {
      await store.putJob({ spec: spec(name, 4), state: control.JobState.JOB_STATE_RUNNING }, 0);
      await store.ensureItems(spec(name, 4));
      for (const i of [0, 1]) await store.recordResult(result(name, i));
    }
    await store.forgetJob("gone");
    expect(await store.getJob("gone")).toBeUndefined();
    expect(await store.results("gone")).toEqual([]);
    expect(await store.progress("gone")).toEqual({ done: 0, pending: 0, inFlight: 0 });
    expect((await store.listJobs()).map((j) => j.spec?.name)).not.toContain("gone");
    expect((await store.results("gone-too")).map((r) => r.item)).toEqual([0, 1]);
    expect(await store.progress("gone-too")).toEqual({ done: 2, pending: 4, inFlight: 0 });
    // A new job under the name starts from nothing: all four items, none taken for done.
    await store.putJob({ spec: spec("gone", 4), state: control.JobState.JOB_STATE_QUEUED }, 0);
    await store.ensureItems(spec("gone", 4));
    expect(await store.progress("gone")).toEqual({ done: 0, pending: 4, inFlight: 0 });
  });

  it("an audit refuses unsigned, forged, garbled and misplaced results; redo removes them and hands their items out again", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ig-job-audit-"));
    try {
      makeCa(dir, "ca");
      makeCert(dir, "backend-3", "ca", "URI:spiffe://infergrid/backend/backend-3");
      const pem = (name: string) => readFileSync(join(dir, name));
      const signed = await JobStore.open(nc, logger, {
        ackWaitMs: 1000,
        signer: new HeartbeatSigner(pem("backend-3.pem"), pem("backend-3.key")),
      });
      const verifier = new HeartbeatVerifier(pem("ca.pem"));
      for (const i of [0, 1]) expect(await signed.recordResult(result("audited", i, "backend-3"))).toBe("recorded");
      // The item recorded a second time (computed twice): the first result stays.
      expect(await signed.recordResult(result("audited", 1, "backend-3"))).toBe("exists");
      await store.recordResult(result("audited", 2, "backend-3"));
      await signed.recordResult(result("audited", 3, "backend-4"));
      await store.resultsKv.put("audited.4", new Uint8Array([0xff, 0xff, 0xff]));
      await store.resultsKv.put("audited.5", control.JobItemResult.encode(result("audited", 9, "backend-3")).finish());
      // Keys that name none of the job's items: they must not count toward it, however well sealed.
      await signed.recordResult(result("audited", 9, "backend-3"));
      await store.resultsKv.put("audited.x", new Uint8Array([1]));
      await store.ensureItems(spec("audited", 7));
      const last = await signed.claim("audited", { maxWaitMs: 1000 });
      expect(last?.item).toBe(6);
      await signed.recordResult(result("audited", 6, "backend-3"));
      await last?.done();
      expect(await store.progress("audited")).toEqual({ done: 9, pending: 0, inFlight: 0 });

      const check: ResultCheck = (r, raw) => verifier.jobResultProblem(r, raw);
      const { accepted, refused } = await store.audit("audited", 7, check);
      expect(accepted).toBe(3);
      expect(refused.sort((a, b) => a.key.localeCompare(b.key))).toEqual([
        { key: "audited.2", item: 2, backendId: "backend-3", problem: "unsigned (no certificate or no signature)" },
        { key: "audited.3", item: 3, backendId: "backend-4", problem: 'signed by backend/backend-3, but names backend "backend-4"' },
        { key: "audited.4", item: 4, backendId: "", problem: expect.stringMatching(/^not a job result/) },
        { key: "audited.5", item: 5, backendId: "backend-3", problem: "the result of audited.9 under the key audited.5" },
        { key: "audited.9", item: undefined, backendId: "backend-3", problem: "the key audited.9 names none of the job's 7 items" },
        { key: "audited.x", item: undefined, backendId: "", problem: "the key audited.x names none of the job's 7 items" },
      ]);
      // Without a check only what does not read as the result of one of its items is refused.
      expect((await store.audit("audited", 7)).refused.map((f) => f.key).sort()).toEqual([
        "audited.4",
        "audited.5",
        "audited.9",
        "audited.x",
      ]);

      await store.redo("audited", refused);
      expect(await store.progress("audited")).toEqual({ done: 3, pending: 4, inFlight: 0 });
      const again: number[] = [];
      for (let i = 0; i < 4; i++) {
        const c = await signed.claim("audited", { maxWaitMs: 1000 });
        if (!c) break;
        expect(await signed.hasResult("audited", c.item)).toBe(false);
        await signed.recordResult(result("audited", c.item, "backend-3"));
        await c.done();
        again.push(c.item);
      }
      expect(again.sort()).toEqual([2, 3, 4, 5]);
      const passed = await store.audit("audited", 7, check);
      expect({ accepted: passed.accepted, refused: passed.refused }).toEqual({ accepted: 7, refused: [] });
      // The same results give the same digest; it is what the allocator records when it calls the job done.
      expect((await store.audit("audited", 7, check)).digest.equals(passed.digest)).toBe(true);
      expect((await store.verifiedResults("audited")).unchanged).toBeUndefined(); // no digest recorded yet
      await store.putJob({ spec: spec("audited", 7), state: control.JobState.JOB_STATE_SUCCEEDED, resultsDigest: passed.digest });
      const verified = await store.verifiedResults("audited");
      expect(verified.unchanged).toBe(true);
      expect(verified.results.map((r) => r.item)).toEqual([0, 1, 2, 3, 4, 5, 6]);

      // The audit that passed copied the results to the done bucket: a backend's overwrite, delete or new key in the
      // bucket it may write changes nothing a reader of the done job gets.
      const original = await store.resultsKv.get("audited.3");
      await store.resultsKv.put("audited.3", control.JobItemResult.encode(result("audited", 3, "backend-7")).finish());
      await store.resultsKv.delete("audited.5");
      await store.resultsKv.put("audited.11", control.JobItemResult.encode(result("audited", 11, "backend-3")).finish());
      const after = await store.verifiedResults("audited");
      expect(after.unchanged).toBe(true);
      expect(after.results).toEqual(verified.results);
      expect((await store.results("audited")).find((r) => r.item === 3)?.backendId).toBe("backend-3");
      expect(Buffer.from(original?.value ?? []).length).toBeGreaterThan(0);
      // Called done, the job's results leave that bucket (retireResults); the copy stays.
      await store.retireResults("audited");
      expect(await store.progress("audited")).toMatchObject({ done: 0 });
      expect((await store.verifiedResults("audited")).results.map((r) => r.item)).toEqual([0, 1, 2, 3, 4, 5, 6]);

      // A job done before results were copied out (none in the done bucket) is read where backends write, and a
      // change there is told, not prevented.
      await store.putJob({ spec: spec("legacy", 2), state: control.JobState.JOB_STATE_SUCCEEDED, resultsDigest: Buffer.from("x") });
      await store.resultsKv.put("legacy.0", control.JobItemResult.encode(result("legacy", 0, "backend-3")).finish());
      const legacy = await store.verifiedResults("legacy");
      expect(legacy.results.map((r) => r.item)).toEqual([0]);
      expect(legacy.unchanged).toBe(false);
      // Forgetting the job removes its copy too.
      await store.forgetJob("audited");
      expect(await store.results("audited")).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a results digest depends on every key and value, not on their order, and no two sets share its bytes", () => {
    const a = { key: "j.1", value: new Uint8Array([1, 2]) };
    const b = { key: "j.2", value: new Uint8Array([3]) };
    expect(resultsDigest([a, b]).equals(resultsDigest([b, a]))).toBe(true);
    expect(resultsDigest([a]).equals(resultsDigest([a, b]))).toBe(false);
    expect(resultsDigest([a, b]).equals(resultsDigest([a, { ...b, value: new Uint8Array([4]) }]))).toBe(false);
    // A value one zero byte longer is another set (each value's length is hashed).
    expect(
      resultsDigest([{ key: "j.1", value: new Uint8Array([1]) }]).equals(resultsDigest([{ key: "j.1", value: new Uint8Array([1, 0]) }])),
    ).toBe(false);
  });

  it("a garbled item message is dropped, not handed out, and the next item still is", async () => {
    await store.ensureItems(spec("garbled", 1));
    const first = await store.claim("garbled", { maxWaitMs: 1000 });
    expect(first?.item).toBe(0);
    await first?.done();
    nc.publish(jobItemsSubject("garbled"), new TextEncoder().encode("not an item"));
    await nc.flush();
    nc.publish(jobItemsSubject("garbled"), encodeItem(0));
    await nc.flush();
    const next = await store.claim("garbled", { maxWaitMs: 2000 });
    expect(next?.item).toBe(0);
    await next?.done();
    expect(await store.progress("garbled")).toMatchObject({ pending: 0, inFlight: 0 });
  });
});

describe("opened by many at once on a fresh server (real nats-server)", () => {
  // Every process of a fresh cluster opens the registry and the job store as it starts: each finds no stream
  // and creates one, and the server refuses the late ones while the first is being applied.
  it("every opener of the job store and the registry succeeds when they race to create their streams (12 backends starting together failed one)", async () => {
    const nats = await startNatsServer();
    const conns: NatsConnection[] = [];
    try {
      for (let round = 0; round < 10; round++) {
        // Each round starts without the streams, as a fresh cluster does.
        const fresh = await connectNats({ servers: nats.url, name: `opener-${round}` }, logger);
        conns.push(fresh);
        const openers = await Promise.all(
          Array.from({ length: 24 }, (_, i) => connectNats({ servers: nats.url, name: `opener-${round}-${i}` }, logger)),
        );
        conns.push(...openers);
        const outcomes = await Promise.allSettled(
          openers.map((c, i) => (i % 3 === 0 ? ServiceRegistry.open(c, logger) : JobStore.open(c, logger))),
        );
        expect(outcomes.filter((o) => o.status === "rejected").map((o) => String((o as PromiseRejectedResult).reason))).toEqual([]);
        const jsm = await jetstreamManager(fresh);
        const streams = [JOB_ITEMS_STREAM, `KV_${JOBS_BUCKET}`, `KV_${JOB_RESULTS_BUCKET}`, `KV_${REGISTRY_BUCKET}`];
        for (const name of streams) expect(await jsm.streams.delete(name)).toBe(true);
      }
    } finally {
      for (const c of conns) await c.close();
      await nats.stop();
    }
  }, 90_000);
});
