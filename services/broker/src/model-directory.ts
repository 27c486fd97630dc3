import { control } from "@infergrid/proto";

/** A model's metadata as the Open Inference Protocol reports it. */
export interface ModelMetadata {
  name: string;
  /** Services have no versions. */
  versions: string[];
  /** What runs it: Triton's name for ONNX Runtime, or this system's emulated model. */
  platform: string;
  /** Not reported: the broker has the service's spec, not its model's graph (an emulated model takes any tensor). */
  inputs: [];
  outputs: [];
}

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
    const kind = entry.spec?.model?.kind ?? control.ModelKind.MODEL_KIND_UNSPECIFIED;
    return { name, versions: [], platform: PLATFORMS[kind] ?? "unknown", inputs: [], outputs: [] };
  }
}
