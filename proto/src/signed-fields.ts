import protobuf from "protobufjs/minimal.js";

const { Reader, Writer } = protobuf;
const LEN = 2;

/**
 * Signed messages on the wire: the signer encodes the message, signs those bytes, and appends the proof as
 * length-delimited fields (protobuf lets fields be appended to an encoded message). A verifier takes back the
 * bytes that were signed by leaving those fields out of what arrived, in the order it arrived, so nothing is
 * re-encoded: a field a newer sender added and this reader does not know is still covered by the signature.
 */
export function appendBytesFields(encoded: Uint8Array, fields: readonly (readonly [number, Uint8Array])[]): Uint8Array {
  const w = Writer.create();
  for (const [field, value] of fields) w.uint32((field << 3) | LEN).bytes(value);
  const tail = w.finish();
  const out = new Uint8Array(encoded.length + tail.length);
  out.set(encoded, 0);
  out.set(tail, encoded.length);
  return out;
}

/**
 * The bytes of `raw` without the fields numbered in `left`, and those fields' values (the last of each, as
 * protobuf decoding keeps it). Throws on bytes that are not a protobuf message.
 */
export function splitFields(raw: Uint8Array, left: ReadonlySet<number>): { rest: Uint8Array; taken: Map<number, Uint8Array> } {
  const r = Reader.create(raw);
  const kept: [number, number][] = [];
  const taken = new Map<number, Uint8Array>();
  while (r.pos < r.len) {
    const start = r.pos;
    const tag = r.uint32();
    const field = tag >>> 3;
    const wireType = tag & 7;
    if (left.has(field) && wireType === LEN) {
      taken.set(field, r.bytes());
      continue;
    }
    r.skipType(wireType, 0, field);
    const last = kept[kept.length - 1];
    if (last && last[1] === start) last[1] = r.pos;
    else kept.push([start, r.pos]);
  }
  const size = kept.reduce((n, [s, e]) => n + e - s, 0);
  const rest = new Uint8Array(size);
  let at = 0;
  for (const [s, e] of kept) {
    rest.set(raw.subarray(s, e), at);
    at += e - s;
  }
  return { rest, taken };
}
