import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { ModelDirectory } from "./model-directory.js";

const entry = (name: string, kind: control.ModelKind, backends: number, onnxModel = "") =>
  control.ServiceEntry.create({
    spec: { name, model: { kind, onnxModel } },
    backends: Array.from({ length: backends }, (_, i) => ({ backendId: `backend-${i}`, address: `10.0.0.${i}:50051` })),
  });

describe("ModelDirectory", () => {
  it("a service is ready once its list holds a backend, and unknown once it leaves the registry", () => {
    const models = new ModelDirectory();
    expect(models.ready("resnet")).toBeUndefined();
    models.update("resnet", entry("resnet", control.ModelKind.MODEL_KIND_ONNX, 0));
    expect(models.ready("resnet")).toBe(false);
    models.update("resnet", entry("resnet", control.ModelKind.MODEL_KIND_ONNX, 2));
    expect(models.ready("resnet")).toBe(true);
    models.update("resnet", undefined);
    expect(models.ready("resnet")).toBeUndefined();
    expect(models.metadata("resnet")).toBeUndefined();
  });

  it("reports the platform that runs each service's model, and no versions", () => {
    const models = new ModelDirectory();
    models.update("ocr", entry("ocr", control.ModelKind.MODEL_KIND_ONNX, 1, "ppocr-mobile-cls"));
    models.update("echo", entry("echo", control.ModelKind.MODEL_KIND_EMULATED, 1));
    expect(models.metadata("ocr")?.platform).toBe("onnxruntime_onnx");
    expect(models.metadata("ocr")?.versions).toEqual([]);
    expect(models.metadata("echo")).toEqual({ name: "echo", versions: [], platform: "infergrid_emulated", inputs: [], outputs: [] });
  });

  it("reports a catalogue model's tensors: FP32, any batch first, then the model's own dims", () => {
    const models = new ModelDirectory();
    models.update("ocr", entry("ocr", control.ModelKind.MODEL_KIND_ONNX, 1, "ppocr-mobile-cls"));
    models.update("classify", entry("classify", control.ModelKind.MODEL_KIND_ONNX, 0, "resnet18"));
    expect(models.metadata("ocr")).toMatchObject({
      inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3, 48, 192] }],
      outputs: [{ name: "softmax_0.tmp_0", datatype: "FP32", shape: [-1, 2] }],
    });
    expect(models.metadata("classify")).toMatchObject({
      inputs: [{ name: "input", datatype: "FP32", shape: [-1, 3, 224, 224] }],
      outputs: [{ name: "logits", datatype: "FP32", shape: [-1, 1000] }],
    });
    // A registry entry written before the allocator checked model names: no tensors, not a failure.
    models.update("old", entry("old", control.ModelKind.MODEL_KIND_ONNX, 1, "gone"));
    expect(models.metadata("old")).toMatchObject({ platform: "onnxruntime_onnx", inputs: [], outputs: [] });
  });
});
