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
