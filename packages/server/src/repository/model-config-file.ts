import { isAbsolute, resolve } from 'node:path';
import { parsePbtxt } from '@visionserve/protocol/pbtxt';
import { type PbMessageReader, fieldInt, fieldMessage, readMessage } from '@visionserve/protocol/pbtxt';

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

const CONFIG_FIELDS = [
  'name',
  'base_path',
  'model_type',
  'model_platform',
  'model_version_policy',
  'version_labels',
  'logging_config',
] as const;

/**
 * Parses TF Serving's `ModelServerConfig` text format (`--model_config_file`):
 *
 *     model_config_list { config { name: 'm' base_path: 'm' model_platform: 'onnx'
 *       model_version_policy { latest { num_versions: 2 } }   # or all {} / specific { versions: 1 }
 *       version_labels { key: 'stable' value: 1 } } }
 *
 * A relative `base_path` is resolved against `configDir` (the directory of the
 * config file). `model_type` and `model_platform` are accepted and ignored;
 * `logging_config { sampling_config { sampling_rate } log_collector_config { type
 * filename_prefix } }` is read (a relative prefix resolves against `configDir`). An empty document is an empty model list.
 *
 * Throws INVALID_ARGUMENT (with line:column) for syntax errors, unknown fields,
 * missing name/base_path, duplicate model names or labels, bad versions, and
 * `custom_model_config` (not supported).
 */
export function parseModelConfigFile(
  text: string,
  configDir: string,
  options: ParseModelConfigOptions = {},
): ModelConfig[] {
  const source = options.source ?? 'model config';
  const root = readMessage(parsePbtxt(text, { source }), source);
  for (const f of root.message.fields) {
    if (f.name === 'custom_model_config') {
      throw root.error('custom_model_config is not supported; use model_config_list', f);
    }
  }
  root.checkKnown(['model_config_list'], 'ModelServerConfig');
  const list = root.messageField('model_config_list');
  if (list === undefined) return [];
  list.checkKnown(['config'], 'model_config_list');

  const configs: ModelConfig[] = [];
  const seen = new Set<string>();
  for (const field of list.all('config')) {
    const config = readMessage(fieldMessage(field, source), source);
    const parsed = parseOneConfig(config, configDir, source);
    if (seen.has(parsed.name)) {
      throw config.error(`Illegal to list model ${parsed.name} multiple times in config list`, field);
    }
    seen.add(parsed.name);
    configs.push(parsed);
  }
  return configs;
}

function parseOneConfig(config: PbMessageReader, configDir: string, source: string): ModelConfig {
  config.checkKnown(CONFIG_FIELDS, 'model config');
  const name = config.string('name');
  if (name === undefined || name === '') throw config.error('model config is missing "name"');
  const basePath = config.string('base_path');
  if (basePath === undefined || basePath === '') {
    throw config.error(`model config "${name}" is missing "base_path"`);
  }
  config.string('model_platform');
  const policyReader = config.messageField('model_version_policy');
  const versionPolicy =
    policyReader === undefined ? DEFAULT_VERSION_POLICY : parsePolicy(policyReader, name, source);

  const versionLabels: Record<string, number> = {};
  for (const f of config.all('version_labels')) {
    const entry = readMessage(fieldMessage(f, source), source);
    entry.checkKnown(['key', 'value'], 'version_labels');
    const key = entry.string('key');
    if (key === undefined || key === '') throw entry.error(`model "${name}": version label has no key`);
    const valueField = entry.one('value');
    if (valueField === undefined) throw entry.error(`model "${name}": version label "${key}" has no value`);
    const value = fieldInt(valueField, source);
    if (value < 0) throw entry.error(`model "${name}": version label "${key}" has a negative version`);
    if (Object.hasOwn(versionLabels, key)) {
      throw entry.error(`model "${name}": version label "${key}" given more than once`);
    }
    // defineProperty: a label named "__proto__" must be kept, not set the prototype.
    Object.defineProperty(versionLabels, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }

  const loggingReader = config.messageField('logging_config');
  const logging = loggingReader === undefined ? undefined : parseLogging(loggingReader, name, configDir);
  return {
    name,
    // URIs (s3://...) are kept as they are; the storage layer reads them.
    basePath:
      isAbsolute(basePath) || /^[a-z][a-z0-9+.-]*:\/\//i.test(basePath)
        ? basePath
        : resolve(configDir, basePath),
    versionPolicy,
    versionLabels,
    ...(logging === undefined ? {} : { logging }),
  };
}

function parseLogging(
  reader: PbMessageReader,
  model: string,
  configDir: string,
): RequestLoggingConfig | undefined {
  reader.checkKnown(['sampling_config', 'log_collector_config'], 'logging_config');
  const sampling = reader.messageField('sampling_config');
  sampling?.checkKnown(['sampling_rate'], 'sampling_config');
  const rate = sampling?.float('sampling_rate') ?? 0;
  if (!(rate >= 0 && rate <= 1)) {
    throw reader.error(`model "${model}": sampling_rate must be between 0 and 1, got ${rate}`);
  }
  const collector = reader.messageField('log_collector_config');
  collector?.checkKnown(['type', 'filename_prefix'], 'log_collector_config');
  const type = collector?.string('type') ?? '';
  const prefix = collector?.string('filename_prefix') ?? '';
  // Another collector type (TF Serving's are plug-ins) is accepted and ignored, as before.
  if (type !== '' && type !== 'file') return undefined;
  // Without a file prefix there is nowhere to write: accepted and ignored (TF Serving compatible).
  if (prefix === '') return undefined;
  return {
    samplingRate: rate,
    filenamePrefix: isAbsolute(prefix) ? prefix : resolve(configDir, prefix),
    type,
  };
}

function parsePolicy(policy: PbMessageReader, model: string, source: string): VersionPolicy {
  policy.checkKnown(['latest', 'all', 'specific'], 'model_version_policy');
  if (policy.message.fields.length !== 1) {
    throw policy.error(`model "${model}": model_version_policy needs exactly one of latest, all, specific`);
  }
  const latest = policy.messageField('latest');
  if (latest !== undefined) {
    latest.checkKnown(['num_versions'], 'latest');
    const n = latest.int('num_versions') ?? 0;
    if (n < 0) throw latest.error(`model "${model}": num_versions must not be negative`);
    // proto3 default 0 means "unset": serve the newest version, as TF Serving does.
    return { kind: 'latest', numVersions: Math.max(n, 1) };
  }
  const all = policy.messageField('all');
  if (all !== undefined) {
    all.checkKnown([], 'all');
    return { kind: 'all' };
  }
  const specific = policy.messageField('specific')!;
  specific.checkKnown(['versions'], 'specific');
  const versions: number[] = [];
  for (const f of specific.all('versions')) {
    const v = fieldInt(f, source);
    if (v < 0) throw specific.error(`model "${model}": version ${v} is negative`, f);
    if (!versions.includes(v)) versions.push(v);
  }
  if (versions.length === 0) throw specific.error(`model "${model}": specific policy lists no versions`);
  return { kind: 'specific', versions };
}
