import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Code, ServingError } from '@visionserve/protocol';
import type { ModelFiles, ModelFilesResolver } from '../contracts/model-files.js';
import { MODEL_FILE_NAME, SAVED_MODEL_FILES } from './list-versions.js';
import { modelFilesOf } from './saved-model-manifest.js';
import type { SavedModelConverter } from './saved-model-converter.js';

export interface ModelFilesResolverOptions {
  /** Converts SavedModel versions; without it they fail to load with FAILED_PRECONDITION. */
  readonly converter: SavedModelConverter | undefined;
  /**
   * Names of SavedModel signatures the model serves another way (the encoded-image signature
   * of its visionserve.json): they may fail to convert without failing the load. Default: none.
   */
  readonly servedElsewhere?: ((basePath: string) => Promise<ReadonlySet<string>>) | undefined;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/**
 * What a version directory serves: `model.onnx` as serving_default, else a TensorFlow
 * SavedModel (`saved_model.pb` / `.pbtxt`) converted to one ONNX file per signature
 * (cached by content hash), keeping its signature names, keys, dtypes and method names.
 */
export function createModelFilesResolver(options: ModelFilesResolverOptions): ModelFilesResolver {
  return async (source) => {
    const onnx = join(source.path, MODEL_FILE_NAME);
    if (await isFile(onnx)) return { signatures: { serving_default: { path: onnx } } } satisfies ModelFiles;
    let savedModel = false;
    for (const name of SAVED_MODEL_FILES) savedModel ||= await isFile(join(source.path, name));
    if (!savedModel) {
      // Raced with a removal, or a broken layout: say what was expected.
      throw new ServingError(
        Code.NOT_FOUND,
        `Version directory holds neither ${MODEL_FILE_NAME} nor saved_model.pb`,
      );
    }
    if (options.converter === undefined) {
      throw new ServingError(
        Code.FAILED_PRECONDITION,
        'TensorFlow SavedModels are not enabled on this server',
      );
    }
    const conversion = await options.converter.convert(source.path);
    const replaced = (await options.servedElsewhere?.(source.basePath)) ?? new Set<string>();
    return modelFilesOf(conversion.dir, conversion.manifest, replaced);
  };
}
