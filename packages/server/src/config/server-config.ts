import { availableParallelism } from 'node:os';
import { delimiter, dirname, resolve } from 'node:path';
import type { LogLevel } from '../util/logger.js';

/**
 * The one configuration schema. Sources, lowest precedence first: defaults <
 * environment (SageMaker container variables) < command-line flags (TF Serving's
 * names). Validated once by {@link resolveServerConfig}, then frozen.
 */
export interface ServerConfig {
  /** gRPC port (TF Serving `--port`). 0 picks a free port. Default 8500. */
  readonly grpcPort: number;
  /** REST port (`--rest_api_port`); -1 disables REST. Default 8501. */
  readonly restPort: number;
  /** SageMaker-style endpoint port (`--sagemaker_port`, `SAGEMAKER_BIND_TO_PORT`); -1 disables it. Default 8080. */
  readonly sagemakerPort: number;
  /** Address every listener binds to. Default "0.0.0.0". */
  readonly host: string;
  /** Single-model mode: name (`--model_name`, default "default") and base path (`--model_base_path`). */
  readonly modelName: string;
  readonly modelBasePath: string | undefined;
  /** Multi-model mode: TF Serving model config file (`--model_config_file`). */
  readonly modelConfigFile: string | undefined;
  /** Re-read the config file every N seconds; 0 reads it once (`--model_config_file_poll_wait_seconds`). */
  readonly modelConfigFilePollSeconds: number;
  /** Scan base paths for new/removed versions every N seconds (`--file_system_poll_wait_seconds`, default 1); 0 disables. */
  readonly fileSystemPollSeconds: number;
  /**
   * onnxruntime intra-op threads per instance (`--tensorflow_intra_op_parallelism`; 0 = our default of 1).
   * Default 1, measured (bench/batching.mjs, see batching/README.md): on 2 cores, 2 instances x 1 thread
   * out-serve 1 instance x 2 threads for MobileNetV2-int8 and YOLOX-Nano from concurrency 4 up.
   */
  readonly intraOpThreads: number;
  /** onnxruntime inter-op threads per instance (`--tensorflow_inter_op_parallelism`; 0 = 1). */
  readonly interOpThreads: number;
  /**
   * Worker instances per model version (`--model_instances`, `SAGEMAKER_TFS_INSTANCE_COUNT`).
   * Default: cores / intra-op threads, at least 1 (2 x 1 on a 2-core machine; measured, see intraOpThreads).
   */
  readonly instances: number;
  /** Let onnxruntime threads spin (`--ort_allow_spinning`). Default false. */
  readonly allowSpinning: boolean;
  /** gRPC responses in tensor_content (`--enable_serialization_as_tensor_content`). Default false. */
  readonly serializeAsTensorContent: boolean;
  /** REST request timeout in ms (`--rest_api_timeout_in_ms`). Default 30000. */
  readonly restTimeoutMs: number;
  /**
   * Largest accepted REST request body in bytes (`--rest_api_max_body_bytes`). Default 256 MiB
   * (a JSON body must also fit in one V8 string, about 512 MiB; use gRPC for larger tensors).
   */
  readonly restMaxBodyBytes: number;
  /** Allow labels pointing at versions that are not loaded (`--allow_version_labels_for_unavailable_models`). */
  readonly allowVersionLabelsForUnavailableModels: boolean;
  /** Batching (`--enable_batching`, `--batching_parameters_file`); acted on by the batching layer. */
  readonly enableBatching: boolean;
  readonly batchingParametersFile: string | undefined;
  // --- batching, instances and warmup (issue #4) ---
  /**
   * Read `batching_params.pbtxt` from each version directory and use it instead
   * of the server-wide parameters (`--enable_per_model_batching_parameters`). Default false.
   */
  readonly enablePerModelBatchingParameters: boolean;
  /**
   * Batching parameters from the SageMaker environment (`SAGEMAKER_TFS_MAX_BATCH_SIZE`,
   * `_BATCH_TIMEOUT_MICROS`, `_NUM_BATCH_THREADS`, `_MAX_ENQUEUED_BATCHES`, with the
   * container's defaults 8 / 1000 µs / cores / cores), set when
   * `SAGEMAKER_TFS_ENABLE_BATCHING=true`. Fields of `--batching_parameters_file` win.
   */
  readonly batchingEnvParameters: SageMakerBatchingParameters | undefined;
  /** Replay warmup requests before a version becomes AVAILABLE (`--enable_model_warmup`). Default true. */
  readonly enableModelWarmup: boolean;
  /** Times each warmup record is replayed (`--num_request_iterations_for_warmup`). Default 1. */
  readonly numRequestIterationsForWarmup: number;
  // --- end batching, instances and warmup ---
  /** Graceful shutdown: how long in-flight requests may finish, in ms (`--shutdown_grace_ms`). Default 10000. */
  readonly shutdownGraceMs: number;
  readonly logLevel: LogLevel;
  /**
   * Directories whose subdirectories are models that clients may load by name or URL (KServe
   * repository load; SageMaker multi-model `POST /models` unless --sagemaker_model_roots is
   * given): nothing outside them is loaded, symlinks followed (`--model_roots`). Default:
   * /opt/ml/models, plus the directory of --model_config_file when one is given.
   */
  readonly modelRoots: readonly string[];

