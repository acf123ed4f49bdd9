/**
 * TF Serving REST client: predict (row `instances` or columnar `inputs`), model status
 * and metadata, over node:http with keep-alive.
 */
import {
  Code,
  DTYPES,
  type DType,
  ServingError,
  type Tensor,
  type TfsFormat,
  type TfsTensorSpec,
  encodeTfsPredictRequest,
  parseTfsJsonText,
  tfDataTypeName,
  tfsJsonToTensors,
} from '@visionserve/protocol';
import type { ClientTlsOptions } from './client-tls.js';
import { type CallOptions, withCallScope } from './call-options.js';
import { type HttpResult, type HttpTransport, createHttpTransport, errorFromHttp } from './http-transport.js';
import { type ModelRef, type ModelSpec, modelSpec, restModelPath } from './model-ref.js';
import type {
  ModelMetadata,
  ModelVersionStatus,
  PredictResult,
  Predictor,
  SignatureInfo,
  TensorInfo,
} from './results.js';

export interface TfsRestClientOptions {
  /** Base URL, e.g. "http://127.0.0.1:8501" (TF Serving's usual REST port). */
  readonly baseUrl: string;
  /** TLS settings for an https:// base URL: a private CA, a client certificate (ClientTlsOptions). */
  readonly tls?: ClientTlsOptions;
  /** Deadline applied to calls that set no `timeoutMs`, in ms. Default none. */
  readonly defaultTimeoutMs?: number;
  /** Keep-alive sockets (and requests in flight). Default 16. */
  readonly maxSockets?: number;
  /** Headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Largest accepted response body in bytes. Default 1 GiB. */
  readonly maxResponseBytes?: number;
}

export interface RestPredictOptions extends CallOptions {
  /** `row` sends `{"instances": ...}` (every input batched along dim 0), `columnar` `{"inputs": ...}`. Default `columnar`. */
  readonly format?: TfsFormat;
  /**
   * Output alias -> dtype, used to read the JSON answer (JSON has no types and, for one
   * output in row format, no name). When omitted, the client fetches the model's metadata
   * once (cached per model/version/label/signature) and uses its output signature.
   */
  readonly outputs?: Readonly<Record<string, DType>>;
}

export interface TfsRestClient extends Predictor {
  predict(
    model: ModelRef,
    inputs: Readonly<Record<string, Tensor>>,
    options?: RestPredictOptions,
  ): Promise<PredictResult>;
  /** GET /v1/models/{m}[/versions/{v}|/labels/{l}]. */
  getModelStatus(model: ModelRef, options?: CallOptions): Promise<ModelVersionStatus[]>;
  /** GET .../metadata. */
  getModelMetadata(model: ModelRef, options?: CallOptions): Promise<ModelMetadata>;
  /** Closes idle keep-alive sockets. */
  close(): void;
}

const DTYPE_BY_TF_NAME: ReadonlyMap<string, DType> = new Map(DTYPES.map((d) => [tfDataTypeName(d), d]));

export function createTfsRestClient(options: TfsRestClientOptions): TfsRestClient {
  const transport: HttpTransport = createHttpTransport({
    baseUrl: options.baseUrl,
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    ...(options.maxSockets !== undefined ? { maxSockets: options.maxSockets } : {}),
    ...(options.headers !== undefined ? { headers: options.headers } : {}),
    ...(options.maxResponseBytes !== undefined ? { maxResponseBytes: options.maxResponseBytes } : {}),
  });
  const outputSpecCache = new Map<string, Promise<Record<string, TfsTensorSpec>>>();

  const get = (path: string, callOptions: CallOptions | undefined): Promise<unknown> =>
    withCallScope(callOptions, options.defaultTimeoutMs, async (scope) => {
      const res = await transport.request({
        method: 'GET',
        path,
        signal: scope.signal,
        headers: { accept: 'application/json' },
      });
      return jsonOf(res);
    });

  const getModelMetadata = async (model: ModelRef, callOptions?: CallOptions): Promise<ModelMetadata> => {
    const spec = modelSpec(model);
    return metadataFromJson(await get(`${restModelPath(spec)}/metadata`, callOptions), spec);
  };

  const outputSpecs = (
    spec: ModelSpec,
    callOptions: CallOptions | undefined,
  ): Promise<Record<string, TfsTensorSpec>> => {
    const key = JSON.stringify([spec.name, spec.version, spec.label, spec.signatureName]);
    let cached = outputSpecCache.get(key);
    if (cached === undefined) {
      cached = getModelMetadata(spec, callOptions).then((metadata) => {
        const signatureName = spec.signatureName ?? 'serving_default';
        const signature = metadata.signatures[signatureName];
        if (signature === undefined) {
          throw new ServingError(
            Code.INVALID_ARGUMENT,
            `Serving signature name: "${signatureName}" not found in signature def`,
          );
        }
        const specs: Record<string, TfsTensorSpec> = {};
        for (const [alias, info] of Object.entries(signature.outputs))
          specs[alias] = { dtype: info.dtype ?? 'float32' };
        return specs;
      });
      outputSpecCache.set(key, cached);
      cached.catch(() => outputSpecCache.delete(key));
    }
    return cached;
  };

  return {
    async predict(model, inputs, callOptions) {
      const spec = modelSpec(model);
      const format = callOptions?.format ?? 'columnar';
      return withCallScope(callOptions, options.defaultTimeoutMs, async (scope) => {
        // One deadline covers the (first-call-only) metadata fetch and the predict call.
        const specs: Record<string, TfsTensorSpec> = callOptions?.outputs
          ? Object.fromEntries(
              Object.entries(callOptions.outputs).map(([alias, dtype]) => [alias, { dtype }]),
            )
          : await outputSpecs(spec, { signal: scope.signal });
        const body = encodeTfsPredictRequest(inputs, format, spec.signatureName);
        const res = await transport.request({
          method: 'POST',
          path: `${restModelPath(spec)}:predict`,
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body,
          signal: scope.signal,
          idempotent: true,
        });
        const json = jsonOf(res);
        const key = format === 'row' ? 'predictions' : 'outputs';
        if (typeof json !== 'object' || json === null || !Object.hasOwn(json, key)) {
          throw new ServingError(Code.INTERNAL, `Predict response has no "${key}" key`);
        }
        const outputs = tfsJsonToTensors(format, (json as Record<string, unknown>)[key], specs);
        return {
          outputs,
          model: { name: spec.name, version: spec.version },
          wire: { requestBytes: body.byteLength, responseBytes: res.body.byteLength },
        };
      });
    },
    async getModelStatus(model, callOptions) {
      const spec = modelSpec(model);
      return statusFromJson(await get(restModelPath(spec), callOptions));
    },
    getModelMetadata,
    close() {
      transport.close();
    },
  };
}

