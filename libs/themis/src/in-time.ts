import { processingMs, type ThemisProfile } from "./latency-profile.js";

/**
 * Whether a batching backend can answer a request before its caller's deadline, from its Themis profile l(b, c),
 * before it admits the request. A batching backend queues what it admits behind the batch it runs (it admits the
 * batches it can finish within half the SLO, by count, not by rows): a request admitted behind a batch that runs
 * long, or one whose own rows take longer than its caller waits, ties up a slot for an answer nobody reads, and
 * holds up the requests behind it. The frontend then times the call out and sends it elsewhere; the backend can
 * say so at once instead (Clockwork and Nexus drop requests that cannot meet their deadlines for the same reason).
 *
 * - `too-long`: the request alone, on this backend idle, ends after its deadline: it is not run anywhere of this
 *   size (the caller's allowance per attempt is the bound, as the frontend's own timeout would be).
 * - `after-deadline`: it would, if it did not wait behind what this backend has admitted: another may take it.
 * - `in-time`: admit it.
 *
 * The wait is estimated as the running batch's expected end (its start plus l of its rows; now, once that has
 * passed) and one batch of every row waiting plus this request's, which is the earliest the request can finish:
 * it refuses only what cannot end in time on the profile's figures.
 */
export type InTime = { kind: "in-time" } | { kind: "after-deadline"; finishesAt: number } | { kind: "too-long"; aloneMs: number };

export interface InTimeInput {
  profile: ThemisProfile;
  cores: number;
  now: number;
  /** The caller's deadline on the same clock (Infinity: none). */
  deadline: number;
  /** The request's rows (its inputs' first dimension). */
  rows: number;
  /** Rows admitted and waiting for a batch to run, ahead of this request. */
  waitingRows: number;
  /** When the running batch is expected to end (undefined: the model is idle). */
  runningEndsAt: number | undefined;
}

export function inTime(x: InTimeInput): InTime {
  if (!Number.isFinite(x.deadline)) return { kind: "in-time" };
  const aloneMs = processingMs(x.profile, x.rows, x.cores);
  if (x.now + aloneMs > x.deadline) return { kind: "too-long", aloneMs };
  const startsAt = Math.max(x.now, x.runningEndsAt ?? x.now);
  const finishesAt = startsAt + processingMs(x.profile, x.waitingRows + x.rows, x.cores);
  return finishesAt > x.deadline ? { kind: "after-deadline", finishesAt } : { kind: "in-time" };
}
