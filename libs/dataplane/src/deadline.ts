import type { SenderLag } from "./sender-lag.js";

/**
 * The one deadline a request lives by: the earliest of the caller's gRPC deadline, the absolute
 * deadline in the message and the component's own timeout. `Infinity` means none was given.
 * Whole milliseconds: it is written into the next hop's message as an integer (a timeout header or a
 * setting of 1500.5 ms must not fail the request's encoding). The two deadlines are wall-clock times; `now` and the
 * result are on the component's clock, `wallOffsetMs` ahead of the wall clock (SteadyClock.wallOffset; 0 when it is
 * the wall clock).
 */
export function effectiveDeadline(
  now: number,
  grpcDeadline: number,
  messageDeadline: number,
  defaultTimeoutMs: number,
  wallOffsetMs = 0,
): number {
  const candidates = [now + defaultTimeoutMs];
  if (Number.isFinite(grpcDeadline) && grpcDeadline > 0) candidates.push(grpcDeadline + wallOffsetMs);
  if (messageDeadline > 0) candidates.push(messageDeadline + wallOffsetMs);
  return Math.floor(Math.min(...candidates));
}

/**
 * The deadline of a call from another process of the request path: the earliest of the sender's, read through
 * `senders` (its gRPC timeout and the deadline stamped in its message on its own clock; sender-lag.ts), and the
 * component's own timeout. On the component's clock, `wallOffsetMs` ahead of the wall clock, which `grpcDeadline`
 * (from grpc-js, or the request path's own server) is read on.
 */
export function hopDeadline(
  now: number,
  grpcDeadline: number,
  stamped: number,
  defaultTimeoutMs: number,
  wallOffsetMs: number,
  senders: SenderLag,
  sender: string,
): number {
  const relative = Number.isFinite(grpcDeadline) && grpcDeadline > 0 ? grpcDeadline + wallOffsetMs : Number.POSITIVE_INFINITY;
  return Math.floor(Math.min(now + defaultTimeoutMs, senders.deadline(sender, relative, stamped, now, wallOffsetMs)));
}

/** grpc-js gives a deadline as a Date or a number (Infinity when none). */
export function deadlineMs(deadline: Date | number | undefined): number {
  if (deadline === undefined) return Number.POSITIVE_INFINITY;
  return deadline instanceof Date ? deadline.getTime() : deadline;
}
