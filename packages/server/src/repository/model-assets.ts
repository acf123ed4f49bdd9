import { Code, ServingError, invalidArgument } from '@visionserve/protocol';
import { VISION_CONFIG_FILE, type VisionConfig, parseLabels, parseVisionConfig } from '@visionserve/vision';
import type { ServableAssets } from '../contracts/servable-assets.js';
import { readConfined, resolveConfined } from './confined-path.js';

/** Largest visionserve.json / labels file read, in bytes. */
const MAX_ASSET_BYTES = 16 * 1024 * 1024;

/** Handler module names looked up in `<base>/code/`, first match wins. */
export const HANDLER_MODULE_FILES = ['code/inference.mjs', 'code/inference.js'] as const;

export interface ModelAssetsOptions {
  /**
   * A directory whose `code/` serves models that have no `code/` of their own (the top of a
   * SageMaker model directory holding several models); the module is confined to it. Default: none.
   */
  readonly sharedCodeRoot?: string | undefined;
}

/**
 * Reads what the SageMaker-style endpoint needs from a model's base directory:
 * `visionserve.json` (validated), the labels file it names, and the handler module
 * `code/inference.mjs` / `code/inference.js`. Every path is confined to the directory
 * (real paths; symlinks escaping it are refused with PERMISSION_DENIED). Invalid
 * files are INVALID_ARGUMENT naming the file.
 */
export async function readModelAssets(
  basePath: string,
  options: ModelAssetsOptions = {},
): Promise<ServableAssets> {
  const configBytes = await readConfined(basePath, VISION_CONFIG_FILE, MAX_ASSET_BYTES);
  let config: VisionConfig | undefined;
  if (configBytes !== undefined) {
    let json: unknown;
    try {
      json = JSON.parse(configBytes.toString('utf8'));
    } catch (error) {
      throw invalidArgument(
        `${VISION_CONFIG_FILE}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    config = parseVisionConfig(json);
  }
  let labels: Map<number, string> | undefined;
  const post = config?.postprocess;
  if (post?.labels !== undefined) {
    const bytes = await readConfined(basePath, post.labels, MAX_ASSET_BYTES);
    if (bytes === undefined) {
      throw new ServingError(
        Code.INVALID_ARGUMENT,
        `${VISION_CONFIG_FILE}: labels file "${post.labels}" not found in the model directory`,
      );
    }
    labels = parseLabels(bytes.toString('utf8'), post.labels, post.labelsFormat);
  }
  let handlerModulePath: string | undefined;
  for (const root of [basePath, ...(options.sharedCodeRoot === undefined ? [] : [options.sharedCodeRoot])]) {
    for (const file of HANDLER_MODULE_FILES) {
      handlerModulePath = await resolveConfined(root, file);
      if (handlerModulePath !== undefined) break;
    }
    if (handlerModulePath !== undefined) break;
  }
  return { vision: { config, labels }, handlerModulePath };
}
