/**
 * ResNet-18 (He et al. 2016, torchvision's topology) as an ONNX file with random weights: a network of real
 * size and shape (11.7 M parameters, 1.8 GFLOPs per 224x224 image) for measuring latency against batch and
 * threads, which does not depend on the weights' values. Nothing is downloaded: the weights come from a seeded
 * PRNG (He-normal), and batch normalisation is folded into each convolution's bias, as an inference export
 * does.
 */
import { existsSync, mkdirSync, renameSync, statSync, writeFileSync } from "node:fs";
import { endianness } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type Random, seededRandom } from "@infergrid/core";
import { RESNET18_CLASSES, RESNET18_INPUT, RESNET18_OUTPUT, RESNET18_SEED } from "@infergrid/model-catalogue";
import { encodeOnnxModel, type OnnxAttribute, OnnxAttributeType, OnnxDataType, type OnnxNode, type OnnxTensor } from "./onnx-proto.js";

export { RESNET18_CLASSES, RESNET18_INPUT, RESNET18_OUTPUT, RESNET18_SEED };

/** ONNX opset 17 needs IR version 8. */
const OPSET = 17;
const IR_VERSION = 8;

/** Where setup writes the model: gitignored, beside the package's src/ and dist/. */
export function resnet18Path(): string {
  return fileURLToPath(new URL("../generated/resnet18.onnx", import.meta.url));
}

/** The file is ~47 MB of float32 weights; anything much smaller is a partial write. */
const MIN_BYTES = 40_000_000;

export function resnet18Generated(file = resnet18Path()): boolean {
  return existsSync(file) && statSync(file).size >= MIN_BYTES;
}

/** The file to load, or an error that says how to make it. */
export function generatedResnet18(file = resnet18Path()): string {
  if (!resnet18Generated(file)) throw new Error(`model "resnet18" has not been generated (${file} is missing): run npm run setup`);
  return file;
}

function standardNormals(random: Random, n: number, std: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    // Box-Muller: two normals per two uniforms; 1 - u keeps the log's argument in (0, 1].
    const r = Math.sqrt(-2 * Math.log(1 - random.uniform())) * std;
    const theta = 2 * Math.PI * random.uniform();
    out[i] = r * Math.cos(theta);
    if (i + 1 < n) out[i + 1] = r * Math.sin(theta);
  }
  return out;
}

