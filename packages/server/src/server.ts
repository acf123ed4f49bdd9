/**
 * Composition root: the only place that wires layers together, as a short sequence (TF
 * Serving's BuildAndStart): operations, the session chain (runtime -> warmup -> batching), the
 * model catalog, the serving core, readiness, the listeners, then the initial load in TF
 * Serving's order, the pollers, and shutdown. Each step is a module of compose/; nothing here
 * is a global.
 */
import { Code, ServingError } from '@visionserve/protocol';
import { availableParallelism } from 'node:os';
import { type BatchingStats } from './batching/batching-stats.js';
import { IGNORED_TF_SERVING_FLAGS } from './config/flags.js';
import { type ServerConfig } from './config/server-config.js';
import type { ModelManager } from './core/model-manager.js';
import type { InferenceService } from './core/inference-service.js';
import {
  type ExecutionParameters,
  type InvocationCall,
  type InvocationRequest,
  type InvocationResponse,
  type SageMakerInvoker,
} from './frontends/sagemaker/index.js';
import { type InferenceStatistics } from './core/inference-statistics.js';
import type { ServableAssets } from './contracts/servable-assets.js';
import { ConfigError } from './config/config-error.js';
import type { SpareInferenceWorkers } from './runtime/spare-inference-workers.js';
import { type ResponseCache } from './core/response-cache.js';
import { createConcurrencyLimit } from './frontends/shared/concurrency-limit.js';
import { createInputAdapter } from './frontends/shared/input-adapters.js';
import type { Logger } from './util/logger.js';
import { keepGcHeadroom } from './util/gc-headroom.js';
import { startIdleCollection } from './util/idle-collection.js';
import { mallocTrim } from './util/malloc-trim.js';
import type { ServingMetrics } from './observability/serving-metrics.js';
import { createListeners, checkPortsFree, startInOrder } from './compose/listeners.js';
import { createModelCatalog, stageSingleModelFile, type ModelCatalog } from './compose/model-catalog.js';
import { createOperations, warnIfManagementOpen } from './compose/operations.js';
import { createReadiness, type Readiness } from './compose/readiness.js';
import { attachMetricSources, createServingCore, type ServingCore } from './compose/serving-core.js';
import { createSessionChain, type VisionServerHooks } from './compose/session-chain.js';

export { openApiDocument, type OpenApiDocumentOptions } from './frontends/console/openapi-document.js';
export type { VisionServerHooks } from './compose/session-chain.js';

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
  given: ServerConfig,
  logger: Logger,
  hooks: VisionServerHooks,
  spareWorkers: SpareInferenceWorkers | undefined,
): Promise<RunningVisionServer> {
  const { config, staged } = await stageSingleModelFile(given, logger);
  warnIgnoredFlags(config, logger);
  const ops = await createOperations(config, logger);
  // Image decodes in flight at once, across every protocol and warmup (each holds the full-size pixels).
  const imageDecodes = createConcurrencyLimit(Math.max(2, availableParallelism()));
  const adaptInputs = createInputAdapter({ imageDecodes });
  const chain = await createSessionChain(
    config,
    logger,
    observedHooks(hooks, ops),
    adaptInputs,
    spareWorkers,
  );
  const catalog = createModelCatalog(config, logger);
  const core = createServingCore(config, logger, ops, chain, catalog, adaptInputs);
  const readiness = createReadiness(core.manager);
  const listeners = createListeners({
    config,
    logger,
    ops,
    core,
    readiness,
    catalog,
    imageDecodes,
    maxBatchSize: chain.maxBatchSize,
  });
  attachMetricSources(ops, core, chain.batching, listeners);
  // Full collections stay rare under steady load (util/gc-headroom.ts); undone when the server stops.
  const releaseGcHeadroom = keepGcHeadroom({ headroomMb: config.gcHeadroomMb });
  // ... and what a burst left is given back once the heap is quiet (util/idle-collection.ts).
  // glibc's free memory too, once per quiet time with no request in flight (util/malloc-trim.ts).
  const trim = mallocTrim();
  const stopIdleCollection = startIdleCollection({
    quietMs: config.idleGcAfterMs,
    trim: trim && (() => void trim()),
    busy: () => core.budget.requests > 0,
  });
  const timers: NodeJS.Timeout[] = [];
  const stopAll = async (graceMs: number): Promise<void> => {
    for (const t of timers) clearInterval(t);
    await listeners.close(graceMs);
    await core.jsonDecode.close();
    // Versions unload after their last run settled; inference workers finish before they exit.
    await core.manager.close();
    await staged?.remove();
    await core.requestLog.flush();
    await ops.close();
    releaseGcHeadroom();
    stopIdleCollection();
  };
  let invoker: SageMakerInvoker;
  try {
    warnIfManagementOpen(config, ops.guardOpen, logger);
    invoker = await startInOrder(
      config.openPortsBeforeModelsLoad,
      () => listeners.open(),
      () => loadInitialModels(config, logger, catalog, core, readiness),
      () => checkPortsFree(config),
    );
    timers.push(...startPollers(config, logger, catalog, core));
  } catch (error) {
    await stopAll(0);
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    ports: listeners.ports,
    service: core.service,
    manager: core.manager,
    ...(chain.batching ? { batching: chain.batching } : {}),
    invoke: (request, call) => invoker.invoke(request, call),
    executionParameters: invoker.executionParameters,
    ...(core.responseCache ? { responseCache: core.responseCache } : {}),
    statistics: core.statistics,
    ...(ops.metrics ? { metrics: ops.metrics } : {}),
    reloadTls: () => ops.tls?.reload() ?? Promise.resolve(false),
    flushRequestLogs: () => core.requestLog.flush(),
    close() {
      closing ??= drainAndStop(config, logger, readiness, stopAll);
      return closing;
    },
  };
}

