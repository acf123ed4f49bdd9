/**
 * KServe v2 / Open Inference Protocol client over HTTP/REST (the protocol Triton and
 * KServe speak, with Triton's extensions): inference with the binary tensor data
 * extension (raw little-endian tensors after the JSON header, no JSON round trip),
 * classification, health, metadata, model configuration, statistics and the model
 * repository. node:http with keep-alive; no native dependencies, no protobuf.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { gunzip, inflate, deflate, gzip } from 'node:zlib';
import { Code, ServingError, type Tensor, parseTfsJsonText } from '@visionserve/protocol';
import {
  INFERENCE_HEADER_CONTENT_LENGTH,
  type InferParameters,
  decodeHttpInferResponse,
  encodeHttpInferRequest,
} from '@visionserve/protocol/kserve';
import type { ClientTlsOptions } from './client-tls.js';
import { type CallOptions, withCallScope } from './call-options.js';
import { type HttpResult, type HttpTransport, createHttpTransport, errorFromHttp } from './http-transport.js';
import { type KServeModelRef, kserveRef } from './kserve-ref.js';
import type { ModelRef } from './model-ref.js';
import type { PredictResult, Predictor } from './results.js';

export interface KServeHttpClientOptions {
  /** Base URL, e.g. "http://127.0.0.1:8501" (visionserve serves /v2 on its REST port; Triton uses 8000). */
  readonly baseUrl: string;
  /** TLS settings for an https:// base URL: a private CA, a client certificate (ClientTlsOptions). */
  readonly tls?: ClientTlsOptions;
  /** Deadline applied to calls that set no `timeoutMs`, in ms. Default none. */
  readonly defaultTimeoutMs?: number;
  /** Keep-alive sockets (and requests in flight). Default 16. */
  readonly maxSockets?: number;
  /** Headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Largest accepted response body in bytes (after decompression too). Default 1 GiB. */
  readonly maxResponseBytes?: number;
  /**
   * Send inputs and ask for outputs as binary tensor data (the fast path) rather than
   * JSON lists. Per call: `binaryInputs` / `binaryOutputs`. Default true.
   */
  readonly binary?: boolean;
}

export type { KServeModelRef } from './kserve-ref.js';

/** One output to return. */
export interface KServeRequestedOutput {
  readonly name: string;
  /** Binary tensor data (default: the call's `binaryOutputs`). */
  readonly binary?: boolean;
  /** Classification extension: the top-K entries as BYTES "value:index[:label]". */
  readonly classification?: number;
}

export interface KServeInferOptions extends CallOptions {
  /** Outputs to return, by name or with options; every output when omitted. */
  readonly outputs?: readonly (string | KServeRequestedOutput)[];
  /** Send inputs as binary data. Default: the client's `binary`. */
  readonly binaryInputs?: boolean;
  /** Ask for binary outputs. Default: the client's `binary`. */
  readonly binaryOutputs?: boolean;
  /** Request id, echoed by the server. */
  readonly id?: string;
  /** Request parameters. */
  readonly parameters?: InferParameters;
  /** Compress the request body (Content-Encoding). */
  readonly requestCompression?: 'gzip' | 'deflate';
  /** Ask for a compressed response (Accept-Encoding). */
  readonly responseCompression?: 'gzip' | 'deflate';
}

export interface KServeInferResult extends PredictResult {
  /** The request id the server echoed ("" when none). */
  readonly id: string;
}

export interface KServeTensorMetadata {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
}

export interface KServeModelMetadata {
  readonly name: string;
  readonly versions: readonly string[];
  readonly platform: string;
  readonly inputs: readonly KServeTensorMetadata[];
  readonly outputs: readonly KServeTensorMetadata[];
}

export interface KServeServerMetadata {
  readonly name: string;
  readonly version: string;
  readonly extensions: readonly string[];
}

export interface KServeRepositoryEntry {
  readonly name: string;
  readonly version?: string;
  readonly state?: string;
  readonly reason?: string;
}

export interface KServeHttpClient extends Predictor {
  /** POST /v2/models/{m}[/versions/{v}]/infer; outputs keyed by name, in response order. */
  infer(
    model: KServeModelRef,
    inputs: Readonly<Record<string, Tensor>>,
    options?: KServeInferOptions,
  ): Promise<KServeInferResult>;
  /** `infer` with the client's defaults (Predictor, for predictBatched and the CLI). */
  predict(
    model: ModelRef,
    inputs: Readonly<Record<string, Tensor>>,
    options?: CallOptions,
  ): Promise<PredictResult>;
  /** GET /v2/health/live: true on 200, false on another status. */
  serverLive(options?: CallOptions): Promise<boolean>;
  /** GET /v2/health/ready. */
  serverReady(options?: CallOptions): Promise<boolean>;
  /** GET /v2/models/{m}[/versions/{v}]/ready: true on 200, false on another status. */
  modelReady(model: KServeModelRef, options?: CallOptions): Promise<boolean>;
  serverMetadata(options?: CallOptions): Promise<KServeServerMetadata>;
  modelMetadata(model: KServeModelRef, options?: CallOptions): Promise<KServeModelMetadata>;
  /** The model configuration (Triton's ModelConfig JSON). */
  modelConfig(model: KServeModelRef, options?: CallOptions): Promise<Record<string, unknown>>;
  /** Inference statistics of every model, one model, or one version. */
  statistics(
    model?: KServeModelRef,
    options?: CallOptions,
  ): Promise<{ model_stats: Record<string, unknown>[] }>;
  repositoryIndex(options?: CallOptions & { readonly ready?: boolean }): Promise<KServeRepositoryEntry[]>;
  loadModel(name: string, options?: CallOptions): Promise<void>;
  unloadModel(name: string, options?: CallOptions): Promise<void>;
  close(): void;
}

