import { delimiter } from 'node:path';
import { ConfigError } from './config-error.js';
import type { ServerConfig } from './server-config.js';

export interface FlagSpec {
  readonly key: keyof ServerConfig;
  readonly type: 'int' | 'float' | 'bool' | 'string' | 'loglevel' | 'paths' | 'list';
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
  worker_thread_nice: {
    key: 'workerThreadNice',
    type: 'int',
    help: 'nice value of inference and JSON decode threads, so the event loop gets the CPU first (Linux; default 10; 0: off)',
  },
  gc_headroom_mb: {
    key: 'gcHeadroomMb',
    type: 'int',
    help: 'old-generation growth allowed past the live heap before a full GC, in MiB (default 64; 0: V8 default)',
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
  rest_api_num_threads: {
    key: 'restApiNumThreads',
    type: 'int',
    help: 'threads reading JSON tensor bodies off the event loop, one body each at a time (default 2; 0: on the event loop)',
  },
  json_max_depth: {
    key: 'jsonMaxDepth',
    type: 'int',
    help: 'deepest nesting of lists and objects in a JSON tensor body (REST, KServe, /invocations), else 400 (default 100)',
  },
  json_max_object_keys: {
    key: 'jsonMaxObjectKeys',
    type: 'int',
    help: 'most keys in one object of a JSON tensor body, else 400 (default 1000)',
  },
  access_log_max_failures_per_second: {
    key: 'accessLogMaxFailuresPerSecond',
    type: 'int',
    help: 'failed requests access-logged per second at most, at any sampling rate; the rest counted in one line (default 100; 0: none)',
  },
  json_max_values: {
    key: 'jsonMaxValues',
    type: 'int',
    help: 'most JSON values (numbers, strings, lists, objects) in a JSON tensor body, else 400 (default 67108864)',
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
  // --- admission control and connection hygiene ---
  max_queue_wait_ms: {
    key: 'maxQueueWaitMs',
    type: 'int',
    help: 'refuse requests facing more queued work than this, per model, in ms (default 100; 0: off)',
  },
  max_queued_requests: {
    key: 'maxQueuedRequests',
    type: 'int',
    help: 'runs a model version queues at most (default 1000)',
  },
  max_inflight_request_bytes: {
    key: 'maxInflightRequestBytes',
    type: 'int',
    help: 'request bodies held at once, all listeners (default 512 MiB)',
  },
  max_inflight_requests: {
    key: 'maxInflightRequests',
    type: 'int',
    help: 'requests read or served at once, all listeners (default 4096)',
  },
  max_connections: { key: 'maxConnections', type: 'int', help: 'connections per listener (default 4096)' },
  http_headers_timeout_ms: {
    key: 'httpHeadersTimeoutMs',
    type: 'int',
    help: 'time to send HTTP request headers (default 20000)',
  },
  request_body_timeout_ms: {
    key: 'requestBodyTimeoutMs',
    type: 'int',
    help: 'time to send a request body / gRPC message (default 60000)',
  },
  grpc_channel_arguments: {
    key: 'grpcChannelArguments',
    type: 'list',
    help: 'comma-separated gRPC server arguments, TF Serving style: grpc.max_connection_age_ms, grpc.max_connection_age_grace_ms, grpc.max_connection_idle_ms, grpc.keepalive_time_ms, grpc.keepalive_timeout_ms, grpc.max_concurrent_streams, grpc.max_receive_message_length (others are ignored with a warning)',
  },
  grpc_transport: {
    key: 'grpcTransport',
    type: 'string',
    help: 'lean|node: HTTP/2 under the gRPC port, our own or node:http2 (default lean; env VISIONSERVE_GRPC_TRANSPORT)',
  },
  wait_for_models: {
    key: 'waitForModels',
    type: 'bool',
    help: 'start even if a base path is missing or empty, and poll for it (default false)',
  },
  // --- TensorFlow SavedModels and the response cache ---
  saved_model_converter_python: {
    key: 'savedModelConverterPython',
    type: 'string',
    help: 'Python with tensorflow + tf2onnx for SavedModels (default: the one `visionserve convert --setup` made)',
  },
  saved_model_cache_dir: {
    key: 'savedModelCacheDir',
    type: 'string',
    help: 'SavedModel conversion cache (default ~/.cache/visionserve)',
  },
  saved_model_conversion_timeout_seconds: {
    key: 'savedModelConversionTimeoutSeconds',
    type: 'int',
    help: 'longest SavedModel conversion (default 600)',
  },
  response_cache_bytes: {
    key: 'responseCacheBytes',
    type: 'int',
    help: 'response cache size for models with "responseCache": true in visionserve.json (default 0: off)',
  },
  model_roots: {
    key: 'modelRoots',
    type: 'paths',
    help: "':'-separated dirs whose subdirs clients may load as models",
  },
  // --- KServe v2 ---
  kserve_rest: {
    key: 'kserveRest',
    type: 'bool',
    help: 'KServe v2 HTTP API (/v2) on the REST port (default true)',
  },
  kserve_grpc: {
    key: 'kserveGrpc',
    type: 'bool',
    help: 'KServe v2 gRPC API (inference.GRPCInferenceService) on the gRPC port (default true)',
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
  // --- operations ---
  monitoring_config_file: {
    key: 'monitoringConfigFile',
    type: 'string',
    help: 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" } text file',
  },
  access_log_sampling_rate: {
    key: 'accessLogSamplingRate',
    type: 'float',
    help: 'share of successful requests access-logged, 0..1; failed ones up to --access_log_max_failures_per_second (default 0)',
  },
  otlp_traces_endpoint: {
    key: 'otlpTracesEndpoint',
    type: 'string',
    help: 'OTLP/HTTP traces URL, e.g. http://collector:4318/v1/traces (default: no tracing)',
  },
  trace_sampling_rate: {
    key: 'traceSamplingRate',
    type: 'float',
    help: 'share of requests without a sampled traceparent traced (default 0.01)',
  },
  ssl_config_file: {
    key: 'sslConfigFile',
    type: 'string',
    help: 'TF Serving SSLConfig text file: TLS/mTLS on every listener',
  },
  ssl_config_poll_seconds: {
    key: 'sslConfigPollSeconds',
    type: 'int',
    help: 're-read certificates every N s (default 10; 0: never)',
  },
  rest_api_enable_cors_support: {
    key: 'enableCors',
    type: 'bool',
    help: 'CORS headers and OPTIONS preflight on the HTTP APIs (default false)',
  },
  admin_token_file: {
    key: 'adminTokenFile',
    type: 'string',
    help: 'model management needs "Authorization: Bearer <token>" (default: open)',
  },
  admin_client_names: {
    key: 'adminClientNames',
    type: 'list',
    help: 'comma-separated client certificate names allowed to manage models (mTLS)',
  },
  disable_model_management: {
    key: 'disableModelManagement',
    type: 'bool',
    help: 'refuse reload config and multi-model load/unload (default false)',
  },
  shutdown_readiness_delay_ms: {
    key: 'shutdownReadinessDelayMs',
    type: 'int',
    help: 'on shutdown, /readyz answers 503 this long before listeners stop (default 0)',
  },
  // --- SageMaker endpoint ---
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
  // --- SageMaker deployment ---
  sagemaker_model_dir: {
    key: 'sagemakerModelDir',
    type: 'string',
    help: 'SageMaker model dir / model.tar.gz / s3:// (default /opt/ml/model if present)',
  },
  model_cache_dir: {
    key: 'modelCacheDir',
    type: 'string',
    help: 'cache for s3:// models, unpacked archives, handler installs',
  },
  model_archive_max_bytes: {
    key: 'modelArchiveMaxBytes',
    type: 'int',
    help: 'largest unpacked model.tar.gz (default 16 GiB)',
  },
  sagemaker_install_handler_dependencies: {
    key: 'sagemakerInstallHandlerDependencies',
    type: 'bool',
    help: 'npm-install code/package.json before a handler loads (default true)',
  },
  sagemaker_max_concurrent_transforms: {
    key: 'sagemakerMaxConcurrentTransforms',
    type: 'int',
    help: 'MaxConcurrentTransforms in /execution-parameters (0: 2 x instances)',
  },
  sagemaker_max_payload_mb: {
    key: 'sagemakerMaxPayloadMb',
    type: 'int',
    help: 'MaxPayloadInMB in /execution-parameters (default 6)',
  },
  // --- browser: gRPC-web, OpenAPI, console ---
  enable_grpc_web: {
    key: 'enableGrpcWeb',
    type: 'bool',
    help: 'gRPC-web (PredictionService, ModelService) on the REST port (default true)',
  },
  grpc_web_cors_origins: {
    key: 'grpcWebCorsOrigins',
    type: 'list',
    help: 'comma-separated origins allowed to call gRPC-web cross-origin ("*": any; default none, or any with --rest_api_enable_cors_support)',
  },
  enable_openapi: {
    key: 'enableOpenapi',
    type: 'bool',
    help: 'serve the OpenAPI 3.1 document at /openapi.json and its docs UI at /docs (default true)',
  },
  enable_console: {
    key: 'enableConsole',
    type: 'bool',
    help: 'serve the web console on the REST port (default true)',
  },
  console_path: {
    key: 'consolePath',
    type: 'string',
    help: 'URL path of the web console (default /console)',
  },
};

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function parseValue(flag: string, spec: FlagSpec, raw: string): unknown {
  switch (spec.type) {
    case 'int': {
      if (!/^-?\d+$/.test(raw)) throw new ConfigError(`--${flag} expects an integer, got "${raw}"`);
      return Number(raw);
    }
    case 'float': {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n))
        throw new ConfigError(`--${flag} expects a number, got "${raw}"`);
      return n;
    }
    case 'list':
      return raw
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p !== '');
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
    if (!spec) {
      const near = closestFlag(name);
      throw new ConfigError(
        `unknown flag --${name}${near === undefined ? '' : ` (did you mean --${near}?)`}`,
      );
    }
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

/** Names other servers use for our flags. */
const COMMON_MISSPELLINGS: Readonly<Record<string, string>> = {
  grpc_port: 'port',
  http_port: 'rest_api_port',
  model_path: 'model_base_path',
  model_repository: 'model_config_file',
};

/** The known flag a mistyped one most likely meant: containing it, sharing most words, or a near spelling. */
function closestFlag(name: string): string | undefined {
  const known = COMMON_MISSPELLINGS[name];
  if (known !== undefined) return known;
  const names = Object.keys(FLAGS);
  const containing = names.filter((n) => n.includes(name));
  if (containing.length === 1) return containing[0];
  const words = new Set(name.split('_'));
  let best: string | undefined;
  let bestScore = 0;
  for (const n of names) {
    const theirs = n.split('_');
    const shared = theirs.filter((w) => words.has(w)).length;
    const score = shared / new Set([...words, ...theirs]).size - editDistance(name, n) / 1000;
    if (score > bestScore) {
      best = n;
      bestScore = score;
    }
  }
  if (best !== undefined && bestScore >= 0.5) return best;
  const maxDistance = Math.max(2, Math.floor(name.length / 4));
  return names.find((n) => editDistance(name, n) <= maxDistance);
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}
