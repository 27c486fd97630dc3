/**
 * What the hand-written readers (routed.ts, model-infer.ts) share of the protobuf wire format over protobufjs's
 * Reader: the wire types they branch on, a length-delimited field's bounds, and a walk over a message's fields.
 */
import type protobuf from "protobufjs/minimal.js";

export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;
export const I32 = 5;

/** Reads a length-delimited field's bounds and moves past it. */
export function delimited(r: protobuf.Reader): [number, number] {
  const len = r.size();
  const start = r.pos;
  const end = start + len;
  if (end > r.len) throw new RangeError("a length-delimited field runs past the end of the message");
  r.pos = end;
  return [start, end];
}

/** Reads a message's fields up to `end`: `take` reads one it knows and says so; any other is skipped. */
export function eachField(r: protobuf.Reader, end: number, take: (field: number, wireType: number) => boolean): void {
  while (r.pos < end) {
    const tag = r.tag();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (!take(field, wt)) r.skipType(wt, 0, field);
  }
}
