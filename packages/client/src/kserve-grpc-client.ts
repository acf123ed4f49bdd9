/**
 * KServe v2 / Open Inference Protocol client over gRPC (`inference.GRPCInferenceService`, the
 * service Triton and KServe runtimes serve), on the client's gRPC channel; no grpc-js, no native
 * dependencies. Inference sends every input in `raw_input_contents` (views of the tensors, as
 * tritonclient does) and reads `raw_output_contents` (or typed contents) back. The protobuf
 * codec is loaded on the first call, so creating a client is cheap.
 */
import type { Tensor } from '@visionserve/protocol';
import type { InferParameters } from '@visionserve/protocol/kserve';
import { type CallOptions, withCallScope } from './call-options.js';
import type { ClientTlsOptions } from './client-tls.js';
import { type GrpcChannel, type GrpcClientTransport, createGrpcChannel } from './grpc-channel.js';
import type {
  KServeInferResult,
  KServeModelMetadata,
  KServeModelRef,
  KServeRepositoryEntry,
  KServeServerMetadata,
} from './kserve-http-client.js';
import type { ModelRef } from './model-ref.js';
import type { PredictResult, Predictor } from './results.js';
import { kserveRef } from './kserve-ref.js';
import { modelInferResponsePadding } from './response-placement.js';
import type { UnaryCallOptions } from './grpc-channel-types.js';

export interface KServeGrpcClientOptions {
  /** Server address "host:port" (visionserve serves KServe gRPC on its gRPC port, 8500; Triton uses 8001), or "https://host:port" for TLS. */
  readonly address: string;
  /** Deadline applied to calls that set no `timeoutMs`, in ms. Default none. */
  readonly defaultTimeoutMs?: number;
  /** Largest accepted response message in bytes. Default 2 GiB - 1. */
  readonly maxReceiveBytes?: number;
  /** The HTTP/2 implementation (GrpcChannelOptions.transport). Default 'lean'. */
  readonly transport?: GrpcClientTransport;
  /** TLS settings for an https:// address (or "host:port"): a private CA, a client certificate. */
  readonly tls?: ClientTlsOptions;
  /** Request metadata sent with every call (ASCII values), e.g. an authorization header. */
  readonly metadata?: Readonly<Record<string, string>>;
}

/** One output to return over gRPC. */
export interface KServeGrpcRequestedOutput {
  readonly name: string;
  /** Classification extension: the top-K entries as BYTES "value:index[:label]". */
  readonly classification?: number;
}

export interface KServeGrpcInferOptions extends CallOptions {
  /** Outputs to return, by name or with options; every output when omitted. */
  readonly outputs?: readonly (string | KServeGrpcRequestedOutput)[];
  /** Request id, echoed by the server. */
  readonly id?: string;
  /** Request parameters (booleans, strings, int64 for integers, double otherwise). */
  readonly parameters?: InferParameters;
}

export interface KServeGrpcClient extends Predictor {
  /** ModelInfer; outputs keyed by name, in response order. */
  infer(
    model: KServeModelRef,
    inputs: Readonly<Record<string, Tensor>>,
    options?: KServeGrpcInferOptions,
  ): Promise<KServeInferResult>;
  /** `infer` with every output (Predictor, for predictBatched and the CLI). */
  predict(
    model: ModelRef,
    inputs: Readonly<Record<string, Tensor>>,
    options?: CallOptions,
  ): Promise<PredictResult>;
  serverLive(options?: CallOptions): Promise<boolean>;
  serverReady(options?: CallOptions): Promise<boolean>;
  /** ModelReady; rejects with NOT_FOUND for an unknown model (as Triton answers over gRPC). */
  modelReady(model: KServeModelRef, options?: CallOptions): Promise<boolean>;
  serverMetadata(options?: CallOptions): Promise<KServeServerMetadata>;
  modelMetadata(model: KServeModelRef, options?: CallOptions): Promise<KServeModelMetadata>;
  /** The model configuration as proto3 JSON with proto field names (64-bit integers as strings). */
  modelConfig(model: KServeModelRef, options?: CallOptions): Promise<Record<string, unknown>>;
  /** Inference statistics of every model, one model, or one version (proto3 JSON, as modelConfig). */
  statistics(
    model?: KServeModelRef,
    options?: CallOptions,
  ): Promise<{ model_stats: Record<string, unknown>[] }>;
  repositoryIndex(options?: CallOptions & { readonly ready?: boolean }): Promise<KServeRepositoryEntry[]>;
  loadModel(name: string, options?: CallOptions): Promise<void>;
  unloadModel(name: string, options?: CallOptions): Promise<void>;
  /** Closes the HTTP/2 connection; calls in flight fail. */
  close(): void;
}

