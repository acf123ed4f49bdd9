import { type DType } from '@visionserve/protocol';

/** Declared type of one model input or output. */
export interface TensorSpec {
  /** Name of the tensor in the model graph (for ONNX, the same as its alias). */
  readonly name: string;
  readonly dtype: DType;
  /** Dimension sizes; -1 marks a dynamic dimension. `undefined` means unknown rank. */
  readonly shape: readonly number[] | undefined;
}

/** A callable signature: alias -> spec for inputs and outputs. */
export interface Signature {
  readonly inputs: Readonly<Record<string, TensorSpec>>;
  readonly outputs: Readonly<Record<string, TensorSpec>>;
  /** TF Serving method name, e.g. "tensorflow/serving/predict". */
  readonly methodName: string;
}

/** The signature every ONNX model exposes. */
export const DEFAULT_SIGNATURE_NAME = 'serving_default';
export const PREDICT_METHOD_NAME = 'tensorflow/serving/predict';

/**
 * True when the model batches along dimension 0: every input and output has rank >= 2
 * and a variable dimension 0 (e.g. [-1, 3, 224, 224] -> [-1, 1000]). A request's batch
 * items are then its dimension 0; otherwise a request is one item. (Rank-1 tensors are
 * not treated as batched: their per-item shape would be empty.) KServe reports such models
 * with max_batch_size > 0, and statistics count their items.
 */
export function batchesAlongDimension0(signature: Signature): boolean {
  const all = [...Object.values(signature.inputs), ...Object.values(signature.outputs)];
  return (
    all.length > 0 && all.every((t) => t.shape !== undefined && t.shape.length >= 2 && t.shape[0] === -1)
  );
}
