import { HeartbeatSigner, HeartbeatVerifier, JOB_RESULTS_DONE_BUCKET, JobStore, resultsDigest } from "@infergrid/control-plane";
import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { createLogger, unaryCall } from "@infergrid/runtime";
import { eventually } from "@infergrid/testkit";
import { jetstream } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatedSpec, expectAllAnswered, registerService, type TestCluster, waitUntilServing } from "./process-cluster.js";
import { type RoleUsersCluster, startRoleUsersCluster } from "./role-users-cluster.js";

/**
 * Job results under signed results, on real processes with NATS users shared by every instance of a role, as in
 * Kubernetes: NATS lets any backend pod write any key of the job results' bucket. A compromised backend pod writes
 * results for a job's items before the job runs: unsigned, sealed with its own certificate (a backend that never
 * works for the job), and sealed with its own certificate but naming a backend that does. The allocator
 * (--signed-heartbeats) must count none of them: the job completes only once every item has a result sealed by a
 * backend that worked for it, and the forged items are done again.
 */
const logger = createLogger("test", "job-results-trust", "silent");
const ITEMS = 200;

let run: RoleUsersCluster;
let cluster: TestCluster;
const pem = (name: string) => run.pem(name);

beforeAll(async () => {
  // backend-9: a backend pod of the cluster (its certificate is the CA's) that never works for the job.
  run = await startRoleUsersCluster(
    { backends: 3, frontends: 1, allocatorEnv: { INFERGRID_JOB_GRACE_MS: "2000" }, frontendEnv: { INFERGRID_SCALING: "static" } },
    [["backend-9", "backend"]],
    logger,
  );
  cluster = run.cluster;
  await registerService(cluster, emulatedSpec("svc", { initialBackends: 1, maxBackends: 1 }));
  await waitUntilServing(cluster, "svc", { x: { dims: [1], data: [1] } });
}, 90_000);

afterAll(async () => {
  await run?.stop();
});

/** A result written after the job is done, by a pod that never ran the item. */
const forgedAfter = (job: string) => ({
  job,
  item: 0,
  backendId: "backend-1",
  digest: "f".repeat(64),
  computeMs: 1,
  doneAtUnixMs: Date.now(),
});

const getJob = (name: string): Promise<control.BestEffortJob.$Properties> =>
  unaryCall(cluster.adminClient, AllocatorAdminDefinition.GetJob, { name }, { deadline: Date.now() + 5000 });

describe("job results under signed results (NATS users per role, as in Kubernetes; real processes)", () => {
  it("results written by a backend pod for items it never ran are refused and their items done again", async () => {
    const job = "trusted-job";
    const nc = await run.asRole("backend");
    try {
      // The compromised pod: NATS lets it write the results' bucket like any backend.
      const rogue = await JobStore.open(nc, logger, { signer: new HeartbeatSigner(pem("backend-9.pem"), pem("backend-9.key")) });
      const unsigned = await JobStore.open(nc, logger);
      const forged = (item: number, backendId: string) => ({
        job,
        item,
        backendId,
        digest: "0".repeat(64),
        computeMs: 1,
        doneAtUnixMs: Date.now(),
      });
      for (let i = 0; i < 10; i++) expect(await unsigned.recordResult(forged(i, "backend-0"))).toBe("recorded");
      for (let i = 10; i < 20; i++) expect(await rogue.recordResult(forged(i, "backend-9"))).toBe("recorded");
      for (let i = 20; i < 30; i++) expect(await rogue.recordResult(forged(i, "backend-1"))).toBe("recorded");
    } finally {
      await nc.close();
    }

    const reply = await unaryCall(
      cluster.adminClient,
      AllocatorAdminDefinition.SubmitJob,
      {
        spec: {
          name: job,
          model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.1, locMs: 10, scaleMs: 20 }, coldStartMs: 200 },
          items: ITEMS,
          maxBackends: 2,
          seed: 3,
        },
      },
      { deadline: Date.now() + 5000 },
    );
    expect(reply.created).toBe(true);
    const done = await eventually(
      `${job} to complete`,
      async () => {
        const j = await getJob(job);
        if (j.state !== control.JobState.JOB_STATE_SUCCEEDED) throw new Error(`state ${j.state}, ${j.itemsDone}/${ITEMS} done`);
        return j;
      },
      60_000,
      250,
    );
    expect(done.itemsDone).toBe(ITEMS);
    expect(done.itemsRefused).toBe(30);
    const workers = [...(done.workers ?? [])].sort();
    expect(workers.length).toBeGreaterThan(0);
    for (const w of workers) expect(["backend-0", "backend-1", "backend-2"]).toContain(w);

    // The results a reader of the done job gets are those the allocator's audit passed, copied to the done bucket:
    // the record's digest is theirs, and each is sealed by the backend it names, a worker of the job.
    const reader = await run.asRole("allocator");
    try {
      const store = await JobStore.open(reader, logger);
      const verifier = new HeartbeatVerifier(pem("ca.pem"));
      const archived = await store.archivedResults(job);
      expect(archived.length).toBe(ITEMS);
      expect(Buffer.from(done.resultsDigest ?? []).equals(resultsDigest(archived))).toBe(true);
      for (const { value } of archived) {
        const r = control.JobItemResult.decode(value);
        expect(verifier.jobResultProblem(r, value)).toBeUndefined();
        expect(workers).toContain(r.backendId);
      }
      const verified = await store.verifiedResults(job);
      expect(verified.unchanged).toBe(true);
      const results = verified.results;
      expect(results.map((r) => r.item)).toEqual(Array.from({ length: ITEMS }, (_, i) => i));
      expect(results.some((r) => r.digest === "0".repeat(64))).toBe(false);

      // After the job is done a backend pod overwrites a result where NATS lets it (the bucket backends write, which
      // no longer holds the job's results), and cannot write the done bucket: readers get the audited results.
      const pod = await run.asRole("backend");
      try {
        const rogue = await JobStore.open(pod, logger);
        await rogue.resultsKv.put(`${job}.7`, control.JobItemResult.encode({ ...forgedAfter(job), item: 7 }).finish());
        // A KV put is a JetStream publish to the key's subject.
        const forged = control.JobItemResult.encode({ ...forgedAfter(job), item: 8 }).finish();
        await expect(jetstream(pod).publish(`$KV.${JOB_RESULTS_DONE_BUCKET}.${job}.8`, forged)).rejects.toThrow(/permission/i);
      } finally {
        await pod.close();
      }
      const after = await store.verifiedResults(job);
      expect(after.unchanged).toBe(true);
      expect(after.results).toEqual(results);
    } finally {
      await reader.close();
    }

    const refusals = cluster.allocator.logs
      .filter((l) => l.msg === "refused a job result; its item is done again" && l.results === 10)
      .map((l) => String(l.problem));
    // One line per problem, each with its ten results.
    expect(refusals.sort()).toEqual([
      "backend backend-9 never worked for the job",
      'signed by backend/backend-9, but names backend "backend-1"',
      "unsigned (no certificate or no signature)",
    ]);
    await expectAllAnswered(cluster, "svc", 10);
    console.info(
      `job results trust: ${ITEMS} items, 30 forged results refused and redone; job done in ` +
        `${Number(done.finishedAtUnixMs) - Number(done.submittedAtUnixMs)} ms by ${workers.join(", ")}`,
    );
  }, 120_000);
});
