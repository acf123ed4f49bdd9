import { delimiter } from 'node:path';
import { ConfigError } from './config-error.js';
import type { ServerConfig } from './server-config.js';

export interface FlagSpec {
  readonly key: keyof ServerConfig;
  readonly type: 'int' | 'float' | 'bool' | 'string' | 'loglevel' | 'paths' | 'list';
  readonly help: string;
  /** The default where it is not one value of DEFAULTS (it depends on the machine or other flags). */
  readonly defaultText?: string;
  /** The environment variable that sets it too (flags win), as the SageMaker container names it. */
  readonly env?: string;
}

/** Command-line flags, TF Serving spelling. */
export const FLAGS: Readonly<Record<string, FlagSpec>> = {
  port: { key: 'grpcPort', type: 'int', help: 'gRPC port' },
  rest_api_port: { key: 'restPort', type: 'int', help: 'REST port (-1 disables)' },
  sagemaker_port: {
    key: 'sagemakerPort',
    env: 'SAGEMAKER_BIND_TO_PORT',
    type: 'int',
    help: 'SageMaker-style endpoint port (-1 disables)',
  },
  host: { key: 'host', type: 'string', help: 'bind address' },
  model_name: {
    key: 'modelName',
    type: 'string',
    help: 'model name in single-model mode',
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
    help: 'scan for new/removed versions every N s (0: never)',
  },
  tensorflow_intra_op_parallelism: {
    key: 'intraOpThreads',
    defaultText: '1',
    env: 'SAGEMAKER_TFS_INTRA_OP_PARALLELISM',
    type: 'int',
    help: 'onnxruntime intra-op threads (0: 1)',
  },
  tensorflow_inter_op_parallelism: {
    key: 'interOpThreads',
    env: 'SAGEMAKER_TFS_INTER_OP_PARALLELISM',
    type: 'int',
    help: 'onnxruntime inter-op threads (0: 1)',
  },
  model_instances: {
    key: 'instances',
    defaultText: 'cores / intra-op threads',
    env: 'SAGEMAKER_TFS_INSTANCE_COUNT',
    type: 'int',
    help: 'worker instances per model version',
  },
  ort_allow_spinning: {
    key: 'allowSpinning',
    type: 'bool',
    help: 'let onnxruntime threads spin',
  },
  worker_thread_nice: {
    key: 'workerThreadNice',
    type: 'int',
    help: 'nice value of inference and JSON decode threads, so the event loop gets the CPU first (Linux; 0: off)',
  },
  gc_headroom_mb: {
    key: 'gcHeadroomMb',
    type: 'int',
    help: 'old-generation growth allowed past the live heap before a full GC, in MiB (0: V8 default)',
  },
  idle_gc_after_ms: {
    key: 'idleGcAfterMs',
    type: 'int',
    help: 'after this long with a JS heap quiet (main thread, JSON decode threads), one full GC and one glibc malloc_trim give a burst back (0: off)',
  },
  enable_serialization_as_tensor_content: {
    key: 'serializeAsTensorContent',
    type: 'bool',
    help: 'gRPC outputs as tensor_content',
  },
  rest_api_timeout_in_ms: { key: 'restTimeoutMs', type: 'int', help: 'REST request timeout' },
  rest_api_max_body_bytes: {
    key: 'restMaxBodyBytes',
    type: 'int',
    help: 'largest REST body',
  },
  rest_api_num_threads: {
    key: 'restApiNumThreads',
    type: 'int',
    help: 'threads reading JSON tensor bodies off the event loop, one body each at a time (0: on the event loop)',
  },
  json_max_depth: {
    key: 'jsonMaxDepth',
    type: 'int',
    help: 'deepest nesting of lists and objects in a JSON tensor body (REST, KServe, /invocations); deeper: 400',
  },
  json_max_object_keys: {
    key: 'jsonMaxObjectKeys',
    type: 'int',
    help: 'most keys in one object of a JSON tensor body; more: 400',
  },
  json_max_values: {
    key: 'jsonMaxValues',
    type: 'int',
    help: 'most JSON values (numbers, strings, lists, objects) in a JSON tensor body; more: 400',
  },
  access_log_max_failures_per_second: {
    key: 'accessLogMaxFailuresPerSecond',
    type: 'int',
    help: 'failed requests access-logged per second at most, at any sampling rate; the rest counted in one line (0: none)',
  },
  allow_version_labels_for_unavailable_models: {
    key: 'allowVersionLabelsForUnavailableModels',
    type: 'bool',
    help: 'labels may name versions not loaded yet',
  },
  enable_batching: {
    key: 'enableBatching',
    env: 'SAGEMAKER_TFS_ENABLE_BATCHING',
    type: 'bool',
    help: 'server-side batching',
  },
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
    help: 'warm up versions before they are AVAILABLE',
  },
  num_request_iterations_for_warmup: {
    key: 'numRequestIterationsForWarmup',
    type: 'int',
    help: 'replays of each warmup record',
  },
  shutdown_grace_ms: {
    key: 'shutdownGraceMs',
    type: 'int',
    help: 'graceful shutdown budget',
  },
  log_level: { key: 'logLevel', type: 'loglevel', help: 'debug|info|warn|error|silent' },
  // --- admission control and connection hygiene ---
  max_queue_wait_ms: {
    key: 'maxQueueWaitMs',
    type: 'int',
    help: 'refuse requests facing more queued work than this, per model, in ms (0: off; requests queue until their deadline or the queue bound)',
  },
  max_queued_requests: {
    key: 'maxQueuedRequests',
    type: 'int',
    help: 'runs a model version queues at most; more are refused at the headers',
  },
  admission_burst_per_instance: {
    key: 'admissionBurstPerInstance',
    type: 'int',
    help: 'requests queued per inference instance or JSON decode thread that the wait limits never refuse',
  },
  max_json_decode_backlog_ms: {
    key: 'maxJsonDecodeBacklogMs',
    type: 'int',
    help: 'refuse JSON bodies facing more decode work than this, in ms (0: off)',
  },
  min_request_body_bytes_per_s: {
    key: 'minRequestBodyBytesPerS',
    type: 'int',
    help: 'least rate of a request body: slower HTTP bodies (per 5 s window) get 408 and a close, and bodies count as queued work only while at least this fast (0: off)',
  },
  max_inflight_request_bytes: {
    key: 'maxInflightRequestBytes',
    type: 'int',
    help: 'request bodies held at once, all listeners',
  },
  max_inflight_requests: {
    key: 'maxInflightRequests',
    type: 'int',
    help: 'requests read or served at once, all listeners',
  },
  max_connections: {
    key: 'maxConnections',
    type: 'int',
    help: 'connections per listener; at the cap the longest-idle one is closed for a new one',
  },
  max_connections_per_address: {
    key: 'maxConnectionsPerAddress',
    type: 'int',
    help: 'connections per listener from one client address (0: no limit)',
  },
  connection_first_bytes_timeout_ms: {
    key: 'connectionFirstBytesTimeoutMs',
    type: 'int',
    help: 'time from accept to a TLS handshake plus first request head or HTTP/2 preface (0: none)',
  },
  http_keepalive_timeout_ms: {
    key: 'httpKeepaliveTimeoutMs',
    type: 'int',
    help: 'idle HTTP/1.1 keep-alive connections are closed after this',
  },
  http_headers_timeout_ms: {
    key: 'httpHeadersTimeoutMs',
    type: 'int',
    help: 'time to send HTTP request headers',
  },
  request_body_timeout_ms: {
    key: 'requestBodyTimeoutMs',
    type: 'int',
    help: 'time to send a request body / gRPC message',
  },
  stream_max_open: {
    key: 'streamMaxOpen',
    type: 'int',
    help: 'frame streams (WebSocket and gRPC) open at once, all listeners',
  },
  stream_max_frame_bytes: {
    key: 'streamMaxFrameBytes',
    type: 'int',
    help: 'largest encoded frame or raw tensor on a frame stream; a larger one ends it (1009, RESOURCE_EXHAUSTED)',
  },
  stream_queue_frames: {
    key: 'streamQueueFrames',
    type: 'int',
    help: 'frames waiting per stream with policy=all before the server stops reading it',
  },
  stream_inflight_frames: {
    key: 'streamInflightFrames',
    type: 'int',
    help: 'frames of one stream decoded or run at once',
  },
  stream_unsent_answers: {
    key: 'streamUnsentAnswers',
    type: 'int',
    help: 'answers of one stream not yet written to its socket before it starts no new frame',
  },
  grpc_channel_arguments: {
    key: 'grpcChannelArguments',
    type: 'list',
    help: 'comma-separated gRPC server arguments, TF Serving style: grpc.max_connection_age_ms, grpc.max_connection_age_grace_ms, grpc.max_connection_idle_ms, grpc.keepalive_time_ms, grpc.keepalive_timeout_ms, grpc.max_concurrent_streams, grpc.max_receive_message_length (others are ignored with a warning)',
  },
  grpc_transport: {
    key: 'grpcTransport',
    env: 'VISIONSERVE_GRPC_TRANSPORT',
    type: 'string',
    help: 'lean|node: HTTP/2 under the gRPC port, our own or node:http2',
  },
  wait_for_models: {
    key: 'waitForModels',
    type: 'bool',
    help: 'start even if a base path is missing or empty, and poll for it',
  },
  // --- TensorFlow SavedModels and the response cache ---
  saved_model_converter_python: {
    key: 'savedModelConverterPython',
    defaultText: 'the Python that `visionserve convert --setup` made',
    env: 'VISIONSERVE_CONVERTER_PYTHON',
    type: 'string',
    help: 'Python with tensorflow + tf2onnx for SavedModels',
  },
  saved_model_cache_dir: {
    key: 'savedModelCacheDir',
    defaultText: '~/.cache/visionserve',
    env: 'VISIONSERVE_CACHE_DIR',
    type: 'string',
    help: 'SavedModel conversion cache',
  },
  saved_model_conversion_timeout_seconds: {
    key: 'savedModelConversionTimeoutSeconds',
    type: 'int',
    help: 'longest SavedModel conversion',
  },
  response_cache_bytes: {
    key: 'responseCacheBytes',
    type: 'int',
    help: 'response cache size for models with "responseCache": true in visionserve.json',
  },
  model_roots: {
    key: 'modelRoots',
    defaultText: '/opt/ml/models and the config file’s directory',
    type: 'paths',
    help: "':'-separated dirs whose subdirs clients may load as models",
  },
  // --- KServe v2 ---
  kserve_rest: {
    key: 'kserveRest',
    type: 'bool',
    help: 'KServe v2 HTTP API (/v2) on the REST port',
  },
  kserve_grpc: {
    key: 'kserveGrpc',
    type: 'bool',
    help: 'KServe v2 gRPC API (inference.GRPCInferenceService) on the gRPC port',
  },
  kserve_sagemaker_port: {
    key: 'kserveSagemakerPort',
    type: 'bool',
    help: 'KServe v2 HTTP API on the SageMaker port too',
  },
  kserve_model_control_mode: {
    key: 'kserveModelControlMode',
    type: 'string',
    help: 'none|explicit: KServe repository load/unload',
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
    help: 'share of successful requests access-logged, 0..1; failed ones up to --access_log_max_failures_per_second',
  },
  otlp_traces_endpoint: {
    key: 'otlpTracesEndpoint',
    defaultText: 'none: no tracing',
    type: 'string',
    help: 'OTLP/HTTP traces URL, e.g. http://collector:4318/v1/traces',
  },
  trace_sampling_rate: {
    key: 'traceSamplingRate',
    type: 'float',
    help: 'share of requests without a sampled traceparent traced',
  },
  ssl_config_file: {
    key: 'sslConfigFile',
    type: 'string',
    help: 'TF Serving SSLConfig text file: TLS/mTLS on every listener',
  },
  ssl_config_poll_seconds: {
    key: 'sslConfigPollSeconds',
    type: 'int',
    help: 're-read certificates every N s (0: never)',
  },
  rest_api_enable_cors_support: {
    key: 'enableCors',
    type: 'bool',
    help: 'CORS headers and OPTIONS preflight on the HTTP APIs',
  },
  admin_token_file: {
    key: 'adminTokenFile',
    defaultText: 'none: management is open',
    type: 'string',
    help: 'model management needs "Authorization: Bearer <token>"',
  },
  admin_client_names: {
    key: 'adminClientNames',
    type: 'list',
    help: 'comma-separated client certificate names allowed to manage models (mTLS)',
  },
  disable_model_management: {
    key: 'disableModelManagement',
    type: 'bool',
    help: 'refuse reload config and multi-model load/unload',
  },
  shutdown_readiness_delay_ms: {
    key: 'shutdownReadinessDelayMs',
    type: 'int',
    help: 'on shutdown, /readyz answers 503 this long before listeners stop',
  },
  // --- SageMaker endpoint ---
  sagemaker_default_model_name: {
    key: 'sagemakerDefaultModelName',
    env: 'SAGEMAKER_TFS_DEFAULT_MODEL_NAME',
    type: 'string',
    help: 'model used by /invocations without tfs-model-name',
  },
  sagemaker_multi_model: {
    key: 'sagemakerMultiModel',
    env: 'SAGEMAKER_MULTI_MODEL',
    type: 'bool',
    help: 'multi-model API on the SageMaker port',
  },
  sagemaker_model_roots: {
    key: 'sagemakerModelRoots',
    defaultText: '--model_roots',
    type: 'paths',
    help: "':'-separated dirs POST /models urls must lie in",
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
    help: 'largest /invocations body',
  },
  sagemaker_request_timeout_ms: {
    key: 'sagemakerRequestTimeoutMs',
    env: 'SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS',
    type: 'int',
    help: '/invocations deadline (0: none)',
  },
  sagemaker_handler_workers: {
    key: 'sagemakerHandlerWorkers',
    env: 'SAGEMAKER_GUNICORN_WORKERS',
    type: 'int',
    help: 'worker threads for code/inference.js',
  },
  sagemaker_model_load_timeout_ms: {
    key: 'sagemakerModelLoadTimeoutMs',
    env: 'SAGEMAKER_TFS_WAIT_TIME_SECONDS',
    type: 'int',
    help: 'POST /models load timeout',
  },
  // --- SageMaker deployment ---
  sagemaker_model_dir: {
    key: 'sagemakerModelDir',
    defaultText: '/opt/ml/model if it holds anything',
    type: 'string',
    help: 'SageMaker model dir / model.tar.gz / s3://',
  },
  model_cache_dir: {
    key: 'modelCacheDir',
    defaultText: '$TMPDIR/visionserve-cache',
    type: 'string',
    help: 'cache for s3:// models, unpacked archives, handler installs',
  },
  model_archive_max_bytes: {
    key: 'modelArchiveMaxBytes',
    type: 'int',
    help: 'largest unpacked model.tar.gz',
  },
  sagemaker_install_handler_dependencies: {
    key: 'sagemakerInstallHandlerDependencies',
    type: 'bool',
    help: 'npm-install code/package.json before a handler loads',
  },
  sagemaker_max_concurrent_transforms: {
    key: 'sagemakerMaxConcurrentTransforms',
    defaultText: '2 × instances',
    env: 'SAGEMAKER_MAX_CONCURRENT_TRANSFORMS',
    type: 'int',
    help: 'MaxConcurrentTransforms in /execution-parameters (0: 2 x instances)',
  },
  sagemaker_max_payload_mb: {
    key: 'sagemakerMaxPayloadMb',
    env: 'SAGEMAKER_MAX_PAYLOAD_IN_MB',
    type: 'int',
    help: 'MaxPayloadInMB in /execution-parameters',
  },
  // --- browser: gRPC-web, OpenAPI, console ---
  enable_grpc_web: {
    key: 'enableGrpcWeb',
    type: 'bool',
    help: 'gRPC-web (PredictionService, ModelService) on the REST port',
  },
  grpc_web_cors_origins: {
    key: 'grpcWebCorsOrigins',
    defaultText: 'none, or any with --rest_api_enable_cors_support',
    type: 'list',
    help: 'comma-separated origins allowed to call gRPC-web cross-origin ("*": any)',
  },
  enable_openapi: {
    key: 'enableOpenapi',
    type: 'bool',
    help: 'serve the OpenAPI 3.1 document at /openapi.json and its docs UI at /docs',
  },
  enable_console: {
    key: 'enableConsole',
    type: 'bool',
    help: 'serve the web console on the REST port',
  },
  console_path: {
    key: 'consolePath',
    type: 'string',
    help: 'URL path of the web console',
  },
  // --- TF Serving start-up and main.cc flags ---
  open_ports_before_models_load: {
    key: 'openPortsBeforeModelsLoad',
    type: 'bool',
    help: 'open the ports before the initial models load: /healthz, metrics and /ping answer during the load, /readyz 503 until it is done, model requests NOT_FOUND meanwhile (false: ports open once the models are in, as TF Serving)',
  },
  grpc_socket_path: {
    key: 'grpcSocketPath',
    type: 'string',
    help: 'also serve the gRPC APIs on this Unix domain socket, beside --port',
  },
  max_num_load_retries: {
    key: 'maxNumLoadRetries',
    type: 'int',
    help: 'retries of a failed version load before giving up',
  },
  load_retry_interval_micros: {
    key: 'loadRetryIntervalMicros',
    type: 'int',
    help: 'wait between load retries in microseconds, negative: none',
  },
};

