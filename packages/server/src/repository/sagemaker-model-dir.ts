import { readdir, stat } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';
import { isVersionDirectory, parseVersionDirName } from './list-versions.js';

/** One model found in a SageMaker model directory. */
export interface FoundModel {
  /** The directory's name (the container names models after their directory). */
  readonly name: string;
  /** Directory holding the model's numeric version directories. */
  readonly basePath: string;
}

/** What a SageMaker model directory (`/opt/ml/model`, an unpacked model.tar.gz) holds. */
export interface SageMakerModelDir {
  /** Models sorted by path; the first is the container's default model. */
  readonly models: readonly FoundModel[];
  /** `<dir>/code` when present: handler code shared by every model that has no `code/` of its own. */
  readonly codeDir: string | undefined;
}

/** How deep models are looked for below the directory (the container searches the whole tree). */
const MAX_DEPTH = 4;

async function isDir(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

async function hasVersion(dir: string, entries: readonly string[]): Promise<boolean> {
  for (const e of entries) {
    if (parseVersionDirName(e) !== undefined && (await isVersionDirectory(join(dir, e)))) return true;
  }
  return false;
}

/**
 * The models in a SageMaker model directory, as the SageMaker TF Serving container finds
 * them: a directory that holds a version (`<version>/model.onnx`, or a TensorFlow SavedModel's
 * `<version>/saved_model.pb`, as SageMaker TF Serving archives have) is a model named after
 * itself, so `/opt/ml/model/1/model.onnx` is one model ("model", or `singleModelName` when
 * given) and `/opt/ml/model/{a,b}/1/saved_model.pb` are models "a" and "b". Version directories are not
 * searched further; `code/` and hidden entries are skipped; symlinked directories are
 * followed. An empty list when nothing is found (the caller names the problem).
 */
export async function findSageMakerModels(dir: string, singleModelName?: string): Promise<SageMakerModelDir> {
  const models: FoundModel[] = [];
  const walk = async (path: string, depth: number): Promise<void> => {
    let entries: string[];
    try {
      entries = (await readdir(path)).sort();
    } catch {
      return;
    }
    if (await hasVersion(path, entries)) {
      const top = relative(dir, path) === '';
      models.push({ name: top ? (singleModelName ?? basename(path)) : basename(path), basePath: path });
      return;
    }
    if (depth >= MAX_DEPTH) return;
    for (const e of entries) {
      if (e.startsWith('.') || (depth === 0 && e === 'code') || parseVersionDirName(e) !== undefined)
        continue;
      const child = join(path, e);
      if (await isDir(child)) await walk(child, depth + 1);
    }
  };
  await walk(dir, 0);
  const codeDir = join(dir, 'code');
  return { models, codeDir: (await isDir(codeDir)) ? codeDir : undefined };
}
