import { grpc } from "@infergrid/runtime";

/**
 * A component that answers UNAVAILABLE on purpose (nothing could take the request in time) says
 * so with these metadata keys, with a hint of when to retry. The broker tells that apart from a
 * frontend it could not reach, which it fails over instead; HTTP clients get `Retry-After`.
 */
export const RETRY_AFTER_MS_KEY = "x-infergrid-retry-after-ms";
export const ORIGIN_KEY = "x-infergrid-origin";
/**
 * A backend that refuses a request unrun because it could not finish it within its caller's allowance (a
 * batching backend's Themis profile; themis in-time.ts) says so with this key: the frontend counts it as a
 * timeout but does not suspect the backend, which answered.
 */
export const NOT_RUN_KEY = "x-infergrid-not-run";

export function unavailableMetadata(origin: string, retryAfterMs: number): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set(RETRY_AFTER_MS_KEY, String(Math.max(0, Math.round(retryAfterMs))));
  md.set(ORIGIN_KEY, origin);
  return md;
}

export function retryAfterMs(md: grpc.Metadata | undefined): number | undefined {
  const v = md?.get(RETRY_AFTER_MS_KEY)[0];
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/** True when the status was produced by one of our components rather than by the transport. */
export function isDeliberate(md: grpc.Metadata | undefined): boolean {
  return (md?.get(ORIGIN_KEY).length ?? 0) > 0;
}
