import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { LogLevel } from '../util/logger.js';
import { ConfigError } from './config-error.js';
import { parseGrpcChannelArguments } from './grpc-channel-arguments.js';

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
   * Default 1, measured (`visionserve bench --suite sweep`, see batching/README.md): on 2 cores, 2 instances x 1 thread
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
  /**
   * Nice value of the inference and JSON decode threads (`--worker_thread_nice`, Linux; 0
   * leaves them at the event loop's priority). Default 10: when the cores are busy the event
   * loop, which reads requests, refuses excess ones and writes answers, gets the CPU first.
   */
  readonly workerThreadNice: number;
  /**
   * How far, in MiB, the main heap's old generation may grow past what survived the last full
   * garbage collection before the next one (`--gc_headroom_mb`; util/gc-headroom.ts). Default
   * 64: without it V8 ran a full collection every 10-20 requests of 600 KB. 0 leaves V8's policy.
   */
  readonly gcHeadroomMb: number;
  /**
   * After this long with a heap allocating next to nothing, one full garbage collection returns
   * what a burst left, on the main thread and in each JSON decode
   * thread (`--idle_gc_after_ms`; util/idle-collection.ts), and glibc's malloc_trim gives free
   * malloc memory back once (util/malloc-trim.ts). Default 6000: RSS back near idle within
   * seconds of a burst instead of 15-30 s. 0 leaves it to V8 and glibc.
   */
  readonly idleGcAfterMs: number;
  /** gRPC responses in tensor_content (`--enable_serialization_as_tensor_content`). Default false. */
  readonly serializeAsTensorContent: boolean;
  /** REST request timeout in ms (`--rest_api_timeout_in_ms`). Default 30000. */
  readonly restTimeoutMs: number;
  /**
   * Largest accepted REST request body in bytes (`--rest_api_max_body_bytes`). Default 256 MiB
   * (a JSON body must also fit in one V8 string, about 512 MiB; use gRPC for larger tensors).
   */
  readonly restMaxBodyBytes: number;
  /**
   * Threads that read JSON tensor bodies (REST `:predict`, KServe `/infer`, `/invocations`) off
   * the event loop, one body each at a time (`--rest_api_num_threads`; TF Serving's flag sizes
   * its HTTP threads). Default 2 (a big body never holds up the others), started on first use;
   * 0 reads them on the event loop.
   */
  readonly restApiNumThreads: number;
  /** Deepest nesting in a JSON tensor body (`--json_max_depth`); deeper: 400. Default 100. */
  readonly jsonMaxDepth: number;
  /** Most keys in one object of a JSON tensor body (`--json_max_object_keys`); more: 400. Default 1000. */
  readonly jsonMaxObjectKeys: number;
  /** Most JSON values in a JSON tensor body (`--json_max_values`); more: 400. Default 2^26. */
  readonly jsonMaxValues: number;
  /**
   * Failed requests access-logged per second at most, whatever `accessLogSamplingRate` is
   * (`--access_log_max_failures_per_second`). Default 100; 0 logs none.
   */
  readonly accessLogMaxFailuresPerSecond: number;
  /** Allow labels pointing at versions that are not loaded (`--allow_version_labels_for_unavailable_models`). */
  readonly allowVersionLabelsForUnavailableModels: boolean;
  /** Batching (`--enable_batching`, `--batching_parameters_file`); acted on by the batching layer. */
  readonly enableBatching: boolean;
  readonly batchingParametersFile: string | undefined;
  // --- batching, instances and warmup ---
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
  /** Graceful shutdown: how long in-flight requests may finish, in ms (`--shutdown_grace_ms`). Default 10000. */
  readonly shutdownGraceMs: number;
  // --- admission control and connection hygiene ---
  /**
   * Refuse a request (UNAVAILABLE / 503 with Retry-After) when its model version already has
   * more than this much queued work, estimated from recent run times, in ms; 0 disables
   * (`--max_queue_wait_ms`), beyond the burst of `admissionBurstPerInstance`. Requests whose
   * deadline (or request timeout) the queue cannot meet are refused whatever it is. Default 0:
   * requests queue as in TF Serving, up to `maxQueuedRequests` (docs/overload.md).
   */
  readonly maxQueueWaitMs: number;
  /**
   * Runs one model version queues at most, whatever their estimated wait; beyond it requests
   * are refused at their headers (`--max_queued_requests`). Default 128 (docs/overload.md: the
   * memory it holds at 3× capacity).
   */
  readonly maxQueuedRequests: number;
  /**
   * Requests queued per inference instance (and JSON bodies per decode thread) that the wait
   * limits (`maxQueueWaitMs`, `maxJsonDecodeBacklogMs`) never refuse
   * (`--admission_burst_per_instance`). Default 4.
   */
  readonly admissionBurstPerInstance: number;
  /**
   * Longest JSON decode backlog (bodies arrived, not yet decoded) a new body may join, in ms
   * (`--max_json_decode_backlog_ms`); 0 disables. Default 100 (the limit measured before it had
   * a flag of its own, docs/overload.md).
   */
  readonly maxJsonDecodeBacklogMs: number;
  /**
   * Least rate of an HTTP request body in bytes per second, over each 5 s window while it is
   * read (`--min_request_body_bytes_per_s`): slower is answered 408 and closed; 0 disables.
   * Admission counts a body on its way (HTTP or gRPC) as queued work only while it arrives at
   * least this fast. Default 1024 (docs/overload.md).
   */
  readonly minRequestBodyBytesPerS: number;
  /**
   * Request bodies held at once across every listener, in bytes (`--max_inflight_request_bytes`);
   * a request that would pass it is refused before its body is read. Default 512 MiB.
   */
  readonly maxInflightRequestBytes: number;
  /** Requests read or served at once across every listener (`--max_inflight_requests`). Default 4096. */
  readonly maxInflightRequests: number;
  /**
   * Connections per listener (`--max_connections`); at the cap the connection idle the longest
   * (nothing in flight) is closed for a new one. Default 4096.
   */
  readonly maxConnections: number;
  /** Connections per listener from one client address (`--max_connections_per_address`). Default 0: no limit. */
  readonly maxConnectionsPerAddress: number;
  /**
   * Time from accept to a connection's first bytes: TLS handshake plus the first request head
   * (HTTP/1.1) or the HTTP/2 preface and SETTINGS (gRPC), in ms
   * (`--connection_first_bytes_timeout_ms`). Default 10000; 0: none.
   */
  readonly connectionFirstBytesTimeoutMs: number;
  /** Idle HTTP/1.1 keep-alive connections close after this, in ms (`--http_keepalive_timeout_ms`). Default 65000. */
  readonly httpKeepaliveTimeoutMs: number;
  /** Time a client has to send its request headers, in ms (`--http_headers_timeout_ms`). Default 20000. */
  readonly httpHeadersTimeoutMs: number;
  /** Time a client has to send a request body (HTTP) or message (gRPC), in ms (`--request_body_timeout_ms`). Default 60000. */
  readonly requestBodyTimeoutMs: number;
  /** Frame streams open at once, all listeners (`--stream_max_open`). Default 64. */
  readonly streamMaxOpen: number;
  /** Largest encoded frame on a frame stream, bytes (`--stream_max_frame_bytes`). Default 8 MiB. */
  readonly streamMaxFrameBytes: number;
  /** Frames waiting per stream with policy=all before its socket is no longer read (`--stream_queue_frames`). Default 4. */
  readonly streamQueueFrames: number;
  /** Frames of one stream decoded or run at once (`--stream_inflight_frames`). Default 2. */
  readonly streamInflightFrames: number;
  /** Answers of one stream not yet written to its socket before it starts no new frame (`--stream_unsent_answers`). Default 8. */
  readonly streamUnsentAnswers: number;
  /**
   * The HTTP/2 implementation under the gRPC port (`--grpc_transport`,
   * `VISIONSERVE_GRPC_TRANSPORT`): `lean`, the server's own (one socket write per response,
   * DATA frames as large as the client allows), or `node`, node:http2. Default `lean`.
   */
  readonly grpcTransport: 'lean' | 'node';
  /**
   * TF Serving's `--grpc_channel_arguments` entries (`name=value`); the applied ones are in
   * grpc-channel-arguments.ts. Default none.
   */
  readonly grpcChannelArguments: readonly string[];
  /**
   * Start even when a configured base path does not exist or holds no version yet, and keep
   * polling for it (TF Serving's behaviour; `--wait_for_models`). Default false: fail at
   * start-up with a message that names the flag and the expected layout.
   */
  readonly waitForModels: boolean;
  readonly logLevel: LogLevel;
  /**
   * Directories whose subdirectories are models that clients may load by name or URL (KServe
   * repository load; SageMaker multi-model `POST /models` unless --sagemaker_model_roots is
   * given): nothing outside them is loaded, symlinks followed (`--model_roots`). Default:
   * /opt/ml/models, plus the directory of --model_config_file when one is given.
   */
  readonly modelRoots: readonly string[];

  // --- KServe v2 / Open Inference Protocol ---
  /** Serve the KServe v2 HTTP API (`/v2/...`) on the REST port (`--kserve_rest`). Default true. */
  readonly kserveRest: boolean;
  /**
   * Serve the KServe v2 gRPC API (`inference.GRPCInferenceService`) on the gRPC port, beside
   * TF Serving's services (`--kserve_grpc`). Default true.
   */
  readonly kserveGrpc: boolean;
  /** Also serve it on the SageMaker-style port (`--kserve_sagemaker_port`). Default false. */
  readonly kserveSagemakerPort: boolean;
  /**
   * `explicit` lets clients load and unload models through the repository extension
   * (`POST /v2/repository/models/{m}/load|unload`); `none` refuses them (503), as Triton's
   * default does (`--kserve_model_control_mode`). The index is always served. Default `none`.
   */
  readonly kserveModelControlMode: 'none' | 'explicit';

  // --- TensorFlow SavedModels and the response cache ---
  /**
   * Python with tensorflow, tf2onnx and onnx that converts SavedModel versions to ONNX on load
   * (`--saved_model_converter_python`, `VISIONSERVE_CONVERTER_PYTHON`). Default: the environment
   * `visionserve convert --setup` made in the cache directory, when it exists.
   */
  readonly savedModelConverterPython: string | undefined;
  /**
   * Where conversions (and the converter environment) live (`--saved_model_cache_dir`,
   * `VISIONSERVE_CACHE_DIR`). Default: $XDG_CACHE_HOME/visionserve or ~/.cache/visionserve.
   */
  readonly savedModelCacheDir: string | undefined;
  /** One conversion may take this long before it is killed, in s (`--saved_model_conversion_timeout_seconds`). Default 600. */
  readonly savedModelConversionTimeoutSeconds: number;
  /**
   * Bytes of predict responses cached for models whose visionserve.json sets
   * `"responseCache": true` (`--response_cache_bytes`); 0 disables the cache. Default 0.
   */
  readonly responseCacheBytes: number;

  // --- operations: metrics, logs, tracing, TLS, management
  /** TF Serving's MonitoringConfig text file: `prometheus_config { enable: true path: ... }` (`--monitoring_config_file`). Default: no metrics. */
  readonly monitoringConfigFile: string | undefined;
  /** Share of successful requests written to the access log, 0..1; failed requests are always logged (`--access_log_sampling_rate`). Default 0 (off). */
  readonly accessLogSamplingRate: number;
  /** OTLP/HTTP traces endpoint, e.g. http://collector:4318/v1/traces (`--otlp_traces_endpoint`). Default: no tracing. */
  readonly otlpTracesEndpoint: string | undefined;
  /** Share of requests without a sampled `traceparent` that are traced, 0..1 (`--trace_sampling_rate`). Default 0.01. */
  readonly traceSamplingRate: number;
  /** TF Serving's SSLConfig text file: TLS (and mTLS with client_verify) on every listener (`--ssl_config_file`). Default: plaintext. */
  readonly sslConfigFile: string | undefined;
  /** Re-read the SSL config and its certificate files every N seconds; 0 never (`--ssl_config_poll_seconds`). Default 10. */
  readonly sslConfigPollSeconds: number;
  /** CORS on the HTTP APIs, TF Serving's semantics (`--rest_api_enable_cors_support`). Default false. */
  readonly enableCors: boolean;
  /** Model management needs `Authorization: Bearer <token in this file>` (`--admin_token_file`). Default: open. */
  readonly adminTokenFile: string | undefined;
  /** Client certificate names (CN or SAN) allowed to manage models, with client_verify (`--admin_client_names`). Default: none. */
  readonly adminClientNames: readonly string[];
  /** Refuse every model management call (`--disable_model_management`). Default false. */
  readonly disableModelManagement: boolean;
  /** On shutdown, answer /readyz 503 for this long before the listeners stop, in ms (`--shutdown_readiness_delay_ms`). Default 0. */
  readonly shutdownReadinessDelayMs: number;

  // --- browser: gRPC-web, OpenAPI, console ---
  /** gRPC-web for PredictionService and ModelService on the REST port (`--enable_grpc_web`). Default true. */
  readonly enableGrpcWeb: boolean;
  /**
   * Origins allowed to call gRPC-web cross-origin; "*" any (`--grpc_web_cors_origins`).
   * Default: none, or any with `--rest_api_enable_cors_support`.
   */
  readonly grpcWebCorsOrigins: readonly string[];
  /** The OpenAPI 3.1 document at /openapi.json and its docs UI at /docs (`--enable_openapi`). Default true. */
  readonly enableOpenapi: boolean;
  /** The web console on the REST port (`--enable_console`). Default true. */
  readonly enableConsole: boolean;
  /** URL path of the web console, e.g. "/console" (`--console_path`). Default "/console". */
  readonly consolePath: string;

  // --- SageMaker endpoint ---
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

  // --- SageMaker deployment: model archives, handler dependencies, batch transform, S3 ---
  /**
   * A SageMaker model directory (`--sagemaker_model_dir`): version directories at its top
   * (one model, named by --model_name) or several models (`<name>/<version>/model.onnx`),
   * plus `code/`; also a `model.tar.gz` or an `s3://` location of either. Every model found
   * is served. `visionserve serve` uses /opt/ml/model when no model is given and it exists.
   */
  readonly sagemakerModelDir: string | undefined;
  /** Where `s3://` model copies, unpacked archives and installed handler code go (`--model_cache_dir`). Default `<tmp>/visionserve-cache`. */
  readonly modelCacheDir: string;
  /** Largest unpacked model archive, in bytes (`--model_archive_max_bytes`). Default 16 GiB. */
  readonly modelArchiveMaxBytes: number;
  /** Install `code/package.json` dependencies before a handler loads (`--sagemaker_install_handler_dependencies`). Default true. */
  readonly sagemakerInstallHandlerDependencies: boolean;
  /**
   * `MaxConcurrentTransforms` of `GET /execution-parameters` (`SAGEMAKER_MAX_CONCURRENT_TRANSFORMS`);
   * 0: twice --model_instances (keeps every instance busy while answers travel). Default 0.
   */
  readonly sagemakerMaxConcurrentTransforms: number;
  /** `MaxPayloadInMB` of `GET /execution-parameters` (`SAGEMAKER_MAX_PAYLOAD_IN_MB`). Default 6 (SageMaker's). */
  readonly sagemakerMaxPayloadMb: number;

  // --- TF Serving start-up and main.cc flags ---
  /**
   * Open the listeners before the initial models load (`--open_ports_before_models_load`):
   * /healthz, metrics and SageMaker /ping answer during a long load, /readyz answers 503
   * until it settled, and requests for a configured model still loading get NOT_FOUND.
   * Default false: TF Serving's order, ports open once the initial models are in.
   */
  readonly openPortsBeforeModelsLoad: boolean;
  /**
   * Also serve the gRPC APIs (TF Serving and KServe) on this Unix domain socket, beside the
   * TCP port (`--grpc_socket_path`, TF Serving's; relative paths are relative to the working
   * directory). A stale socket file there is replaced. Default none.
   */
  readonly grpcSocketPath: string | undefined;
  /** Retries of a failed version load before giving up (`--max_num_load_retries`). Default 5 (TF Serving's). */
  readonly maxNumLoadRetries: number;
  /** Wait between load retries, µs; negative: no wait (`--load_retry_interval_micros`). Default 60 s (TF Serving's). */
  readonly loadRetryIntervalMicros: number;
  /** TF Serving flags given that mean nothing here (`name=value`): warned about once at start, ignored. */
  readonly ignoredFlags: readonly string[];
}

