/**
 * Composition root: the only module that wires layers together (runtime ->
 * core -> frontends). Nothing here is a global; every component gets its
 * dependencies passed in.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { Code, ServingError } from '@visionserve/protocol';
import { textFormatSource } from '@visionserve/protocol/pbtxt';
import { createServer as createNetServer } from 'node:net';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { createBatchScheduler } from './batching/batch-scheduler.js';
import {
  type BatchingParameters,
  defaultBatchingParameters,
  resolveBatchingParameters,
} from './batching/batching-parameters.js';
import { createBatchingSessionFactory } from './batching/batching-session-factory.js';
import { type BatchingStats, createBatchingStats } from './batching/batching-stats.js';
import { APPLIED_GRPC_ARGUMENTS, parseGrpcChannelArguments } from './config/grpc-channel-arguments.js';
import { IGNORED_TF_SERVING_FLAGS } from './config/flags.js';
import { DEFAULTS, type ServerConfig } from './config/server-config.js';
import type { ModelConfig } from './core/model-config.js';
import { DEFAULT_VERSION_POLICY } from './core/model-config.js';
import { createModelManager } from './core/model-manager.js';
import type { ModelManager } from './core/model-manager.js';
import { type InputAdapter, createInferenceService } from './core/create-inference-service.js';
import type { InferenceService } from './core/inference-service.js';
import type { ModelSource, SessionFactory } from './core/session.js';
import type { HttpApi } from './frontends/http/http-api.js';
import { createHttpEdge } from './frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from './frontends/http/start-http-server.js';
import { createTfsRestApi } from './frontends/tfs-rest/index.js';
import { type RunningGrpcServer, startGrpcServer } from './frontends/grpc/index.js';
import { createTfsGrpcServices } from './frontends/tfs-grpc/index.js';
import { createGrpcWebApi } from './frontends/grpc-web/grpc-web-api.js';
import { type VersionTimes, createConsoleApi } from './frontends/console/console-api.js';
import { openApiDocument } from './frontends/console/openapi-document.js';
import { createTrafficSampler } from './observability/traffic-sampler.js';
import {
  type ExecutionParameters,
  type InvocationCall,
  type InvocationRequest,
  type InvocationResponse,
  type SageMakerInvoker,
  createSageMakerApi,
  createSageMakerInvoker,
} from './frontends/sagemaker/index.js';
import {
  createKServeGrpcService,
  createKServeHttpApi,
  createKServeService,
} from './frontends/kserve/index.js';
import { type InferenceStatistics, createInferenceStatistics } from './core/inference-statistics.js';
import type { HandlerHost } from './contracts/handler-host.js';
import type { ServableAssets } from './contracts/servable-assets.js';
import { checkVersionConfined, resolveModelLocation } from './repository/confined-path.js';
import { findModelDirectory, listModelDirectories } from './repository/model-roots.js';
import { readModelAssets } from './repository/model-assets.js';
import { createHandlerHost } from './runtime/handler-host.js';
import { createHandlerDependencies } from './runtime/handler-dependencies.js';
import { createModelSources, isArchivePath } from './storage/model-sources.js';
import { isS3Uri } from './storage/s3-store.js';
import { parseBatchingParameters } from './repository/batching-parameters-file.js';
import {
  MODEL_FILE_NAME,
  SAVED_MODEL_FILES,
  createVersionDirectoryIndex,
} from './repository/list-versions.js';
import { describeModelLayoutProblem } from './repository/model-layout.js';
import { type StagedModelFile, stageModelFile } from './repository/single-file-model.js';
import { createInflightBudget } from './frontends/shared/inflight-budget.js';
import { createShedReporter } from './observability/shed-reporter.js';
import { createJsonDecodePool } from './runtime/json-decode-pool.js';
import { ConfigError } from './config/config-error.js';
import { notFound, toServingError } from '@visionserve/protocol';
import { readOptionalFile } from './repository/optional-file.js';
import { modelConfigsFromMessage, parseModelConfigFile } from './repository/model-config-file.js';
import { createOnnxSessionFactory } from './runtime/onnx-session-factory.js';
import type { SpareInferenceWorkers } from './runtime/spare-inference-workers.js';
import { createModelFilesResolver } from './repository/model-files.js';
import { createSavedModelConverter } from './repository/saved-model-converter.js';
import { type ResponseCache, createResponseCache } from './core/response-cache.js';
import { createConcurrencyLimit } from './frontends/shared/concurrency-limit.js';
import { extendSignatures, imageBytesSignatureName } from './frontends/shared/image-bytes-signature.js';
import { createInputAdapter } from './frontends/shared/input-adapters.js';
import type { Logger } from './util/logger.js';
import { keepGcHeadroom } from './util/gc-headroom.js';
import { WARMUP_FILE_PATH } from './warmup/warmup-file.js';
import type { InferenceObserver } from './core/inference-observer.js';
import type { RequestObserver } from './frontends/shared/request-observer.js';
import { createOpsApi, type ReadinessCheck } from './frontends/ops/ops-api.js';
import { parseMonitoringConfig } from './repository/monitoring-config-file.js';
import type { ServingMetrics, createServingMetrics } from './observability/serving-metrics.js';
import { createAccessLog } from './observability/access-log.js';
import { createPredictionLogWriter } from './observability/prediction-log-writer.js';
import { type RequestSink, createRequestHub } from './observability/request-hub.js';
import type { RequestTracer } from './observability/tracing.js';
import { type TlsFiles, loadTlsFiles } from './security/tls-files.js';
import { createManagementPolicy } from './security/management-policy.js';
import { type WarmupReport, createWarmupSessionFactory } from './warmup/warmup-session-factory.js';

export { openApiDocument, type OpenApiDocumentOptions } from './frontends/console/openapi-document.js';

export interface RunningVisionServer {
  /** Bound ports; a listener that is disabled is absent. */
  readonly ports: { readonly grpc?: number; readonly rest?: number; readonly sagemaker?: number };
  readonly service: InferenceService<ServableAssets>;
  readonly manager: ModelManager<ServableAssets>;
  /** Batching counters per batched model version; absent when batching is off. */
  readonly batching?: BatchingStats;
  /**
   * Serves one SageMaker /invocations request in-process, exactly as the HTTP route does
   * (`visionserve transform` uses it with every listener disabled).
   */
  invoke(request: InvocationRequest, call: InvocationCall): Promise<InvocationResponse>;
  /** What `GET /execution-parameters` answers. */
  readonly executionParameters: ExecutionParameters;
  /**
   * The response cache (hits, misses, evictions, bytes; per model too) for metrics; absent
   * when --response_cache_bytes is 0.
   */
  readonly responseCache?: ResponseCache;
  /** Per-version inference statistics (KServe statistics extension). */
  readonly statistics: InferenceStatistics;
  /** The Prometheus metrics, when --monitoring_config_file enables them. */
  readonly metrics?: ServingMetrics;
  /** Re-reads the TLS certificate files now (they are also polled); false when nothing changed or TLS is off. */
  reloadTls(): Promise<boolean>;
  /** Resolves once every sampled request handed to the request log (logging_config) is on disk. */
  flushRequestLogs(): Promise<void>;
  /** Graceful shutdown: stop listening, let in-flight requests finish (up to shutdownGraceMs), unload models. */
  close(): Promise<void>;
}