const SERVICE = '/inference.GRPCInferenceService/';

type Codec = typeof import('./kserve-grpc-codec.js');
let codecPromise: Promise<Codec> | undefined;
const loadCodec = (): Promise<Codec> => (codecPromise ??= import('./kserve-grpc-codec.js'));

/** Encodes, calls and decodes one RPC inside one deadline. */
type Call = <T>(
  method: string,
  callOptions: CallOptions | undefined,
  encode: (codec: Codec) => Uint8Array | Uint8Array[],
  decode: (codec: Codec, answer: Uint8Array, requestBytes: number) => T,
  responsePadding?: UnaryCallOptions['responsePadding'],
) => Promise<T>;

function caller(channel: GrpcChannel, options: KServeGrpcClientOptions): Call {
  return (method, callOptions, encode, decode, responsePadding) =>
    withCallScope(callOptions, options.defaultTimeoutMs, async (scope) => {
      const codec = await loadCodec();
      const request = encode(codec);
      const remaining = scope.remainingMs();
      const answer = await channel.unary(SERVICE + method, request, {
        signal: scope.signal,
        ...(remaining !== undefined ? { timeoutMs: remaining } : {}),
        ...(options.metadata ? { metadata: options.metadata } : {}),
        ...(responsePadding ? { responsePadding } : {}),
      });
      const requestBytes =
        request instanceof Uint8Array ? request.byteLength : request.reduce((n, c) => n + c.byteLength, 0);
      return decode(codec, answer, requestBytes);
    });
}

function encodeInfer(
  codec: Codec,
  ref: { readonly name: string; readonly version: string },
  inputs: Readonly<Record<string, Tensor>>,
  inferOptions: KServeGrpcInferOptions,
): Uint8Array | Uint8Array[] {
  return codec.encodeModelInferRequest({
    modelName: ref.name,
    modelVersion: ref.version,
    ...(inferOptions.id !== undefined ? { id: inferOptions.id } : {}),
    ...(inferOptions.parameters !== undefined ? { parameters: inferOptions.parameters } : {}),
    inputs: Object.entries(inputs).map(([name, tensor]) => ({ name, tensor })),
    ...(inferOptions.outputs === undefined
      ? {}
      : {
          outputs: inferOptions.outputs.map((o) =>
            typeof o === 'string'
              ? { name: o }
              : {
                  name: o.name,
                  ...(o.classification !== undefined ? { classification: o.classification } : {}),
                },
          ),
        }),
  });
}

function decodeInfer(
  codec: Codec,
  answer: Uint8Array,
  requestBytes: number,
  ref: { readonly name: string },
): KServeInferResult {
  const result = codec.decodeModelInferResponse(answer);
  const outputs: Record<string, Tensor> = {};
  for (const o of result.outputs) outputs[o.name] = o.tensor;
  const version = /^\d+$/.test(result.modelVersion) ? Number(result.modelVersion) : undefined;
  return {
    outputs,
    model: { name: result.modelName === '' ? ref.name : result.modelName, version },
    id: result.id,
    wire: { requestBytes, responseBytes: answer.byteLength },
  };
}

function infer(
  call: Call,
  model: KServeModelRef,
  inputs: Readonly<Record<string, Tensor>>,
  inferOptions: KServeGrpcInferOptions = {},
): Promise<KServeInferResult> {
  const ref = kserveRef(model);
  return call(
    'ModelInfer',
    inferOptions,
    (codec) => encodeInfer(codec, ref, inputs, inferOptions),
    (codec, answer, requestBytes) => decodeInfer(codec, answer, requestBytes, ref),
    modelInferResponsePadding,
  );
}

type HealthCalls = Pick<KServeGrpcClient, 'serverLive' | 'serverReady' | 'modelReady' | 'serverMetadata'>;

function healthCalls(call: Call): HealthCalls {
  return {
    serverLive: (callOptions) =>
      call(
        'ServerLive',
        callOptions,
        (c) => c.encode(c.RPC.ServerLive[0], {}),
        (c, a) => c.decode(c.RPC.ServerLive[1], a).live,
      ),
    serverReady: (callOptions) =>
      call(
        'ServerReady',
        callOptions,
        (c) => c.encode(c.RPC.ServerReady[0], {}),
        (c, a) => c.decode(c.RPC.ServerReady[1], a).ready,
      ),
    modelReady: (model, callOptions) =>
      call(
        'ModelReady',
        callOptions,
        (c) => c.encode(c.RPC.ModelReady[0], kserveRef(model)),
        (c, a) => c.decode(c.RPC.ModelReady[1], a).ready,
      ),
    serverMetadata: (callOptions) =>
      call(
        'ServerMetadata',
        callOptions,
        (c) => c.encode(c.RPC.ServerMetadata[0], {}),
        (c, a) => {
          const { name, version, extensions } = c.decode(c.RPC.ServerMetadata[1], a);
          return { name, version, extensions };
        },
      ),
  };
}

