import type { Code, DType, Tensor } from '@visionserve/protocol';
import type { CallOptions } from './call-options.js';
import type { ModelRef } from './model-ref.js';

/** Bytes on the wire for one call (HTTP bodies / gRPC messages, without headers or framing). */
export interface WireBytes {
  readonly requestBytes: number;
  readonly responseBytes: number;
}

/** The model version that answered. */
export interface ResolvedModel {
  readonly name: string;
  /** Undefined when the server did not say (TF Serving REST predict responses never do). */
  readonly version: number | undefined;
}

/** Output tensors of a predict call, keyed by output alias. */
export interface PredictResult {
  readonly outputs: Record<string, Tensor>;
  readonly model: ResolvedModel;
  readonly wire: WireBytes;
}

/** One input or output of a signature. */
export interface TensorInfo {
  /** Name of the tensor in the model graph. */
  readonly name: string;
  /** The element type, or undefined for a TF dtype visionserve has no DType for. */
  readonly dtype: DType | undefined;
  /** TensorFlow's DataType name as sent by the server, e.g. "DT_FLOAT". */
  readonly tfDtype: string;
  /** Dimension sizes, -1 for unknown; undefined for unknown rank. */
  readonly shape: readonly number[] | undefined;
}

export interface SignatureInfo {
  readonly inputs: Readonly<Record<string, TensorInfo>>;
  readonly outputs: Readonly<Record<string, TensorInfo>>;
  /** e.g. "tensorflow/serving/predict". */
  readonly methodName: string;
}

/** GetModelMetadata's signature_def, for one model version. */
export interface ModelMetadata {
  readonly model: ResolvedModel;
  readonly signatures: Readonly<Record<string, SignatureInfo>>;
}

/** One entry of GetModelStatus. */
export interface ModelVersionStatus {
  readonly version: number;
  /** UNKNOWN | START | LOADING | AVAILABLE | UNLOADING | END. */
  readonly state: string;
  readonly errorCode: Code;
  readonly errorMessage: string;
}

/** What a prediction client can do; both TF Serving clients implement it (and predictBatched uses it). */
export interface Predictor {
  predict(
    model: ModelRef,
    inputs: Readonly<Record<string, Tensor>>,
    options?: CallOptions,
  ): Promise<PredictResult>;
}
