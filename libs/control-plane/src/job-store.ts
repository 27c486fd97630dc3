import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { control, decodeMessage, encodeMessage } from "@infergrid/proto";
import type { NatsConnection } from "@infergrid/runtime";
import {
  AckPolicy,
  type Consumer,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { Logger } from "pino";
import { createConcurrently } from "./concurrent-create.js";
import {
  allJobItems,
  JOB_ITEMS_STREAM,
  JOB_RESULTS_BUCKET,
  JOB_RESULTS_DONE_BUCKET,
  JOBS_BUCKET,
  jobConsumer,
  jobItemsSubject,
  jobKey,
  jobResultKey,
  serviceNameProblem,
} from "./subjects.js";

export { JOB_ITEMS_STREAM, JOB_RESULTS_BUCKET, JOB_RESULTS_DONE_BUCKET, JOBS_BUCKET } from "./subjects.js";

/**
 * How long a claimed item may go without a word from its worker before JetStream gives it to another.
 * A worker calls `working()` every third of it while it computes, so it bounds how long a crashed worker's
 * item waits, not how long an item may take.
 */
export const DEFAULT_ITEM_ACK_WAIT_MS = 60_000;

/** Items published at once by ensureItems (each publish waits for its ack). */
const PUBLISH_WINDOW = 256;
/** Results read at once by results(). */
const READ_WINDOW = 64;
const NANOS_PER_MS = 1_000_000;
/** Creates the items' stream unless it exists (once, whoever of many starting processes gets there first). */
async function ensureItemsStream(jsm: JetStreamManager): Promise<void> {
  await createConcurrently(async () => {
    try {
      await jsm.streams.info(JOB_ITEMS_STREAM);
      return;
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    }
    await jsm.streams.add({
      name: JOB_ITEMS_STREAM,
      subjects: [allJobItems],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
    });
  });
}

export interface JobStoreOptions {
  /** The ack wait of the item consumers this store creates (default DEFAULT_ITEM_ACK_WAIT_MS). */
  ackWaitMs?: number;
  /** Seals each result this store records (a backend's certificate and key: HeartbeatSigner). */
  signer?: { seal(encoded: Uint8Array): Uint8Array };
}

/** A recorded result that an audit refused, and why. */
export interface RefusedResult {
  /** Its key in the results' bucket (`<job>.<item>`, or whatever a writer put there). */
  key: string;
  /** The job's item its key names, to be done again; undefined when the key names none of the job's items. */
  item: number | undefined;
  backendId: string;
  problem: string;
}

/** What an audit asks of each recorded result that reads (undefined: it counts; else why it does not). */
export type ResultCheck = (result: control.JobItemResult, raw: Uint8Array) => string | undefined;

/** An item handed to one worker. Exactly one of done() and abandon() should follow. */
export interface ClaimedItem {
  readonly item: number;
  /** JetStream delivered it before (a worker crashed, let go of it, or went silent past the ack wait). */
  readonly redelivered: boolean;
  /** The consumer's ack wait: a worker calls working() more often than this while it computes. */
  readonly ackWaitMs: number;
  /** Acks it (and waits for the server to confirm): the item is never delivered again. */
  done(): Promise<void>;
  /** Naks it: it is redelivered at once, to whoever pulls next. */
  abandon(): Promise<void>;
  /** Restarts the ack wait. */
  working(): void;
}

export interface JobProgress {
  /** Results recorded. */
  done: number;
  /** Items in the stream not yet delivered. */
  pending: number;
  /** Delivered and neither acked nor terminated (a nak'd item waiting for redelivery counts here). */
  inFlight: number;
}

/** Item messages carry the item index as plain decimal text ("0", "17"): readable with `nats sub`. */
export function encodeItem(item: number): Uint8Array {
  return new TextEncoder().encode(String(item));
}

/** The item index in a message, or undefined when it is not a plain decimal index. */
export function decodeItem(data: Uint8Array): number | undefined {
  return parseItem(new TextDecoder().decode(data));
}

/** An item index written as plain decimal text (an item message, a result key's last token), or undefined. */
function parseItem(text: string): number | undefined {
  if (!/^(0|[1-9][0-9]{0,9})$/.test(text)) return undefined;
  const item = Number(text);
  return item <= 0xffffffff ? item : undefined;
}

function checkJobName(name: string): void {
  const problem = serviceNameProblem(name);
  if (problem !== undefined) throw new RangeError(problem.replace("service name", "job name"));
}

function isApiError(err: unknown, ...codes: number[]): boolean {
  return err instanceof JetStreamApiError && codes.includes(err.code);
}

/**
 * Best-effort jobs (FaPES) in JetStream: the job records (KV `ig_jobs`, key job.<name>), each item's result
 * written once (KV `ig_job_results`, key <job>.<item>), and the items still to do (work-queue stream
 * `IG_JOB_ITEMS`, subject ig.job.items.<job>, one durable pull consumer job-<job> per job).
 *
 * Exactly once: a worker that claims an item checks hasResult first (a worker that crashed after recording it,
 * before its ack, leaves it to be redelivered), computes, records with a KV create (the first record wins), and
 * only then acks. An item is lost only if it is acked without a result, which nothing here does.
 */
export class JobStore {
  private readonly consumers = new Map<string, Consumer>();
  private doneKv: Promise<KV> | undefined;

  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly kvm: Kvm,
    readonly jobs: KV,
    readonly resultsKv: KV,
    private readonly ackWaitMs: number,
    private readonly logger: Logger,
    private readonly signer: JobStoreOptions["signer"],
  ) {}

  static async open(nc: NatsConnection, logger: Logger, options: JobStoreOptions = {}): Promise<JobStore> {
    const ackWaitMs = options.ackWaitMs ?? DEFAULT_ITEM_ACK_WAIT_MS;
    if (!(Number.isFinite(ackWaitMs) && ackWaitMs >= 1000)) throw new RangeError(`ackWaitMs must be at least 1000, got ${ackWaitMs}`);
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const kvm = new Kvm(nc);
    const jobs = await createConcurrently(() => kvm.create(JOBS_BUCKET, { history: 5 }));
    const results = await createConcurrently(() => kvm.create(JOB_RESULTS_BUCKET, { history: 1 }));
    await ensureItemsStream(jsm);
    return new JobStore(js, jsm, kvm, jobs, results, ackWaitMs, logger.child({ component: "job-store" }), options.signer);
  }

  // ---- jobs ------------------------------------------------------------------------------------------

  async getJob(name: string): Promise<{ job: control.BestEffortJob; revision: number } | undefined> {
    checkJobName(name);
    const e = await this.jobs.get(jobKey(name));
    if (e?.operation !== "PUT") return undefined;
    const decoded = decodeMessage(control.BestEffortJob, e.value);
    if (!decoded.ok) {
      this.logger.warn({ key: e.key, error: decoded.error }, "garbled job record");
      return undefined;
    }
    return { job: decoded.value, revision: e.revision };
  }

  /** Writes the job record: revision 0 = it must not exist yet, n = only if still at n, undefined = always. */
  async putJob(job: control.IBestEffortJob, revision?: number): Promise<number> {
    const name = job.spec?.name ?? "";
    checkJobName(name);
    const bytes = encodeMessage(control.BestEffortJob, job);
    if (revision === undefined) return this.jobs.put(jobKey(name), bytes);
    if (revision === 0) return this.jobs.create(jobKey(name), bytes);
    return this.jobs.update(jobKey(name), bytes, revision);
  }

  /** Every job record, by name. */
  async listJobs(): Promise<control.BestEffortJob[]> {
    const names: string[] = [];
    for await (const key of await this.jobs.keys("job.*")) names.push(key.slice(4));
    const found = await Promise.all(names.sort().map((n) => this.getJob(n)));
    return found.flatMap((f) => (f ? [f.job] : []));
  }

  // ---- items -----------------------------------------------------------------------------------------

  /**
   * Makes the job's items claimable, once: if its consumer exists this does nothing. Otherwise the job's
   * subject is purged (items a previous call published before it failed), every item without a result is
   * published, and only then the consumer is created, so a call that fails half-way leaves no consumer and the
   * next one starts over without duplicates. `keepGoing` is asked before each window of publishes: false (the job
   * was cancelled meanwhile) stops there, without a consumer.
   */
  async ensureItems(spec: control.IBestEffortJobSpec, keepGoing: () => boolean = () => true): Promise<void> {
    const name = spec.name ?? "";
    checkJobName(name);
    const items = spec.items ?? 0;
    if (!(Number.isInteger(items) && items >= 0)) throw new RangeError(`items must be a non-negative integer, got ${items}`);
    if (await this.consumerInfo(name)) return;
    await this.jsm.streams.purge(JOB_ITEMS_STREAM, { filter: jobItemsSubject(name) });
    const recorded = await this.recordedItems(name);
    const todo: number[] = [];
    for (let i = 0; i < items; i++) if (!recorded.has(i)) todo.push(i);
    for (let start = 0; start < todo.length; start += PUBLISH_WINDOW) {
      if (!keepGoing()) return;
      await Promise.all(todo.slice(start, start + PUBLISH_WINDOW).map((i) => this.js.publish(jobItemsSubject(name), encodeItem(i))));
    }
    if (!keepGoing()) return;
    await this.jsm.consumers.add(JOB_ITEMS_STREAM, {
      durable_name: jobConsumer(name),
      filter_subject: jobItemsSubject(name),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: this.ackWaitMs * NANOS_PER_MS,
      max_deliver: -1,
    });
    this.logger.info({ job: name, items, published: todo.length, alreadyRecorded: recorded.size }, "job items published");
  }

  async progress(name: string): Promise<JobProgress> {
    checkJobName(name);
    const [done, info] = await Promise.all([this.countResults(name), this.consumerInfo(name)]);
    return { done, pending: info?.num_pending ?? 0, inFlight: info?.num_ack_pending ?? 0 };
  }

  /** The job is cancelled or finished: its consumer and its undelivered items go; its results stay. */
  async removeItems(name: string): Promise<void> {
    checkJobName(name);
    this.consumers.delete(name);
    try {
      await this.jsm.consumers.delete(JOB_ITEMS_STREAM, jobConsumer(name));
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
    }
    await this.jsm.streams.purge(JOB_ITEMS_STREAM, { filter: jobItemsSubject(name) });
  }

  /**
   * Forgets a finished job: its items, its results, then its record, so its name may be used again. Results go
   * before the record: a call that fails half-way leaves the record, and the next call finishes the work.
   */
  async forgetJob(name: string): Promise<void> {
    checkJobName(name);
    await this.removeItems(name);
    await this.retireResults(name);
    await this.purgeArchived(name);
    await this.jobs.purge(jobKey(name));
  }

  /**
   * A job called done: its results in the bucket every backend may write are removed (readers take them from the
   * done bucket, where the audit that passed copied them). A result a backend records after this is left there,
   * and read by no one.
   */
  async retireResults(name: string): Promise<void> {
    checkJobName(name);
    await this.jsm.streams.purge(`KV_${JOB_RESULTS_BUCKET}`, { filter: `$KV.${JOB_RESULTS_BUCKET}.${name}.*` });
  }

  // ---- results ---------------------------------------------------------------------------------------

  /**
   * Every recorded result of the job, by item; a done job's as audited (the done bucket). A garbled one, or one
   * under another item's key, is logged and left out.
   */
  async results(name: string): Promise<control.JobItemResult[]> {
    checkJobName(name);
    return this.resultsOf((await this.readableResults(name)).stored);
  }

  /** A done job's audited results if it has them (the done bucket), else those in the bucket backends write. */
  private async readableResults(name: string): Promise<{ stored: { key: string; value: Uint8Array }[]; digest: Uint8Array | undefined }> {
    const record = (await this.getJob(name))?.job;
    const digest = record?.resultsDigest && record.resultsDigest.length > 0 ? record.resultsDigest : undefined;
    if (digest && record?.state === control.JobState.JOB_STATE_SUCCEEDED) {
      const archived = await this.storedIn(await this.done(), name);
      // A job done before results were copied out on their audit has none there.
      if (archived.length > 0) return { stored: archived, digest };
    }
    return { stored: await this.storedResults(name), digest };
  }

  private resultsOf(stored: readonly { key: string; value: Uint8Array }[]): control.JobItemResult[] {
    const out: control.JobItemResult[] = [];
    for (const { key, value } of stored) {
      const { result, problem } = resultUnder(key, value);
      if (result && problem === undefined) out.push(result);
      else this.logger.warn({ key, problem }, "job result left out");
    }
    return out.sort((a, b) => a.item - b.item);
  }

  async hasResult(job: string, item: number): Promise<boolean> {
    checkJobName(job);
    const e = await this.resultsKv.get(jobResultKey(job, item));
    return e?.operation === "PUT";
  }

  /**
   * Writes the item's result if none is recorded. "exists": someone recorded it first (the item was done
   * twice). A create whose reply was lost and that is retried finds its own bytes there: that is "recorded".
   */
  async recordResult(result: control.IJobItemResult): Promise<"recorded" | "exists"> {
    const job = result.job ?? "";
    checkJobName(job);
    const item = result.item ?? 0;
    const key = jobResultKey(job, item);
    const encoded = encodeMessage(control.JobItemResult, result);
    const bytes = this.signer ? this.signer.seal(encoded) : encoded;
    try {
      await this.resultsKv.create(key, bytes);
      return "recorded";
    } catch (err) {
      // Taken (wrong last sequence), or no reply (NATS away): what is there now says which.
      const e = await this.resultsKv.get(key);
      if (e?.operation !== "PUT") throw err;
      return sameBytes(e.value, bytes) ? "recorded" : "exists";
    }
  }

  /**
   * Reads every recorded result of the job and sorts them: those that count, and those refused because their key
   * names none of the job's `items`, they do not read as the result of the item their key names, or `check`
   * refuses them (an unsigned or forged one). The allocator audits a job before it calls it done; `redo` then
   * removes the refused ones and puts their items back.
   */
  async audit(name: string, items: number, check?: ResultCheck): Promise<{ accepted: number; refused: RefusedResult[]; digest: Buffer }> {
    checkJobName(name);
    let accepted = 0;
    const refused: RefusedResult[] = [];
    const stored = await this.storedResults(name);
    for (const { key, value } of stored) {
      const parsed = parseItem(key.slice(name.length + 1));
      const item = parsed !== undefined && parsed < items ? parsed : undefined;
      const read = resultUnder(key, value);
      const problem =
        item === undefined
          ? `the key ${key} names none of the job's ${items} items`
          : (read.problem ?? (read.result && check?.(read.result, value)));
      if (problem === undefined) accepted++;
      else refused.push({ key, item, backendId: read.result?.backendId ?? "", problem });
    }
    // Over every stored result: with none refused, the results the job is called done with. Those are copied out to
    // where only the allocator writes, so that what readers of the done job get is what passed.
    if (refused.length === 0 && accepted >= items) await this.archive(name, stored);
    return { accepted, refused, digest: resultsDigest(stored) };
  }

  /** Replaces the job's copy in the done bucket with `stored`. */
  private async archive(name: string, stored: readonly { key: string; value: Uint8Array }[]): Promise<void> {
    const done = await this.done();
    await this.purgeArchived(name);
    for (let start = 0; start < stored.length; start += PUBLISH_WINDOW)
      await Promise.all(stored.slice(start, start + PUBLISH_WINDOW).map(({ key, value }) => done.put(key, value)));
  }

  private async purgeArchived(name: string): Promise<void> {
    await this.done();
    await this.jsm.streams.purge(`KV_${JOB_RESULTS_DONE_BUCKET}`, { filter: `$KV.${JOB_RESULTS_DONE_BUCKET}.${name}.*` });
  }

  /** The job's results as its last passing audit copied them to the done bucket, as bytes (to check their seals). */
  async archivedResults(name: string): Promise<{ key: string; value: Uint8Array }[]> {
    checkJobName(name);
    return this.storedIn(await this.done(), name);
  }

  /** The done bucket, opened (or made) when first needed: the backends, which never read it, do not open it. */
  private done(): Promise<KV> {
    this.doneKv ??= createConcurrently(() => this.kvm.create(JOB_RESULTS_DONE_BUCKET, { history: 1 }));
    return this.doneKv;
  }

  /**
   * A job's results (as `results`) with whether they are those it was called done with: `unchanged` is false if any
   * was overwritten, deleted or added since (the digest in its record differs), undefined if the job has no digest
   * (not done yet, or done before digests were kept). A done job's results are read from the done bucket, which only
   * the allocator writes, as is the record; a job done before they were copied there is read from the bucket every
   * backend may write.
   */
  async verifiedResults(name: string): Promise<{ results: control.JobItemResult[]; unchanged: boolean | undefined }> {
    checkJobName(name);
    const { stored, digest } = await this.readableResults(name);
    const results = this.resultsOf(stored);
    if (digest === undefined) return { results, unchanged: undefined };
    return { results, unchanged: resultsDigest(stored).equals(digest) };
  }

  /**
   * Removes refused results and puts the items they name back in the job's work queue, to be done again. The
   * results go first: a worker that claims an item checks for its result before it computes. Their subjects are
   * purged (no delete marker), because results are counted by their subjects (countResults).
   */
  async redo(name: string, refused: readonly Pick<RefusedResult, "key" | "item">[]): Promise<void> {
    checkJobName(name);
    for (let start = 0; start < refused.length; start += PUBLISH_WINDOW)
      await Promise.all(
        refused
          .slice(start, start + PUBLISH_WINDOW)
          .map(({ key }) => this.jsm.streams.purge(`KV_${JOB_RESULTS_BUCKET}`, { filter: `$KV.${JOB_RESULTS_BUCKET}.${key}` })),
      );
    const items = refused.flatMap((f) => (f.item === undefined ? [] : [f.item]));
    for (let start = 0; start < items.length; start += PUBLISH_WINDOW)
      await Promise.all(items.slice(start, start + PUBLISH_WINDOW).map((i) => this.js.publish(jobItemsSubject(name), encodeItem(i))));
  }

  // ---- worker side -----------------------------------------------------------------------------------

  /**
   * The job's next item for this worker, or undefined when none came within maxWaitMs (also when the job has no
   * consumer: not made claimable yet, or removed; or NATS cannot be reached). Waits at least 1 s (JetStream's
   * shortest pull). A garbled item message is logged and acked (dropped: it would only come back; a
   * terminated message stays pending on nats-server 2.9).
   */
  async claim(name: string, options: { maxWaitMs: number }): Promise<ClaimedItem | undefined> {
    checkJobName(name);
    const waitMs = Math.max(1000, options.maxWaitMs);
    const end = Date.now() + waitMs;
    let consumer: Consumer | undefined;
    try {
      consumer = await this.consumer(name);
    } catch (err) {
      this.logger.warn({ err, job: name }, "cannot reach the job's items");
    }
    if (!consumer) {
      await sleep(Math.max(0, end - Date.now()));
      return undefined;
    }
    while (Date.now() < end) {
      let msg: JsMsg | null;
      try {
        msg = await consumer.next({ expires: Math.max(1000, end - Date.now()) });
      } catch (err) {
        // The consumer was deleted (job removed) or NATS went away: look it up afresh next time.
        this.consumers.delete(name);
        this.logger.warn({ err, job: name }, "pulling the job's next item failed");
        await sleep(Math.max(0, Math.min(1000, end - Date.now())));
        return undefined;
      }
      if (!msg) return undefined;
      const item = decodeItem(msg.data);
      if (item === undefined) {
        this.logger.warn({ job: name, subject: msg.subject, bytes: msg.data.length }, "dropped a garbled job item");
        msg.ack();
        continue;
      }
      return this.claimed(msg, item, await this.ackWaitOf(consumer));
    }
    return undefined;
  }

  /** The consumer's own ack wait (whoever created it chose it), from its cached info. */
  private async ackWaitOf(consumer: Consumer): Promise<number> {
    try {
      const nanos = (await consumer.info(true)).config.ack_wait;
      if (nanos !== undefined && nanos > 0) return nanos / NANOS_PER_MS;
    } catch {
      // No info: the store's own setting is the best guess.
    }
    return this.ackWaitMs;
  }

  private claimed(msg: JsMsg, item: number, ackWaitMs: number): ClaimedItem {
    return {
      item,
      redelivered: msg.redelivered,
      ackWaitMs,
      done: async () => {
        if (!(await msg.ackAck({ timeout: 5_000 }))) throw new Error(`the ack of item ${item} was not confirmed`);
      },
      abandon: async () => {
        msg.nak();
      },
      working: () => msg.working(),
    };
  }

  // ---- internals -------------------------------------------------------------------------------------

  private async consumer(name: string): Promise<Consumer | undefined> {
    const cached = this.consumers.get(name);
    if (cached) return cached;
    try {
      const c = await this.js.consumers.get(JOB_ITEMS_STREAM, jobConsumer(name));
      this.consumers.set(name, c);
      return c;
    } catch (err) {
      if (isApiError(err, JetStreamApiCodes.ConsumerNotFound, JetStreamApiCodes.StreamNotFound)) return undefined;
      throw err;
    }
  }

  private async consumerInfo(name: string) {
    try {
      return await this.jsm.consumers.info(JOB_ITEMS_STREAM, jobConsumer(name));
    } catch (err) {
      if (isApiError(err, JetStreamApiCodes.ConsumerNotFound)) return undefined;
      throw err;
    }
  }

  private async recordedItems(name: string): Promise<Set<number>> {
    const recorded = new Set<number>();
    for await (const key of await this.resultsKv.keys(`${name}.*`)) {
      const item = parseItem(key.slice(name.length + 1));
      if (item !== undefined) recorded.add(item);
    }
    return recorded;
  }

  /**
   * Results recorded for the job without reading them: an ephemeral consumer on the last value of each of the
   * job's keys counts them as its pending messages (results are never deleted, so every key is one result).
   */
  private async countResults(name: string): Promise<number> {
    const stream = `KV_${JOB_RESULTS_BUCKET}`;
    try {
      const info = await this.jsm.consumers.add(stream, {
        filter_subject: `$KV.${JOB_RESULTS_BUCKET}.${name}.*`,
        deliver_policy: DeliverPolicy.LastPerSubject,
        ack_policy: AckPolicy.None,
        headers_only: true,
        inactive_threshold: 5_000 * NANOS_PER_MS,
      });
      void this.jsm.consumers.delete(stream, info.name).catch(() => undefined);
      return info.num_pending;
    } catch (err) {
      this.logger.debug({ err, job: name }, "counting results through a consumer failed; counting keys");
      return (await this.recordedItems(name)).size;
    }
  }

  /** Every result key of the job with the bytes it holds (deleted keys left out), read a window at a time. */
  private storedResults(name: string): Promise<{ key: string; value: Uint8Array }[]> {
    return this.storedIn(this.resultsKv, name);
  }

  private async storedIn(kv: KV, name: string): Promise<{ key: string; value: Uint8Array }[]> {
    const keys: string[] = [];
    for await (const key of await kv.keys(`${name}.*`)) keys.push(key);
    const out: { key: string; value: Uint8Array }[] = [];
    for (let start = 0; start < keys.length; start += READ_WINDOW) {
      const read = await Promise.all(keys.slice(start, start + READ_WINDOW).map((k) => kv.get(k)));
      read.forEach((e, i) => {
        if (e?.operation === "PUT") out.push({ key: keys[start + i] as string, value: e.value });
      });
    }
    return out;
  }
}

/**
 * SHA-256 over results as stored, in key order: each key, a zero byte, the value's length (4 bytes, big-endian) and
 * the value, so that no two different sets of results give the same bytes to hash.
 */
export function resultsDigest(stored: readonly { key: string; value: Uint8Array }[]): Buffer {
  const hash = createHash("sha256");
  const length = Buffer.alloc(4);
  for (const { key, value } of [...stored].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))) {
    hash.update(key, "utf8").update(ZERO);
    length.writeUInt32BE(value.length);
    hash.update(length).update(value);
  }
  return hash.digest();
}
const ZERO = Buffer.from([0]);

/**
 * The result a key holds, decoded when it reads, and why it is not the key's item's result (`problem`): bytes that
 * are not a result, or another item's result.
 */
function resultUnder(key: string, value: Uint8Array): { result?: control.JobItemResult; problem?: string } {
  const decoded = decodeMessage(control.JobItemResult, value);
  if (!decoded.ok) return { problem: `not a job result: ${decoded.error}` };
  const own = jobResultKey(decoded.value.job, decoded.value.item);
  return own === key ? { result: decoded.value } : { result: decoded.value, problem: `the result of ${own} under the key ${key}` };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