/**
 * Puts the binary tensor data that follows the JSON header (Inference-Header-Content-Length)
 * on an 8-byte boundary, so that the first binary output (and the next ones, when the sizes
 * before them are multiples of 8) decodes as a view. Compressed bodies are not placed.
 */
function binaryDataPadding(headers: IncomingHttpHeaders): number {
  if (headers['content-encoding'] !== undefined && headers['content-encoding'] !== 'identity') return 0;
  const raw = headers[INFERENCE_HEADER_CONTENT_LENGTH.toLowerCase()];
  const jsonBytes = Number(Array.isArray(raw) ? raw[0] : raw);
  return Number.isSafeInteger(jsonBytes) && jsonBytes > 0 ? (8 - (jsonBytes % 8)) % 8 : 0;
}

function modelPath(model: KServeModelRef | ModelRef): string {
  const { name, version } = kserveRef(model);
  return `/v2/models/${encodeURIComponent(name)}${version === '' ? '' : `/versions/${version}`}`;
}

function zlib(fn: typeof gzip | typeof gunzip, body: Uint8Array, limit?: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    fn(body, limit === undefined ? {} : { maxOutputLength: limit }, (error, out) => {
      if (error) {
        reject(new ServingError(Code.INTERNAL, `Cannot (de)compress a body: ${error.message}`));
      } else resolve(out);
    });
  });
}

function jsonOf(res: HttpResult): unknown {
  if (res.status !== 200) throw errorFromHttp(res);
  try {
    return parseTfsJsonText(res.body.toString('utf8'));
  } catch (error) {
    throw new ServingError(Code.INTERNAL, `Server answered with invalid JSON: ${String(error)}`);
  }
}

/** One JSON (or bodiless) request inside one deadline. */
type Call = (
  method: 'GET' | 'POST',
  path: string,
  callOptions: CallOptions | undefined,
  body?: string,
) => Promise<HttpResult>;

function caller(transport: HttpTransport, options: KServeHttpClientOptions): Call {
  return (method, path, callOptions, body) =>
    withCallScope(callOptions, options.defaultTimeoutMs, (scope) =>
      transport.request({
        method,
        path,
        signal: scope.signal,
        headers: {
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: Buffer.from(body) } : {}),
      }),
    );
}

function encodeInfer(
  inputs: Readonly<Record<string, Tensor>>,
  inferOptions: KServeInferOptions,
  binaryDefault: boolean,
): ReturnType<typeof encodeHttpInferRequest> {
  const binaryInputs = inferOptions.binaryInputs ?? binaryDefault;
  const binaryOutputs = inferOptions.binaryOutputs ?? binaryDefault;
  return encodeHttpInferRequest({
    ...(inferOptions.id !== undefined ? { id: inferOptions.id } : {}),
    ...(inferOptions.parameters !== undefined ? { parameters: inferOptions.parameters } : {}),
    inputs: Object.entries(inputs).map(([name, tensor]) => ({ name, tensor, binary: binaryInputs })),
    ...(inferOptions.outputs === undefined
      ? { binaryOutput: binaryOutputs }
      : {
          outputs: inferOptions.outputs.map((o) =>
            typeof o === 'string'
              ? { name: o, binary: binaryOutputs }
              : {
                  name: o.name,
                  binary: o.binary ?? binaryOutputs,
                  ...(o.classification !== undefined ? { classification: o.classification } : {}),
                },
          ),
        }),
  });
}

/** The answer's body, inflated when the server compressed it. */
async function answerBody(res: HttpResult, maxBytes: number): Promise<Uint8Array> {
  const encoding = res.headers['content-encoding'];
  if (encoding === 'gzip' || encoding === 'deflate') {
    return zlib(encoding === 'gzip' ? gunzip : inflate, res.body, maxBytes);
  }
  return res.body;
}

