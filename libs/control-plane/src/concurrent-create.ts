import { setTimeout as sleep } from "node:timers/promises";
import { JetStreamApiError } from "@nats-io/jetstream";

/** JetStream's "stream name already in use with a different configuration" (not in JetStreamApiCodes). */
const STREAM_NAME_IN_USE = 10058;
/** JetStream's "subjects overlap with an existing stream" (not in JetStreamApiCodes). */
const STREAM_SUBJECT_OVERLAP = 10065;
/** How long a create keeps at it while another process's create of the same stream is being applied. */
export const CONCURRENT_CREATE_WAIT_MS = 15_000;

/**
 * Runs `create`, which makes a JetStream stream (or a KV bucket, which is one) unless it exists, again while
 * the server refuses it because another process is creating the same stream. Every process of a fresh cluster
 * opens the registry and the job store as it starts: each looks, finds nothing and creates. The server then
 * refuses all but the first as "name in use" or, while the first is still being applied, as "subjects
 * overlap". The first's stream is as good as ours, so `create` is run again until it finds it (or, if that
 * create failed, makes it), up to `waitMs`; a slow server took more than a second to apply one.
 */
export async function createConcurrently<T>(create: () => Promise<T>, waitMs = CONCURRENT_CREATE_WAIT_MS): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await create();
    } catch (err) {
      const raced = err instanceof JetStreamApiError && (err.code === STREAM_NAME_IN_USE || err.code === STREAM_SUBJECT_OVERLAP);
      if (!raced || Date.now() >= deadline) throw err;
    }
    await sleep(Math.min(50 * attempt, 500));
  }
}
