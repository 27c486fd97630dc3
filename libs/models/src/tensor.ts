import { InvalidModelInputError, type TensorValue } from "./types.js";

/** Checks that `dims` are non-negative integers and that `data` holds exactly their product of numbers. */
export function checkTensorShape(inputName: string, tensor: TensorValue): number {
  const { dims, data } = tensor as Partial<TensorValue>;
  if (!Array.isArray(dims)) throw new InvalidModelInputError(`input "${inputName}": dims must be an array of integers`);
  if (!(data instanceof Float32Array || Array.isArray(data))) {
    throw new InvalidModelInputError(`input "${inputName}": data must be a Float32Array or an array of numbers`);
  }
  let size = 1;
  for (const d of dims) {
    if (!Number.isInteger(d) || d < 0) throw new InvalidModelInputError(`input "${inputName}": dims [${dims.join(", ")}] has ${d}`);
    size *= d;
  }
  if (data.length !== size) {
    throw new InvalidModelInputError(`input "${inputName}": data has ${data.length} values but dims [${dims.join(", ")}] need ${size}`);
  }
  return size;
}

/** A plain array may hold anything a JSON client sent, so each element is checked, not just the container. */
export function checkFinite(inputName: string, data: Float32Array | number[]): void {
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw new InvalidModelInputError(`input "${inputName}": value at flat index ${i} is ${String(v)}, not a finite number`);
    }
  }
}

export function toFloat32(data: Float32Array | number[]): Float32Array {
  return data instanceof Float32Array ? data : Float32Array.from(data);
}
