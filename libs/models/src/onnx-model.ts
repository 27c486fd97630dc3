import type { InferenceSession, Tensor } from "onnxruntime-node";

type Ort = typeof import("onnxruntime-node");
let ortModule: Promise<Ort> | undefined;
/**
 * onnxruntime-node is a large native module: it is loaded the first time a process loads an ONNX
 * model, so that the many workers that run emulated models (or none yet) start fast.
 */
function ort(): Promise<Ort> {
  ortModule ??= import("onnxruntime-node");
  return ortModule;
}

import { findOnnxModel, type OnnxCatalogueEntry } from "./onnx-catalogue.js";
import { checkFinite, checkTensorShape, toFloat32 } from "./tensor.js";
import {
  type InferResult,
  InvalidModelInputError,
  ModelNotFoundError,
  ModelNotLoadedError,
  type ModelRuntime,
  type TensorValue,
} from "./types.js";

export interface OnnxModelOptions {
  /** A name in onnxCatalogue. */
  model: string;
  /** Threads for one operator; 1 keeps replicas on a shared machine from competing and results repeatable. */
  intraOpThreads?: number;
  /** Largest batch N accepted (default: the catalogue's). */
  maxBatch?: number;
  /** Monotonic ms, for the timings. */
  now?: () => number;
}

interface Loaded {
  session: InferenceSession;
  coldStartMs: number;
}

/** A real model from onnxCatalogue, run in-process on onnxruntime-node's CPU provider. */
export class OnnxModel implements ModelRuntime {
  readonly name: string;
  readonly entry: OnnxCatalogueEntry;
  private readonly intraOpThreads: number;
  private readonly maxBatch: number;
  private readonly now: () => number;
  private loading: Promise<Loaded> | undefined;
  private session: InferenceSession | undefined;
  private TensorCtor: Ort["Tensor"] | undefined;

  constructor(options: OnnxModelOptions) {
    const entry = findOnnxModel(options.model);
    if (!entry) throw new ModelNotFoundError(`no ONNX model "${options.model}" in the catalogue`);
    const intraOpThreads = options.intraOpThreads ?? 1;
    const maxBatch = options.maxBatch ?? entry.defaultMaxBatch;
    if (!(Number.isInteger(intraOpThreads) && intraOpThreads >= 1))
      throw new RangeError(`intraOpThreads must be >= 1, got ${intraOpThreads}`);
    if (!(Number.isInteger(maxBatch) && maxBatch >= 1)) throw new RangeError(`maxBatch must be >= 1, got ${maxBatch}`);
    this.name = entry.name;
    this.entry = entry;
    this.intraOpThreads = intraOpThreads;
    this.maxBatch = maxBatch;
    this.now = options.now ?? (() => performance.now());
  }

  load(): Promise<{ coldStartMs: number }> {
    if (!this.loading) {
      const loading: Promise<Loaded> = this.createSession().then(
        (loaded) => {
          // unload() may have run while the session was being created; it releases this one itself.
          if (this.loading === loading) this.session = loaded.session;
          return loaded;
        },
        (err: unknown) => {
          if (this.loading === loading) this.loading = undefined;
          throw err;
        },
      );
      this.loading = loading;
    }
    return this.loading.then(({ coldStartMs }) => ({ coldStartMs }));
  }

  async infer(inputs: Record<string, TensorValue>): Promise<InferResult> {
    const session = this.session;
    if (!session) throw new ModelNotLoadedError(`model "${this.name}" is not loaded`);
    const feeds = this.validate(inputs);
    const started = this.now();
    const results = await session.run(feeds);
    const computeMs = this.now() - started;
    const outputs: Record<string, TensorValue> = {};
    for (const [outputName, tensor] of Object.entries(results)) {
      if (!(tensor.data instanceof Float32Array)) throw new Error(`output "${outputName}" is ${tensor.type}, only float32 is supported`);
      outputs[outputName] = { dims: [...tensor.dims], data: tensor.data };
    }
    return { outputs, computeMs };
  }

  async unload(): Promise<void> {
    const loading = this.loading;
    this.loading = undefined;
    this.session = undefined;
    const loaded = await loading?.catch(() => undefined);
    await loaded?.session.release();
  }

  private async createSession(): Promise<Loaded> {
    const started = this.now();
    const runtime = await ort();
    this.TensorCtor = runtime.Tensor;
    const session = await runtime.InferenceSession.create(this.entry.modelPath(), {
      executionProviders: ["cpu"],
      intraOpNumThreads: this.intraOpThreads,
      interOpNumThreads: 1,
      executionMode: "sequential",
    });
    const coldStartMs = this.now() - started;
    // The catalogue's names are what clients send; a different file behind the same name must fail here, not per request.
    const expectedIn = this.entry.inputs.map((i) => i.name);
    const expectedOut = this.entry.outputs.map((o) => o.name);
    if (!sameNames(session.inputNames, expectedIn) || !sameNames(session.outputNames, expectedOut)) {
      await session.release();
      throw new Error(
        `model "${this.name}" has inputs [${session.inputNames.join(", ")}] and outputs [${session.outputNames.join(", ")}], ` +
          `the catalogue says [${expectedIn.join(", ")}] and [${expectedOut.join(", ")}]`,
      );
    }
    return { session, coldStartMs };
  }

  private validate(inputs: Record<string, TensorValue>): Record<string, Tensor> {
    for (const inputName of Object.keys(inputs)) {
      if (!this.entry.inputs.some((spec) => spec.name === inputName)) {
        throw new InvalidModelInputError(
          `unknown input "${inputName}": model "${this.name}" takes ${this.entry.inputs.map((s) => `"${s.name}"`).join(", ")}`,
        );
      }
    }
    const feeds: Record<string, Tensor> = {};
    let batch: number | undefined;
    for (const spec of this.entry.inputs) {
      const tensor = inputs[spec.name];
      if (!tensor) throw new InvalidModelInputError(`missing input "${spec.name}" (${spec.description})`);
      checkTensorShape(spec.name, tensor);
      const expected = `[N, ${spec.itemDims.join(", ")}] with N from 1 to ${this.maxBatch}`;
      const [n, ...item] = tensor.dims;
      if (n === undefined || item.length !== spec.itemDims.length || item.some((d, i) => d !== spec.itemDims[i])) {
        throw new InvalidModelInputError(`input "${spec.name}": dims [${tensor.dims.join(", ")}], expected ${expected}`);
      }
      if (n < 1 || n > this.maxBatch) throw new InvalidModelInputError(`input "${spec.name}": batch ${n}, expected ${expected}`);
      if (batch !== undefined && n !== batch) throw new InvalidModelInputError(`input "${spec.name}": batch ${n} differs from ${batch}`);
      batch = n;
      checkFinite(spec.name, tensor.data);
      const TensorCtor = this.TensorCtor;
      if (!TensorCtor) throw new ModelNotLoadedError(`model "${this.name}" is not loaded`);
      feeds[spec.name] = new TensorCtor("float32", toFloat32(tensor.data), tensor.dims);
    }
    return feeds;
  }
}

function sameNames(actual: readonly string[], expected: readonly string[]): boolean {
  return actual.length === expected.length && expected.every((name) => actual.includes(name));
}
