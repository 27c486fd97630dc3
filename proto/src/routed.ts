/**
 * The request path's messages as the broker and the frontend see them: the fields they route on decoded, the
 * tensors kept as the bytes that came on the wire and forwarded untouched. Only the backend decodes tensors, so
 * a 600 KB image costs a hop one copy, not a decode into JavaScript numbers and an encode back.
 *
 * Written by hand over protobufjs's Reader and Writer because no library forwards a protobuf field's bytes
 * between messages: a map<string, Tensor> entry is the same bytes in InferRequest (field 3), ExecuteRequest
 * (field 4), ExecuteReply and InferResponse (field 3), only its tag differs. The field numbers below are the
 * .proto files'; `routed.test.ts` checks every message here against the generated codecs both ways.
 */
import "./numbers-not-longs.js";
import { endianness } from "node:os";
import type { MethodDefinition } from "@grpc/grpc-js";
import protobuf from "protobufjs/minimal.js";
import { infergrid } from "./gen/messages.js";
import { delimited, eachField, I32, I64, LEN, VARINT } from "./wire.js";

import backend = infergrid.backend.v1;
import inference = infergrid.inference.v1;

const { Reader } = protobuf;

/** One map<string, Tensor> entry as received: the MapEntry message's bytes (key = 1, value = 2), a view. */
export type RawEntry = Uint8Array;

/**
 * A float32 input entry written around values it does not copy (float32Entry): its bytes are `head` (the key,
 * dtype, dims, and the values' tag and length) then `data`, a view of the bytes the values came in, written after
 * it as they are. Its name and shape are known from what it was made of, not read back.
 */
export interface SplitEntry {
  readonly head: Uint8Array;
  readonly data: Uint8Array;
  readonly name: string;
  readonly shape: TensorShape;
}

/** An input a request carries on: as received, or written by the broker around its values (SplitEntry). */
export type InputEntry = RawEntry | SplitEntry;

const isSplit = (e: InputEntry): e is SplitEntry => !(e instanceof Uint8Array);

/** InferRequest with its inputs undecoded. `undecodable` says why the bytes were not a valid InferRequest. */
export interface RoutedInferRequest {
  service: string;
  requestId: string;
  deadlineUnixMs: number;
  /** The first ROUTED_INPUTS_KEPT entries. */
  inputs: InputEntry[];
  /** Entries on the wire beyond those kept, counted without being read (a request that large is refused). */
  inputsBeyond?: number;
  undecodable?: string;
}

/**
 * Input entries a routed request keeps; those beyond are only counted. The data plane refuses far fewer
 * (libs/dataplane MAX_INPUTS), so none beyond is ever needed, and a request of 10,000 tiny inputs costs a hop a
 * scan of its bytes instead of 10,000 views of them.
 */
export const ROUTED_INPUTS_KEPT = 256;

/** ExecuteRequest with its inputs passed through (written with the inputs' field number, 4). */
export interface RoutedExecuteRequest {
  service: string;
  requestId: string;
  frontendId: string;
  inputs: readonly InputEntry[];
  attempt: number;
  holdId?: string;
  /** When the frontend stops waiting for this attempt (Unix ms). */
  deadlineUnixMs: number;
}

/** ExecuteReply with its outputs undecoded: the frontend reads the status and the report, forwards the outputs. */
export interface RoutedExecuteReply {
  status: backend.ExecuteStatus;
  report: backend.BackendReport | null;
  outputs: RawEntry[];
  computeMs: number;
}

/** InferResponse around outputs that came from the backend untouched. */
export interface RoutedInferResponse {
  requestId: string;
  service: string;
  outputs: readonly RawEntry[];
  backendId: string;
  frontendId: string;
  timing: inference.Timing.$Properties;
}

/** What the broker and the frontend check of a tensor without decoding its values. */
export interface TensorShape {
  dtype: string;
  dims: number[];
  /** How many float32 values the tensor carries. */
  values: number;
}

const tagOf = (field: number, wireType: number) => ((field << 3) | wireType) >>> 0;

function view(buf: Uint8Array, start: number, end: number): Uint8Array {
  return buf.subarray(start, end);
}

/** Tag byte of InferRequest's inputs (field 3, length-delimited). */
const INPUT_TAG = (3 << 3) | LEN;

