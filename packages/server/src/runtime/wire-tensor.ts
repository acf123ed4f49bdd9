import type { DType, NumericArray, Tensor } from '@visionserve/protocol';
import { fromBytes, isStringData } from '@visionserve/protocol';

/**
 * A tensor as it crosses the worker boundary. Numeric payloads travel inside a whole
 * ArrayBuffer in the transfer list (moved, not copied), at `byteOffset`; strings are cloned.
 */
export type WireTensor =
  | {
      readonly name: string;
      readonly dtype: Exclude<DType, 'string'>;
      readonly shape: readonly number[];
      /** A SharedArrayBuffer only for an output lent from a worker's pool (`slot`). */
      readonly buffer: ArrayBuffer | SharedArrayBuffer;
      readonly byteOffset: number;
      readonly byteLength: number;
      /** The worker's pool slot the output lives in, until released (see ToWorker `release`). */
      readonly slot?: number | undefined;
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

/** Messages to an inference worker. After `close` it finishes its current run, releases the session and exits. */
/** What an inference worker (onnx-worker.ts) loads: its workerData, or a spare's `load` message. */
export interface WorkerInit {
  /** Model files to load, one onnxruntime session each; a run names one by key (default the first). */
  readonly models: readonly { readonly key: string; readonly path: string }[];
  readonly intraOpThreads: number;
  readonly interOpThreads: number;
  readonly allowSpinning: boolean;
  /** Nice value of the worker thread (thread-priority.ts); 0 leaves it as the event loop's. */
  readonly threadNice?: number | undefined;
  /**
   * The word shared with the main thread that keeps a stop out of native onnxruntime calls
   * (native-call-guard.ts). Absent: the worker keeps one of its own (nothing guards it).
   */
  readonly nativeState?: Int32Array | undefined;
}

export type ToWorker =
  | {
      readonly type: 'run';
      readonly id: number;
      readonly inputs: readonly WireTensor[];
      readonly outputNames: readonly string[] | undefined;
      /** Which of the worker's model files runs (WorkerInit.models); default the first. */
      readonly model?: string | undefined;
      /**
       * Large outputs may be lent from the worker's pool of shared buffers (WireTensor `slot`)
       * instead of moved; the server releases each slot once nothing reads it any more.
       */
      readonly lend?: boolean | undefined;
    }
  /** Pool slots the server no longer reads: the worker may reuse them. Handled at once, between runs. */
  | { readonly type: 'release'; readonly slots: readonly number[] }
  | { readonly type: 'close' }
  /** To a spare worker (started without workerData): the models to load; it then answers as a fresh one. */
  | { readonly type: 'load'; readonly init: WorkerInit };

/** The metadata of one model file a worker loaded. */
export interface WireModel {
  readonly key: string;
  readonly inputs: readonly WireSpec[];
  readonly outputs: readonly WireSpec[];
}

export type FromWorker =
  | { readonly type: 'ready'; readonly models: readonly WireModel[] }
  | { readonly type: 'load-failed'; readonly message: string }
  | {
      readonly type: 'result';
      readonly id: number;
      readonly outputs: readonly WireTensor[];
      /** session.run's duration in the worker, in ms. */
      readonly computeMs: number;
    }
  | { readonly type: 'run-failed'; readonly id: number; readonly message: string };

/**
 * The ArrayBuffer that can be moved for `data`: its own buffer when the view covers all of
 * it, else a fresh copy (a view into a larger buffer, or a pooled Buffer, must not be
 * detached).
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

/**
 * Converts a tensor for posting and collects the buffers to move in `transfer` (each once).
 * Numeric data moves with its buffer when the view covers the whole buffer or the buffer is
 * one the caller handed over (`owned`); otherwise it is copied first.
 */
export function toWire(
  name: string,
  tensor: Tensor,
  transfer: ArrayBuffer[],
  owned?: ReadonlySet<ArrayBufferLike>,
): WireTensor {
  if (isStringData(tensor.data)) {
    return { name, dtype: 'string', shape: tensor.shape, strings: tensor.data };
  }
  if (tensor.dtype === 'string') throw new TypeError('string tensor with numeric data');
  const data = tensor.data;
  const whole = data.buffer instanceof ArrayBuffer && owned?.has(data.buffer) === true;
  const buffer = whole ? data.buffer : ownedBuffer(data);
  if (!transfer.includes(buffer)) transfer.push(buffer);
  return {
    name,
    dtype: tensor.dtype,
    shape: tensor.shape,
    buffer,
    byteOffset: whole ? data.byteOffset : 0,
    byteLength: data.byteLength,
  };
}

/**
 * The tensor a WireTensor carries: a view of the received buffer, or an aligned copy when
 * the bytes are not aligned for the element type.
 */
export function tensorFromWire(t: WireTensor): Tensor {
  if (t.dtype === 'string') return { dtype: 'string', shape: t.shape, data: t.strings };
  return {
    dtype: t.dtype,
    shape: t.shape,
    data: fromBytes(t.dtype, new Uint8Array(t.buffer, t.byteOffset, t.byteLength)),
  };
}