async function infer(
  transport: HttpTransport,
  options: KServeHttpClientOptions,
  model: KServeModelRef,
  inputs: Readonly<Record<string, Tensor>>,
  inferOptions: KServeInferOptions = {},
): Promise<KServeInferResult> {
  const ref = kserveRef(model);
  const encoded = encodeInfer(inputs, inferOptions, options.binary ?? true);
  const headers: Record<string, string> = {
    'content-type': encoded.binaryBytes > 0 ? 'application/octet-stream' : 'application/json',
  };
  if (encoded.binaryBytes > 0) headers[INFERENCE_HEADER_CONTENT_LENGTH] = String(encoded.json.byteLength);
  if (inferOptions.responseCompression !== undefined)
    headers['accept-encoding'] = inferOptions.responseCompression;
  return withCallScope(inferOptions, options.defaultTimeoutMs, async (scope) => {
    let body: Uint8Array | Uint8Array[] = [encoded.json, ...encoded.binary];
    if (inferOptions.requestCompression !== undefined) {
      headers['content-encoding'] = inferOptions.requestCompression;
      body = await zlib(inferOptions.requestCompression === 'gzip' ? gzip : deflate, Buffer.concat(body));
    }
    const requestBytes = Array.isArray(body)
      ? encoded.json.byteLength + encoded.binaryBytes
      : body.byteLength;
    const res = await transport.request({
      method: 'POST',
      path: `${modelPath(model)}/infer`,
      headers,
      body,
      signal: scope.signal,
      bodyPadding: binaryDataPadding,
      idempotent: true,
    });
    if (res.status !== 200) throw errorFromHttp(res);
    const answer = await answerBody(res, options.maxResponseBytes ?? 1024 * 1024 * 1024);
    const headerLength = res.headers[INFERENCE_HEADER_CONTENT_LENGTH.toLowerCase()];
    const result = decodeHttpInferResponse(
      answer,
      Array.isArray(headerLength) ? headerLength[0] : headerLength,
    );
    const outputs: Record<string, Tensor> = {};
    for (const o of result.outputs) outputs[o.name] = o.tensor;
    const version = /^\d+$/.test(result.modelVersion) ? Number(result.modelVersion) : undefined;
    return {
      outputs,
      model: { name: result.modelName === '' ? ref.name : result.modelName, version },
      id: result.id,
      wire: { requestBytes, responseBytes: res.body.byteLength },
    };
  });
}

type JsonCalls = Omit<KServeHttpClient, 'infer' | 'predict' | 'close'>;

/** Every call but inference: health, metadata, configuration, statistics, repository. */
function jsonCalls(call: Call): JsonCalls {
  const status = async (path: string, callOptions?: CallOptions): Promise<boolean> =>
    (await call('GET', path, callOptions)).status === 200;
  return {
    serverLive: (callOptions) => status('/v2/health/live', callOptions),
    serverReady: (callOptions) => status('/v2/health/ready', callOptions),
    modelReady: async (model, callOptions) => status(`${modelPath(model)}/ready`, callOptions),
    async serverMetadata(callOptions) {
      return jsonOf(await call('GET', '/v2', callOptions)) as KServeServerMetadata;
    },
    async modelMetadata(model, callOptions) {
      return jsonOf(await call('GET', modelPath(model), callOptions)) as KServeModelMetadata;
    },
    async modelConfig(model, callOptions) {
      return jsonOf(await call('GET', `${modelPath(model)}/config`, callOptions)) as Record<string, unknown>;
    },
    async statistics(model, callOptions) {
      const path = model === undefined ? '/v2/models/stats' : `${modelPath(model)}/stats`;
      return jsonOf(await call('GET', path, callOptions)) as { model_stats: Record<string, unknown>[] };
    },
    async repositoryIndex(callOptions) {
      const body = callOptions?.ready === undefined ? '' : JSON.stringify({ ready: callOptions.ready });
      return jsonOf(await call('POST', '/v2/repository/index', callOptions, body)) as KServeRepositoryEntry[];
    },
    async loadModel(name, callOptions) {
      jsonOf(await call('POST', `/v2/repository/models/${encodeURIComponent(name)}/load`, callOptions, '{}'));
    },
    async unloadModel(name, callOptions) {
      jsonOf(
        await call(
          'POST',
          `/v2/repository/models/${encodeURIComponent(name)}/unload`,
          callOptions,
          '{"parameters":{"unload_dependents":false}}',
        ),
      );
    },
  };
}

export function createKServeHttpClient(options: KServeHttpClientOptions): KServeHttpClient {
  const transport: HttpTransport = createHttpTransport({
    baseUrl: options.baseUrl,
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    ...(options.maxSockets !== undefined ? { maxSockets: options.maxSockets } : {}),
    ...(options.headers !== undefined ? { headers: options.headers } : {}),
    ...(options.maxResponseBytes !== undefined ? { maxResponseBytes: options.maxResponseBytes } : {}),
  });
  return {
    infer: (model, inputs, inferOptions) => infer(transport, options, model, inputs, inferOptions),
    predict: async (model, inputs, callOptions) =>
      infer(transport, options, kserveRef(model), inputs, callOptions),
    ...jsonCalls(caller(transport, options)),
    close() {
      transport.close();
    },
  };
}
