import type { CallOptions } from './call-options.js';
import type { ModelConfigEntry } from './model-config-entry.js';
import type { ModelRef } from './model-ref.js';
import type { ModelMetadata, ModelVersionStatus, PredictResult, Predictor } from './results.js';
import type { Tensor } from '@visionserve/protocol';

export type TensorEncoding = 'tensor_content' | 'typed';

/** Options of the typed TF Serving calls, whatever channel carries them. */
export interface TfsCallDefaults {
  /** Deadline applied to calls that set no `timeoutMs`, in ms. Default none. */
  readonly defaultTimeoutMs?: number;
  /** Request metadata sent with every call (ASCII values), e.g. an authorization header. */
  readonly metadata?: Readonly<Record<string, string>>;
  /**
   * How request tensors are encoded by default: `tensor_content` (raw little-endian
   * bytes, the fast path) or `typed` (`float_val`, `int_val`, ... as tf.make_tensor_proto
   * does). String tensors always use `string_val`. Default `tensor_content`.
   * (Response encoding is the server's choice: TF Serving and visionserve answer with typed
   * fields unless started with --enable_serialization_as_tensor_content; both are decoded.)
   */
  readonly encoding?: TensorEncoding;
}

export interface GrpcPredictOptions extends CallOptions {
  /** Output aliases to compute and return (TF Serving `output_filter`); all when omitted. */
  readonly outputFilter?: readonly string[];
  /** Overrides the client's request encoding for this call. */
  readonly encoding?: TensorEncoding;
}

export interface TfsGrpcClient extends Predictor {
  predict(
    model: ModelRef,
    inputs: Readonly<Record<string, Tensor>>,
    options?: GrpcPredictOptions,
  ): Promise<PredictResult>;
  getModelMetadata(model: ModelRef, options?: CallOptions): Promise<ModelMetadata>;
  /** Status of every version of a model (or of the pinned version / label). */
  getModelStatus(model: ModelRef, options?: CallOptions): Promise<ModelVersionStatus[]>;
  /**
   * Replaces the server's whole model set (models not listed are unloaded). Rejects with
   * the server's status when it is not OK.
   */
  reloadConfig(models: readonly ModelConfigEntry[], options?: CallOptions): Promise<void>;
  /** Closes the connection (HTTP/2) or does nothing (gRPC-web); calls in flight fail. */
  close(): void;
}
