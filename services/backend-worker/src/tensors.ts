import type { TensorValue } from "@infergrid/models";
import type { inference } from "@infergrid/proto";

export function fromTensorMap(inputs: Record<string, inference.Tensor.$Properties> | null | undefined): Record<string, TensorValue> {
  const out: Record<string, TensorValue> = {};
  for (const [name, t] of Object.entries(inputs ?? {}))
    out[name] = { dims: (t.dims ?? []).map(Number), data: Float32Array.from(t.data ?? []) };
  return out;
}

export function toTensorMap(outputs: Record<string, TensorValue>): Record<string, inference.Tensor.$Properties> {
  const out: Record<string, inference.Tensor.$Properties> = {};
  for (const [name, t] of Object.entries(outputs)) out[name] = { dtype: "float32", dims: t.dims, data: Array.from(t.data) };
  return out;
}
