import { type DType, type NumericArray, type Tensor, fromBytes, isStringData } from '@visionserve/protocol';

/**
 * A tensor as it crosses the worker boundary. Numeric payloads travel as a whole
 * ArrayBuffer in the transfer list (moved, not copied); strings are cloned.
 */
export type WireTensor =
  | {
      readonly name: string;
      readonly dtype: Exclude<DType, 'string'>;
      readonly shape: readonly number[];
      readonly buffer: ArrayBuffer;
    }
  | {
      readonly name: string;
      readonly dtype: 'string';
      readonly shape: readonly number[];
      readonly strings: readonly Uint8Array[];
    };

/** Spec of one model input/output as the worker reports it (ONNX metadata). */
export interface WireSpec {
  readonly name: string;
  /** onnxruntime type name, e.g. "float32", "int64", "string". */
  readonly type: string;
  /** Fixed sizes; symbolic/unknown dims as strings or -1. Undefined: unknown rank. */
  readonly shape: readonly (number | string)[] | undefined;
}

export type ToWorker =
  | {
      readonly type: 'run';
      readonly id: number;
      readonly inputs: readonly WireTensor[];
      readonly outputNames: readonly string[] | undefined;
    }
  | { readonly type: 'close' };

export type FromWorker =
  | { readonly type: 'ready'; readonly inputs: readonly WireSpec[]; readonly outputs: readonly WireSpec[] }
  | { readonly type: 'load-failed'; readonly message: string }
  | { readonly type: 'result'; readonly id: number; readonly outputs: readonly WireTensor[] }
  | { readonly type: 'run-failed'; readonly id: number; readonly message: string };

/**
 * The ArrayBuffer that can be moved for `data`: its own buffer when the view
 * covers all of it, else a fresh copy (a view into a larger request buffer, or a
 * pooled Buffer, must not be detached).
 */
export function ownedBuffer(data: NumericArray): ArrayBuffer {
  const buffer = data.buffer;
  if (buffer instanceof ArrayBuffer && data.byteOffset === 0 && data.byteLength === buffer.byteLength) {
    return buffer;
  }
  const copy = new ArrayBuffer(data.byteLength);
  new Uint8Array(copy).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return copy;
}

/** Converts a tensor for posting; pushes moved buffers onto `transfer`. */
export function toWire(name: string, tensor: Tensor, transfer: ArrayBuffer[]): WireTensor {
  if (isStringData(tensor.data)) {
    return { name, dtype: 'string', shape: tensor.shape, strings: tensor.data };
  }
  if (tensor.dtype === 'string') throw new TypeError('string tensor with numeric data');
  const buffer = ownedBuffer(tensor.data);
  transfer.push(buffer);
  return { name, dtype: tensor.dtype, shape: tensor.shape, buffer };
}

/** The tensor a WireTensor carries; numeric data is a view of the received buffer (no copy). */
export function tensorFromWire(t: WireTensor): Tensor {
  if (t.dtype === 'string') return { dtype: 'string', shape: t.shape, data: t.strings };
  return { dtype: t.dtype, shape: t.shape, data: fromBytes(t.dtype, new Uint8Array(t.buffer)) };
}
