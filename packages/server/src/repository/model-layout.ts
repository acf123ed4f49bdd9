import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { MODEL_FILE_NAME, isVersionDirectory, parseVersionDirName } from './list-versions.js';

/**
 * Why a base path serves nothing, in words a user can act on (what was found and what
 * layout is expected: `<base>/<version>/model.onnx`), or undefined when it holds at least
 * one version. Never throws.
 */
export async function describeModelLayoutProblem(basePath: string): Promise<string | undefined> {
  let entries: string[];
  try {
    const info = await stat(basePath);
    if (info.isFile()) {
      return basePath.toLowerCase().endsWith('.onnx')
        ? `${basePath} is a model file; pass its directory layout <base>/1/model.onnx, or this file with --model_base_path alone (single-model mode serves it as version 1)`
        : `${basePath} is a file, not a directory of versions (<base>/<version>/${MODEL_FILE_NAME})`;
    }
    entries = await readdir(basePath);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return `${basePath} does not exist`;
    if (code === 'ENOTDIR') return `${basePath} is not a directory`;
    return `${basePath} cannot be read (${code ?? 'error'})`;
  }
  const versions = entries.filter((e) => parseVersionDirName(e) !== undefined);
  for (const v of versions) {
    if (await isVersionDirectory(join(basePath, v))) return undefined;
  }
  if (entries.includes('saved_model.pb')) {
    return `${basePath} holds saved_model.pb directly; versions live in numbered directories: move it (with variables/) to ${join(basePath, '1')}/`;
  }
  if (entries.includes(MODEL_FILE_NAME)) {
    return `${basePath} holds ${MODEL_FILE_NAME} directly; versions live in numbered directories: move it to ${join(basePath, '1', MODEL_FILE_NAME)}`;
  }
  if (versions.length > 0) {
    return `${basePath} has version directories (${versions.slice(0, 5).join(', ')}) but none holds ${MODEL_FILE_NAME} or saved_model.pb`;
  }
  const onnx = entries.find((e) => e.toLowerCase().endsWith('.onnx'));
  if (onnx !== undefined) {
    return `${basePath} holds ${onnx} but no version directory; expected ${join(basePath, '1', MODEL_FILE_NAME)}`;
  }
  return `${basePath} holds no version directory (expected <base>/<version>/${MODEL_FILE_NAME} or a SavedModel <base>/<version>/saved_model.pb, e.g. ${join(basePath, '1', MODEL_FILE_NAME)})`;
}