/**
 * Skips the input entries that follow at r.pos, counting them, and stops at the first other field: the entries
 * beyond those kept are only counted, and this loop over the bytes does it at a fraction of the Reader's cost.
 */
function skipInputs(bytes: Uint8Array, r: protobuf.Reader): number {
  let pos = r.pos;
  let n = 0;
  while (pos < r.len && bytes[pos] === INPUT_TAG) {
    pos++;
    let len = 0;
    let shift = 0;
    let b: number;
    do {
      if (pos >= r.len || shift > 28) throw new RangeError("an input's length is not a valid varint");
      b = bytes[pos++] as number;
      len += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80);
    if (pos + len > r.len) throw new RangeError("a length-delimited field runs past the end of the message");
    pos += len;
    n++;
  }
  r.pos = pos;
  return n;
}

/** Never throws: bytes that are not an InferRequest come back with `undecodable` set (INVALID_ARGUMENT, not INTERNAL). */
export function decodeRoutedInfer(bytes: Uint8Array): RoutedInferRequest {
  const out: RoutedInferRequest = { service: "", requestId: "", deadlineUnixMs: 0, inputs: [] };
  try {
    const r = Reader.create(bytes);
    eachField(r, r.len, (field, wt) => {
      if (field === 1 && wt === LEN) out.service = r.string();
      else if (field === 2 && wt === LEN) out.requestId = r.string();
      else if (field === 3 && wt === LEN) {
        const [s, e] = delimited(r);
        if (out.inputs.length < ROUTED_INPUTS_KEPT) out.inputs.push(view(bytes, s, e));
        else out.inputsBeyond = (out.inputsBeyond ?? 0) + 1 + skipInputs(bytes, r);
      } else if (field === 4 && wt === VARINT) out.deadlineUnixMs = Number(r.int64());
      else return false;
      return true;
    });
  } catch (err) {
    out.undecodable = `the request is not a valid InferRequest: ${err instanceof Error ? err.message : String(err)}`;
  }
  return out;
}

/**
 * A message written in one allocation of its exact size: protobufjs's Writer grows its buffer by doubling and
 * copies it again on finish, three copies of a 600 KB tensor a hop where one will do.
 */
class ExactWriter {
  private readonly parts: Array<{
    tag: number;
    kind: "bytes" | "string" | "varint" | "split";
    bytes?: Uint8Array;
    split?: SplitEntry;
    text?: string;
    n?: number;
  }> = [];
  private size = 0;

  bytes(field: number, value: Uint8Array): this {
    const tag = tagOf(field, LEN);
    this.parts.push({ tag, kind: "bytes", bytes: value });
    this.size += varintSize(tag) + varintSize(value.length) + value.length;
    return this;
  }

  /** An input entry as a length-delimited field: a split one's head, then its values. */
  entry(field: number, value: InputEntry): this {
    if (!isSplit(value)) return this.bytes(field, value);
    const tag = tagOf(field, LEN);
    const len = value.head.length + value.data.length;
    this.parts.push({ tag, kind: "split", split: value, n: len });
    this.size += varintSize(tag) + varintSize(len) + len;
    return this;
  }

  string(field: number, value: string | undefined): this {
    if (!value) return this;
    const tag = tagOf(field, LEN);
    const len = Buffer.byteLength(value);
    this.parts.push({ tag, kind: "string", text: value, n: len });
    this.size += varintSize(tag) + varintSize(len) + len;
    return this;
  }

  /** A non-negative integer below 2^53 as a varint (int64, uint32, enum); callers validate first. */
  varint(field: number, value: number): this {
    if (!value) return this;
    if (!(Number.isSafeInteger(value) && value > 0)) throw new RangeError(`field ${field}: ${value} is not a non-negative integer`);
    const tag = tagOf(field, VARINT);
    this.parts.push({ tag, kind: "varint", n: value });
    this.size += varintSize(tag) + varintSize(value);
    return this;
  }

