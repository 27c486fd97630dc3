import { makeOcrClsSampleInput } from "@infergrid/models";
import type { inference } from "@infergrid/proto";

/** The models library's fixed sample text line, as the inputs of an InferRequest. */
export function ocrClsInput(kind: "upright" | "flipped"): Record<string, inference.Tensor.$Properties> {
  const { x } = makeOcrClsSampleInput(kind);
  return { x: { dims: x.dims, data: Array.from(x.data) } };
}
