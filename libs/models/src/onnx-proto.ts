/**
 * The part of ONNX's protobuf schema (onnx/onnx.proto, proto2, package onnx) that a model file made here
 * needs, declared with protobufjs's reflection API. The field numbers are the official ones from
 * onnx.proto: the file is read by onnxruntime's own parser, so a wrong number would silently drop a field.
 * Messages and fields not used here (sparse tensors, training info, functions, sequence/map types) are left
 * out; a reader skips what it does not know, so the encoding stays valid ONNX.
 *
 * npm's `onnx-proto` ships the compiled schema, but built on protobufjs 6 while this repository uses 8; the
 * few messages below cost less than a second protobufjs major.
 */
import protobuf from "protobufjs";

const schema = {
  nested: {
    onnx: {
      nested: {
        AttributeProto: {
          fields: {
            name: { type: "string", id: 1 },
            type: { type: "AttributeType", id: 20 },
            f: { type: "float", id: 2 },
            i: { type: "int64", id: 3 },
            s: { type: "bytes", id: 4 },
            floats: { rule: "repeated", type: "float", id: 7 },
            ints: { rule: "repeated", type: "int64", id: 8 },
          },
          nested: {
            AttributeType: { values: { UNDEFINED: 0, FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, GRAPH: 5, FLOATS: 6, INTS: 7 } },
          },
        },
        ValueInfoProto: {
          fields: {
            name: { type: "string", id: 1 },
            type: { type: "TypeProto", id: 2 },
            docString: { type: "string", id: 3 },
          },
        },
        NodeProto: {
          fields: {
            input: { rule: "repeated", type: "string", id: 1 },
            output: { rule: "repeated", type: "string", id: 2 },
            name: { type: "string", id: 3 },
            opType: { type: "string", id: 4 },
            domain: { type: "string", id: 7 },
            attribute: { rule: "repeated", type: "AttributeProto", id: 5 },
            docString: { type: "string", id: 6 },
          },
        },
        ModelProto: {
          fields: {
            irVersion: { type: "int64", id: 1 },
            opsetImport: { rule: "repeated", type: "OperatorSetIdProto", id: 8 },
            producerName: { type: "string", id: 2 },
            producerVersion: { type: "string", id: 3 },
            domain: { type: "string", id: 4 },
            modelVersion: { type: "int64", id: 5 },
            docString: { type: "string", id: 6 },
            graph: { type: "GraphProto", id: 7 },
          },
        },
        GraphProto: {
          fields: {
            node: { rule: "repeated", type: "NodeProto", id: 1 },
            name: { type: "string", id: 2 },
            initializer: { rule: "repeated", type: "TensorProto", id: 5 },
            docString: { type: "string", id: 10 },
            input: { rule: "repeated", type: "ValueInfoProto", id: 11 },
            output: { rule: "repeated", type: "ValueInfoProto", id: 12 },
          },
        },
        TensorProto: {
          fields: {
            dims: { rule: "repeated", type: "int64", id: 1 },
            dataType: { type: "int32", id: 2 },
            name: { type: "string", id: 8 },
            rawData: { type: "bytes", id: 9 },
          },
          nested: {
            DataType: { values: { UNDEFINED: 0, FLOAT: 1, INT64: 7 } },
          },
        },
        TensorShapeProto: {
          fields: {
            dim: { rule: "repeated", type: "Dimension", id: 1 },
          },
          nested: {
            Dimension: {
              oneofs: { value: { oneof: ["dimValue", "dimParam"] } },
              fields: {
                dimValue: { type: "int64", id: 1 },
                dimParam: { type: "string", id: 2 },
              },
            },
          },
        },
        TypeProto: {
          oneofs: { value: { oneof: ["tensorType"] } },
          fields: {
            tensorType: { type: "Tensor", id: 1 },
          },
          nested: {
            Tensor: {
              fields: {
                elemType: { type: "int32", id: 1 },
                shape: { type: "TensorShapeProto", id: 2 },
              },
            },
          },
        },
        OperatorSetIdProto: {
          fields: {
            domain: { type: "string", id: 1 },
            version: { type: "int64", id: 2 },
          },
        },
      },
    },
  },
};

const root = protobuf.Root.fromJSON(schema);

/** onnx.ModelProto, for encoding and (in tests) decoding. */
export const ModelProto = root.lookupType("onnx.ModelProto");

/** TensorProto.DataType values used here. */
export const OnnxDataType = { FLOAT: 1, INT64: 7 } as const;

/** AttributeProto.AttributeType values used here. */
export const OnnxAttributeType = { FLOAT: 1, INT: 2, INTS: 7 } as const;

export interface OnnxTensor {
  name: string;
  dims: number[];
  dataType: number;
  rawData: Uint8Array;
}

export interface OnnxAttribute {
  name: string;
  type: number;
  f?: number;
  i?: number;
  ints?: number[];
}

export interface OnnxNode {
  name: string;
  opType: string;
  input: string[];
  output: string[];
  attribute: OnnxAttribute[];
}

/** One dim of a value's shape: a fixed size or a named free dim (e.g. the batch). */
export type OnnxDim = number | string;

export interface OnnxValueInfo {
  name: string;
  elemType: number;
  shape: OnnxDim[];
}

export interface OnnxGraph {
  name: string;
  node: OnnxNode[];
  initializer: OnnxTensor[];
  input: OnnxValueInfo[];
  output: OnnxValueInfo[];
}

export interface OnnxModelSpec {
  irVersion: number;
  opsetVersion: number;
  producerName: string;
  docString: string;
  graph: OnnxGraph;
}

function valueInfo(v: OnnxValueInfo): object {
  return {
    name: v.name,
    type: {
      tensorType: {
        elemType: v.elemType,
        shape: { dim: v.shape.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

/** The model as ONNX file bytes. */
export function encodeOnnxModel(spec: OnnxModelSpec): Uint8Array {
  const message = ModelProto.fromObject({
    irVersion: spec.irVersion,
    opsetImport: [{ domain: "", version: spec.opsetVersion }],
    producerName: spec.producerName,
    docString: spec.docString,
    graph: {
      name: spec.graph.name,
      node: spec.graph.node,
      initializer: spec.graph.initializer,
      input: spec.graph.input.map(valueInfo),
      output: spec.graph.output.map(valueInfo),
    },
  });
  return ModelProto.encode(message).finish();
}