  /**
   * The message as chunks to be written one after another: large byte fields (a tensor) as views of the bytes
   * they came as, everything else in one small allocation. A hop that forwards a 588 KiB image this way copies
   * it into no buffer of its own.
   */
  chunks(): Buffer[] {
    const bulkOf = (b: Uint8Array | undefined) => (b !== undefined && b.length >= BULK_BYTES ? b.length : 0);
    const bulk = this.parts.reduce(
      (n, p) => n + (p.kind === "bytes" ? bulkOf(p.bytes) : p.kind === "split" ? bulkOf(p.split?.data) : 0),
      0,
    );
    const small = Buffer.allocUnsafe(this.size - bulk);
    const out: Buffer[] = [];
    let pos = 0;
    let from = 0;
    for (const p of this.parts) {
      pos = writeVarint(small, pos, p.tag);
      if (p.kind === "varint") pos = writeVarint(small, pos, p.n ?? 0);
      else if (p.kind === "string") {
        pos = writeVarint(small, pos, p.n ?? 0);
        pos += small.write(p.text ?? "", pos, "utf8");
      } else {
        let b = p.bytes ?? new Uint8Array();
        pos = writeVarint(small, pos, p.kind === "split" ? (p.n ?? 0) : b.length);
        if (p.split) {
          small.set(p.split.head, pos);
          pos += p.split.head.length;
          b = p.split.data;
        }
        if (b.length >= BULK_BYTES) {
          out.push(small.subarray(from, pos), Buffer.from(b.buffer, b.byteOffset, b.byteLength));
          from = pos;
        } else {
          small.set(b, pos);
          pos += b.length;
        }
      }
    }
    if (pos > from) out.push(small.subarray(from, pos));
    return out;
  }

  finish(): Buffer {
    const buf = Buffer.allocUnsafe(this.size);
    let pos = 0;
    for (const p of this.parts) {
      pos = writeVarint(buf, pos, p.tag);
      if (p.kind === "varint") pos = writeVarint(buf, pos, p.n ?? 0);
      else if (p.kind === "string") {
        pos = writeVarint(buf, pos, p.n ?? 0);
        pos += buf.write(p.text ?? "", pos, "utf8");
      } else if (p.split) {
        pos = writeVarint(buf, pos, p.n ?? 0);
        buf.set(p.split.head, pos);
        pos += p.split.head.length;
        buf.set(p.split.data, pos);
        pos += p.split.data.length;
      } else {
        const b = p.bytes ?? new Uint8Array();
        pos = writeVarint(buf, pos, b.length);
        buf.set(b, pos);
        pos += b.length;
      }
    }
    return buf;
  }
}

/** Byte fields from this size on are left where they are by `chunks()` (below it a copy costs less than a write). */
const BULK_BYTES = 16 * 1024;

/** A request serializer that can also give its message as chunks (ExactWriter.chunks). */
export interface ChunkedSerialize<T> {
  (message: T): Buffer;
  chunks(message: T): Buffer[];
}

export function isChunked<T>(serialize: (message: T) => Buffer): serialize is ChunkedSerialize<T> {
  return typeof (serialize as Partial<ChunkedSerialize<T>>).chunks === "function";
}

/**
 * A request deserializer that can also decode tensors' values into arrays its server lends for the call, given
 * back once the call is answered (runtime's unary-direct.ts): for handlers whose request does not outlive their
 * answer. A 588 KiB image decoded into a fresh array on every request is memory outside V8's heap, which starts
 * its full collections (the body pool's reason, buffer-pool.ts).
 */
export interface ScratchDeserialize<T> {
  (bytes: Buffer): T;
  withScratch(bytes: Buffer, floatsFor: FloatsFor): T;
}

export function hasScratch<T>(deserialize: (bytes: Buffer) => T): deserialize is ScratchDeserialize<T> {
  return typeof (deserialize as Partial<ScratchDeserialize<T>>).withScratch === "function";
}

/** ExecuteRequest's deserializer for the backend, lent arrays or not. */
export const executeRequestDeserialize: ScratchDeserialize<DecodedExecuteRequest> = Object.assign((b: Buffer) => decodeExecuteRequest(b), {
  withScratch: (b: Buffer, floatsFor: FloatsFor) => decodeExecuteRequest(b, floatsFor),
});

function chunked<T>(writer: (message: T) => ExactWriter): ChunkedSerialize<T> {
  return Object.assign((m: T) => writer(m).finish(), { chunks: (m: T) => writer(m).chunks() });
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size += 1;
  }
  return size;
}

function writeVarint(buf: Buffer, pos: number, n: number): number {
  while (n >= 128) {
    buf[pos++] = (n % 128) | 128;
    n = Math.floor(n / 128);
  }
  buf[pos++] = n;
  return pos;
}