/** The caller's hooks, with the metrics told of warmups and worker deaths first. */
function observedHooks(
  hooks: VisionServerHooks,
  ops: Awaited<ReturnType<typeof createOperations>>,
): VisionServerHooks {
  return {
    onWarmup: (report) => {
      ops.metrics?.warmup(report);
      hooks.onWarmup?.(report);
    },
    onWorkerExit: () => {
      ops.metrics?.workerExited();
      hooks.onWorkerExit?.();
    },
  };
}

/** Readiness goes false first, so that load balancers stop sending before listeners close. */
async function drainAndStop(
  config: ServerConfig,
  logger: Logger,
  readiness: Readiness,
  stopAll: (graceMs: number) => Promise<void>,
): Promise<void> {
  readiness.drain();
  if (config.shutdownReadinessDelayMs > 0) {
    logger.info('draining: /readyz answers 503', { delayMs: config.shutdownReadinessDelayMs });
    await new Promise((resolve) => setTimeout(resolve, config.shutdownReadinessDelayMs));
  }
  await stopAll(config.shutdownGraceMs);
}

/** The initial configuration's models, loaded (or failed as TF Serving fails). */
async function loadInitialModels(
  config: ServerConfig,
  logger: Logger,
  catalog: ModelCatalog,
  core: ServingCore,
  readiness: Readiness,
): Promise<void> {
  const initial = (await catalog.readConfigs()) ?? [];
  if (!config.waitForModels) await catalog.checkLayouts(initial);
  readiness.loading(initial.map((c) => c.name));
  try {
    await core.manager.setModels(initial);
  } catch (error) {
    // TF Serving does not start when a configured model fails to load; --wait_for_models
    // keeps its wait-and-retry behaviour instead.
    if (!(error instanceof ServingError && error.code === Code.UNKNOWN)) throw error;
    if (!config.waitForModels) {
      throw new ConfigError(`${error.message} (--wait_for_models starts anyway and keeps retrying)`);
    }
    logger.error('starting without every model', { error });
  } finally {
    readiness.loading(undefined);
  }
}

/** The JSON decode thread's prestart, the file-system poll and the config-file poll. */
function startPollers(
  config: ServerConfig,
  logger: Logger,
  catalog: ModelCatalog,
  core: ServingCore,
): NodeJS.Timeout[] {
  // A second after the models are in (not competing with their loads and warmups), one JSON
  // decode thread starts, so the first big JSON body does not pay for its start and warm-up.
  const timers = [
    setTimeout(() => {
      core.jsonDecode.prestart();
    }, 1000),
  ];
  if (config.fileSystemPollSeconds > 0) {
    timers.push(
      setInterval(() => {
        // S3 copies are refreshed first; their failures are logged and the copies kept.
        void catalog.sources.sync().then(() => core.manager.poll());
      }, config.fileSystemPollSeconds * 1000),
    );
  }
  if (config.modelConfigFile !== undefined && config.modelConfigFilePollSeconds > 0) {
    timers.push(
      setInterval(() => {
        reloadConfigFile(logger, catalog, core);
      }, config.modelConfigFilePollSeconds * 1000),
    );
  }
  for (const t of timers) t.unref();
  return timers;
}

function reloadConfigFile(logger: Logger, catalog: ModelCatalog, core: ServingCore): void {
  catalog
    .readConfigs()
    .then((configs) => (configs === undefined ? undefined : core.manager.setModels(configs)))
    .catch((error: unknown) => {
      const applied = error instanceof ServingError && error.code === Code.UNKNOWN;
      logger.error(
        applied
          ? 'model config reloaded, but some models did not become available'
          : 'model config reload failed; keeping the current models',
        { error },
      );
    });
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
