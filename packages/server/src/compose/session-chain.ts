/**
 * The session factory chain: runtime -> warmup (unless disabled) -> batching (when enabled).
 * Warmup sits below batching so that its requests reach every worker instance unmerged; a
 * version is AVAILABLE only after both.
 */
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { createBatchScheduler } from '../batching/batch-scheduler.js';
import {
  type BatchingParameters,
  defaultBatchingParameters,
  resolveBatchingParameters,
} from '../batching/batching-parameters.js';
import { createBatchingSessionFactory } from '../batching/batching-session-factory.js';
import { type BatchingStats, createBatchingStats } from '../batching/batching-stats.js';
import { type ServerConfig } from '../config/server-config.js';
import { type InputAdapter } from '../core/create-inference-service.js';
import type { ModelSource, SessionFactory } from '../core/session.js';
import type { ServableAssets } from '../contracts/servable-assets.js';
import { readModelAssets } from '../repository/model-assets.js';
import { parseBatchingParameters } from '../repository/batching-parameters-file.js';
import { readOptionalFile } from '../repository/optional-file.js';
import { createOnnxSessionFactory } from '../runtime/onnx-session-factory.js';
import type { SpareInferenceWorkers } from '../runtime/spare-inference-workers.js';
import { createModelFilesResolver } from '../repository/model-files.js';
import { createSavedModelConverter } from '../repository/saved-model-converter.js';
import { extendSignatures, imageBytesSignatureName } from '../frontends/shared/image-bytes-signature.js';
import type { Logger } from '../util/logger.js';
import { WARMUP_FILE_PATH } from '../warmup/warmup-file.js';
import { type WarmupReport, createWarmupSessionFactory } from '../warmup/warmup-session-factory.js';

/** Per-model batching parameters file inside a version directory. */
const MODEL_BATCHING_PARAMETERS_FILE = 'batching_params.pbtxt';

export interface VisionServerHooks {
  /** Called after each version's warmup (tests, benchmarks). */
  readonly onWarmup?: (report: WarmupReport) => void;
  /** Called when an inference worker died unasked (it is replaced). */
  readonly onWorkerExit?: () => void;
}

export interface SessionChain {
  readonly factory: SessionFactory;
  /** Batching counters; absent when batching is off. */
  readonly batching: BatchingStats | undefined;
  /** The batching max_batch_size; absent when batching is off. */
  readonly maxBatchSize: number | undefined;
}

export async function createSessionChain(
  config: ServerConfig,
  logger: Logger,
  hooks: VisionServerHooks,
  adaptInputs: InputAdapter<ServableAssets>,
  spareWorkers: SpareInferenceWorkers | undefined,
): Promise<SessionChain> {
  let factory = runtimeFactory(config, logger, hooks, spareWorkers);
  if (config.enableModelWarmup) factory = withWarmup(factory, config, logger, hooks, adaptInputs);
  if (!config.enableBatching) return { factory, batching: undefined, maxBatchSize: undefined };
  return withBatching(factory, config, logger);
}

/** onnxruntime sessions in worker threads; SavedModels converted on load. */
function runtimeFactory(
  config: ServerConfig,
  logger: Logger,
  hooks: VisionServerHooks,
  spareWorkers: SpareInferenceWorkers | undefined,
): SessionFactory {
  const converter = createSavedModelConverter({
    python: config.savedModelConverterPython,
    cacheDir: config.savedModelCacheDir,
    timeoutMs: config.savedModelConversionTimeoutSeconds * 1000,
    logger: logger.child({ component: 'savedmodel' }),
  });
  return createOnnxSessionFactory({
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
}

function withWarmup(
  factory: SessionFactory,
  config: ServerConfig,
  logger: Logger,
  hooks: VisionServerHooks,
  adaptInputs: InputAdapter<ServableAssets>,
): SessionFactory {
  return createWarmupSessionFactory({
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

/** TF Serving's batching parameters: defaults < SageMaker variables < --batching_parameters_file. */
async function withBatching(
  factory: SessionFactory,
  config: ServerConfig,
  logger: Logger,
): Promise<SessionChain> {
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
  const batched = createBatchingSessionFactory({
    factory,
    scheduler: createBatchScheduler({ numBatchThreads: parameters.numBatchThreads, logger: batchLogger }),
    parameters,
    modelParameters: config.enablePerModelBatchingParameters ? modelParameters : undefined,
    stats: batching,
    logger: batchLogger,
  });
  return { factory: batched, batching, maxBatchSize: parameters.maxBatchSize };
}
