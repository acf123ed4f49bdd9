/**
 * Composition root: the only module that wires layers together (runtime ->
 * core -> frontends). Nothing here is a global; every component gets its
 * dependencies passed in.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
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
import type { ServerConfig } from './config/server-config.js';
import type { ModelConfig } from './core/model-config.js';
import { DEFAULT_VERSION_POLICY } from './core/model-config.js';
import { createModelManager } from './core/model-manager.js';
import type { ModelManager } from './core/model-manager.js';
import { createInferenceService } from './core/create-inference-service.js';
import type { InferenceService } from './core/inference-service.js';
import type { ModelSource, SessionFactory } from './core/session.js';
import type { HttpApi } from './frontends/http/http-api.js';
import { createHttpEdge } from './frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from './frontends/http/start-http-server.js';
import { createTfsRestApi } from './frontends/tfs-rest/index.js';
import { createTfsGrpcFrontend, startGrpcServer } from './frontends/tfs-grpc/index.js';
import type { RunningGrpcServer } from './frontends/tfs-grpc/index.js';
import { createSageMakerApi } from './frontends/sagemaker/index.js';
import { createKServeHttpApi, createKServeService } from './frontends/kserve/index.js';
import {
  type InferenceStatistics,
  createInferenceStatistics,
} from './frontends/shared/inference-statistics.js';
import type { HandlerHost } from './contracts/handler-host.js';
import type { ServableAssets } from './contracts/servable-assets.js';
import { resolveModelLocation } from './repository/confined-path.js';
import { findModelDirectory, listModelDirectories } from './repository/model-roots.js';
import { readModelAssets } from './repository/model-assets.js';
import { createHandlerHost } from './runtime/handler-host.js';
import { parseBatchingParameters } from './repository/batching-parameters-file.js';
import { listVersions } from './repository/list-versions.js';
import { readOptionalFile } from './repository/optional-file.js';
import { parseModelConfigFile } from './repository/model-config-file.js';
import { createOnnxSessionFactory } from './runtime/onnx-session-factory.js';
import type { Logger } from './util/logger.js';
import { WARMUP_FILE_PATH } from './warmup/warmup-file.js';
import { type WarmupReport, createWarmupSessionFactory } from './warmup/warmup-session-factory.js';

export interface RunningVisionServer {
  /** Bound ports; a listener that is disabled is absent. */
  readonly ports: { readonly grpc?: number; readonly rest?: number; readonly sagemaker?: number };
  readonly service: InferenceService<ServableAssets>;
  readonly manager: ModelManager<ServableAssets>;
  /** Batching counters per batched model version; absent when batching is off. */
  readonly batching?: BatchingStats;
  /** Per-version inference statistics (KServe statistics extension). */
  readonly statistics: InferenceStatistics;
  /** Graceful shutdown: stop listening, let in-flight requests finish (up to shutdownGraceMs), unload models. */
  close(): Promise<void>;
}