/**
 * TF Serving's main.cc flags that have no meaning here, with why: accepted (so that a
 * `tensorflow_model_server` command line works unchanged), warned about once, ignored.
 * `bool` ones may be given bare (`--enable_profiler`).
 */
export const IGNORED_TF_SERVING_FLAGS: Readonly<Record<string, { bool: boolean; why: string }>> = {
  num_load_threads: { bool: false, why: 'versions load concurrently, each in its own inference workers' },
  num_unload_threads: { bool: false, why: 'unloads run concurrently' },
  flush_filesystem_caches: { bool: true, why: 'no TensorFlow filesystem caches here' },
  tensorflow_session_parallelism: {
    bool: false,
    why: 'use --tensorflow_intra_op_parallelism and --tensorflow_inter_op_parallelism',
  },
  tensorflow_session_config_file: { bool: false, why: 'no TensorFlow session: models run in onnxruntime' },
  use_alts_credentials: { bool: true, why: 'Google ALTS is not supported; use --ssl_config_file' },
  platform_config_file: {
    bool: false,
    why: 'the platform is chosen per version directory (ONNX or SavedModel)',
  },
  per_process_gpu_memory_fraction: { bool: false, why: 'CPU inference' },
  saved_model_tags: { bool: false, why: 'SavedModels are converted from their "serve" MetaGraph' },
  grpc_max_threads: {
    bool: false,
    why: 'gRPC runs on the event loop; inference on --model_instances workers',
  },
  remove_unused_fields_from_bundle_metagraph: { bool: true, why: 'no MetaGraph is kept in memory' },
  prefer_tflite_model: { bool: true, why: 'TensorFlow Lite models are not served' },
  num_tflite_pools: { bool: false, why: 'TensorFlow Lite models are not served' },
  num_tflite_interpreters_per_pool: { bool: false, why: 'TensorFlow Lite models are not served' },
  enable_signature_method_name_check: {
    bool: true,
    why: 'Classify and Regress always check what the signature offers, as TF Serving does without it',
  },
  xla_cpu_compilation_enabled: { bool: true, why: 'no XLA: models run in onnxruntime' },
  xla_gpu_compilation_enabled: { bool: true, why: 'no XLA: models run in onnxruntime' },
  enable_profiler: { bool: true, why: 'no TensorFlow profiler service; see --otlp_traces_endpoint' },
  thread_pool_factory_config_file: { bool: false, why: 'no TensorFlow thread pools' },
  mixed_precision: { bool: false, why: 'models run at the precision they were exported in' },
  skip_initialize_tpu: { bool: true, why: 'no TPU' },
  enable_grpc_healthcheck_service: { bool: true, why: 'health is served over HTTP (/healthz, /readyz)' },
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
    const ignored = IGNORED_TF_SERVING_FLAGS[name];
    if (ignored !== undefined) {
      const bare = eq < 0 && (ignored.bool || argv[i + 1] === undefined || argv[i + 1]!.startsWith('--'));
      const value = eq >= 0 ? arg.slice(eq + 1) : bare ? 'true' : argv[++i]!;
      out.ignoredFlags = [...(out.ignoredFlags ?? []), `${name}=${value}`];
      continue;
    }
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