/** The JSON body of a 2xx answer (NaN/Infinity tokens allowed); a ServingError otherwise. */
function jsonOf(res: HttpResult): unknown {
  if (res.status < 200 || res.status > 299) throw errorFromHttp(res);
  try {
    return parseTfsJsonText(res.body.toString('utf8'));
  } catch (error) {
    throw new ServingError(Code.INTERNAL, `Server answered with invalid JSON: ${String(error)}`);
  }
}

function asRecord(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ServingError(Code.INTERNAL, `Malformed response: ${what} is not an object`);
  }
  return value as Record<string, unknown>;
}

function statusFromJson(json: unknown): ModelVersionStatus[] {
  const list = asRecord(json, 'status').model_version_status;
  if (!Array.isArray(list))
    throw new ServingError(Code.INTERNAL, 'Malformed response: no model_version_status');
  return list.map((entry: unknown) => {
    const e = asRecord(entry, 'model_version_status entry');
    const status = asRecord(e.status ?? {}, 'status');
    const codeName = typeof status.error_code === 'string' ? status.error_code : 'OK';
    return {
      version: Number(e.version),
      state: typeof e.state === 'string' ? e.state : 'UNKNOWN',
      errorCode: (Code as unknown as Record<string, Code | undefined>)[codeName] ?? Code.UNKNOWN,
      errorMessage: typeof status.error_message === 'string' ? status.error_message : '',
    };
  });
}

function tensorInfoFromJson(value: unknown): TensorInfo {
  const v = asRecord(value, 'tensor_info');
  const tfDtype = typeof v.dtype === 'string' ? v.dtype : 'DT_INVALID';
  const shape = asRecord(v.tensor_shape ?? {}, 'tensor_shape');
  const dims = Array.isArray(shape.dim) ? shape.dim : [];
  return {
    name: typeof v.name === 'string' ? v.name : '',
    dtype: DTYPE_BY_TF_NAME.get(tfDtype),
    tfDtype,
    shape:
      shape.unknown_rank === true
        ? undefined
        : dims.map((d: unknown) => Number(asRecord(d, 'dim').size ?? -1)),
  };
}

function metadataFromJson(json: unknown, requested: ModelSpec): ModelMetadata {
  const root = asRecord(json, 'metadata response');
  const modelSpecJson = asRecord(root.model_spec ?? {}, 'model_spec');
  const defs = asRecord(
    asRecord(asRecord(root.metadata ?? {}, 'metadata').signature_def ?? {}, 'signature_def').signature_def ??
      {},
    'signature_def',
  );
  const signatures: Record<string, SignatureInfo> = {};
  for (const [name, def] of Object.entries(defs)) {
    const d = asRecord(def, `signature ${name}`);
    const map = (value: unknown): Record<string, TensorInfo> =>
      Object.fromEntries(
        Object.entries(asRecord(value ?? {}, 'tensor map')).map(([k, v]) => [k, tensorInfoFromJson(v)]),
      );
    signatures[name] = {
      inputs: map(d.inputs),
      outputs: map(d.outputs),
      methodName: typeof d.method_name === 'string' ? d.method_name : '',
    };
  }
  const version = modelSpecJson.version === undefined ? requested.version : Number(modelSpecJson.version);
  return {
    model: { name: typeof modelSpecJson.name === 'string' ? modelSpecJson.name : requested.name, version },
    signatures,
  };
}