  // ---- KServe v2 / Open Inference Protocol ----
  /** Serve the KServe v2 HTTP API (`/v2/...`) on the REST port (`--kserve_rest`). Default true. */
  readonly kserveRest: boolean;
  /** Also serve it on the SageMaker-style port (`--kserve_sagemaker_port`). Default false. */
  readonly kserveSagemakerPort: boolean;
  /**
   * `explicit` lets clients load and unload models through the repository extension
   * (`POST /v2/repository/models/{m}/load|unload`); `none` refuses them (503), as Triton's
   * default does (`--kserve_model_control_mode`). The index is always served. Default `none`.
   */
  readonly kserveModelControlMode: 'none' | 'explicit';
  // ---- end KServe ----

  // ---- SageMaker endpoint and SAGEMAKER_TFS_* batching fields (issue #3) ----
  /** Model /invocations uses when no `tfs-model-name` is given (`SAGEMAKER_TFS_DEFAULT_MODEL_NAME`). Default: the first configured model. */
  readonly sagemakerDefaultModelName: string | undefined;
  /** Multi-model endpoint API: GET/POST /models, DELETE /models/{m}, POST /models/{m}/invoke (`SAGEMAKER_MULTI_MODEL`). Default false. */
  readonly sagemakerMultiModel: boolean;
  /**
   * Directories a multi-model `POST /models` `url` must resolve inside (after following
   * symlinks). Default: --model_roots.
   */
  readonly sagemakerModelRoots: readonly string[];
  /** Most models loaded at once through the multi-model API; 0 = no limit (then 507). Default 0. */
  readonly sagemakerMaxModels: number;
  /** Refuse multi-model loads (507) while the process RSS is above this many bytes; 0 = no limit. Default 0. */
  readonly sagemakerMemoryLimitBytes: number;
  /** Largest /invocations request body in bytes (413 above it). Default 100 MiB (the container's nginx buffer). */
  readonly sagemakerMaxBodyBytes: number;
  /** Deadline of one /invocations request in ms, handler included (`SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS`); 0 disables. Default 60000. */
  readonly sagemakerRequestTimeoutMs: number;
  /** Worker threads running user handler code (`SAGEMAKER_GUNICORN_WORKERS`). Default 2. */
  readonly sagemakerHandlerWorkers: number;
  /** How long a multi-model load may take before 408, in ms (`SAGEMAKER_TFS_WAIT_TIME_SECONDS`). Default 300000. */
  readonly sagemakerModelLoadTimeoutMs: number;
  // ---- end SageMaker block ----
}

/** Batching fields that the SageMaker container sets from its environment. */
export interface SageMakerBatchingParameters {
  readonly maxBatchSize: number;
  readonly batchTimeoutMicros: number;
  readonly numBatchThreads: number;
  readonly maxEnqueuedBatches: number;
}

interface FlagSpec {
  readonly key: keyof ServerConfig;
  readonly type: 'int' | 'bool' | 'string' | 'loglevel' | 'paths';
  readonly help: string;
}

