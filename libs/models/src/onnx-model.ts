import { execFile } from "node:child_process";
import { availableParallelism } from "node:os";
import { promisify } from "node:util";
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
  /** Threads for one operator (the model's cores); 1 keeps replicas on a shared machine from competing and results repeatable. resize() changes them in place. */
  intraOpThreads?: number;
  /** Largest batch N accepted (default: the catalogue's). */
  maxBatch?: number;
  /**
   * Also pin the whole process to as many CPUs as threads (the first ones, `taskset -a -p`, where util-linux is
   * installed; skipped otherwise), at load and at each resize. Off by default: with several replicas on one
   * machine each would take the same first CPUs, and which CPUs a replica gets is its node's decision (a
   * Kubernetes CPU limit or cpuset). The profiler turns it on so that c threads run on c cores.
   */
  pinCpus?: boolean;
  /** Monotonic ms, for the timings. */
  now?: () => number;
}

interface Loaded {
  session: InferenceSession;
  coldStartMs: number;
}

/** A session and the runs still using it: a session replaced by a resize is released when its last run ends. */
interface Slot {
  session: InferenceSession;
  inFlight: number;
  retired: boolean;
  released?: Promise<void>;
}

/** A real model from onnxCatalogue, run in-process on onnxruntime-node's CPU provider. */
export class OnnxModel implements ModelRuntime {
  readonly name: string;
  readonly entry: OnnxCatalogueEntry;
  private threads: number;
  private readonly maxBatch: number;
  private readonly pinCpus: boolean;
  private readonly now: () => number;
  private loading: Promise<Loaded> | undefined;
  private current: Slot | undefined;
  private openSlots = new Set<Slot>();
  private resizes: Promise<unknown> = Promise.resolve();
  private TensorCtor: Ort["Tensor"] | undefined;

  constructor(options: OnnxModelOptions) {
    const entry = findOnnxModel(options.model);
    if (!entry) throw new ModelNotFoundError(`no ONNX model "${options.model}" in the catalogue`);
    const intraOpThreads = checkThreads(options.intraOpThreads ?? 1);
    const maxBatch = options.maxBatch ?? entry.defaultMaxBatch;
    if (!(Number.isInteger(maxBatch) && maxBatch >= 1)) throw new RangeError(`maxBatch must be >= 1, got ${maxBatch}`);
    this.name = entry.name;
    this.entry = entry;
    this.threads = intraOpThreads;
    this.maxBatch = maxBatch;
    this.pinCpus = options.pinCpus ?? false;
    this.now = options.now ?? (() => performance.now());
  }

  /** The intra-op threads of the session that serves the next inference. */
  get cores(): number {
    return this.threads;
  }

  /** Sessions not yet released: the serving one, and replaced ones whose runs have not all ended. */
  get openSessions(): number {
    return this.openSlots.size;
  }

  load(): Promise<{ coldStartMs: number }> {
    if (!this.loading) {
      const started = this.now();
      const loading: Promise<Loaded> = this.createSession(this.threads).then(
        async (session) => {
          // unload() may have run while the session was being created; it releases this one itself.
          if (this.loading === loading) {
            this.current = this.open(session);
            if (this.pinCpus) await pinProcessToCpus(this.threads);
          }
          return { session, coldStartMs: this.now() - started };
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

  /**
   * Themis's in-place vertical scaling: a new session with `threads` intra-op threads is built while the
   * current one keeps serving, and serves from the next inference on; the old one is released when its
   * in-flight runs end. resizeMs runs from the call until the new size is in effect (queued behind an earlier
   * resize, it includes the wait); 0 when the size does not change.
   */
  async resize(threads: number): Promise<{ resizeMs: number }> {
    const started = this.now();
    const size = checkThreads(threads);
    const run = this.resizes.then(() => this.resizeNow(size, started));
    this.resizes = run.catch(() => undefined);
    return run;
  }

  async infer(inputs: Record<string, TensorValue>): Promise<InferResult> {
    const slot = this.current;
    if (!slot) throw new ModelNotLoadedError(`model "${this.name}" is not loaded`);
    const feeds = this.validate(inputs);
    const started = this.now();
    slot.inFlight++;
    let results: InferenceSession.OnnxValueMapType;
    try {
      results = await slot.session.run(feeds);
    } finally {
      slot.inFlight--;
      if (slot.retired && slot.inFlight === 0) void this.release(slot);
    }
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
    const slot = this.current;
    this.loading = undefined;
    this.current = undefined;
    const loaded = await loading?.catch(() => undefined);
    if (slot) await this.retire(slot);
    else await loaded?.session.release();
  }

  private async resizeNow(threads: number, started: number): Promise<{ resizeMs: number }> {
    const loading = this.loading;
    if (!loading) throw new ModelNotLoadedError(`model "${this.name}" is not loaded`);
    await loading;
    if (threads === this.threads) return { resizeMs: 0 };
    // Growing: the CPUs are widened first, so that the new session's threads start on them.
    if (this.pinCpus && threads > this.threads) await pinProcessToCpus(threads);
    const session = await this.createSession(threads);
    const old = this.current;
    if (this.loading !== loading || !old) {
      await session.release();
      throw new ModelNotLoadedError(`model "${this.name}" was unloaded during its resize`);
    }
    // Shrinking: narrowed only once the wider session no longer serves new runs.
    if (this.pinCpus && threads < this.threads) await pinProcessToCpus(threads);
    this.current = this.open(session);
    this.threads = threads;
    const resizeMs = this.now() - started;
    void this.retire(old);
    return { resizeMs };
  }

  private open(session: InferenceSession): Slot {
    const slot: Slot = { session, inFlight: 0, retired: false };
    this.openSlots.add(slot);
    return slot;
  }

  /** Releases the slot's session now, or when its last in-flight run ends. */
  private retire(slot: Slot): Promise<void> {
    slot.retired = true;
    return slot.inFlight === 0 ? this.release(slot) : Promise.resolve();
  }

  private release(slot: Slot): Promise<void> {
    slot.released ??= slot.session.release().finally(() => this.openSlots.delete(slot));
    return slot.released;
  }

  private async createSession(threads: number): Promise<InferenceSession> {
    const runtime = await ort();
    this.TensorCtor = runtime.Tensor;
    const session = await runtime.InferenceSession.create(this.entry.modelPath(), {
      executionProviders: ["cpu"],
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: "sequential",
    });
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
    return session;
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

const execFileAsync = promisify(execFile);
/** The CPUs this process may use before any pinning here: availableParallelism() shrinks with the affinity. */
const CPUS_AT_START = availableParallelism();

function checkThreads(threads: number): number {
  if (!(Number.isInteger(threads) && threads >= 1)) throw new RangeError(`intraOpThreads must be an integer >= 1, got ${threads}`);
  return threads;
}

/**
 * Pins every thread of this process (ONNX Runtime's pool included) to the first `cpus` CPUs with util-linux's
 * taskset; threads started later inherit it. Without taskset, or where the machine refuses, threads alone set
 * the size.
 */
async function pinProcessToCpus(cpus: number): Promise<void> {
  const last = Math.min(cpus, CPUS_AT_START) - 1;
  try {
    await execFileAsync("taskset", ["-a", "-p", "-c", last === 0 ? "0" : `0-${last}`, String(process.pid)]);
  } catch {
    // Not installed, or no permission to change affinity: the thread count still applies.
  }
}

function sameNames(actual: readonly string[], expected: readonly string[]): boolean {
  return actual.length === expected.length && expected.every((name) => actual.includes(name));
}
