/**
 * The serving core: the model manager (versions, assets, their event fan-out to metrics,
 * caches, statistics and handler modules), the inference service over it with admission, the
 * request log, the JSON decode threads and the in-flight budget shared by every listener.
 */
import { join } from 'node:path';
import { type BatchingStats } from '../batching/batching-stats.js';
import { type ServerConfig } from '../config/server-config.js';
import { createModelManager } from '../core/model-manager.js';
import type { ModelManager, VersionEvent } from '../core/model-manager.js';
import { type InputAdapter, createInferenceService } from '../core/create-inference-service.js';
import type { InferenceService } from '../core/inference-service.js';
import { type VersionTimes } from '../frontends/console/console-api.js';
import { type InferenceStatistics, createInferenceStatistics } from '../core/inference-statistics.js';
import type { HandlerHost } from '../contracts/handler-host.js';
import type { ServableAssets } from '../contracts/servable-assets.js';
import { createInflightBudget } from '../frontends/shared/inflight-budget.js';
import { createShedReporter } from '../observability/shed-reporter.js';
import { createJsonDecodePool } from '../runtime/json-decode-pool.js';
import { type ResponseCache, createResponseCache } from '../core/response-cache.js';
import { extendSignatures } from '../frontends/shared/image-bytes-signature.js';
import type { Logger } from '../util/logger.js';
import type { RequestObserver } from '../frontends/shared/request-observer.js';
import type { FrameStreamCounts } from '../frontends/stream/frame-stream-counts.js';
import { createPredictionLogWriter } from '../observability/prediction-log-writer.js';
import { modelManagerSettings } from './config-settings.js';
import type { ModelCatalog } from './model-catalog.js';
import { type Operations, observe, queueDepths } from './operations.js';
import type { SessionChain } from './session-chain.js';

/** Open gRPC connections and how many the connection limits closed, by reason (metrics). */
export interface GrpcConnectionCounts {
  readonly open: number;
  readonly limitCloses: ReadonlyMap<string, number>;
}

/** One listener's open connections and connection-guard closes by reason (metrics). */
export interface ListenerConnectionCounts {
  readonly listener: string;
  readonly open: number;
  readonly guardCloses: ReadonlyMap<string, number>;
}

export interface ServingCore {
  readonly manager: ModelManager<ServableAssets>;
  readonly service: InferenceService<ServableAssets>;
  readonly statistics: InferenceStatistics;
  readonly responseCache: ResponseCache | undefined;
  /** When each version last changed state (the console's Models page). */
  versionTimes(model: string, version: number): VersionTimes | undefined;
  readonly requestLog: ReturnType<typeof createPredictionLogWriter>;
  readonly requestObserver: RequestObserver | undefined;
  readonly jsonDecode: ReturnType<typeof createJsonDecodePool>;
  readonly budget: ReturnType<typeof createInflightBudget>;
  readonly shedReporter: ReturnType<typeof createShedReporter>;
  /** The handler host, once the SageMaker invoker made it: its modules are dropped with their versions. */
  handlerHost: HandlerHost | undefined;
}

export function createServingCore(
  config: ServerConfig,
  logger: Logger,
  ops: Operations,
  chain: SessionChain,
  catalog: ModelCatalog,
  adaptInputs: InputAdapter<ServableAssets>,
): ServingCore {
  const responseCache =
    config.responseCacheBytes > 0 ? createResponseCache({ maxBytes: config.responseCacheBytes }) : undefined;
  const statistics = createInferenceStatistics();
  const times = new Map<string, VersionTimes>();
  const core = { handlerHost: undefined as HandlerHost | undefined };
  const manager = createModelManager<ServableAssets>({
    sessionFactory: chain.factory,
    loadAssets: (source) => catalog.loadVersionAssets(source),
    listVersions: (basePath) => catalog.versionDirs.list(basePath),
    versionPath: (basePath, version) => catalog.versionDirs.path(basePath, version),
    ...modelManagerSettings(config),
    logger: logger.child({ component: 'manager' }),
    onVersionEvent: (event) => {
      ops.metrics?.versionEvent(event);
      recordVersionTime(times, event);
      // Handler modules are imported once per worker: drop them when their version goes or its assets change.
      if (event.type === 'unloaded' || event.type === 'assets-refreshed') {
        core.handlerHost?.forget(event.basePath);
        const shared = catalog.sharedCodeRoot(event.basePath);
        if (shared !== undefined) core.handlerHost?.forget(join(shared, 'code'));
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
      burstPerInstance: config.admissionBurstPerInstance,
      minArrivalBytesPerSecond: config.minRequestBodyBytesPerS,
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
  return Object.assign(core, {
    manager,
    service,
    statistics,
    responseCache,
    versionTimes: (model: string, version: number) => times.get(`${model}\u0000${version}`),
    requestLog,
    requestObserver: observers.request,
    jsonDecode: createJsonDecodePool({
      threads: config.restApiNumThreads,
      threadNice: config.workerThreadNice,
      idleGcAfterMs: config.idleGcAfterMs,
      maxWaitMs: config.maxJsonDecodeBacklogMs,
      burstPerThread: config.admissionBurstPerInstance,
      limits: {
        maxDepth: config.jsonMaxDepth,
        maxObjectKeys: config.jsonMaxObjectKeys,
        maxValues: config.jsonMaxValues,
      },
      onShed: (model, error) => {
        shedReporter.report('json-decode', model, error.message);
      },
      logger: logger.child({ component: 'json-decode' }),
    }),
    budget: createInflightBudget({
      maxBytes: config.maxInflightRequestBytes,
      maxRequests: config.maxInflightRequests,
      onShed: ({ message, ...details }) => {
        shedReporter.report('inflight-budget', undefined, message, details);
      },
    }),
    shedReporter,
  });
}

function recordVersionTime(times: Map<string, VersionTimes>, event: VersionEvent): void {
  if (event.type === 'assets-refreshed') return;
  const key = `${event.model}\u0000${event.version}`;
  if (event.type === 'unloaded') times.delete(key);
  else times.set(key, { since: Date.now(), loadMs: event.durationMs });
}

/** The metrics' scrape-time sources, once the core (and later the gRPC listener) exist. */
export function attachMetricSources(
  ops: Operations,
  core: ServingCore,
  batching: BatchingStats | undefined,
  listeners: {
    grpcConnections(): GrpcConnectionCounts | undefined;
    listenerConnections(): ListenerConnectionCounts[];
    frameStreams(): FrameStreamCounts;
  },
): void {
  const { manager, budget, shedReporter, responseCache } = core;
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
    grpcConnections: () => listeners.grpcConnections(),
    listenerConnections: () => listeners.listenerConnections(),
    frameStreams: () => listeners.frameStreams(),
    responseCache:
      responseCache === undefined
        ? undefined
        : () => ({ ...responseCache.stats(), models: responseCache.modelStats() }),
  });
}
