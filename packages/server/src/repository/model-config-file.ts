import { isAbsolute, resolve } from 'node:path';
import { type ServingError, invalidArgument, unimplemented } from '@visionserve/protocol';
import { parseTextMessage } from '@visionserve/protocol/pbtxt';
import {
  type LoggingConfig,
  type ModelConfig as ModelConfigMessage,
  type ModelServerConfig,
  ModelServerConfigSchema,
} from '@visionserve/protocol/tfs-proto';

/** A version policy as the file states it (core's VersionPolicy has this shape). */
export type VersionPolicy =
  | { readonly kind: 'latest'; readonly numVersions: number }
  | { readonly kind: 'all' }
  | { readonly kind: 'specific'; readonly versions: readonly number[] };

/** TF Serving's default when a config names no policy: the latest version. */
const DEFAULT_VERSION_POLICY: VersionPolicy = { kind: 'latest', numVersions: 1 };

/** `logging_config` of a model (core's RequestLoggingConfig has this shape). */
export interface RequestLoggingConfig {
  readonly samplingRate: number;
  readonly filenamePrefix: string;
  readonly type: string;
}

/** One `config { ... }` entry of a model_config_list (core's ModelConfig has this shape). */
export interface ModelConfig {
  readonly name: string;
  /** Directory holding the numeric version directories, made absolute against the file's directory. */
  readonly basePath: string;
  readonly versionPolicy: VersionPolicy;
  /** Label -> version. */
  readonly versionLabels: Readonly<Record<string, number>>;
  /** `logging_config`; absent when the entry has none. */
  readonly logging?: RequestLoggingConfig | undefined;
}

export interface ParseModelConfigOptions {
  /** Name used in error messages (e.g. the file name). Default "model config". */
  readonly source?: string;
}

/**
 * Where a ModelServerConfig message came from, for the one mapping: a file's directory (relative
 * paths resolve against it; a gRPC reload has none and keeps paths as sent) and, for a file,
 * errors positioned at the line of the offending message.
 */
export interface ModelServerConfigOrigin {
  readonly configDir?: string | undefined;
  readonly error?: ((text: string, message: object, field?: string) => ServingError) | undefined;
}

/**
 * Parses TF Serving's `ModelServerConfig` text format (`--model_config_file`) into the generated
 * message, as TF Serving does, then maps it like a gRPC reload (`modelConfigsFromMessage`):
 *
 *     model_config_list { config { name: 'm' base_path: 'm' model_platform: 'onnx'
 *       model_version_policy { latest { num_versions: 2 } }   # or all {} / specific { versions: 1 }
 *       version_labels { key: 'stable' value: 1 } } }
 *
 * Throws INVALID_ARGUMENT at `<file>:<line>:<column>` for syntax errors, unknown fields, missing
 * name/base_path, duplicate model names, bad versions; `custom_model_config` is UNIMPLEMENTED.
 */
export function parseModelConfigFile(
  text: string,
  configDir: string,
  options: ParseModelConfigOptions = {},
): ModelConfig[] {
  const parsed = parseTextMessage(ModelServerConfigSchema, text, {
    source: options.source ?? 'model config',
  });
  if (parsed.message.config.case === undefined) return []; // an empty file: no models
  return modelConfigsFromMessage(parsed.message, { configDir, error: parsed.error });
}

/**
 * The one mapping from a `ModelServerConfig` message to the served model set, for the config
 * file and for gRPC HandleReloadConfigRequest alike. Only model_config_list is served:
 * custom_model_config is UNIMPLEMENTED, a message without config INVALID_ARGUMENT.
 * model_type and model_platform are not checked (every model is ONNX here).
 */
export function modelConfigsFromMessage(
  config: ModelServerConfig | undefined,
  origin: ModelServerConfigOrigin = {},
): ModelConfig[] {
  const choice = config?.config;
  if (choice?.case === 'customModelConfig') {
    throw unimplemented('custom_model_config is not supported; use model_config_list');
  }
  if (choice?.case !== 'modelConfigList') {
    throw invalidArgument('ModelServerConfig must hold a model_config_list');
  }
  const fail = (text: string, message: object, field?: string): ServingError =>
    origin.error?.(text, message, field) ?? invalidArgument(text);
  const configs: ModelConfig[] = [];
  const seen = new Set<string>();
  for (const entry of choice.value.config) {
    const parsed = modelConfigFromMessage(entry, origin.configDir, fail);
    if (seen.has(parsed.name)) {
      throw fail(`Illegal to list model ${parsed.name} multiple times in config list`, entry);
    }
    seen.add(parsed.name);
    configs.push(parsed);
  }
  return configs;
}