/** The served model set: from the config file's text when there is one, else single-model flags. */
function modelConfigs(config: ServerConfig, configFileText: string | undefined): ModelConfig[] {
  if (config.modelConfigFile !== undefined && configFileText !== undefined) {
    return parseModelConfigFile(configFileText, dirname(config.modelConfigFile), {
      source: config.modelConfigFile,
    });
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

/** Per-model batching parameters file inside a version directory. */
const MODEL_BATCHING_PARAMETERS_FILE = 'batching_params.pbtxt';

export interface VisionServerHooks {
  /** Called after each version's warmup (tests, benchmarks). */
  readonly onWarmup?: (report: WarmupReport) => void;
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
): Promise<{
  factory: SessionFactory;
  batching: BatchingStats | undefined;
  maxBatchSize: number | undefined;
}> {
  let factory: SessionFactory = createOnnxSessionFactory({
    instances: config.instances,
    intraOpThreads: config.intraOpThreads,
    interOpThreads: config.interOpThreads,
    allowSpinning: config.allowSpinning,
    logger: logger.child({ component: 'runtime' }),
  });
  if (config.enableModelWarmup) {
    factory = createWarmupSessionFactory({
      factory,
      readWarmupFile: (source) => readOptionalFile(join(source.path, WARMUP_FILE_PATH)),
      iterations: config.numRequestIterationsForWarmup,
      concurrency: config.instances,
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

/** max_batch_size reported for batching models when server-side batching is off: no limit. */
const NO_BATCH_LIMIT = 2 ** 31 - 1;

/** The loopback address matching a bind address, for URLs handed to user code. */
function loopbackFor(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** Starts every enabled listener once the initial model load has settled. */
export async function startVisionServer(
  config: ServerConfig,
  logger: Logger,
  hooks: VisionServerHooks = {},
): Promise<RunningVisionServer> {
  const {
    factory: sessionFactory,
    batching,
    maxBatchSize,
  } = await createSessionFactory(config, logger, hooks);
  let handlerHost: HandlerHost | undefined;
  const statistics = createInferenceStatistics();
  const manager = createModelManager<ServableAssets>({
    sessionFactory,
    loadAssets: (source) => readModelAssets(source.basePath),
    listVersions,
    logger: logger.child({ component: 'manager' }),
    allowVersionLabelsForUnavailableModels: config.allowVersionLabelsForUnavailableModels,
    onVersionEvent: (event) => {
      // Handler modules are imported once per worker: drop them when their version goes or its assets change.
      if (event.type === 'unloaded' || event.type === 'assets-refreshed') handlerHost?.forget(event.basePath);
      if (event.type === 'unloaded') statistics.forget(event.model, event.version);
    },
  });
  const service = createInferenceService({ manager, logger: logger.child({ component: 'core' }) });

  let lastConfigText: string | undefined;
  const applyConfigFile = async (): Promise<void> => {
    const text =
      config.modelConfigFile === undefined ? undefined : await readFile(config.modelConfigFile, 'utf8');
    if (text !== undefined && text === lastConfigText) return;
    lastConfigText = text;
    await manager.setModels(modelConfigs(config, text));
  };
  await applyConfigFile();

  const timers: NodeJS.Timeout[] = [];
  if (config.fileSystemPollSeconds > 0) {
    timers.push(
      setInterval(() => {
        void manager.poll();
      }, config.fileSystemPollSeconds * 1000),
    );
  }
  if (config.modelConfigFile !== undefined && config.modelConfigFilePollSeconds > 0) {
    timers.push(
      setInterval(() => {
        applyConfigFile().catch((error: unknown) => {
          logger.error('model config reload failed; keeping the current models', { error });
        });
      }, config.modelConfigFilePollSeconds * 1000),
    );
  }
  for (const t of timers) t.unref();

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
    createKServeHttpApi({ kserve, bodyLimitBytes, requestTimeoutMs });

  let rest: StartedHttpServer | undefined;
  let grpc: RunningGrpcServer | undefined;
  let sagemaker: StartedHttpServer | undefined;
  try {
    if (config.restPort >= 0) {
      rest = await startHttpServer({
        host: config.host,
        port: config.restPort,
        handler: createHttpEdge({
          apis: [
            createTfsRestApi({
              service,
              bodyLimitBytes: config.restMaxBodyBytes,
              requestTimeoutMs: config.restTimeoutMs,
            }),
            ...(config.kserveRest ? [kserveApi(config.restMaxBodyBytes, config.restTimeoutMs)] : []),
          ],
          logger: logger.child({ component: 'rest' }),
          notFoundMessage: (method, path) => `No handler for ${method} ${path}`,
        }),
      });
    }
    if (config.grpcPort >= 0) {
      grpc = await startGrpcServer({
        host: config.host,
        port: config.grpcPort,
        logger: logger.child({ component: 'grpc' }),
        frontends: [
          createTfsGrpcFrontend({
            service,
            logger: logger.child({ component: 'grpc' }),
            serializeAsTensorContent: config.serializeAsTensorContent,
          }),
        ],
      });
    }
    if (config.sagemakerPort >= 0) {
      handlerHost = createHandlerHost({
        workers: config.sagemakerHandlerWorkers,
        logger: logger.child({ component: 'handler-host' }),
      });
      const roots = config.sagemakerModelRoots;
      const loopback = loopbackFor(config.host);
      sagemaker = await startHttpServer({
        host: config.host,
        port: config.sagemakerPort,
        handler: createHttpEdge({
          apis: [
            createSageMakerApi({
              service,
              registry: manager,
              logger: logger.child({ component: 'sagemaker' }),
              handlerHost,
              resolveModelLocation: (url) => resolveModelLocation(url, roots),
              defaultModelName: config.sagemakerDefaultModelName,
              multiModel: config.sagemakerMultiModel,
              maxModels: config.sagemakerMaxModels,
              memoryLimitBytes: config.sagemakerMemoryLimitBytes,
              modelLoadTimeoutMs: config.sagemakerModelLoadTimeoutMs,
              bodyLimitBytes: config.sagemakerMaxBodyBytes,
              requestTimeoutMs: config.sagemakerRequestTimeoutMs,
              restBaseUrl: rest === undefined ? undefined : `http://${loopback}:${rest.port}`,
              grpcPort: grpc?.port,
            }),
            ...(config.kserveSagemakerPort
              ? [kserveApi(config.sagemakerMaxBodyBytes, config.sagemakerRequestTimeoutMs)]
              : []),
          ],
          logger: logger.child({ component: 'sagemaker' }),
          notFoundMessage: () => 'Not Found',
        }),
      });
    }
  } catch (error) {
    for (const t of timers) clearInterval(t);
    await sagemaker?.close();
    await handlerHost?.close();
    await rest?.close();
    await grpc?.close(0);
    await manager.close();
    throw error;
  }

  let closing: Promise<void> | undefined;
  return {
    ports: {
      ...(grpc ? { grpc: grpc.port } : {}),
      ...(rest ? { rest: rest.port } : {}),
      ...(sagemaker ? { sagemaker: sagemaker.port } : {}),
    },
    service,
    manager,
    ...(batching ? { batching } : {}),
    statistics,
    close() {
      closing ??= (async () => {
        for (const t of timers) clearInterval(t);
        const grace = config.shutdownGraceMs;
        await Promise.all([rest?.close(grace), grpc?.close(grace), sagemaker?.close(grace)]);
        await handlerHost?.close();
        await manager.close();
      })();
      return closing;
    },
  };
}
