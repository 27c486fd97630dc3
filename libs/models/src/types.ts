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
