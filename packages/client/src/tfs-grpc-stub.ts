/**
 * TF Serving's typed calls on a unary gRPC channel, whatever carries it (node:http2 or
 * gRPC-web over fetch). Imports no transport, so the browser entry can use it. The
 * protobuf codec is loaded on the first call.
 */
import { type CallOptions, withCallScope } from './call-options.js';
import type { GrpcChannel, UnaryCallOptions } from './grpc-channel-types.js';
import { modelSpec } from './model-ref.js';
import { predictResponsePadding } from './response-placement.js';
import type { TfsCallDefaults, TfsGrpcClient } from './tfs-grpc-types.js';

const PREDICT = '/tensorflow.serving.PredictionService/Predict';
const METADATA = '/tensorflow.serving.PredictionService/GetModelMetadata';
const STATUS = '/tensorflow.serving.ModelService/GetModelStatus';

const RELOAD = '/tensorflow.serving.ModelService/HandleReloadConfigRequest';

type Codec = typeof import('./tfs-grpc-codec.js');
let codecPromise: Promise<Codec> | undefined;
const loadCodec = (): Promise<Codec> => (codecPromise ??= import('./tfs-grpc-codec.js'));

/**
 * The TF Serving calls (Predict, GetModelMetadata, GetModelStatus, HandleReloadConfigRequest)
 * over any unary channel: HTTP/2 gRPC (createTfsGrpcClient) or gRPC-web over fetch
 * (createTfsGrpcWebClient). `close` closes the channel.
 */
export function createTfsGrpcStub(channel: GrpcChannel, options: TfsCallDefaults): TfsGrpcClient {
  /** Encodes, calls and decodes inside one deadline. */
  const call = <T>(
    path: string,
    callOptions: CallOptions | undefined,
    encode: (codec: Codec) => Uint8Array | Uint8Array[],
    decode: (codec: Codec, answer: Uint8Array, requestBytes: number) => T,
    responsePadding?: UnaryCallOptions['responsePadding'],
  ): Promise<T> =>
    withCallScope(callOptions, options.defaultTimeoutMs, async (scope) => {
      const codec = await loadCodec();
      const request = encode(codec);
      const remaining = scope.remainingMs();
      const answer = await channel.unary(path, request, {
        signal: scope.signal,
        ...(remaining !== undefined ? { timeoutMs: remaining } : {}),
        ...(options.metadata ? { metadata: options.metadata } : {}),
        ...(responsePadding ? { responsePadding } : {}),
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
        predictResponsePadding,
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