function floatTensor(name: string, dims: number[], data: Float32Array): OnnxTensor {
  // raw_data is little-endian by the ONNX spec; a Float32Array's bytes are the machine's order.
  if (endianness() !== "LE") throw new Error("generating ONNX raw_data needs a little-endian machine");
  return { name, dims, dataType: OnnxDataType.FLOAT, rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

const ints = (name: string, values: number[]): OnnxAttribute => ({ name, type: OnnxAttributeType.INTS, ints: values });
const int = (name: string, value: number): OnnxAttribute => ({ name, type: OnnxAttributeType.INT, i: value });

class GraphBuilder {
  readonly nodes: OnnxNode[] = [];
  readonly initializers: OnnxTensor[] = [];
  parameters = 0;
  constructor(private readonly random: Random) {}

  private node(opType: string, name: string, input: string[], attribute: OnnxAttribute[] = []): string {
    const output = `${name}_out`;
    this.nodes.push({ name, opType, input, output: [output], attribute });
    return output;
  }

  private weights(name: string, dims: number[], std: number): string {
    const n = dims.reduce((a, b) => a * b, 1);
    this.initializers.push(floatTensor(name, dims, standardNormals(this.random, n, std)));
    this.parameters += n;
    return name;
  }

  /** A convolution with batch norm folded in (weights He-normal over fan-in, bias small). */
  conv(name: string, x: string, cin: number, cout: number, kernel: number, stride: number): string {
    const w = this.weights(`${name}.weight`, [cout, cin, kernel, kernel], Math.sqrt(2 / (cin * kernel * kernel)));
    const b = this.weights(`${name}.bias`, [cout], 0.01);
    const pad = Math.floor(kernel / 2);
    return this.node(
      "Conv",
      name,
      [x, w, b],
      [
        ints("kernel_shape", [kernel, kernel]),
        ints("strides", [stride, stride]),
        ints("pads", [pad, pad, pad, pad]),
        ints("dilations", [1, 1]),
        int("group", 1),
      ],
    );
  }

  relu(name: string, x: string): string {
    return this.node("Relu", name, [x]);
  }

  add(name: string, a: string, b: string): string {
    return this.node("Add", name, [a, b]);
  }

  maxPool(name: string, x: string): string {
    return this.node("MaxPool", name, [x], [ints("kernel_shape", [3, 3]), ints("strides", [2, 2]), ints("pads", [1, 1, 1, 1])]);
  }

  globalAveragePool(name: string, x: string): string {
    return this.node("GlobalAveragePool", name, [x]);
  }

  flatten(name: string, x: string): string {
    return this.node("Flatten", name, [x], [int("axis", 1)]);
  }

  gemm(name: string, x: string, inFeatures: number, outFeatures: number): string {
    const w = this.weights(`${name}.weight`, [outFeatures, inFeatures], Math.sqrt(2 / inFeatures));
    const b = this.weights(`${name}.bias`, [outFeatures], 0.01);
    return this.node("Gemm", name, [x, w, b], [int("transB", 1)]);
  }

  /** torchvision's BasicBlock: two 3x3 convolutions and the shortcut (a strided 1x1 convolution where the shape changes). */
  basicBlock(name: string, x: string, cin: number, cout: number, stride: number): string {
    const a = this.relu(`${name}.relu1`, this.conv(`${name}.conv1`, x, cin, cout, 3, stride));
    const b = this.conv(`${name}.conv2`, a, cout, cout, 3, 1);
    const shortcut = stride !== 1 || cin !== cout ? this.conv(`${name}.downsample`, x, cin, cout, 1, stride) : x;
    return this.relu(`${name}.relu2`, this.add(`${name}.add`, b, shortcut));
  }
}

export interface GeneratedModel {
  bytes: Uint8Array;
  parameters: number;
  nodes: number;
}

/** ResNet-18 taking [N, 3, 224, 224] float32 (N free) and giving [N, 1000] logits. */
export function buildResnet18Onnx(seed = RESNET18_SEED): GeneratedModel {
  const g = new GraphBuilder(seededRandom(seed));
  let x = g.maxPool("maxpool", g.relu("relu", g.conv("conv1", RESNET18_INPUT, 3, 64, 7, 2)));
  let channels = 64;
  for (const [stage, width] of [64, 128, 256, 512].entries()) {
    for (let block = 0; block < 2; block++) {
      const stride = stage > 0 && block === 0 ? 2 : 1;
      x = g.basicBlock(`layer${stage + 1}.${block}`, x, channels, width, stride);
      channels = width;
    }
  }
  const logits = g.gemm("fc", g.flatten("flatten", g.globalAveragePool("avgpool", x)), channels, RESNET18_CLASSES);
  // The graph's output must carry the catalogue's name; the last node's output is renamed to it.
  const last = g.nodes.at(-1);
  if (!last || last.output[0] !== logits) throw new Error("the ResNet graph does not end in its Gemm");
  last.output = [RESNET18_OUTPUT];
  const bytes = encodeOnnxModel({
    irVersion: IR_VERSION,
    opsetVersion: OPSET,
    producerName: "infergrid",
    docString: `ResNet-18 (torchvision topology), random He-normal weights from seed ${seed}, batch norm folded into the convolutions`,
    graph: {
      name: "resnet18",
      node: g.nodes,
      initializer: g.initializers,
      input: [{ name: RESNET18_INPUT, elemType: OnnxDataType.FLOAT, shape: ["N", 3, 224, 224] }],
      output: [{ name: RESNET18_OUTPUT, elemType: OnnxDataType.FLOAT, shape: ["N", RESNET18_CLASSES] }],
    },
  });
  return { bytes, parameters: g.parameters, nodes: g.nodes.length };
}

/**
 * Writes the model unless it is there already; returns whether it wrote. The file is written under a temporary
 * name and renamed, so that a reader (or a second setup running at once) never sees half a model.
 */
export function ensureResnet18Onnx(file = resnet18Path()): { path: string; written: boolean } {
  if (resnet18Generated(file)) return { path: file, written: false };
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, buildResnet18Onnx().bytes);
  renameSync(tmp, file);
  return { path: file, written: true };
}