/** Batching fields that the SageMaker container sets from its environment. */
export interface SageMakerBatchingParameters {
  readonly maxBatchSize: number;
  readonly batchTimeoutMicros: number;
  readonly numBatchThreads: number;
  readonly maxEnqueuedBatches: number;
}

/** Every default in one place (instances and intra-op threads depend on the machine; see resolveServerConfig). */
export const DEFAULTS = {
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
  workerThreadNice: 10,
  gcHeadroomMb: 64,
  idleGcAfterMs: 6000,
  serializeAsTensorContent: false,
  restTimeoutMs: 30_000,
  restMaxBodyBytes: 256 * 1024 * 1024,
  restApiNumThreads: 2,
  jsonMaxDepth: 100,
  jsonMaxObjectKeys: 1000,
  jsonMaxValues: 2 ** 26,
  accessLogMaxFailuresPerSecond: 100,
  allowVersionLabelsForUnavailableModels: false,
  enableBatching: false,
  batchingParametersFile: undefined,
  enablePerModelBatchingParameters: false,
  batchingEnvParameters: undefined,
  enableModelWarmup: true,
  numRequestIterationsForWarmup: 1,
  shutdownGraceMs: 10_000,
  logLevel: 'info',
  maxQueueWaitMs: 0,
  maxQueuedRequests: 128,
  admissionBurstPerInstance: 4,
  maxJsonDecodeBacklogMs: 100,
  minRequestBodyBytesPerS: 1024,
  maxInflightRequestBytes: 512 * 1024 * 1024,
  maxInflightRequests: 4096,
  maxConnections: 4096,
  maxConnectionsPerAddress: 0,
  connectionFirstBytesTimeoutMs: 10_000,
  httpKeepaliveTimeoutMs: 65_000,
  httpHeadersTimeoutMs: 20_000,
  requestBodyTimeoutMs: 60_000,
  streamMaxOpen: 64,
  streamMaxFrameBytes: 8 * 1024 * 1024,
  streamQueueFrames: 4,
  streamInflightFrames: 2,
  streamUnsentAnswers: 8,
  grpcTransport: 'lean',
  grpcChannelArguments: [],
  waitForModels: false,
  savedModelConverterPython: undefined,
  savedModelCacheDir: undefined,
  savedModelConversionTimeoutSeconds: 600,
  responseCacheBytes: 0,
  kserveRest: true,
  kserveGrpc: true,
  kserveSagemakerPort: false,
  kserveModelControlMode: 'none',
  monitoringConfigFile: undefined,
  accessLogSamplingRate: 0,
  otlpTracesEndpoint: undefined,
  traceSamplingRate: 0.01,
  sslConfigFile: undefined,
  sslConfigPollSeconds: 10,
  enableCors: false,
  adminTokenFile: undefined,
  adminClientNames: [],
  disableModelManagement: false,
  shutdownReadinessDelayMs: 0,
  enableGrpcWeb: true,
  grpcWebCorsOrigins: [],
  enableOpenapi: true,
  enableConsole: true,
  consolePath: '/console',
  sagemakerDefaultModelName: undefined,
  sagemakerMultiModel: false,
  sagemakerMaxModels: 0,
  sagemakerMemoryLimitBytes: 0,
  sagemakerMaxBodyBytes: 100 * 1024 * 1024,
  sagemakerRequestTimeoutMs: 60_000,
  sagemakerHandlerWorkers: 2,
  sagemakerModelLoadTimeoutMs: 300_000,
  sagemakerModelDir: undefined,
  modelArchiveMaxBytes: 16 * 1024 ** 3,
  sagemakerInstallHandlerDependencies: true,
  sagemakerMaxConcurrentTransforms: 0,
  sagemakerMaxPayloadMb: 6,
  openPortsBeforeModelsLoad: false,
  grpcSocketPath: undefined,
  maxNumLoadRetries: 5,
  loadRetryIntervalMicros: 60_000_000,
  ignoredFlags: [],
} as const satisfies Omit<
  ServerConfig,
  'intraOpThreads' | 'instances' | 'modelRoots' | 'sagemakerModelRoots' | 'modelCacheDir'