/**
 * The served model set: from the config file's text when there is one, else single-model
 * flags. A bad file is reported in TF Serving's words: protobuf's `Error parsing text-format
 * tensorflow.serving.ModelServerConfig: <line>:<column>: ...`, then `Invalid protobuf file: '<file>'`.
 */
function modelConfigs(config: ServerConfig, configFileText: string | undefined): ModelConfig[] {
  const file = config.modelConfigFile;
  if (file !== undefined && configFileText !== undefined) {
    try {
      return parseModelConfigFile(configFileText, dirname(file), {
        source: textFormatSource('tensorflow.serving.ModelServerConfig'),
      });
    } catch (error) {
      if (!(error instanceof ServingError)) throw error;
      throw new ServingError(error.code, `${error.message}\nInvalid protobuf file: '${file}'`, {
        cause: error,
      });
    }
  }
  if (config.modelBasePath !== undefined) {
    return [
      {
        name: config.modelName,
        basePath: config.modelBasePath,
        versionPolicy: DEFAULT_VERSION_POLICY,
        versionLabels: {},
      },
    ];
  }
  return [];
}

const DEFAULT_MODEL_NAME: string = DEFAULTS.modelName;

/** Per-model batching parameters file inside a version directory. */
const MODEL_BATCHING_PARAMETERS_FILE = 'batching_params.pbtxt';

export interface VisionServerHooks {
  /** Called after each version's warmup (tests, benchmarks). */
  readonly onWarmup?: (report: WarmupReport) => void;
  /** Called when an inference worker died unasked (it is replaced). */
  readonly onWorkerExit?: () => void;
}

/** What the caller may hand over to a server it starts. */
export interface VisionServerResources {
  /**
   * Inference workers the caller started before loading the server
   * (`startSpareInferenceWorkers` from `@visionserve/server/boot`): the first model loads
   * take them instead of starting threads. The server asks the ones still idle to exit once
   * the initial models settled (or when it fails to start). Default none.
   */
  readonly spareWorkers?: SpareInferenceWorkers | undefined;
}

/**
 * The session factory chain: runtime -> warmup (unless disabled) -> batching
 * (when enabled). Warmup sits below batching so that its requests reach every
 * worker instance unmerged; the version is AVAILABLE only after both.
 */
async function createSessionFactory(
  config: ServerConfig,
  logger: Logger,
  hooks: VisionServerHooks,
  adaptInputs: InputAdapter<ServableAssets>,
  spareWorkers: SpareInferenceWorkers | undefined,
): Promise<{
  factory: SessionFactory;
  batching: BatchingStats | undefined;
  maxBatchSize: number | undefined;
}> {
  const converter = createSavedModelConverter({
    python: config.savedModelConverterPython,
    cacheDir: config.savedModelCacheDir,
    timeoutMs: config.savedModelConversionTimeoutSeconds * 1000,
    logger: logger.child({ component: 'savedmodel' }),
  });
  let factory: SessionFactory = createOnnxSessionFactory({
    resolveModelFiles: createModelFilesResolver({
      converter,
      servedElsewhere: async (basePath) => {
        const name = imageBytesSignatureName(await readModelAssets(basePath));
        return new Set(name === undefined ? [] : [name]);
      },
    }),
    instances: config.instances,
    intraOpThreads: config.intraOpThreads,
    interOpThreads: config.interOpThreads,
    allowSpinning: config.allowSpinning,
    threadNice: config.workerThreadNice,
    maxQueuedRuns: config.maxQueuedRequests,
    onWorkerExit: hooks.onWorkerExit,
    spareWorkers,
    logger: logger.child({ component: 'runtime' }),
  });
  if (config.enableModelWarmup) {
    factory = createWarmupSessionFactory({
      factory,
      readWarmupFile: (source) => readOptionalFile(join(source.path, WARMUP_FILE_PATH)),
      iterations: config.numRequestIterationsForWarmup,
      concurrency: config.instances,
      // Records for the signatures clients see (the encoded-image one too) replay as requests do.
      servedSignatures: async (source, signatures) => {
        const assets = await readModelAssets(source.basePath);
        return {
          signatures: extendSignatures(signatures, assets).signatures,
          adaptInputs: (signature, inputs) => adaptInputs(signature, inputs, assets, undefined),
        };
      },
      onWarmup: hooks.onWarmup,
      logger: logger.child({ component: 'warmup' }),
    });
  }
  if (!config.enableBatching) return { factory, batching: undefined, maxBatchSize: undefined };

  const defaults = defaultBatchingParameters(availableParallelism());
  const file = config.batchingParametersFile;
  const fromFile =
    file === undefined ? {} : parseBatchingParameters(await readFile(file, 'utf8'), { source: file });
  const parameters = resolveBatchingParameters(
    defaults,
    [config.batchingEnvParameters ?? {}, fromFile],
    file ?? 'batching parameters',
  );
  const modelParameters = async (source: ModelSource): Promise<BatchingParameters | undefined> => {
    const bytes = await readOptionalFile(join(source.path, MODEL_BATCHING_PARAMETERS_FILE));
    if (bytes === undefined) return undefined;
    const name = `${source.modelName}/${source.version}/${MODEL_BATCHING_PARAMETERS_FILE}`;
    const own = parseBatchingParameters(new TextDecoder().decode(bytes), { source: name });
    return resolveBatchingParameters(defaults, [own], name);
  };
  const batching = createBatchingStats();
  const batchLogger = logger.child({ component: 'batching' });
  if (parameters.numBatchThreads < config.instances) {
    batchLogger.warn(
      'num_batch_threads is below --model_instances: some instances will idle under batching',
      {
        numBatchThreads: parameters.numBatchThreads,
        instances: config.instances,
      },
    );
  }
  factory = createBatchingSessionFactory({
    factory,
    scheduler: createBatchScheduler({ numBatchThreads: parameters.numBatchThreads, logger: batchLogger }),
    parameters,
    modelParameters: config.enablePerModelBatchingParameters ? modelParameters : undefined,
    stats: batching,
    logger: batchLogger,
  });
  return { factory, batching, maxBatchSize: parameters.maxBatchSize };
}

