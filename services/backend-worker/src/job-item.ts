import { createHash } from "node:crypto";
import { lognormalMean, type Random, seededRandom } from "@infergrid/core";
import { type LatencyProfile, serviceMs } from "@infergrid/kairos";
import { findOnnxModel, type TensorValue } from "@infergrid/models";
import { control } from "@infergrid/proto";
import { processingMs } from "@infergrid/themis";

/**
 * A best-effort job's items are defined by (seed, item) alone, so any backend that runs item i, now or after a
 * reclaim, computes the same thing and the result's digest can be compared across runs.
 */

/** Independent streams drawn from one (seed, item): the input values, and an emulated model's service time. */
export type ItemStream = "input" | "time";

/** A 32-bit seed for one stream of one item (sha-256, so nearby seeds and items share nothing). */
export function itemSeed(seed: number, item: number, stream: ItemStream): number {
  const h = createHash("sha256").update(`infergrid-job-item:${seed}:${item}:${stream}`).digest();
  return h.readInt32LE(0);
}

export function itemRandom(seed: number, item: number, stream: ItemStream): Random {
  return seededRandom(itemSeed(seed, item, stream));
}

/** The name of an emulated model's one input: emulated models take any input, and read only its batch. */
export const EMULATED_ITEM_INPUT = "x";

/**
 * Item `item`'s inputs at batch `batch`: for an ONNX model, each input of its catalogue entry at
 * [batch, ...itemDims]; for an emulated one, a [batch, 1] tensor (its batch is what the emulated time depends
 * on). Values are uniform in [-1, 1) from (seed, item). Throws for an ONNX model not in the catalogue.
 */
export function jobItemInputs(
  model: control.ModelSpec.$Properties | null | undefined,
  batch: number,
  seed: number,
  item: number,
): Record<string, TensorValue> {
  const b = Math.max(1, Math.floor(batch));
  const random = itemRandom(seed, item, "input");
  const tensor = (itemDims: readonly number[]): TensorValue => {
    const dims = [b, ...itemDims];
    const data = new Float32Array(dims.reduce((n, d) => n * d, 1));
    for (let i = 0; i < data.length; i++) data[i] = random.uniform() * 2 - 1;
    return { dims, data };
  };
  if (model?.kind === control.ModelKind.MODEL_KIND_ONNX) {
    const entry = findOnnxModel(model.onnxModel ?? "");
    if (!entry) throw new Error(`ONNX model ${JSON.stringify(model.onnxModel)} is not in the catalogue`);
    return Object.fromEntries(entry.inputs.map((input) => [input.name, tensor(input.itemDims)]));
  }
  return { [EMULATED_ITEM_INPUT]: tensor([1]) };
}

/**
 * sha-256 (hex) of the outputs in a fixed order: by name; for each its name, a 0 byte, its rank and dims as
 * little-endian uint32, and its values as little-endian float32 (what the model computed, in float32).
 */
export function digestOutputs(outputs: Record<string, TensorValue>): string {
  const h = createHash("sha256");
  for (const name of Object.keys(outputs).sort()) {
    const t = outputs[name] as TensorValue;
    h.update(name);
    h.update(Uint8Array.of(0));
    const dims = Buffer.alloc(4 * (t.dims.length + 1));
    dims.writeUInt32LE(t.dims.length, 0);
    t.dims.forEach((d, i) => {
      dims.writeUInt32LE(d >>> 0, 4 * (i + 1));
    });
    h.update(dims);
    const values = Buffer.alloc(4 * t.data.length);
    for (let i = 0; i < t.data.length; i++) values.writeFloatLE(t.data[i] as number, 4 * i);
    h.update(values);
  }
  return h.digest("hex");
}

/**
 * What an item is expected to take before any has been timed: the emulated model's mean at the item's batch
 * (its Themis l(b, c), this type's profile, or its lognormal mean); 0 for an ONNX model (unknown until one ran).
 */
export function nominalItemMs(
  model: control.ModelSpec.$Properties | null | undefined,
  batch: number,
  cores: number,
  profile: LatencyProfile | undefined,
): number {
  if (!model || model.kind === control.ModelKind.MODEL_KIND_ONNX) return 0;
  const b = Math.max(1, Math.floor(batch));
  const t = model.themis;
  if (t) return processingMs({ gamma: t.gamma ?? 0, eps: t.eps ?? 0, delta: t.delta ?? 0, eta: t.eta ?? 0 }, b, Math.max(1, cores));
  if (profile && profile.points.length > 0) return serviceMs(profile, b);
  const p = model.profile;
  return lognormalMean({ shape: p?.shape ?? 0, loc: p?.locMs ?? 0, scale: p?.scaleMs ?? 0 });
}