>;

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
    ...DEFAULTS,
    ...merged,
    modelRoots,
    sagemakerModelRoots: merged.sagemakerModelRoots?.map((p) => resolve(p)) ?? modelRoots,
    modelCacheDir: resolve(merged.modelCacheDir ?? join(tmpdir(), 'visionserve-cache')),
    intraOpThreads: intra,
    instances:
      merged.instances && merged.instances > 0 ? merged.instances : Math.max(1, Math.floor(cores / intra)),
  };
  if (
    [config.modelBasePath, config.modelConfigFile, config.sagemakerModelDir].filter((v) => v !== undefined)
      .length > 1
  ) {
    throw new ConfigError(
      'only one of --model_base_path, --model_config_file and --sagemaker_model_dir can be set',
    );
  }
  for (const [key, value] of [
    ['port', config.grpcPort],
    ['rest_api_port', config.restPort],
    ['sagemaker_port', config.sagemakerPort],
  ] as const) {
    if (value < -1 || value > 65535) throw new ConfigError(`--${key} must be a port number, got ${value}`);
  }
  if (config.grpcSocketPath !== undefined && config.grpcPort < 0) {
    throw new ConfigError('--grpc_socket_path serves beside the gRPC port: it needs --port >= 0');
  }
  if (config.restPort > 0 && config.restPort === config.grpcPort) {
    throw new ConfigError('--rest_api_port must differ from --port');
  }
  if (!['lean', 'node'].includes(config.grpcTransport)) {
    throw new ConfigError(`--grpc_transport must be lean or node, got "${config.grpcTransport}"`);
  }
  parseGrpcChannelArguments(config.grpcChannelArguments); // throws on a malformed entry
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
    ['sagemaker_max_concurrent_transforms', config.sagemakerMaxConcurrentTransforms],
  ] as const) {
    if (value < 0) throw new ConfigError(`--${key} must be >= 0, got ${value}`);
  }
  for (const [key, value] of [
    ['access_log_sampling_rate', config.accessLogSamplingRate],
    ['trace_sampling_rate', config.traceSamplingRate],
  ] as const) {
    if (!(value >= 0 && value <= 1)) throw new ConfigError(`--${key} must be between 0 and 1, got ${value}`);
  }
  if (config.otlpTracesEndpoint !== undefined && !/^https?:\/\//.test(config.otlpTracesEndpoint)) {
    throw new ConfigError(
      `--otlp_traces_endpoint must be an http(s) URL, got "${config.otlpTracesEndpoint}"`,
    );
  }
  for (const [key, value] of [
    ['max_queue_wait_ms', config.maxQueueWaitMs],
    ['admission_burst_per_instance', config.admissionBurstPerInstance],
    ['max_json_decode_backlog_ms', config.maxJsonDecodeBacklogMs],
    ['min_request_body_bytes_per_s', config.minRequestBodyBytesPerS],
    ['rest_api_num_threads', config.restApiNumThreads],
    ['access_log_max_failures_per_second', config.accessLogMaxFailuresPerSecond],
    ['worker_thread_nice', config.workerThreadNice],
    ['gc_headroom_mb', config.gcHeadroomMb],
    ['idle_gc_after_ms', config.idleGcAfterMs],
    ['response_cache_bytes', config.responseCacheBytes],
    ['ssl_config_poll_seconds', config.sslConfigPollSeconds],
    ['shutdown_readiness_delay_ms', config.shutdownReadinessDelayMs],
    ['max_connections_per_address', config.maxConnectionsPerAddress],
    ['connection_first_bytes_timeout_ms', config.connectionFirstBytesTimeoutMs],
  ] as const) {
    if (value < 0) throw new ConfigError(`--${key} must be >= 0, got ${value}`);
  }
  if (config.workerThreadNice > 19) {
    throw new ConfigError(`--worker_thread_nice must be between 0 and 19, got ${config.workerThreadNice}`);
  }
  for (const [key, value] of [
    ['max_queued_requests', config.maxQueuedRequests],
    ['json_max_depth', config.jsonMaxDepth],
    ['json_max_object_keys', config.jsonMaxObjectKeys],
    ['json_max_values', config.jsonMaxValues],
    ['max_inflight_request_bytes', config.maxInflightRequestBytes],
    ['max_inflight_requests', config.maxInflightRequests],
    ['max_connections', config.maxConnections],
    ['http_keepalive_timeout_ms', config.httpKeepaliveTimeoutMs],
    ['http_headers_timeout_ms', config.httpHeadersTimeoutMs],
    ['request_body_timeout_ms', config.requestBodyTimeoutMs],
    ['sagemaker_max_body_bytes', config.sagemakerMaxBodyBytes],
    ['sagemaker_handler_workers', config.sagemakerHandlerWorkers],
    ['sagemaker_model_load_timeout_ms', config.sagemakerModelLoadTimeoutMs],
    ['sagemaker_max_payload_mb', config.sagemakerMaxPayloadMb],
    ['model_archive_max_bytes', config.modelArchiveMaxBytes],
    ['saved_model_conversion_timeout_seconds', config.savedModelConversionTimeoutSeconds],
    ['stream_max_open', config.streamMaxOpen],
    ['stream_max_frame_bytes', config.streamMaxFrameBytes],
    ['stream_queue_frames', config.streamQueueFrames],
    ['stream_inflight_frames', config.streamInflightFrames],
    ['stream_unsent_answers', config.streamUnsentAnswers],
  ] as const) {
    if (value < 1) throw new ConfigError(`--${key} must be >= 1, got ${value}`);
  }
  if (!/^\/[A-Za-z0-9._~-]+(?:\/[A-Za-z0-9._~-]+)*$/.test(config.consolePath)) {
    throw new ConfigError(
      `--console_path must be an absolute URL path such as /console (letters, digits, . _ ~ -), got "${config.consolePath}"`,
    );
  }
  return Object.freeze(config);
}
