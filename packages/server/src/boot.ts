// `@visionserve/server/boot`: what a process that is going to serve does before it loads
// the server (the package entry, with every protocol and its protobuf schemas): read its
// configuration and start the inference worker threads, which then boot on the other cores
// while the rest loads. Nothing here loads a protocol, protobuf or onnxruntime on this thread.
export { resolveServerConfig, DEFAULTS } from './config/server-config.js';
export type { ServerConfig } from './config/server-config.js';
export { parseFlags, FLAGS, IGNORED_TF_SERVING_FLAGS } from './config/flags.js';
export { flagHelpLines, renderConfigurationDoc, FLAG_GROUPS } from './config/flag-docs.js';
export { configFromEnv } from './config/env.js';
export { ConfigError } from './config/config-error.js';
export { createJsonLogger, silentLogger } from './util/logger.js';
export type { Logger, LogLevel } from './util/logger.js';
export { startSpareInferenceWorkers } from './runtime/spare-inference-workers.js';
export type {
  SpareInferenceWorkers,
  SpareInferenceWorkersOptions,
} from './runtime/spare-inference-workers.js';
