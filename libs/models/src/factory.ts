import type { Random } from "@infergrid/core";
import { EmulatedModel, type EmulatedModelOptions, type Sleep } from "./emulated-model.js";
import { OnnxModel } from "./onnx-model.js";
import { ModelNotFoundError, type ModelRuntime } from "./types.js";

/** Plain data, so it can come from a deployment's JSON config. */
export type ModelSpec =
  | ({ kind: "emulated" } & Omit<EmulatedModelOptions, "random" | "sleep">)
  | { kind: "onnx"; model: string; intraOpThreads?: number; maxBatch?: number };

export interface ModelRuntimeDeps {
  random?: Random;
  sleep?: Sleep;
  now?: () => number;
}

/** Throws ModelNotFoundError for an unknown catalogue name or kind, before anything is loaded. */
export function createModelRuntime(spec: ModelSpec, deps: ModelRuntimeDeps = {}): ModelRuntime {
  switch (spec.kind) {
    case "emulated":
      return new EmulatedModel({ ...spec, ...(deps.random && { random: deps.random }), ...(deps.sleep && { sleep: deps.sleep }) });
    case "onnx":
      return new OnnxModel({ ...spec, ...(deps.now && { now: deps.now }) });
    default: {
      const unknown: { kind?: unknown } = spec;
      throw new ModelNotFoundError(`unknown model kind ${JSON.stringify(unknown.kind)}`);
    }
  }
}
