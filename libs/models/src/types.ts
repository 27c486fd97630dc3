/** A float32 tensor in row-major order. `data.length` must equal the product of `dims`. */
export interface TensorValue {
  dims: number[];
  data: Float32Array | number[];
}

export interface InferResult {
  outputs: Record<string, TensorValue>;
  computeMs: number;
}

export interface ModelRuntime {
  readonly name: string;
  /** Loads the model (the real cold start) and reports how long it took. A second call returns the first result. */
  load(): Promise<{ coldStartMs: number }>;
  /** Validates the inputs (InvalidModelInputError naming the input and the fault), runs, and reports the compute time. */
  infer(inputs: Record<string, TensorValue>): Promise<InferResult>;
  unload(): Promise<void>;
  /**
   * In-place vertical scaling (Themis): run on `cores` cores from the next inference on, without a reload.
   * Reports how long the change took before it was in effect (a real model rebuilds its session). A runtime
   * without it has a fixed size.
   */
  resize?(cores: number): Promise<{ resizeMs: number }>;
  /** The cores it runs on now (1 when it has a fixed size). */
  readonly cores?: number;
}

/** The caller sent inputs the model cannot take: a client error, never a worker fault. */
export class InvalidModelInputError extends Error {
  override readonly name = "InvalidModelInputError";
}

export class ModelNotFoundError extends Error {
  override readonly name = "ModelNotFoundError";
}

/** infer() before load() or after unload(): the worker's lifecycle is wrong, not the request. */
export class ModelNotLoadedError extends Error {
  override readonly name = "ModelNotLoadedError";
}