/** Command-line flags, TF Serving spelling. */
export const FLAGS: Readonly<Record<string, FlagSpec>> = {
  port: { key: 'grpcPort', type: 'int', help: 'gRPC port (default 8500)' },
  rest_api_port: { key: 'restPort', type: 'int', help: 'REST port (default 8501; -1 disables)' },
  sagemaker_port: {
    key: 'sagemakerPort',
    type: 'int',
    help: 'SageMaker-style endpoint port (default 8080; -1 disables)',
  },
  host: { key: 'host', type: 'string', help: 'bind address (default 0.0.0.0)' },
  model_name: {
    key: 'modelName',
    type: 'string',
    help: 'model name in single-model mode (default "default")',
  },
  model_base_path: { key: 'modelBasePath', type: 'string', help: 'directory of numeric version directories' },
  model_config_file: {
    key: 'modelConfigFile',
    type: 'string',
    help: 'TF Serving model_config_list text file',
  },
  model_config_file_poll_wait_seconds: {
    key: 'modelConfigFilePollSeconds',
    type: 'int',
    help: 're-read the config file every N s (0: once)',
  },
  file_system_poll_wait_seconds: {
    key: 'fileSystemPollSeconds',
    type: 'int',
    help: 'scan for new/removed versions every N s (default 1; 0: never)',
  },
  tensorflow_intra_op_parallelism: {
    key: 'intraOpThreads',
    type: 'int',
    help: 'onnxruntime intra-op threads (0: 1)',
  },
  tensorflow_inter_op_parallelism: {
    key: 'interOpThreads',
    type: 'int',
    help: 'onnxruntime inter-op threads (0: 1)',
  },
  model_instances: {
    key: 'instances',
    type: 'int',
    help: 'worker instances per model version (default: cores/intra)',
  },
  ort_allow_spinning: {
    key: 'allowSpinning',
    type: 'bool',
    help: 'let onnxruntime threads spin (default false)',
  },
  enable_serialization_as_tensor_content: {
    key: 'serializeAsTensorContent',
    type: 'bool',
    help: 'gRPC outputs as tensor_content (default false)',
  },
  rest_api_timeout_in_ms: { key: 'restTimeoutMs', type: 'int', help: 'REST request timeout (default 30000)' },
  rest_api_max_body_bytes: {
    key: 'restMaxBodyBytes',
    type: 'int',
    help: 'largest REST body (default 256 MiB)',
  },
  allow_version_labels_for_unavailable_models: {
    key: 'allowVersionLabelsForUnavailableModels',
    type: 'bool',
    help: 'labels may name versions not loaded yet',
  },
  enable_batching: { key: 'enableBatching', type: 'bool', help: 'server-side batching' },
  batching_parameters_file: {
    key: 'batchingParametersFile',
    type: 'string',
    help: 'batching parameters text file',
  },
  enable_per_model_batching_parameters: {
    key: 'enablePerModelBatchingParameters',
    type: 'bool',
    help: 'read batching_params.pbtxt from version directories',
  },
  enable_model_warmup: {
    key: 'enableModelWarmup',
    type: 'bool',
    help: 'warm up versions before they are AVAILABLE (default true)',
  },
  num_request_iterations_for_warmup: {
    key: 'numRequestIterationsForWarmup',
    type: 'int',
    help: 'replays of each warmup record (default 1)',
  },
  shutdown_grace_ms: {
    key: 'shutdownGraceMs',
    type: 'int',
    help: 'graceful shutdown budget (default 10000)',
  },
  log_level: { key: 'logLevel', type: 'loglevel', help: 'debug|info|warn|error|silent (default info)' },
  model_roots: {
    key: 'modelRoots',
    type: 'paths',
    help: "':'-separated dirs whose subdirs clients may load as models",
  },
  kserve_rest: {
    key: 'kserveRest',
    type: 'bool',
    help: 'KServe v2 HTTP API (/v2) on the REST port (default true)',
  },
  kserve_sagemaker_port: {
    key: 'kserveSagemakerPort',
    type: 'bool',
    help: 'KServe v2 HTTP API on the SageMaker port too (default false)',
  },
  kserve_model_control_mode: {
    key: 'kserveModelControlMode',
    type: 'string',
    help: 'none|explicit: KServe repository load/unload (default none)',
  },
  // ---- SageMaker endpoint (issue #3) ----
  sagemaker_default_model_name: {
    key: 'sagemakerDefaultModelName',
    type: 'string',
    help: 'model used by /invocations without tfs-model-name',
  },
  sagemaker_multi_model: {
    key: 'sagemakerMultiModel',
    type: 'bool',
    help: 'multi-model API on the SageMaker port (default false)',
  },
  sagemaker_model_roots: {
    key: 'sagemakerModelRoots',
    type: 'paths',
    help: "':'-separated dirs POST /models urls must lie in (default: --model_roots)",
  },
  sagemaker_max_models: {
    key: 'sagemakerMaxModels',
    type: 'int',
    help: 'most models loaded via POST /models (0: no limit)',
  },
  sagemaker_memory_limit_bytes: {
    key: 'sagemakerMemoryLimitBytes',
    type: 'int',
    help: 'refuse POST /models above this RSS (0: none)',
  },
  sagemaker_max_body_bytes: {
    key: 'sagemakerMaxBodyBytes',
    type: 'int',
    help: 'largest /invocations body (default 100 MiB)',
  },
  sagemaker_request_timeout_ms: {
    key: 'sagemakerRequestTimeoutMs',
    type: 'int',
    help: '/invocations deadline (default 60000; 0: none)',
  },
  sagemaker_handler_workers: {
    key: 'sagemakerHandlerWorkers',
    type: 'int',
    help: 'worker threads for code/inference.js (default 2)',
  },
  sagemaker_model_load_timeout_ms: {
    key: 'sagemakerModelLoadTimeoutMs',
    type: 'int',
    help: 'POST /models load timeout (default 300000)',
  },
};

