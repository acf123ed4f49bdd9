/**
 * Where the served models come from: the config file or the single-model flags, made local
 * (S3, archives, a SageMaker model directory expanded into its models), their version
 * directories as TF Serving reads them, their assets (handler dependencies installed), and the
 * re-read of the config file. A leaf of the composition: it knows the repository and storage,
 * not the serving layers.
 */
import { readFile } from 'node:fs/promises';
import { ServingError } from '@visionserve/protocol';
import { textFormatSource } from '@visionserve/protocol/pbtxt';
import { dirname } from 'node:path';
import { DEFAULTS, type ServerConfig } from '../config/server-config.js';
import type { ModelConfig } from '../core/model-config.js';
import { DEFAULT_VERSION_POLICY } from '../core/model-config.js';
import type { ModelSource } from '../core/session.js';
import type { ServableAssets } from '../contracts/servable-assets.js';
import { checkVersionConfined, resolveModelLocation } from '../repository/confined-path.js';
import { readModelAssets } from '../repository/model-assets.js';
import { createHandlerDependencies } from '../runtime/handler-dependencies.js';
import { type ModelSources, createModelSources, isArchivePath } from '../storage/model-sources.js';
import { isS3Uri } from '../storage/s3-store.js';
import {
  MODEL_FILE_NAME,
  SAVED_MODEL_FILES,
  type VersionDirectoryIndex,
  createVersionDirectoryIndex,
} from '../repository/list-versions.js';
import { describeModelLayoutProblem } from '../repository/model-layout.js';
import { type StagedModelFile, stageModelFile } from '../repository/single-file-model.js';
import { ConfigError } from '../config/config-error.js';
import { notFound, toServingError } from '@visionserve/protocol';
import { parseModelConfigFile } from '../repository/model-config-file.js';
import type { Logger } from '../util/logger.js';

/**
 * The served model set: from the config file's text when there is one, else single-model
 * flags. A bad file is reported in TF Serving's words: protobuf's `Error parsing text-format
 * tensorflow.serving.ModelServerConfig: <line>:<column>: ...`, then `Invalid protobuf file: '<file>'`.
 */
export function modelConfigs(config: ServerConfig, configFileText: string | undefined): ModelConfig[] {
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

/** The one-file model of --model_base_path=<file>.onnx staged as a version directory, if it is one. */
export async function stageSingleModelFile(
  config: ServerConfig,
  logger: Logger,
): Promise<{ config: ServerConfig; staged: StagedModelFile | undefined }> {
  if (config.modelBasePath === undefined || config.modelConfigFile !== undefined) {
    return { config, staged: undefined };
  }
  const staged = await stageModelFile(config.modelBasePath);
  if (staged === undefined) return { config, staged };
  logger.info('serving a single model file as version 1', { file: config.modelBasePath });
  return { config: { ...config, modelBasePath: staged.basePath }, staged };
}

export interface ModelCatalog {
  readonly sources: ModelSources;
  /** Version directories as TF Serving reads them (00000123 is version 123). */
  readonly versionDirs: VersionDirectoryIndex;
  /** A version's assets (confined under its base path when it was loaded by name under roots). */
  loadVersionAssets(source: ModelSource): Promise<ServableAssets>;
  /** The SageMaker model directory whose shared code/ serves a base path, if any. */
  sharedCodeRoot(basePath: string): string | undefined;
  /** The configured model set, made local; undefined when the config file did not change. */
  readConfigs(): Promise<ModelConfig[] | undefined>;
  /** Fails start-up as TF Serving does when a configured base path cannot serve anything. */
  checkLayouts(configs: readonly ModelConfig[]): Promise<void>;
  /** A SageMaker multi-model `url` (under the roots, an archive or s3://) as a local base path. */
  resolveSageMakerLocation(url: string): Promise<string>;
}

export function createModelCatalog(config: ServerConfig, logger: Logger): ModelCatalog {
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
  const versionDirs = createVersionDirectoryIndex((basePath, version, kept, ignored) => {
    logger.warn('Duplicate version directories detected; loading the one TF Serving would', {
      basePath,
      version,
      loadedFrom: kept,
      ignored,
    });
  });
  const loadAssets = async (basePath: string): Promise<ServableAssets> => {
    const assets = await readModelAssets(basePath, { sharedCodeRoot: sharedCodeRoots.get(basePath) });
    if (assets.handlerModulePath === undefined || handlerDependencies === undefined) return assets;
    return { ...assets, handlerModulePath: await handlerDependencies.prepare(assets.handlerModulePath) };
  };
  let lastConfigText: string | undefined;
  return {
    sources,
    versionDirs,
    sharedCodeRoot: (basePath) => sharedCodeRoots.get(basePath),
    async loadVersionAssets(source) {
      if (source.confined === true) {
        // A SavedModel's files count too: the converter reads them.
        for (const file of [MODEL_FILE_NAME, ...SAVED_MODEL_FILES, 'variables', 'assets']) {
          await checkVersionConfined(source.basePath, source.path, file);
        }
      }
      return loadAssets(source.basePath);
    },
    async readConfigs() {
      const text =
        config.modelConfigFile === undefined ? undefined : await readFile(config.modelConfigFile, 'utf8');
      if (text !== undefined && text === lastConfigText) return undefined;
      lastConfigText = text;
      return localize(config, sources, sharedCodeRoots, modelConfigs(config, text));
    },
    checkLayouts: (configs) => checkModelLayouts(config, configs),
    resolveSageMakerLocation: (url) => resolveSageMakerLocation(sources, config.sagemakerModelRoots, url),
  };
}

/** Remote and archived locations as local directories; a SageMaker model directory as the models it holds. */
async function localize(
  config: ServerConfig,
  sources: ModelSources,
  sharedCodeRoots: Map<string, string>,
  configs: readonly ModelConfig[],
): Promise<ModelConfig[]> {
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
      return { name: m.name, basePath: m.basePath, versionPolicy: DEFAULT_VERSION_POLICY, versionLabels: {} };
    });
  }
  return Promise.all(
    configs.map(async (c) =>
      isS3Uri(c.basePath) || isArchivePath(c.basePath)
        ? { ...c, basePath: await sources.localBasePath(c.basePath) }
        : c,
    ),
  );
}

async function resolveSageMakerLocation(
  sources: ModelSources,
  roots: readonly string[],
  url: string,
): Promise<string> {
  if (!isS3Uri(url) && !isArchivePath(url)) return resolveModelLocation(url, roots);
  const where = isS3Uri(url) ? url : await resolveModelLocation(url, roots, 'file');
  // The container answers 404 for a model location it cannot use.
  return sources.localBasePath(where).catch((error: unknown) => {
    throw notFound(toServingError(error).message);
  });
}
