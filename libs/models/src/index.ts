export * from "./emulated-model.js";
export * from "./factory.js";
export * from "./ocr-cls.js";
export * from "./onnx-catalogue.js";
export * from "./onnx-model.js";
export * from "./resnet-onnx.js";
export * from "./types.js";