type Fail = (text: string, message: object, field?: string) => ServingError;

function modelConfigFromMessage(
  entry: ModelConfigMessage,
  configDir: string | undefined,
  fail: Fail,
): ModelConfig {
  const name = entry.name;
  if (name === '') throw fail('model config is missing "name"', entry);
  if (entry.basePath === '') throw fail(`model config "${name}" is missing "base_path"`, entry);
  const logging =
    entry.loggingConfig === undefined
      ? undefined
      : loggingFromMessage(entry.loggingConfig, name, configDir, fail);
  return {
    name,
    basePath: resolvePath(entry.basePath, configDir),
    versionPolicy: versionPolicyFromMessage(entry, fail),
    versionLabels: versionLabelsFromMessage(entry, fail),
    ...(logging === undefined ? {} : { logging }),
  };
}

/** URIs (s3://...) and absolute paths are kept; a relative path resolves against the file's directory. */
function resolvePath(path: string, configDir: string | undefined): string {
  if (configDir === undefined || isAbsolute(path) || /^[a-z][a-z0-9+.-]*:\/\//i.test(path)) return path;
  return resolve(configDir, path);
}

function versionLabelsFromMessage(entry: ModelConfigMessage, fail: Fail): Record<string, number> {
  const labels: Record<string, number> = {};
  for (const [label, version] of Object.entries(entry.versionLabels)) {
    if (label === '') throw fail(`model "${entry.name}": version label has no key`, entry, 'version_labels');
    // defineProperty: a label named "__proto__" must be kept, not set the prototype.
    Object.defineProperty(labels, label, {
      value: safeVersion(version, `model "${entry.name}": version label "${label}"`, entry, fail),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return labels;
}

function versionPolicyFromMessage(entry: ModelConfigMessage, fail: Fail): VersionPolicy {
  const choice = entry.modelVersionPolicy?.policyChoice;
  const model = `model "${entry.name}"`;
  switch (choice?.case) {
    case 'latest':
      // proto3 cannot tell an unset num_versions from 0; both mean TF Serving's default of 1.
      return { kind: 'latest', numVersions: Math.max(choice.value.numVersions, 1) };
    case 'all':
      return { kind: 'all' };
    case 'specific': {
      const versions = [
        ...new Set(choice.value.versions.map((v) => safeVersion(v, `${model}: version`, choice.value, fail))),
      ];
      if (versions.length === 0) throw fail(`${model}: specific policy lists no versions`, choice.value);
      return { kind: 'specific', versions };
    }
    default:
      return DEFAULT_VERSION_POLICY;
  }
}

function safeVersion(value: bigint, what: string, at: object, fail: Fail): number {
  if (value < 0n) throw fail(`${what}: version ${value.toString()} is negative`, at);
  if (value > BigInt(Number.MAX_SAFE_INTEGER))
    throw fail(`${what}: version ${value.toString()} is out of range`, at);
  return Number(value);
}

function loggingFromMessage(
  config: LoggingConfig,
  model: string,
  configDir: string | undefined,
  fail: Fail,
): RequestLoggingConfig | undefined {
  const rate = config.samplingConfig?.samplingRate ?? 0;
  if (!(rate >= 0 && rate <= 1)) {
    throw fail(`model "${model}": sampling_rate must be between 0 and 1, got ${rate}`, config);
  }
  const type = config.logCollectorConfig?.type ?? '';
  const prefix = config.logCollectorConfig?.filenamePrefix ?? '';
  // Another collector type (TF Serving's are plug-ins) is accepted and ignored.
  if (type !== '' && type !== 'file') return undefined;
  // Without a file prefix there is nowhere to write: accepted and ignored (TF Serving compatible).
  if (prefix === '') return undefined;
  return { samplingRate: rate, filenamePrefix: resolvePath(prefix, configDir), type };
}
