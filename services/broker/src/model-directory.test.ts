import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { ModelDirectory } from "./model-directory.js";

const entry = (name: string, kind: control.ModelKind, backends: number) =>
  control.ServiceEntry.create({
    spec: { name, model: { kind } },
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
    models.update("ocr", entry("ocr", control.ModelKind.MODEL_KIND_ONNX, 1));
    models.update("echo", entry("echo", control.ModelKind.MODEL_KIND_EMULATED, 1));
    expect(models.metadata("ocr")).toEqual({ name: "ocr", versions: [], platform: "onnxruntime_onnx", inputs: [], outputs: [] });
    expect(models.metadata("echo")?.platform).toBe("infergrid_emulated");
  });
});