/** The server package's version (KServe server metadata). */
function serverVersion(): string {
  try {
    const pkg = createRequire(import.meta.url)('../../package.json') as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The built console (@visionserve/console's dist/), or undefined when it is not installed or built. */
function consoleStaticDir(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('@visionserve/console/package.json');
    const dir = join(dirname(pkg), 'dist');
    return existsSync(join(dir, 'index.html')) ? dir : undefined;
  } catch {
    return undefined;
  }
}

/** max_batch_size reported for batching models when server-side batching is off: no limit. */
const NO_BATCH_LIMIT = 2 ** 31 - 1;

/** The loopback address matching a bind address, for URLs handed to user code. */
function loopbackFor(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * Refuses to start when a configured base path cannot serve anything (missing, a file, no
 * version directory), with a message that names the setting and the expected layout.
 * `--wait_for_models` keeps TF Serving's behaviour instead: start and keep polling.
 */
async function checkModelLayouts(config: ServerConfig, configs: readonly ModelConfig[]): Promise<void> {
  const problems: string[] = [];
  for (const c of configs) {
    const problem = await describeModelLayoutProblem(c.basePath);
    if (problem === undefined) continue;
    const where =
      config.modelConfigFile === undefined
        ? '--model_base_path'
        : `base_path of model "${c.name}" in ${config.modelConfigFile}`;
    problems.push(`${where}: ${problem}`);
  }
  if (problems.length > 0) {
    throw new ConfigError(
      `${problems.join('\n')}\n(start anyway and wait for versions to appear with --wait_for_models)`,
    );
  }
}

/** One warning per TF Serving flag given that means nothing here (IGNORED_TF_SERVING_FLAGS). */
function warnIgnoredFlags(config: ServerConfig, logger: Logger): void {
  const byName = new Map(config.ignoredFlags.map((given) => [given.split('=', 1)[0]!, given]));
  for (const [name, given] of byName) {
    logger.warn(`--${name}: a TF Serving flag with no effect here, ignored`, {
      flag: given,
      reason: IGNORED_TF_SERVING_FLAGS[name]?.why,
    });
  }
}

/** A listener that cannot bind is a configuration problem: say which flag sets that port. */
async function listen<T>(flag: string, port: number, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ConfigError(`${flag}=${port}: the port is already in use`);
    if (code === 'EACCES') throw new ConfigError(`${flag}=${port}: no permission to bind this port`);
    if (code === 'EADDRNOTAVAIL')
      throw new ConfigError(`--host: the address is not available on this machine`);
    throw error;
  }
}

/**
 * Fails at once with listen()'s message when a fixed port (not 0, not disabled) is taken,
 * before a load that may take minutes: the listeners themselves bind only after it.
 * A port taken in between still fails at bind time.
 */
async function checkPortsFree(config: ServerConfig): Promise<void> {
  const ports: [string, number][] = [
    ['--rest_api_port', config.restPort],
    ['--port', config.grpcPort],
    ['--sagemaker_port', config.sagemakerPort],
  ];
  for (const [flag, port] of ports) {
    if (port <= 0) continue;
    await listen(flag, port, async () => {
      const probe = createNetServer();
      await new Promise<void>((resolve, reject) => {
        probe.once('error', reject);
        probe.listen({ port, host: config.host.replace(/^\[|\]$/g, ''), exclusive: true }, resolve);
      });
      await new Promise<void>((resolve) => probe.close(() => resolve()));
    });
  }
}

/**
 * TF Serving's order by default: the initial models load first and the ports open once
 * they are in, so that no client of a configured model sees NOT_FOUND while it loads
 * (a fixed port that is taken still fails before the load, `checkPorts`). With
 * `portsFirst` (--open_ports_before_models_load) the listeners open first: /healthz,
 * metrics and SageMaker /ping answer during a long load, /readyz answers 503 until it
 * settled, and model requests get NOT_FOUND meanwhile.
 */
async function startInOrder<T>(
  portsFirst: boolean,
  openListeners: () => Promise<T>,
  loadModels: () => Promise<void>,
  checkPorts: () => Promise<void>,
): Promise<T> {
  if (portsFirst) {
    const opened = await openListeners();
    await loadModels();
    return opened;
  }
  await checkPorts();
  await loadModels();
  return openListeners();
}

/**
 * Loads the initial configuration's models and then starts every enabled listener (TF
 * Serving's order; --open_ports_before_models_load starts them first, see startInOrder).
 * Resolves when both are done.
 */
export async function startVisionServer(
  config: ServerConfig,
  logger: Logger,
  hooks: VisionServerHooks = {},
  resources: VisionServerResources = {},
): Promise<RunningVisionServer> {
  const { spareWorkers } = resources;
  try {
    return await startServer(config, logger, hooks, spareWorkers);
  } finally {
    // Spares serve the initial loads only; later loads start their own threads. Not awaited:
    // a spare still booting exits when it is done, and idle spares never hold the process.
    void spareWorkers?.close();
  }
}

async function startServer(
  config: ServerConfig,
  logger: Logger,
  hooks: VisionServerHooks,
  spareWorkers: SpareInferenceWorkers | undefined,
): Promise<RunningVisionServer> {
  let staged: StagedModelFile | undefined;
  if (config.modelBasePath !== undefined && config.modelConfigFile === undefined) {
    staged = await stageModelFile(config.modelBasePath);
    if (staged !== undefined) {
      logger.info('serving a single model file as version 1', { file: config.modelBasePath });
      config = { ...config, modelBasePath: staged.basePath };
    }
  }
  warnIgnoredFlags(config, logger);
  // --- operations: metrics, access log, request log, tracing, TLS, management guard
  const ops = await createOperations(config, logger);
  // Image decodes in flight at once, across every protocol and warmup (each holds the full-size pixels).
  const imageDecodes = createConcurrencyLimit(Math.max(2, availableParallelism()));
  const adaptInputs = createInputAdapter({ imageDecodes });
  const {
    factory: sessionFactory,
    batching,
    maxBatchSize,
  } = await createSessionFactory(
    config,
    logger,
    {
      ...hooks,
      onWarmup: (report) => {
        ops.metrics?.warmup(report);
        hooks.onWarmup?.(report);
      },
      onWorkerExit: () => {
        ops.metrics?.workerExited();
        hooks.onWorkerExit?.();
      },
    },
    adaptInputs,
    spareWorkers,
  );
  let handlerHost: HandlerHost | undefined;
  const sources = createModelSources({
    cacheDir: config.modelCacheDir,
    logger: logger.child({ component: 'storage' }),
    archiveLimits: { maxBytes: config.modelArchiveMaxBytes, maxEntries: 100_000 },
  });
  // Base path -> the SageMaker model directory whose shared code/ serves it.
  const sharedCodeRoots = new Map<string, string>();
  const handlerDependencies = config.sagemakerInstallHandlerDependencies
    ? createHandlerDependencies({
        cacheDir: config.modelCacheDir,
        logger: logger.child({ component: 'handler-dependencies' }),
      })
    : undefined;
  const loadAssets = async (basePath: string): Promise<ServableAssets> => {
    const assets = await readModelAssets(basePath, { sharedCodeRoot: sharedCodeRoots.get(basePath) });
    if (assets.handlerModulePath === undefined || handlerDependencies === undefined) return assets;
    return { ...assets, handlerModulePath: await handlerDependencies.prepare(assets.handlerModulePath) };
  };
  /** Remote and archived locations as local directories; a SageMaker model directory as the models it holds. */
  const localize = async (configs: readonly ModelConfig[]): Promise<ModelConfig[]> => {
    if (config.sagemakerModelDir !== undefined) {
      const singleName = config.modelName === DEFAULT_MODEL_NAME ? 'model' : config.modelName;
      const found = await sources.modelDirectory(config.sagemakerModelDir, singleName);
      if (found.models.length === 0 && !config.waitForModels) {
        throw new ConfigError(
          `--sagemaker_model_dir=${config.sagemakerModelDir}: no model found (expected <version>/model.onnx or <version>/saved_model.pb at its top, or <model>/<version>/... for several models)`,
        );
      }
      return found.models.map((m) => {
        if (found.codeDir !== undefined) sharedCodeRoots.set(m.basePath, dirname(found.codeDir));
        return {
          name: m.name,
          basePath: m.basePath,
          versionPolicy: DEFAULT_VERSION_POLICY,
          versionLabels: {},
        };
      });
    }
    return Promise.all(
      configs.map(async (c) =>
        isS3Uri(c.basePath) || isArchivePath(c.basePath)
          ? { ...c, basePath: await sources.localBasePath(c.basePath) }
          : c,
      ),
    );
  };
  const responseCache =
    config.responseCacheBytes > 0 ? createResponseCache({ maxBytes: config.responseCacheBytes }) : undefined;
  const statistics = createInferenceStatistics();
  /** When each version last changed state (the console's Models page). */
  const versionTimes = new Map<string, VersionTimes>();
  const versionDirs = createVersionDirectoryIndex((basePath, version, kept, ignored) =>
    logger.warn('Duplicate version directories detected; loading the one TF Serving would', {
      basePath,
      version,
      loadedFrom: kept,
      ignored,
    }),
  );
  const manager = createModelManager<ServableAssets>({
    sessionFactory,
    loadAssets: async (source) => {
      if (source.confined === true) {
        // A SavedModel's files count too: the converter reads them.
        for (const file of [MODEL_FILE_NAME, ...SAVED_MODEL_FILES, 'variables', 'assets']) {
          await checkVersionConfined(source.basePath, source.path, file);
        }
      }
      return loadAssets(source.basePath);
    },
    listVersions: (basePath) => versionDirs.list(basePath),
    versionPath: (basePath, version) => versionDirs.path(basePath, version),
    maxLoadRetries: config.maxNumLoadRetries,
    loadRetryIntervalMs: Math.max(0, config.loadRetryIntervalMicros / 1000),
    logger: logger.child({ component: 'manager' }),
    allowVersionLabelsForUnavailableModels: config.allowVersionLabelsForUnavailableModels,
    onVersionEvent: (event) => {
      ops.metrics?.versionEvent(event);
      if (event.type !== 'assets-refreshed') {
        const key = `${event.model}\u0000${event.version}`;
        if (event.type === 'unloaded') versionTimes.delete(key);
        else versionTimes.set(key, { since: Date.now(), loadMs: event.durationMs });
      }
      // Handler modules are imported once per worker: drop them when their version goes or its assets change.
      if (event.type === 'unloaded' || event.type === 'assets-refreshed') {
        handlerHost?.forget(event.basePath);
        const shared = sharedCodeRoots.get(event.basePath);
        if (shared !== undefined) handlerHost?.forget(join(shared, 'code'));
      }
      // Cached responses belong to one version and the assets it ran with (image settings).
      if (event.type !== 'loaded') responseCache?.invalidate(event.model, event.version);
      if (event.type === 'unloaded') statistics.forget(event.model, event.version);
    },
  });
  const requestLog = createPredictionLogWriter({
    loggingConfigOf: (model) => manager.modelConfig(model)?.logging,
    logger: logger.child({ component: 'request-log' }),
    onRecord: (model, outcome) => ops.metrics?.requestLogged(model, outcome),
  });
  const observers = observe(ops, requestLog);
  /** Every admission refusal: counted per reason and logged at most once per 10 s per reason. */
  const shedReporter = createShedReporter({ logger: logger.child({ component: 'admission' }) });
  const service = createInferenceService({
    manager,
    logger: logger.child({ component: 'core' }),
    admission: {
      maxQueueWaitMs: config.maxQueueWaitMs,
      onShed: (model, error) => {
        shedReporter.report('queue-wait', model, error.message);
      },
    },
    statistics,
    extendSignatures,
    adaptInputs,
    responseCache:
      responseCache === undefined
        ? undefined
        : { cache: responseCache, enabledFor: (assets) => assets.vision.config?.responseCache === true },
    observer: observers.inference,
  });
  // JSON predict bodies are read off the event loop (threads start on first use).
  const jsonDecode = createJsonDecodePool({
    threads: config.restApiNumThreads,
    threadNice: config.workerThreadNice,
    maxWaitMs: config.maxQueueWaitMs,
    limits: {
      maxDepth: config.jsonMaxDepth,
      maxObjectKeys: config.jsonMaxObjectKeys,
      maxValues: config.jsonMaxValues,
    },
    onShed: (model, error) => {
      shedReporter.report('json-decode', model, error.message);
    },
    logger: logger.child({ component: 'json-decode' }),
  });
  const budget = createInflightBudget({
    maxBytes: config.maxInflightRequestBytes,
    maxRequests: config.maxInflightRequests,
    onShed: ({ message, ...details }) => {
      shedReporter.report('inflight-budget', undefined, message, details);
    },
  });
  // Declared before the metrics sources that read it (the listener starts further down).
  let grpc: RunningGrpcServer | undefined;
  ops.metrics?.attach({
    versionStates: () =>
      manager.modelNames().flatMap((model) => {
        try {
          return manager.status(model).map((s) => ({ model, version: s.version, state: s.state }));
        } catch {
          return [];
        }
      }),
    queueDepths: () => queueDepths(manager),
    batching: batching === undefined ? undefined : () => batching.snapshot(),
    inflight: () => ({ bytes: budget.usedBytes, requests: budget.requests }),
    shed: () => shedReporter.counts(),
    grpcConnections: () =>
      grpc === undefined ? undefined : { open: grpc.connections, limitCloses: grpc.limitCloses },
    responseCache:
      responseCache === undefined
        ? undefined
        : () => ({ ...responseCache.stats(), models: responseCache.modelStats() }),
  });
  let draining = false;
  /** Models of the initial config while it loads (not ready until it settled); undefined afterwards. */
  let initialModels: readonly string[] | undefined = [];
  const readiness: ReadinessCheck = () => {
    if (draining) return { ready: false, reason: 'draining' };
    const waiting: { model: string; state: string }[] = [];
    for (const model of initialModels ?? manager.modelNames()) {
      let states: string[] = [];
      try {
        states = manager.status(model).map((s) => s.state);
      } catch {
        // No version known yet.
      }
      if (initialModels !== undefined || !states.includes('AVAILABLE')) {
        waiting.push({ model, state: states.includes('AVAILABLE') ? 'AVAILABLE' : (states[0] ?? 'START') });
      }
    }
    if (initialModels !== undefined) {
      return { ready: false, reason: 'loading the configured models', models: waiting };
    }
    return waiting.length === 0
      ? { ready: true }
      : { ready: false, reason: 'models without an AVAILABLE version', models: waiting };
  };
  const opsApi = (metricsHere: boolean) =>
    createOpsApi({
      readiness,
      metrics:
        metricsHere && ops.metrics !== undefined
          ? {
              path: ops.metricsPath,
              contentType: ops.metrics.contentType,
              render: () => metricsOf(ops).render(),
            }
          : undefined,
    });
  const edgeExtras = { observer: observers.request, cors: config.enableCors };
  const httpLimits = {
    maxConnections: config.maxConnections,
    headersTimeoutMs: config.httpHeadersTimeoutMs,
    requestTimeoutMs: config.requestBodyTimeoutMs + config.httpHeadersTimeoutMs,
  };

  const timers: NodeJS.Timeout[] = [];
  const kserve = createKServeService({
    service,
    registry: manager,
    statistics,
    roots: {
      list: () => listModelDirectories(config.modelRoots),
      resolve: (name) => findModelDirectory(config.modelRoots, name),
    },
    modelControl: config.kserveModelControlMode,
    rescan: () => manager.poll(),
    serverVersion: serverVersion(),
    maxBatchSize: maxBatchSize ?? NO_BATCH_LIMIT,
    instanceCount: config.instances,
    dynamicBatching: config.enableBatching,
    logger: logger.child({ component: 'kserve' }),
  });
  const kserveApi = (bodyLimitBytes: number, requestTimeoutMs: number): HttpApi =>
    createKServeHttpApi({ kserve, bodyLimitBytes, requestTimeoutMs, managementGuard: ops.guard, jsonDecode });

  // One set of TF Serving gRPC services: the HTTP/2 server and gRPC-web on the REST port share it.
  const tfsGrpcServices = createTfsGrpcServices({
    service,
    imageDecodes,
    logger: logger.child({ component: 'grpc' }),
    serializeAsTensorContent: config.serializeAsTensorContent,
    readModelServerConfig: (message) => modelConfigsFromMessage(message),
    managementGuard: ops.guard,
  });

  let rest: StartedHttpServer | undefined;
  let sagemaker: StartedHttpServer | undefined;
  let invoker: SageMakerInvoker | undefined;
  // Full collections stay rare under steady load (util/gc-headroom.ts); undone when the server stops.
  const releaseGcHeadroom = keepGcHeadroom({ headroomMb: config.gcHeadroomMb });
  const stopAll = async (graceMs: number): Promise<void> => {
    for (const t of timers) clearInterval(t);
    // Listeners drain together: no new connections, keep-alive clients told to go, in-flight requests finish.
    await Promise.all([rest?.close(graceMs), grpc?.close(graceMs), sagemaker?.close(graceMs)]);
    await handlerHost?.close();
    await jsonDecode.close();
    // Versions unload after their last run settled; inference workers finish before they exit.
    await manager.close();
    await staged?.remove();
    await requestLog.flush();
    await ops.close();
    releaseGcHeadroom();
  };
  try {
    let lastConfigText: string | undefined;
    const readConfigs = async (): Promise<ModelConfig[] | undefined> => {
      const text =
        config.modelConfigFile === undefined ? undefined : await readFile(config.modelConfigFile, 'utf8');
      if (text !== undefined && text === lastConfigText) return undefined;
      lastConfigText = text;
      return localize(modelConfigs(config, text));
    };
    /** The REST listener: TF Serving REST, KServe v2 HTTP, ops, console, gRPC-web. */
    const openRest = async (): Promise<void> => {
      if (config.restPort >= 0) {
        rest = await listen('--rest_api_port', config.restPort, () =>
          startHttpServer({
            host: config.host,
            port: config.restPort,
            ...httpLimits,
            tls: ops.tls?.listener,
            edge: createHttpEdge({
              ...edgeExtras,
              apis: [
                opsApi(true),
                createTfsRestApi({
                  service,
                  imageDecodes,
                  bodyLimitBytes: config.restMaxBodyBytes,
                  requestTimeoutMs: config.restTimeoutMs,
                  jsonDecode,
                }),
                ...(config.kserveRest ? [kserveApi(config.restMaxBodyBytes, config.restTimeoutMs)] : []),
                ...(config.enableConsole || config.enableOpenapi
                  ? [
                      createConsoleApi({
                        service,
                        guard: ops.guard,
                        modelConfig: (name) => manager.modelConfig(name),
                        versionTimes: (model, version) => versionTimes.get(`${model}\u0000${version}`),
                        batching: {
                          enabled: config.enableBatching,
                          maxBatchSize,
                          instances: config.instances,
                        },
                        openApi: config.enableOpenapi
                          ? openApiDocument({
                              version: serverVersion(),
                              metricsPath: ops.metrics === undefined ? undefined : ops.metricsPath,
                              consolePath: config.consolePath,
                            })
                          : undefined,
                        staticDir: consoleStaticDir(),
                        consolePath: config.enableConsole ? config.consolePath : undefined,
                        traffic:
                          ops.metrics === undefined
                            ? undefined
                            : createTrafficSampler({ read: () => metricsOf(ops).values() }),
                        requestTimeoutMs: config.restTimeoutMs,
                        logger: logger.child({ component: 'console' }),
                      }),
                    ]
                  : []),
                ...(config.enableGrpcWeb
                  ? [
                      createGrpcWebApi({
                        services: tfsGrpcServices,
                        logger: logger.child({ component: 'grpc-web' }),
                        maxMessageBytes: config.restMaxBodyBytes,
                        requestTimeoutMs: config.restTimeoutMs,
                        corsOrigins:
                          config.grpcWebCorsOrigins.length > 0
                            ? config.grpcWebCorsOrigins
                            : config.enableCors
                              ? ['*']
                              : [],
                      }),
                    ]
                  : []),
              ],
              logger: logger.child({ component: 'rest' }),
              notFoundMessage: (method, path) => `No handler for ${method} ${path}`,
              budget,
            }),
          }),
        );
      }
    };
    /** The gRPC listener (TCP port and --grpc_socket_path): TF Serving and KServe gRPC. */
    const openGrpc = async (): Promise<void> => {
      if (config.grpcPort >= 0) {
        const channelArguments = parseGrpcChannelArguments(config.grpcChannelArguments);
        if (channelArguments.ignored.length > 0) {
          logger.warn('--grpc_channel_arguments: not applied by this server, ignored', {
            ignored: channelArguments.ignored,
            applied: APPLIED_GRPC_ARGUMENTS,
          });
        }
        const grpcArgs = channelArguments.applied;
        grpc = await listen('--port', config.grpcPort, () =>
          startGrpcServer({
            host: config.host,
            port: config.grpcPort,
            socketPath: config.grpcSocketPath,
            logger: logger.child({ component: 'grpc' }),
            budget,
            connectionLimits: {
              maxAgeMs: grpcArgs.maxConnectionAgeMs,
              maxAgeGraceMs: grpcArgs.maxConnectionAgeGraceMs,
              maxIdleMs: grpcArgs.maxConnectionIdleMs,
              keepaliveTimeMs: grpcArgs.keepaliveTimeMs,
              keepaliveTimeoutMs: grpcArgs.keepaliveTimeoutMs,
            },
            maxConcurrentStreams: grpcArgs.maxConcurrentStreams,
            ...(grpcArgs.maxReceiveMessageBytes === undefined || grpcArgs.maxReceiveMessageBytes < 0
              ? {}
              : { maxMessageBytes: grpcArgs.maxReceiveMessageBytes }),
            maxConnections: config.maxConnections,
            bodyTimeoutMs: config.requestBodyTimeoutMs,
            transport: config.grpcTransport,
            observer: observers.request,
            tls: ops.tls?.listener,
            services: [
              ...tfsGrpcServices,
              ...(config.kserveGrpc ? [createKServeGrpcService({ kserve, managementGuard: ops.guard })] : []),
            ],
          }),
        );
      }
    };
    /** The SageMaker invoker (its handler host starts on first use) and listener. */
    const openSageMaker = async (): Promise<SageMakerInvoker> => {
      // Handler workers start on first use: the host costs nothing until a handler runs.
      const host = createHandlerHost({
        workers: config.sagemakerHandlerWorkers,
        logger: logger.child({ component: 'handler-host' }),
      });
      handlerHost = host;
      const loopback = loopbackFor(config.host);
      invoker = createSageMakerInvoker({
        service,
        logger: logger.child({ component: 'sagemaker' }),
        handlerHost: host,
        imageDecodes,
        defaultModelName: config.sagemakerDefaultModelName,
        jsonDecode,
        restBaseUrl:
          rest === undefined
            ? undefined
            : `${ops.tls === undefined ? 'http' : 'https'}://${loopback}:${rest.port}`,
        grpcPort: grpc?.port,
        executionParameters: {
          MaxConcurrentTransforms:
            config.sagemakerMaxConcurrentTransforms > 0
              ? config.sagemakerMaxConcurrentTransforms
              : 2 * config.instances,
          BatchStrategy: 'MULTI_RECORD',
          MaxPayloadInMB: config.sagemakerMaxPayloadMb,
        },
      });
      if (config.sagemakerPort >= 0) {
        const roots = config.sagemakerModelRoots;
        const sagemakerInvoker = invoker;
        sagemaker = await listen('--sagemaker_port', config.sagemakerPort, () =>
          startHttpServer({
            host: config.host,
            port: config.sagemakerPort,
            ...httpLimits,
            tls: ops.tls?.listener,
            edge: createHttpEdge({
              ...edgeExtras,
              apis: [
                opsApi(true),
                createSageMakerApi({
                  service,
                  invoker: sagemakerInvoker,
                  registry: manager,
                  logger: logger.child({ component: 'sagemaker' }),
                  resolveModelLocation: async (url) => {
                    if (!isS3Uri(url) && !isArchivePath(url)) return resolveModelLocation(url, roots);
                    const where = isS3Uri(url) ? url : await resolveModelLocation(url, roots, 'file');
                    // The container answers 404 for a model location it cannot use.
                    return sources.localBasePath(where).catch((error: unknown) => {
                      throw notFound(toServingError(error).message);
                    });
                  },
                  multiModel: config.sagemakerMultiModel,
                  maxModels: config.sagemakerMaxModels,
                  memoryLimitBytes: config.sagemakerMemoryLimitBytes,
                  modelLoadTimeoutMs: config.sagemakerModelLoadTimeoutMs,
                  bodyLimitBytes: config.sagemakerMaxBodyBytes,
                  requestTimeoutMs: config.sagemakerRequestTimeoutMs,
                  grpcPort: grpc?.port,
                  restPort: rest?.port,
                  managementGuard: ops.guard,
                }),
                ...(config.kserveSagemakerPort
                  ? [kserveApi(config.sagemakerMaxBodyBytes, config.sagemakerRequestTimeoutMs)]
                  : []),
              ],
              logger: logger.child({ component: 'sagemaker' }),
              notFoundMessage: () => 'Not Found',
              budget,
            }),
          }),
        );
      }
      return invoker;
    };
    /** Every enabled listener (model APIs, ops, SageMaker); returns the SageMaker invoker. */
    const openListeners = async (): Promise<SageMakerInvoker> => {
      await openRest();
      await openGrpc();
      return openSageMaker();
    };
    /** The initial configuration's models, loaded (or failed as TF Serving fails). */
    const loadInitialModels = async (): Promise<void> => {
      warnIfManagementOpen(config, ops.guardOpen, logger);
      const initial = (await readConfigs()) ?? [];
      if (!config.waitForModels) await checkModelLayouts(config, initial);
      initialModels = initial.map((c) => c.name);
      try {
        await manager.setModels(initial);
      } catch (error) {
        // TF Serving does not start when a configured model fails to load; --wait_for_models
        // keeps its wait-and-retry behaviour instead.
        if (!(error instanceof ServingError && error.code === Code.UNKNOWN)) throw error;
        if (!config.waitForModels) {
          throw new ConfigError(`${error.message} (--wait_for_models starts anyway and keeps retrying)`);
        }
        logger.error('starting without every model', { error });
      } finally {
        initialModels = undefined;
      }
    };
    invoker = await startInOrder(config.openPortsBeforeModelsLoad, openListeners, loadInitialModels, () =>
      checkPortsFree(config),
    );
    // A second after the models are in (not competing with their loads and warmups), one JSON
    // decode thread starts, so the first big JSON body does not pay for its start and warm-up.
    const prestart = setTimeout(() => {
      jsonDecode.prestart();
    }, 1000);
    prestart.unref();
    timers.push(prestart);

    if (config.fileSystemPollSeconds > 0) {
      timers.push(
        setInterval(() => {
          // S3 copies are refreshed first; their failures are logged and the copies kept.
          void sources.sync().then(() => manager.poll());
        }, config.fileSystemPollSeconds * 1000),
      );
    }
    if (config.modelConfigFile !== undefined && config.modelConfigFilePollSeconds > 0) {
      timers.push(
        setInterval(() => {
          readConfigs()
            .then((configs) => (configs === undefined ? undefined : manager.setModels(configs)))
            .catch((error: unknown) => {
              const applied = error instanceof ServingError && error.code === Code.UNKNOWN;
              logger.error(
                applied
                  ? 'model config reloaded, but some models did not become available'
                  : 'model config reload failed; keeping the current models',
                { error },
              );
            });
        }, config.modelConfigFilePollSeconds * 1000),
      );
    }
    for (const t of timers) t.unref();
  } catch (error) {
    await stopAll(0);
    throw error;
  }

  let closing: Promise<void> | undefined;
  const sagemakerInvoker: SageMakerInvoker = invoker;
  return {
    ports: {
      ...(grpc ? { grpc: grpc.port } : {}),
      ...(rest ? { rest: rest.port } : {}),
      ...(sagemaker ? { sagemaker: sagemaker.port } : {}),
    },
    service,
    manager,
    ...(batching ? { batching } : {}),
    invoke: (request, call) => sagemakerInvoker.invoke(request, call),
    executionParameters: sagemakerInvoker.executionParameters,
    ...(responseCache ? { responseCache } : {}),
    statistics,
    ...(ops.metrics ? { metrics: ops.metrics } : {}),
    reloadTls: () => ops.tls?.reload() ?? Promise.resolve(false),
    flushRequestLogs: () => requestLog.flush(),
    close() {
      closing ??= (async () => {
        // Readiness goes false first, so that load balancers stop sending before listeners close.
        draining = true;
        if (config.shutdownReadinessDelayMs > 0) {
          logger.info('draining: /readyz answers 503', { delayMs: config.shutdownReadinessDelayMs });
          await new Promise((resolve) => setTimeout(resolve, config.shutdownReadinessDelayMs));
        }
        await stopAll(config.shutdownGraceMs);
      })();
      return closing;
    },
  };
}

function metricsOf(ops: Operations): ServingMetrics {
  return ops.metrics!;
}

/** The operational pieces the flags ask for; each is absent (and costs nothing) when off. */
interface Operations {
  readonly metrics:
    | (ServingMetrics & {
        attach(sources: MetricSources): void;
        requestLogged(model: string, outcome: 'written' | 'dropped'): void;
      })
    | undefined;
  readonly metricsPath: string;
  readonly sinks: readonly RequestSink[];
  readonly tls: TlsFiles | undefined;
  readonly guard: ReturnType<typeof createManagementPolicy>;
  readonly guardOpen: boolean;
  close(): Promise<void>;
}

type MetricSources = NonNullable<Parameters<typeof createServingMetrics>[0]>;

async function createOperations(config: ServerConfig, logger: Logger): Promise<Operations> {
  let metrics: Operations['metrics'];
  let metricsPath = '';
  if (config.monitoringConfigFile !== undefined) {
    const file = config.monitoringConfigFile;
    let monitoring;
    try {
      monitoring = parseMonitoringConfig(await readFile(file, 'utf8'), { source: file });
    } catch (error) {
      throw new ConfigError(
        `--monitoring_config_file: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    if (monitoring.prometheusEnabled) {
      // Loaded only when asked for: prom-client (and what it pulls in) costs every start-up otherwise.
      const metricsModule = await import('./observability/serving-metrics.js');
      metrics = createLateBoundMetrics(
        metricsModule.createServingMetrics,
        config.enableBatching,
        config.responseCacheBytes > 0,
      );
      metricsPath = monitoring.prometheusPath;
    }
  }
  const sinks: RequestSink[] = [];
  if (metrics !== undefined) sinks.push(metrics);
  // Failed requests are access-logged at any sampling rate (up to a rate per second).
  if (config.accessLogSamplingRate > 0 || config.accessLogMaxFailuresPerSecond > 0) {
    sinks.push(
      createAccessLog({
        logger: logger.child({ component: 'access' }),
        samplingRate: config.accessLogSamplingRate,
        maxFailuresPerSecond: config.accessLogMaxFailuresPerSecond,
      }),
    );
  }
  let tracer: RequestTracer | undefined;
  if (config.otlpTracesEndpoint !== undefined) {
    // Loaded only when asked for: without an endpoint no OpenTelemetry code is imported.
    const { createRequestTracer } = await import('./observability/tracing.js');
    tracer = createRequestTracer({
      endpoint: config.otlpTracesEndpoint,
      samplingRate: config.traceSamplingRate,
      batching: config.enableBatching,
      logger: logger.child({ component: 'tracing' }),
    });
    sinks.push(tracer);
  }
  let tls: TlsFiles | undefined;
  if (config.sslConfigFile !== undefined) {
    try {
      tls = await loadTlsFiles({
        configFile: config.sslConfigFile,
        pollIntervalMs: config.sslConfigPollSeconds * 1000,
        logger: logger.child({ component: 'tls' }),
      });
    } catch (error) {
      throw new ConfigError(`--ssl_config_file: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (config.adminClientNames.length > 0 && tls?.clientVerify !== true) {
    throw new ConfigError('--admin_client_names needs --ssl_config_file with client_verify: true');
  }
  let guard: Operations['guard'];
  try {
    guard = createManagementPolicy({
      disabled: config.disableModelManagement,
      tokenFile: config.adminTokenFile,
      clientNames: config.adminClientNames,
      logger: logger.child({ component: 'management' }),
    });
  } catch (error) {
    throw new ConfigError(error instanceof Error ? error.message : String(error));
  }
  return {
    metrics,
    metricsPath,
    sinks,
    tls,
    guard,
    guardOpen: guard.open,
    async close() {
      tls?.close();
      await tracer?.shutdown();
    },
  };
}

/** Metrics whose scrape-time sources (manager, budget, batching) are attached once they exist. */
function createLateBoundMetrics(
  create: typeof createServingMetrics,
  batchingOn: boolean,
  cacheOn: boolean,
): NonNullable<Operations['metrics']> {
  let sources: MetricSources = {};
  const metrics = create({
    versionStates: () => sources.versionStates?.() ?? [],
    queueDepths: () => sources.queueDepths?.() ?? [],
    batching: batchingOn ? () => sources.batching?.() ?? [] : undefined,
    inflight: () => sources.inflight?.() ?? { bytes: 0, requests: 0, shed: 0 },
    shed: () => sources.shed?.() ?? new Map<string, number>(),
    grpcConnections: () => sources.grpcConnections?.(),
    responseCache: cacheOn ? () => sources.responseCache?.() : undefined,
  });
  return Object.assign(metrics, {
    attach(next: MetricSources) {
      sources = next;
    },
  });
}

/** Observers for core and the transports: undefined (no hook at all) when nothing observes requests. */
function observe(
  ops: Operations,
  requestLog: InferenceObserver,
): { request: RequestObserver | undefined; inference: InferenceObserver } {
  const predictObservers: InferenceObserver[] = [requestLog];
  if (ops.metrics !== undefined) predictObservers.unshift(ops.metrics);
  if (ops.sinks.length === 0) return { request: undefined, inference: requestLog };
  const hub = createRequestHub({ requestSinks: ops.sinks, predictObservers });
  return { request: hub.requestObserver, inference: hub.inferenceObserver };
}

/** Runs queued per AVAILABLE version (scrape time). */
function queueDepths(
  manager: ModelManager<ServableAssets>,
): { model: string; version: number; queued: number }[] {
  const out: { model: string; version: number; queued: number }[] = [];
  for (const model of manager.modelNames()) {
    let statuses: readonly { version: number; state: string }[] = [];
    try {
      statuses = manager.status(model);
    } catch {
      continue;
    }
    for (const s of statuses) {
      if (s.state !== 'AVAILABLE') continue;
      try {
        const handle = manager.acquire({ name: model, version: s.version });
        try {
          out.push({ model, version: s.version, queued: handle.session.pressure?.().queued ?? 0 });
        } finally {
          handle.release();
        }
      } catch {
        // Unloaded in between.
      }
    }
  }
  return out;
}

/** Loopback addresses: management open there is a local-only concern. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host.startsWith('127.') || host === '::1' || host === '[::1]';
}

/** TF Serving leaves model management open; say so when that is reachable from the network. */
function warnIfManagementOpen(config: ServerConfig, open: boolean, logger: Logger): void {
  if (!open || isLoopback(config.host)) return;
  const exposed = [
    ...(config.grpcPort >= 0 ? ['gRPC HandleReloadConfigRequest'] : []),
    ...(config.sagemakerPort >= 0 && config.sagemakerMultiModel
      ? ['SageMaker multi-model POST/DELETE /models']
      : []),
  ];
  if (exposed.length === 0) return;
  logger.warn(
    'model management is open to anyone who reaches this address; restrict it with --admin_token_file, --admin_client_names or --disable_model_management',
    { host: config.host, exposed },
  );
}