function routedInferWriter(req: RoutedInferRequest): ExactWriter {
  const w = new ExactWriter().string(1, req.service).string(2, req.requestId);
  for (const e of req.inputs) w.entry(3, e);
  return w.varint(4, req.deadlineUnixMs);
}

function routedExecuteWriter(req: RoutedExecuteRequest): ExactWriter {
  const w = new ExactWriter().string(1, req.service).string(2, req.requestId).string(3, req.frontendId);
  for (const e of req.inputs) w.entry(4, e);
  return w.varint(5, req.attempt).string(6, req.holdId).varint(7, req.deadlineUnixMs);
}

/**
 * One float32 input as a routed request carries it (a `map<string, Tensor>` entry), written around its values'
 * little-endian bytes, which are what a packed float field holds: a tensor that arrives as raw bytes (the Open
 * Inference Protocol's raw_input_contents) is forwarded with no float read or written. Values of BULK_BYTES or
 * more are not copied (a SplitEntry around a view of them: the caller keeps them unchanged until the request is
 * written); fewer are copied into one buffer with the rest, which costs less than a second chunk.
 */
export function float32Entry(name: string, dims: readonly number[], littleEndianFloats: Uint8Array): InputEntry {
  for (const d of dims) if (!(Number.isSafeInteger(d) && d >= 0)) throw new RangeError(`dims must be non-negative integers, got ${d}`);
  const nameLen = Buffer.byteLength(name);
  const dtype = "float32";
  const dimsLen = dims.reduce((n, d) => n + varintSize(d), 0);
  const data = littleEndianFloats.byteLength;
  const tensorLen =
    1 +
    varintSize(dtype.length) +
    dtype.length +
    (dimsLen > 0 ? 1 + varintSize(dimsLen) + dimsLen : 0) +
    (data > 0 ? 1 + varintSize(data) + data : 0);
  const entryLen = 1 + varintSize(nameLen) + nameLen + 1 + varintSize(tensorLen) + tensorLen;
  const split = data >= BULK_BYTES;
  const buf = Buffer.allocUnsafe(split ? entryLen - data : entryLen);
  let pos = 0;
  buf[pos++] = tagOf(1, LEN);
  pos = writeVarint(buf, pos, nameLen);
  pos += buf.write(name, pos, "utf8");
  buf[pos++] = tagOf(2, LEN);
  pos = writeVarint(buf, pos, tensorLen);
  buf[pos++] = tagOf(1, LEN);
  pos = writeVarint(buf, pos, dtype.length);
  pos += buf.write(dtype, pos, "latin1");
  if (dimsLen > 0) {
    buf[pos++] = tagOf(2, LEN);
    pos = writeVarint(buf, pos, dimsLen);
    for (const d of dims) pos = writeVarint(buf, pos, d);
  }
  if (data > 0) {
    buf[pos++] = tagOf(3, LEN);
    pos = writeVarint(buf, pos, data);
    if (split) return { head: buf, data: littleEndianFloats, name, shape: { dtype, dims: [...dims], values: data / 4 } };
    buf.set(littleEndianFloats, pos);
  }
  return buf;
}

/** As one buffer, or as chunks (`.chunks`) that leave each tensor where it came. */
export const encodeRoutedInfer = chunked(routedInferWriter);
export const encodeRoutedExecute = chunked(routedExecuteWriter);

/** Throws on bytes that are not an ExecuteReply (the client call then fails, as a generated decoder's would). */
export function decodeRoutedExecuteReply(bytes: Uint8Array): RoutedExecuteReply {
  const out: RoutedExecuteReply = { status: 0, report: null, outputs: [], computeMs: 0 };
  const r = Reader.create(bytes);
  eachField(r, r.len, (field, wt) => {
    if (field === 1 && wt === VARINT) out.status = r.int32();
    else if (field === 2 && wt === LEN) {
      const [s, e] = delimited(r);
      out.report = backend.BackendReport.decode(view(bytes, s, e));
    } else if (field === 3 && wt === LEN) {
      const [s, e] = delimited(r);
      out.outputs.push(view(bytes, s, e));
    } else if (field === 4 && wt === I64) out.computeMs = r.double();
    else return false;
    return true;
  });
  return out;
}

export function encodeRoutedInferResponse(res: RoutedInferResponse): Buffer {
  const w = new ExactWriter().string(1, res.requestId).string(2, res.service);
  for (const e of res.outputs) w.bytes(3, e);
  return w.string(4, res.backendId).string(5, res.frontendId).bytes(6, inference.Timing.encode(res.timing).finish()).finish();
}

