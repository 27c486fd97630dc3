import { serviceNameProblem } from "@infergrid/control-plane";
import type { inference } from "@infergrid/proto";

const MAX_DIMS = 8;

/**
 * Checks that every tensor is well formed: known dtype, non-negative integer dims, and exactly
 * as many finite values as the dims say. Returns what is wrong, or undefined.
 */
export function tensorProblem(name: string, t: inference.Tensor.$Properties | null | undefined): string | undefined {
  if (!t) return `input ${JSON.stringify(name)} is empty`;
  if (t.dtype && t.dtype !== "float32")
    return `input ${JSON.stringify(name)}: dtype ${JSON.stringify(t.dtype)} is not supported (float32 only)`;
  const dims = t.dims ?? [];
  if (dims.length > MAX_DIMS) return `input ${JSON.stringify(name)}: ${dims.length} dims, at most ${MAX_DIMS}`;
  let count = 1;
  for (const d of dims) {
    const n = Number(d);
    if (!Number.isInteger(n) || n < 0)
      return `input ${JSON.stringify(name)}: dims must be non-negative integers, got ${JSON.stringify(dims.map(Number))}`;
    count *= n;
  }
  const data = t.data ?? [];
  if (dims.length > 0 && count !== data.length) {
    return `input ${JSON.stringify(name)}: dims ${JSON.stringify(dims.map(Number))} need ${count} values, got ${data.length}`;
  }
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) return `input ${JSON.stringify(name)}: value ${i} is not a finite number`;
  }
  return undefined;
}

export function inputsProblem(inputs: Record<string, inference.Tensor.$Properties> | null | undefined): string | undefined {
  for (const [name, t] of Object.entries(inputs ?? {})) {
    if (name.length === 0 || name.length > 128) return "input names must be 1 to 128 characters";
    const p = tensorProblem(name, t);
    if (p) return p;
  }
  return undefined;
}

export function inferRequestProblem(req: inference.InferRequest.$Properties): string | undefined {
  if (!req.service) return "service is required";
  if (serviceNameProblem(req.service)) return `service ${JSON.stringify(req.service)} is not a valid service name`;
  if (req.requestId && req.requestId.length > 128) return "request_id is longer than 128 characters";
  const deadline = Number(req.deadlineUnixMs ?? 0);
  if (!Number.isFinite(deadline) || deadline < 0) return "deadline_unix_ms must be a non-negative Unix time in milliseconds";
  return inputsProblem(req.inputs);
}