type ModelInfoCalls = Pick<KServeGrpcClient, 'modelMetadata' | 'modelConfig' | 'statistics'>;

function modelInfoCalls(call: Call): ModelInfoCalls {
  return {
    modelMetadata: (model, callOptions) =>
      call(
        'ModelMetadata',
        callOptions,
        (c) => c.encode(c.RPC.ModelMetadata[0], kserveRef(model)),
        (c, a) => {
          const m = c.decode(c.RPC.ModelMetadata[1], a);
          const tensor = (t: (typeof m.inputs)[number]): KServeModelMetadata['inputs'][number] => ({
            name: t.name,
            datatype: t.datatype,
            shape: t.shape.map(Number),
          });
          return {
            name: m.name,
            versions: m.versions,
            platform: m.platform,
            inputs: m.inputs.map(tensor),
            outputs: m.outputs.map(tensor),
          };
        },
      ),
    modelConfig: (model, callOptions) =>
      call(
        'ModelConfig',
        callOptions,
        (c) => c.encode(c.RPC.ModelConfig[0], kserveRef(model)),
        (c, a) =>
          c.json(c.RPC.ModelConfig[1], c.decode(c.RPC.ModelConfig[1], a))['config'] as Record<
            string,
            unknown
          >,
      ),
    statistics: (model, callOptions) =>
      call(
        'ModelStatistics',
        callOptions,
        (c) => c.encode(c.RPC.ModelStatistics[0], model === undefined ? {} : kserveRef(model)),
        (c, a) => {
          const j = c.json(c.RPC.ModelStatistics[1], c.decode(c.RPC.ModelStatistics[1], a));
          return { model_stats: (j['model_stats'] ?? []) as Record<string, unknown>[] };
        },
      ),
  };
}

type RepositoryCalls = Pick<KServeGrpcClient, 'repositoryIndex' | 'loadModel' | 'unloadModel'>;

function repositoryCalls(call: Call): RepositoryCalls {
  return {
    repositoryIndex: (callOptions) =>
      call(
        'RepositoryIndex',
        callOptions,
        (c) => c.encode(c.RPC.RepositoryIndex[0], { ready: callOptions?.ready ?? false }),
        (c, a) =>
          c.decode(c.RPC.RepositoryIndex[1], a).models.map((m) => ({
            name: m.name,
            ...(m.version !== '' ? { version: m.version } : {}),
            ...(m.state !== '' ? { state: m.state } : {}),
            ...(m.reason !== '' ? { reason: m.reason } : {}),
          })),
      ),
    loadModel: (name, callOptions) =>
      call(
        'RepositoryModelLoad',
        callOptions,
        (c) => c.encode(c.RPC.RepositoryModelLoad[0], { modelName: name }),
        (c, a) => {
          c.decode(c.RPC.RepositoryModelLoad[1], a);
        },
      ),
    unloadModel: (name, callOptions) =>
      call(
        'RepositoryModelUnload',
        callOptions,
        (c) =>
          c.encode(c.RPC.RepositoryModelUnload[0], {
            modelName: name,
            parameters: { unload_dependents: { parameterChoice: { case: 'boolParam', value: false } } },
          }),
        (c, a) => {
          c.decode(c.RPC.RepositoryModelUnload[1], a);
        },
      ),
  };
}

export function createKServeGrpcClient(options: KServeGrpcClientOptions): KServeGrpcClient {
  const channel: GrpcChannel = createGrpcChannel({
    address: options.address,
    ...(options.maxReceiveBytes !== undefined ? { maxReceiveBytes: options.maxReceiveBytes } : {}),
    ...(options.transport !== undefined ? { transport: options.transport } : {}),
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
  });
  const call = caller(channel, options);
  return {
    infer: (model, inputs, inferOptions) => infer(call, model, inputs, inferOptions),
    predict: (model, inputs, callOptions) => infer(call, kserveRef(model), inputs, callOptions),
    ...healthCalls(call),
    ...modelInfoCalls(call),
    ...repositoryCalls(call),
    close() {
      channel.close();
    },
  };
}