/** Reads an int64 list field (packed or not) into `dims`. */
function readDims(r: protobuf.Reader, wt: number, dims: number[]): void {
  if (wt === LEN) {
    const end = r.size() + r.pos;
    if (end > r.len) throw new RangeError("dims run past the end of the tensor");
    while (r.pos < end) dims.push(Number(r.int64()));
  } else dims.push(Number(r.int64()));
}

/**
 * One entry's name and shape, reading dims and counting values without decoding them. A missing value is
 * `null` (the generated decoder's reading too). Duplicate names: the last wins, as when decoding a map.
 */
export function entryShape(entry: InputEntry): { name: string; shape: TensorShape | null } {
  if (isSplit(entry)) return { name: entry.name, shape: entry.shape };
  const r = Reader.create(entry);
  const { name, value } = readEntry(r, r.len, () => tensorShape(r, entry));
  return { name, shape: value };
}

/** A map<string, Tensor> entry's key and value up to `end`; `readValue` reads the Tensor. */
function readEntry<T>(r: protobuf.Reader, end: number, readValue: () => T): { name: string; value: T | null } {
  let name = "";
  let value: T | null = null;
  eachField(r, end, (field, wt) => {
    if (field === 1 && wt === LEN) name = r.string();
    else if (field === 2 && wt === LEN) value = readValue();
    else return false;
    return true;
  });
  return { name, value };
}

/**
 * Reads one Tensor's fields (dtype, dims) and hands its values to `values`: packed float32 bytes, or one unpacked
 * float at a time (`packed` null). The one walk of a tensor, for counting values and for decoding them.
 */
function readTensor(
  r: protobuf.Reader,
  bytes: Uint8Array,
  values: (packed: Uint8Array | null, one: number) => void,
): { dtype: string; dims: number[] } {
  const end = r.size() + r.pos;
  if (end > r.len) throw new RangeError("a tensor runs past the end of its entry");
  const t = { dtype: "", dims: [] as number[] };
  eachField(r, end, (field, wt) => {
    if (field === 1 && wt === LEN) t.dtype = r.string();
    else if (field === 2 && (wt === LEN || wt === VARINT)) readDims(r, wt, t.dims);
    else if (field === 3 && wt === LEN) {
      const [s, e] = delimited(r);
      if ((e - s) % 4 !== 0) throw new RangeError("packed float data is not a whole number of float32 values");
      values(view(bytes, s, e), 0);
    } else if (field === 3 && wt === I32) values(null, r.float());
    else return false;
    return true;
  });
  if (r.pos !== end) throw new RangeError("a tensor's fields run past its end");
  return t;
}

function tensorShape(r: protobuf.Reader, bytes: Uint8Array): TensorShape {
  let values = 0;
  const t = readTensor(r, bytes, (packed) => {
    values += packed ? packed.length / 4 : 1;
  });
  return { ...t, values };
}

