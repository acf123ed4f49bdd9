// `@visionserve/server`: the model server as a library (the `visionserve` CLI is one user).
// A deliberate surface: start a server from a config, or compose core with your own frontends.

// Starting a server.
export { startVisionServer, openApiDocument, type OpenApiDocumentOptions } from './server.js';
export type { RunningVisionServer, VisionServerHooks, VisionServerResources } from './server.js';
export { resolveServerConfig, DEFAULTS } from './config/server-config.js';
export { parseFlags, FLAGS, IGNORED_TF_SERVING_FLAGS } from './config/flags.js';
export { configFromEnv } from './config/env.js';
export { ConfigError } from './config/config-error.js';
export type { ServerConfig } from './config/server-config.js';
export { createJsonLogger, silentLogger } from './util/logger.js';
export { startSpareInferenceWorkers } from './runtime/spare-inference-workers.js';
export type {
  SpareInferenceWorkers,
  SpareInferenceWorkersOptions,
} from './runtime/spare-inference-workers.js';
export type { Logger, LogLevel } from './util/logger.js';

// Core: the serving semantics, for embedding.
export type * from './core/signature.js';
export type * from './core/session.js';
export type * from './core/model-config.js';
export type * from './core/model-state.js';
export type * from './core/inference-service.js';
export type {
  ModelManager,
  ModelManagerOptions,
  ServableHandle,
  VersionEvent,
} from './core/model-manager.js';
export type * from './core/model-registry.js';
export type { ServableAssets } from './contracts/servable-assets.js';
export { createModelManager } from './core/model-manager.js';
export { createInferenceService } from './core/create-inference-service.js';
export type { InferenceServiceOptions } from './core/create-inference-service.js';

// Runtime and repository building blocks.
export { createOnnxSessionFactory } from './runtime/onnx-session-factory.js';
export type { OnnxRuntimeOptions } from './runtime/onnx-session-factory.js';
export { ortSessionOptions } from './runtime/session-options.js';
export type { OrtSessionSettings } from './runtime/session-options.js';
export { listVersions, listVersionDirectories, MODEL_FILE_NAME } from './repository/list-versions.js';
export { parseModelConfigFile } from './repository/model-config-file.js';
export { readModelAssets } from './repository/model-assets.js';

// Warmup files (TFRecord of PredictionLog), as TF Serving reads them.
export { encodeWarmupFile, parseWarmupFile, WARMUP_FILE_PATH } from './warmup/warmup-file.js';
export type { WarmupRecord } from './warmup/warmup-file.js';
export type { WarmupReport } from './warmup/warmup-session-factory.js';
export type { BatchingCounters, BatchingStats } from './batching/batching-stats.js';

// SageMaker: in-process invocations (visionserve transform) and S3 access.
export type {
  ExecutionParameters,
  InvocationCall,
  InvocationRequest,
  InvocationResponse,
} from './frontends/sagemaker/index.js';
export { createS3Store, describeS3Error, formatS3Uri, isS3Uri, parseS3Uri } from './storage/s3-store.js';
export type { S3Location, S3Object, S3Store, S3StoreOptions } from './storage/s3-store.js';
export { extractModelArchive, DEFAULT_ARCHIVE_LIMITS } from './repository/model-archive.js';
export type { ArchiveLimits, ArchiveSummary } from './repository/model-archive.js';
export { findSageMakerModels } from './repository/sagemaker-model-dir.js';
// TensorFlow SavedModels: the converter (`visionserve convert`), and the response cache.
export {
  CONVERTER_REQUIREMENTS,
  CONVERTER_SCRIPT,
  SETUP_COMMAND,
  createSavedModelConverter,
  defaultCacheDir,
  setupPython,
} from './repository/saved-model-converter.js';
export type {
  Conversion,
  SavedModelConverter,
  SavedModelConverterOptions,
} from './repository/saved-model-converter.js';
export type { ConversionManifest, ConvertedSignature } from './repository/saved-model-manifest.js';
export { createResponseCache, responseCacheKey } from './core/response-cache.js';
export type {
  ResponseCache,
  ResponseCacheModelStats,
  ResponseCacheOptions,
  ResponseCacheStats,
} from './core/response-cache.js';
export { createOutputLease, type ReleasableOutputLease } from './core/output-lease.js';
