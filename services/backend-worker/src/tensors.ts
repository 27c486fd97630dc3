import type { TensorInput } from "@infergrid/dataplane";
import type { TensorValue } from "@infergrid/models";
import type { inference } from "@infergrid/proto";

/** The server decodes values into Float32Arrays already (BackendServingDefinition): those are used as they are. */
export function fromTensorMap(inputs: Record<string, TensorInput | null> | null | undefined): Record<string, TensorValue> {
  const out: Record<string, TensorValue> = {};
  for (const [name, t] of Object.entries(inputs ?? {})) {
    const data = t?.data;
    out[name] = { dims: (t?.dims ?? []).map(Number), data: data instanceof Float32Array ? data : Float32Array.from(data ?? []) };
  }
  return out;
}

export function toTensorMap(outputs: Record<string, TensorValue>): Record<string, inference.Tensor.$Properties> {
  const out: Record<string, inference.Tensor.$Properties> = {};
  for (const [name, t] of Object.entries(outputs)) out[name] = { dtype: "float32", dims: t.dims, data: Array.from(t.data) };
  return out;
}