/** Every input's shape by name, or what makes the entries unreadable. */
export function inputShapes(
  entries: readonly InputEntry[],
): { ok: true; shapes: Map<string, TensorShape | null> } | { ok: false; error: string } {
  const shapes = new Map<string, TensorShape | null>();
  try {
    for (const e of entries) {
      const { name, shape } = entryShape(e);
      shapes.set(name, shape);
    }
    return { ok: true, shapes };
  } catch (err) {
    return { ok: false, error: `malformed inputs: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** A tensor as the backend decodes it: values straight into a Float32Array, not one JavaScript number each. */
export interface DecodedTensor {
  dtype: string;
  dims: number[];
  data: Float32Array;
}

/** ExecuteRequest as the backend serves it. `undecodable` says why the bytes were not an ExecuteRequest. */
export interface DecodedExecuteRequest {
  service: string;
  requestId: string;
  frontendId: string;
  /** A name without a tensor is null, as the generated decoder has it. */
  inputs: Record<string, DecodedTensor | null>;
  attempt: number;
  holdId: string;
  deadlineUnixMs: number;
  undecodable?: string;
}

const LITTLE_ENDIAN = endianness() === "LE";

/** Where a decoded tensor's values go: a Float32Array of `count` values, its contents to be overwritten. */
export type FloatsFor = (count: number) => Float32Array;

const freshFloats: FloatsFor = (count) => new Float32Array(count);

/** Packed float32 values (little-endian on the wire) into an array from `floatsFor`. */
function floatsOf(bytes: Uint8Array, floatsFor: FloatsFor): Float32Array {
  const n = bytes.length / 4;
  const out = floatsFor(n);
  if (LITTLE_ENDIAN) new Uint8Array(out.buffer, out.byteOffset, bytes.length).set(bytes);
  else {
    const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let i = 0; i < n; i++) out[i] = v.getFloat32(4 * i, true);
  }
  return out;
}

function decodeTensor(r: protobuf.Reader, bytes: Uint8Array, floatsFor: FloatsFor): DecodedTensor {
  const chunks: Float32Array[] = [];
  const t: DecodedTensor = {
    ...readTensor(r, bytes, (packed, one) => chunks.push(packed ? floatsOf(packed, floatsFor) : Float32Array.of(one))),
    data: new Float32Array(),
  };
  // One packed run (what every encoder writes) is decoded straight where the caller wants it; values written one
  // by one or in several runs are put together there.
  if (chunks.length === 1) t.data = chunks[0] ?? t.data;
  else if (chunks.length > 1) {
    t.data = floatsFor(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of chunks) {
      t.data.set(c, at);
      at += c.length;
    }
  }
  return t;
}

/** Never throws: bytes that are not an ExecuteRequest come back with `undecodable` set. */
export function decodeExecuteRequest(bytes: Uint8Array, floatsFor: FloatsFor = freshFloats): DecodedExecuteRequest {
  const out: DecodedExecuteRequest = { service: "", requestId: "", frontendId: "", inputs: {}, attempt: 0, holdId: "", deadlineUnixMs: 0 };
  try {
    const r = Reader.create(bytes);
    eachField(r, r.len, (field, wt) => {
      if (field === 1 && wt === LEN) out.service = r.string();
      else if (field === 2 && wt === LEN) out.requestId = r.string();
      else if (field === 3 && wt === LEN) out.frontendId = r.string();
      else if (field === 4 && wt === LEN) {
        const end = r.size() + r.pos;
        if (end > r.len) throw new RangeError("an input runs past the end of the message");
        const { name, value } = readEntry(r, end, () => decodeTensor(r, bytes, floatsFor));
        out.inputs[name] = value;
      } else if (field === 5 && wt === VARINT) out.attempt = r.uint32();
      else if (field === 6 && wt === LEN) out.holdId = r.string();
      else if (field === 7 && wt === VARINT) out.deadlineUnixMs = Number(r.int64());
      else return false;
      return true;
    });
  } catch (err) {
    out.undecodable = `the request is not a valid ExecuteRequest: ${err instanceof Error ? err.message : String(err)}`;
  }
  return out;
}

function passThrough(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

const INFER_PATH = "/infergrid.inference.v1.InferenceService/Infer";

/**
 * InferenceService.Infer for the hops that route: the request's tensors stay bytes, and the answer is an
 * encoded InferResponse relayed as is (the broker) or built around the backend's outputs (the frontend).
 * On the wire it is the same method as `InferenceServiceDefinition.Infer`.
 */
export const RoutedInferenceDefinition = {
  Infer: {
    path: INFER_PATH,
    requestStream: false,
    responseStream: false,
    originalName: "infer",
    requestSerialize: encodeRoutedInfer,
    requestDeserialize: (b: Buffer) => decodeRoutedInfer(b),
    responseSerialize: (m: Uint8Array) => passThrough(m),
    responseDeserialize: (b: Buffer): Uint8Array => b,
  } satisfies MethodDefinition<RoutedInferRequest, Uint8Array>,
};

function clientOnly(): never {
  throw new Error("RoutedExecuteDefinition is for calling a backend; a backend serves BackendServiceDefinition");
}

/** BackendService.Execute as the frontend calls it: inputs forwarded, outputs kept as bytes. For clients only. */
export const RoutedExecuteDefinition = {
  Execute: {
    path: "/infergrid.backend.v1.BackendService/Execute",
    requestStream: false,
    responseStream: false,
    originalName: "execute",
    requestSerialize: encodeRoutedExecute,
    requestDeserialize: clientOnly,
    responseSerialize: clientOnly,
    responseDeserialize: (b: Buffer) => decodeRoutedExecuteReply(b),
  } satisfies MethodDefinition<RoutedExecuteRequest, RoutedExecuteReply>,
};
