import { findOnnxModelInfo, type OnnxInputSpec } from "@infergrid/model-catalogue";
import { control } from "@infergrid/proto";

/** One tensor a model takes or gives, as the Open Inference Protocol describes it. */
export interface TensorMetadata {
  name: string;
  datatype: "FP32";
  /** -1: any size (the batch). */
  shape: number[];
}

/** A model's metadata as the Open Inference Protocol reports it. */
export interface ModelMetadata {
  name: string;
  /** Services have no versions. */
  versions: string[];
  /** What runs it: Triton's name for ONNX Runtime, or this system's emulated model. */
  platform: string;
  /** A catalogue model's tensors; none for an emulated model, which takes any tensor and echoes its shapes. */
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

/** A batch of any size first, then the tensor's own dims: what every catalogue model takes and gives. */
const tensor = (t: Pick<OnnxInputSpec, "name" | "itemDims">): TensorMetadata => ({
  name: t.name,
  datatype: "FP32",
  shape: [-1, ...t.itemDims],
});

const PLATFORMS: Record<number, string> = {
  [control.ModelKind.MODEL_KIND_EMULATED]: "infergrid_emulated",
  [control.ModelKind.MODEL_KIND_ONNX]: "onnxruntime_onnx",
};

/**
 * The services the registry holds, as the broker answers the Open Inference Protocol's model readiness and
 * metadata from them: fed by the registry's watch (every current entry, then every change).
 */
export class ModelDirectory {
  private readonly services = new Map<string, control.ServiceEntry>();

  /** A registry change: the service's entry, or undefined once it is gone. */
  update(name: string, entry: control.ServiceEntry | undefined): void {
    if (entry) this.services.set(name, entry);
    else this.services.delete(name);
  }

  /** Whether the service can take requests: it has a backend in its list (undefined: no such service). */
  ready(name: string): boolean | undefined {
    const entry = this.services.get(name);
    return entry === undefined ? undefined : entry.backends.length > 0;
  }

  metadata(name: string): ModelMetadata | undefined {
    const entry = this.services.get(name);
    if (entry === undefined) return undefined;
    const model = entry.spec?.model;
    const kind = model?.kind ?? control.ModelKind.MODEL_KIND_UNSPECIFIED;
    const onnx = kind === control.ModelKind.MODEL_KIND_ONNX ? findOnnxModelInfo(model?.onnxModel ?? "") : undefined;
    return {
      name,
      versions: [],
      platform: PLATFORMS[kind] ?? "unknown",
      inputs: onnx?.inputs.map(tensor) ?? [],
      outputs: onnx?.outputs.map(tensor) ?? [],
    };
  }
}
