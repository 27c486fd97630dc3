/**
 * The Open Inference Protocol's ModelInferRequest (open_inference.proto) read for the broker, which converts it to a
 * routed InferRequest: FP32 values come back as the little-endian bytes they are on the wire (a view of a packed
 * `fp32_contents`, as `raw_input_contents` is one), not as a JavaScript number each. The generated decoder reads a
 * 588 KiB image's 150,528 values one by one into an array, which cost the broker about 3 ms a request more than the
 * same image sent raw. Everything else is read as the generated decoder reads it.
 */
import "./numbers-not-longs.js";
import protobuf from "protobufjs/minimal.js";
import { ROUTED_INPUTS_KEPT } from "./routed.js";
import { delimited, eachField, I32, LEN, VARINT } from "./wire.js";

const { Reader } = protobuf;

/** One input tensor's header and its FP32 values' bytes. */
export interface ModelInferInputTensor {
  name: string;
  datatype: string;
  shape: number[];
  /** The values of `fp32_contents`, little-endian (a view of the message when they came packed in one run). */
  fp32: Uint8Array;
  /** The first other contents field that holds values (`int64_contents`, ...), if any: values of another datatype. */
  otherContents?: string;
}

export interface DecodedModelInfer {
  modelName: string;
  modelVersion: string;
  id: string;
  /** The first ROUTED_INPUTS_KEPT inputs (the request it becomes keeps no more). */
  inputs: ModelInferInputTensor[];
  /** Inputs on the wire beyond those kept, counted only (a request that large is refused). */
  inputsBeyond: number;
  /** The names of the outputs asked for. */
  outputs: string[];
  rawInputContents: Uint8Array[];
}

/** InferTensorContents' fields other than fp32_contents (6), by number. */
const OTHER_CONTENTS: Record<number, string> = {
  1: "bool_contents",
  2: "int_contents",
  3: "int64_contents",
  4: "uint_contents",
  5: "uint64_contents",
  7: "fp64_contents",
  8: "bytes_contents",
};

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array;
  return Buffer.concat(parts);
}

/** A contents message's FP32 values (bytes, in order) into `fp32`; notes another datatype's values on `tensor`. */
function readContents(bytes: Uint8Array, r: protobuf.Reader, end: number, tensor: ModelInferInputTensor, fp32: Uint8Array[]): void {
  eachField(r, end, (field, wt) => {
    if (field === 6 && wt === LEN) {
      const [s, e] = delimited(r);
      if ((e - s) % 4 !== 0) throw new RangeError("fp32_contents is not a whole number of floats");
      fp32.push(bytes.subarray(s, e));
      return true;
    }
    if (field === 6 && wt === I32) {
      if (r.pos + 4 > end) throw new RangeError("a float runs past the end of the message");
      fp32.push(bytes.subarray(r.pos, r.pos + 4));
      r.skip(4);
      return true;
    }
    const other = OTHER_CONTENTS[field];
    if (other === undefined) return false;
    const before = r.pos;
    r.skipType(wt, 0, field);
    // An empty packed field holds no values.
    if (tensor.otherContents === undefined && !(wt === LEN && r.pos - before <= 1)) tensor.otherContents = other;
    return true;
  });
}

/** A reader over `bytes` from `start` to `end` (a nested message), at the outer message's offsets. */
function nested(bytes: Uint8Array, start: number, end: number): protobuf.Reader {
  const inner = Reader.create(bytes.subarray(0, end));
  inner.pos = start;
  return inner;
}

function readInput(bytes: Uint8Array, r: protobuf.Reader, end: number): ModelInferInputTensor {
  const tensor: ModelInferInputTensor = { name: "", datatype: "", shape: [], fp32: new Uint8Array() };
  const fp32: Uint8Array[] = [];
  eachField(r, end, (field, wt) => {
    if (field === 1 && wt === LEN) tensor.name = r.string();
    else if (field === 2 && wt === LEN) tensor.datatype = r.string();
    else if (field === 3 && wt === LEN) {
      const [s, e] = delimited(r);
      const packed = nested(bytes, s, e);
      while (packed.pos < e) tensor.shape.push(Number(packed.int64()));
    } else if (field === 3 && wt === VARINT) tensor.shape.push(Number(r.int64()));
    else if (field === 5 && wt === LEN) {
      const [s, e] = delimited(r);
      readContents(bytes, nested(bytes, s, e), e, tensor, fp32);
    } else return false;
    return true;
  });
  if (fp32.length > 0) tensor.fp32 = concat(fp32);
  return tensor;
}

/** Never throws: bytes that are not a ModelInferRequest come back as `undecodable` (INVALID_ARGUMENT, not INTERNAL). */
export function decodeModelInfer(bytes: Uint8Array): DecodedModelInfer | { undecodable: string } {
  const out: DecodedModelInfer = {
    modelName: "",
    modelVersion: "",
    id: "",
    inputs: [],
    inputsBeyond: 0,
    outputs: [],
    rawInputContents: [],
  };
  try {
    const r = Reader.create(bytes);
    eachField(r, r.len, (field, wt) => {
      if (field === 1 && wt === LEN) out.modelName = r.string();
      else if (field === 2 && wt === LEN) out.modelVersion = r.string();
      else if (field === 3 && wt === LEN) out.id = r.string();
      else if (field === 5 && wt === LEN) {
        const [s, e] = delimited(r);
        if (out.inputs.length >= ROUTED_INPUTS_KEPT) {
          out.inputsBeyond++;
          return true;
        }
        out.inputs.push(readInput(bytes, nested(bytes, s, e), e));
      } else if (field === 6 && wt === LEN) {
        const [s, e] = delimited(r);
        const inner = nested(bytes, s, e);
        let name = "";
        eachField(inner, e, (f, w) => {
          if (f === 1 && w === LEN) {
            name = inner.string();
            return true;
          }
          return false;
        });
        out.outputs.push(name);
      } else if (field === 7 && wt === LEN) {
        const [s, e] = delimited(r);
        out.rawInputContents.push(bytes.subarray(s, e));
      } else return false;
      return true;
    });
  } catch (err) {
    return { undecodable: `not a ModelInferRequest: ${err instanceof Error ? err.message : String(err)}` };
  }
  return out;
}