/** Thrown for invalid flags or values; the CLI prints it and exits 2. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function parseValue(flag: string, spec: FlagSpec, raw: string): unknown {
  switch (spec.type) {
    case 'int': {
      if (!/^-?\d+$/.test(raw)) throw new ConfigError(`--${flag} expects an integer, got "${raw}"`);
      return Number(raw);
    }
    case 'bool': {
      if (['true', '1', 'yes', ''].includes(raw.toLowerCase())) return true;
      if (['false', '0', 'no'].includes(raw.toLowerCase())) return false;
      throw new ConfigError(`--${flag} expects true or false, got "${raw}"`);
    }
    case 'loglevel': {
      if (!['debug', 'info', 'warn', 'error', 'silent'].includes(raw)) {
        throw new ConfigError(`--${flag} expects debug|info|warn|error|silent, got "${raw}"`);
      }
      return raw;
    }
    case 'string':
      return raw;
    case 'paths':
      return raw.split(delimiter).filter((p) => p !== '');
  }
}

/** Parses `--flag=value`, `--flag value` and bare boolean `--flag`. Unknown flags are errors. */
export function parseFlags(argv: readonly string[]): Partial<ServerConfig> {
  const out: Partial<Mutable<ServerConfig>> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument "${arg}"`);
    const eq = arg.indexOf('=');
    const name = (eq >= 0 ? arg.slice(2, eq) : arg.slice(2)).replaceAll('-', '_');
    const spec = FLAGS[name];
    if (!spec) throw new ConfigError(`unknown flag --${name}`);
    let raw: string;
    if (eq >= 0) raw = arg.slice(eq + 1);
    else if (spec.type === 'bool' && (argv[i + 1] === undefined || argv[i + 1]!.startsWith('--')))
      raw = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new ConfigError(`--${name} needs a value`);
      raw = next;
      i++;
    }
    (out as Record<string, unknown>)[spec.key] = parseValue(name, spec, raw);
  }
  return out;
}

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
  // --- batching (issue #4): the SageMaker TFS container's batching variables and defaults ---
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
  // --- end batching ---
  Object.assign(out, sagemakerFromEnv(env, int));
  return out;
}

/**
 * The SageMaker TFS container variables of issue #3 (protocols.md B11). Variables that
 * only make sense for the container's nginx/gunicorn/TFS processes are mapped onto the
 * nearest equivalent here, or ignored (see the SageMaker section of the README).
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
  return out;
}

/** Merges sources (defaults < env < flags), validates and freezes. */
export function resolveServerConfig(
  flags: Partial<ServerConfig>,
  env: Partial<ServerConfig> = {},
  cores: number = availableParallelism(),
): ServerConfig {
  const merged = { ...env, ...flags };
  const intra = merged.intraOpThreads && merged.intraOpThreads > 0 ? merged.intraOpThreads : 1;
  const modelRoots = (
    merged.modelRoots ?? [
      '/opt/ml/models',
      ...(merged.modelConfigFile === undefined ? [] : [dirname(merged.modelConfigFile)]),
    ]
  ).map((p) => resolve(p));
  const config: ServerConfig = {
    grpcPort: 8500,
    restPort: 8501,
    sagemakerPort: 8080,
    host: '0.0.0.0',
    modelName: 'default',
    modelBasePath: undefined,
    modelConfigFile: undefined,
    modelConfigFilePollSeconds: 0,
    fileSystemPollSeconds: 1,
    interOpThreads: 1,
    allowSpinning: false,
    serializeAsTensorContent: false,
    restTimeoutMs: 30_000,
    restMaxBodyBytes: 256 * 1024 * 1024,
    allowVersionLabelsForUnavailableModels: false,
    enableBatching: false,
    batchingParametersFile: undefined,
    enablePerModelBatchingParameters: false,
    batchingEnvParameters: undefined,
    enableModelWarmup: true,
    numRequestIterationsForWarmup: 1,
    shutdownGraceMs: 10_000,
    logLevel: 'info',
    // ---- SageMaker endpoint (issue #3) ----
    sagemakerDefaultModelName: undefined,
    sagemakerMultiModel: false,
    sagemakerMaxModels: 0,
    sagemakerMemoryLimitBytes: 0,
    sagemakerMaxBodyBytes: 100 * 1024 * 1024,
    sagemakerRequestTimeoutMs: 60_000,
    sagemakerHandlerWorkers: 2,
    sagemakerModelLoadTimeoutMs: 300_000,
    kserveRest: true,
    kserveSagemakerPort: false,
    kserveModelControlMode: 'none',
    ...merged,
    modelRoots,
    sagemakerModelRoots: merged.sagemakerModelRoots?.map((p) => resolve(p)) ?? modelRoots,
    intraOpThreads: intra,
    instances:
      merged.instances && merged.instances > 0 ? merged.instances : Math.max(1, Math.floor(cores / intra)),
  };
  if (config.modelBasePath !== undefined && config.modelConfigFile !== undefined) {
    throw new ConfigError('--model_base_path and --model_config_file cannot both be set');
  }
  for (const [key, value] of [
    ['port', config.grpcPort],
    ['rest_api_port', config.restPort],
    ['sagemaker_port', config.sagemakerPort],
  ] as const) {
    if (value < -1 || value > 65535) throw new ConfigError(`--${key} must be a port number, got ${value}`);
  }
  if (config.restPort > 0 && config.restPort === config.grpcPort) {
    throw new ConfigError('--rest_api_port must differ from --port');
  }
  if (!['none', 'explicit'].includes(config.kserveModelControlMode)) {
    throw new ConfigError(
      `--kserve_model_control_mode must be none or explicit, got "${config.kserveModelControlMode}"`,
    );
  }
  if (config.fileSystemPollSeconds < 0 || config.modelConfigFilePollSeconds < 0) {
    throw new ConfigError('poll intervals must be >= 0');
  }
  if (config.numRequestIterationsForWarmup < 1) {
    throw new ConfigError('--num_request_iterations_for_warmup must be >= 1');
  }
  if (config.sagemakerPort > 0 && [config.grpcPort, config.restPort].includes(config.sagemakerPort)) {
    throw new ConfigError('--sagemaker_port must differ from --port and --rest_api_port');
  }
  for (const [key, value] of [
    ['sagemaker_max_models', config.sagemakerMaxModels],
    ['sagemaker_memory_limit_bytes', config.sagemakerMemoryLimitBytes],
    ['sagemaker_request_timeout_ms', config.sagemakerRequestTimeoutMs],
  ] as const) {
    if (value < 0) throw new ConfigError(`--${key} must be >= 0, got ${value}`);
  }
  for (const [key, value] of [
    ['sagemaker_max_body_bytes', config.sagemakerMaxBodyBytes],
    ['sagemaker_handler_workers', config.sagemakerHandlerWorkers],
    ['sagemaker_model_load_timeout_ms', config.sagemakerModelLoadTimeoutMs],
  ] as const) {
    if (value < 1) throw new ConfigError(`--${key} must be >= 1, got ${value}`);
  }
  return Object.freeze(config);
}
