/**
 * TF Serving gRPC client (PredictionService.Predict / GetModelMetadata, ModelService
 * GetModelStatus / HandleReloadConfigRequest) over the node:http2 channel; no grpc-js.
 * The protobuf codec is loaded on the first call, so creating a client is cheap.
 */
import { type CallOptions, withCallScope } from './call-options.js';
import { type GrpcChannel, createGrpcChannel } from './grpc-channel.js';
import { type ModelRef, modelSpec } from './model-ref.js';
import type { Tensor } from '@visionserve/protocol';
import type { ModelConfigEntry } from './model-config-entry.js';
import type { ModelMetadata, ModelVersionStatus, PredictResult, Predictor } from './results.js';

export interface TfsGrpcClientOptions {
  /** Server address, "host:port" (TF Serving's default gRPC port is 8500). */
  readonly address: string;
  /** Deadline applied to calls that set no `timeoutMs`, in ms. Default none. */
  readonly defaultTimeoutMs?: number;
  /** Largest accepted response message in bytes. Default 2 GiB - 1. */
  readonly maxReceiveBytes?: number;
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

export type TensorEncoding = 'tensor_content' | 'typed';

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
  /** Closes the HTTP/2 connection; calls in flight fail. */
  close(): void;
}

const PREDICT = '/tensorflow.serving.PredictionService/Predict';
const METADATA = '/tensorflow.serving.PredictionService/GetModelMetadata';
const STATUS = '/tensorflow.serving.ModelService/GetModelStatus';
export type { ModelConfigEntry } from './model-config-entry.js';

const RELOAD = '/tensorflow.serving.ModelService/HandleReloadConfigRequest';

type Codec = typeof import('./tfs-grpc-codec.js');
let codecPromise: Promise<Codec> | undefined;
const loadCodec = (): Promise<Codec> => (codecPromise ??= import('./tfs-grpc-codec.js'));

export function createTfsGrpcClient(options: TfsGrpcClientOptions): TfsGrpcClient {
  const channel: GrpcChannel = createGrpcChannel({
    address: options.address,
    ...(options.maxReceiveBytes !== undefined ? { maxReceiveBytes: options.maxReceiveBytes } : {}),
  });
  /** Encodes, calls and decodes inside one deadline. */
  const call = <T>(
    path: string,
    callOptions: CallOptions | undefined,
    encode: (codec: Codec) => Uint8Array | Uint8Array[],
    decode: (codec: Codec, answer: Uint8Array, requestBytes: number) => T,
  ): Promise<T> =>
    withCallScope(callOptions, options.defaultTimeoutMs, async (scope) => {
      const codec = await loadCodec();
      const request = encode(codec);
      const remaining = scope.remainingMs();
      const answer = await channel.unary(path, request, {
        signal: scope.signal,
        ...(remaining !== undefined ? { timeoutMs: remaining } : {}),
        ...(options.metadata ? { metadata: options.metadata } : {}),
      });
      const requestBytes =
        request instanceof Uint8Array ? request.byteLength : request.reduce((n, c) => n + c.byteLength, 0);
      return decode(codec, answer, requestBytes);
    });

  return {
    predict(model, inputs, callOptions) {
      const spec = modelSpec(model);
      const asTensorContent =
        (callOptions?.encoding ?? options.encoding ?? 'tensor_content') === 'tensor_content';
      return call(
        PREDICT,
        callOptions,
        (codec) => codec.encodePredictRequest(spec, inputs, callOptions?.outputFilter ?? [], asTensorContent),
        (codec, answer, requestBytes) => ({
          ...codec.decodePredictResponse(answer, spec),
          wire: { requestBytes, responseBytes: answer.byteLength },
        }),
      );
    },
    getModelMetadata(model, callOptions) {
      const spec = modelSpec(model);
      return call(
        METADATA,
        callOptions,
        (codec) => codec.encodeMetadataRequest(spec),
        (codec, answer) => codec.decodeMetadataResponse(answer, spec),
      );
    },
    getModelStatus(model, callOptions) {
      const spec = modelSpec(model);
      return call(
        STATUS,
        callOptions,
        (codec) => codec.encodeStatusRequest(spec),
        (codec, answer) => codec.decodeStatusResponse(answer),
      );
    },
    reloadConfig(models, callOptions) {
      return call(
        RELOAD,
        callOptions,
        (codec) => codec.encodeReloadRequest(models),
        (codec, answer) => {
          codec.checkReloadResponse(answer);
        },
      );
    },
    close() {
      channel.close();
    },
  };
}
