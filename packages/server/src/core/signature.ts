import type { DType, ExampleFeatureSpec } from '@visionserve/protocol';

/** Declared type of one model input or output. */
export interface TensorSpec {
  /** Name of the tensor in the model graph (for ONNX, the same as its alias). */
  readonly name: string;
  readonly dtype: DType;
  /** Dimension sizes; -1 marks a dynamic dimension. `undefined` means unknown rank. */
  readonly shape: readonly number[] | undefined;
}

/**
 * How the inputs clients send to a signature become the inputs its model runs on, when
 * they differ. Core validates the client inputs against `Signature.inputs`, hands them to
 * the inference service's injected input adapter, then validates the result against
 * `Signature.modelInputs`.
 */
export type SignatureAdapter =
  | {
      /** Clients send serialized tf.Example protos (TF's classify/regress exports). */
      readonly kind: 'tf-example';
      /** The one string input holding them (TF Serving: "inputs"). */
      readonly inputKey: string;
      /** Features parsed out of each example; their keys are the model input aliases. */
      readonly features: readonly ExampleFeatureSpec[];
    }
  | {
      /** Clients send encoded images (JPEG, PNG, WebP): decoded and laid out by the server. */
      readonly kind: 'encoded-image';
      /** The one string input holding them, e.g. "image_bytes". */
      readonly inputKey: string;
      /** The model input the decoded image batch feeds. */
      readonly imageInput: string;
    };

/** A callable signature: alias -> spec for inputs and outputs. */
export interface Signature {
  readonly inputs: Readonly<Record<string, TensorSpec>>;
  readonly outputs: Readonly<Record<string, TensorSpec>>;
  /** TF Serving method name, e.g. "tensorflow/serving/predict". */
  readonly methodName: string;
  /** The session signature that runs this one. Default: the signature's own name. */
  readonly runs?: string | undefined;
  /** Set when the inputs clients send are not the model's own (see SignatureAdapter). */
  readonly adapter?: SignatureAdapter | undefined;
  /** The model's own inputs when `adapter` is set (alias -> spec). Default: `inputs`. */
  readonly modelInputs?: Readonly<Record<string, TensorSpec>> | undefined;
  /**
   * Declared by a TensorFlow SavedModel's SignatureDef (not a plain ONNX file's or derived):
   * Classify and Regress hold it to TF Serving's structure checks. Default false.
   */
  readonly savedModel?: boolean | undefined;
}

/** The signature every ONNX model exposes. */
export const DEFAULT_SIGNATURE_NAME = 'serving_default';
export const PREDICT_METHOD_NAME = 'tensorflow/serving/predict';
export const CLASSIFY_METHOD_NAME = 'tensorflow/serving/classify';
export const REGRESS_METHOD_NAME = 'tensorflow/serving/regress';

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
