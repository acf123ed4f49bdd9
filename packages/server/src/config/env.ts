import { availableParallelism } from 'node:os';
import { ConfigError } from './config-error.js';
import type { ServerConfig } from './server-config.js';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** SageMaker container variables that map onto this schema. */
export function configFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  cores: number = availableParallelism(),
): Partial<ServerConfig> {
  const out: Partial<Mutable<ServerConfig>> = {};
  const int = (name: string): number | undefined => {
    const v = env[name];
    if (v === undefined || v === '') return undefined;
    if (!/^-?\d+$/.test(v)) throw new ConfigError(`${name} expects an integer, got "${v}"`);
    return Number(v);
  };
  const port = int('SAGEMAKER_BIND_TO_PORT');
  if (port !== undefined) out.sagemakerPort = port;
  const intra = int('SAGEMAKER_TFS_INTRA_OP_PARALLELISM');
  if (intra !== undefined) out.intraOpThreads = intra;
  const inter = int('SAGEMAKER_TFS_INTER_OP_PARALLELISM');
  if (inter !== undefined) out.interOpThreads = inter;
  const instances = int('SAGEMAKER_TFS_INSTANCE_COUNT');
  if (instances !== undefined) out.instances = instances;
  // The SageMaker TFS container's batching variables and defaults.
  const batching = env['SAGEMAKER_TFS_ENABLE_BATCHING'];
  if (batching !== undefined) out.enableBatching = batching.toLowerCase() === 'true';
  if (out.enableBatching === true) {
    const bulk = env['SAGEMAKER_BATCH'] !== undefined && env['SAGEMAKER_BATCH'].toLowerCase() === 'true';
    out.batchingEnvParameters = {
      maxBatchSize: int('SAGEMAKER_TFS_MAX_BATCH_SIZE') ?? 8,
      batchTimeoutMicros: int('SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS') ?? 1000,
      numBatchThreads: int('SAGEMAKER_TFS_NUM_BATCH_THREADS') ?? cores,
      maxEnqueuedBatches: int('SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES') ?? (bulk ? 100_000_000 : cores),
    };
  }
  const python = env['VISIONSERVE_CONVERTER_PYTHON'];
  if (python !== undefined && python !== '') out.savedModelConverterPython = python;
  const transport = env['VISIONSERVE_GRPC_TRANSPORT'];
  if (transport !== undefined && transport !== '') {
    if (transport !== 'lean' && transport !== 'node') {
      throw new ConfigError(`VISIONSERVE_GRPC_TRANSPORT must be lean or node, got "${transport}"`);
    }
    out.grpcTransport = transport;
  }
  const cacheDir = env['VISIONSERVE_CACHE_DIR'];
  if (cacheDir !== undefined && cacheDir !== '') out.savedModelCacheDir = cacheDir;
  Object.assign(out, sagemakerFromEnv(env, int));
  return out;
}

/**
 * The SageMaker TFS container variables (docs/sagemaker-endpoint.md). Variables that only make sense
 * for the container's nginx/gunicorn/TFS processes are mapped onto the nearest equivalent
 * here, or ignored (see docs/sagemaker-endpoint.md).
 */
function sagemakerFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  int: (name: string) => number | undefined,
): Partial<ServerConfig> {
  const out: Partial<Mutable<ServerConfig>> = {};
  const defaultModel = env['SAGEMAKER_TFS_DEFAULT_MODEL_NAME'];
  if (defaultModel !== undefined && defaultModel !== '') out.sagemakerDefaultModelName = defaultModel;
  const multi = env['SAGEMAKER_MULTI_MODEL'];
  if (multi !== undefined && multi !== '') {
    if (!/^(true|false)$/i.test(multi)) {
      throw new ConfigError(`SAGEMAKER_MULTI_MODEL expects true or false, got "${multi}"`);
    }
    out.sagemakerMultiModel = multi.toLowerCase() === 'true';
  }
  const seconds = (name: string): number | undefined => {
    const v = int(name);
    return v === undefined ? undefined : v * 1000;
  };
  const timeout =
    seconds('SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS') ?? seconds('SAGEMAKER_GUNICORN_TIMEOUT_SECONDS');
  if (timeout !== undefined) out.sagemakerRequestTimeoutMs = timeout;
  const workers = int('SAGEMAKER_GUNICORN_WORKERS');
  if (workers !== undefined) out.sagemakerHandlerWorkers = workers;
  const wait = seconds('SAGEMAKER_TFS_WAIT_TIME_SECONDS');
  if (wait !== undefined) out.sagemakerModelLoadTimeoutMs = wait;
  // Set by SageMaker Batch Transform for the job's container; echoed by /execution-parameters.
  const transforms = int('SAGEMAKER_MAX_CONCURRENT_TRANSFORMS');
  if (transforms !== undefined) out.sagemakerMaxConcurrentTransforms = transforms;
  const payload = int('SAGEMAKER_MAX_PAYLOAD_IN_MB');
  if (payload !== undefined && payload > 0) out.sagemakerMaxPayloadMb = payload;
  return out;
}
