import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Code, ServingError } from '@visionserve/protocol';

/** File an ONNX version directory holds. */
export const MODEL_FILE_NAME = 'model.onnx';

/** Files that make a directory a TensorFlow SavedModel version (converted to ONNX on load). */
export const SAVED_MODEL_FILES = ['saved_model.pb', 'saved_model.pbtxt'] as const;

/** Files any of which makes a numeric directory a version. */
export const VERSION_MARKER_FILES: readonly string[] = [MODEL_FILE_NAME, ...SAVED_MODEL_FILES];

/** True when `dir` holds a regular file named by VERSION_MARKER_FILES. */
export async function isVersionDirectory(dir: string): Promise<boolean> {
  for (const name of VERSION_MARKER_FILES) {
    try {
      if ((await stat(join(dir, name))).isFile()) return true;
    } catch {
      // Not this one.
    }
  }
  return false;
}

/** Canonical decimal (no leading zeros), so `<basePath>/<String(version)>` is the directory. */
const VERSION_DIR = /^(0|[1-9]\d*)$/;

/**
 * Versions found under a model's base path, ascending: the names of numeric
 * subdirectories (digits only, no leading zeros, symlinks followed) that hold a
 * regular file `model.onnx` or `saved_model.pb(txt)`; version N lives in `<basePath>/N`.
 * Other entries (non-numeric names, "007", files, dirs without a model, numbers beyond
 * Number.MAX_SAFE_INTEGER) are ignored.
 *
 * A missing base path (or one that is not a directory) rejects with NOT_FOUND;
 * other fs failures reject with UNAVAILABLE. The caller (the model manager)
 * logs these as warnings and keeps serving what it has; it never crashes.
 */
export async function listVersions(basePath: string): Promise<number[]> {
  let names: string[];
  try {
    names = await readdir(basePath);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new ServingError(Code.NOT_FOUND, `Could not find base path ${basePath}`, { cause: error });
    }
    throw new ServingError(Code.UNAVAILABLE, `Could not list base path ${basePath}: ${String(code)}`, {
      cause: error,
    });
  }
  const candidates = names.filter((n) => VERSION_DIR.test(n) && Number.isSafeInteger(Number(n)));
  const found = await Promise.all(
    candidates.map(async (name) =>
      (await isVersionDirectory(join(basePath, name))) ? Number(name) : undefined,
    ),
  );
  return found.filter((v): v is number => v !== undefined).sort((a, b) => a - b);
}
