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

/**
 * A base path child's version as TF Serving reads it: decimal digits, leading zeros
 * allowed (`00000123` is version 123); anything else (signs, spaces, letters, numbers
 * beyond Number.MAX_SAFE_INTEGER) is no version and is ignored.
 */
export function parseVersionDirName(name: string): number | undefined {
  if (!/^\d+$/.test(name)) return undefined;
  const version = Number(name);
  return Number.isSafeInteger(version) ? version : undefined;
}

/**
 * Version -> directory name among `names`. Two names for one version (`1` and `001`):
 * the last in byte order wins, as in TF Serving (which warns the same way); `onDuplicate`
 * is told of the name left out.
 */
export function indexVersionNames(
  names: readonly string[],
  onDuplicate?: (version: number, kept: string, ignored: string) => void,
): Map<number, string> {
  const byVersion = new Map<number, string>();
  for (const name of [...names].sort()) {
    const version = parseVersionDirName(name);
    if (version === undefined) continue;
    const previous = byVersion.get(version);
    if (previous !== undefined) onDuplicate?.(version, name, previous);
    byVersion.set(version, name);
  }
  return byVersion;
}

async function readBasePath(basePath: string): Promise<string[]> {
  try {
    return await readdir(basePath);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new ServingError(Code.NOT_FOUND, `Could not find base path ${basePath}`, { cause: error });
    }
    throw new ServingError(Code.UNAVAILABLE, `Could not list base path ${basePath}: ${String(code)}`, {
      cause: error,
    });
  }
}

/**
 * The version directories under a model's base path: version -> directory name, for the
 * subdirectories whose names are versions (parseVersionDirName; symlinks followed) and
 * that hold a regular file `model.onnx` or `saved_model.pb(txt)`. Of two names for one
 * version, the one TF Serving would load (indexVersionNames) is kept if it holds a model.
 *
 * A missing base path (or one that is not a directory) rejects with NOT_FOUND;
 * other fs failures reject with UNAVAILABLE. The caller (the model manager)
 * logs these as warnings and keeps serving what it has; it never crashes.
 */
export async function listVersionDirectories(
  basePath: string,
  onDuplicate?: (version: number, kept: string, ignored: string) => void,
): Promise<Map<number, string>> {
  const byVersion = indexVersionNames(await readBasePath(basePath), onDuplicate);
  const found = await Promise.all(
    [...byVersion].map(async ([version, name]) =>
      (await isVersionDirectory(join(basePath, name))) ? ([version, name] as const) : undefined,
    ),
  );
  const present = found.filter((e) => e !== undefined).sort((a, b) => a[0] - b[0]);
  return new Map(present);
}

/** The versions of listVersionDirectories, ascending. */
export async function listVersions(basePath: string): Promise<number[]> {
  return [...(await listVersionDirectories(basePath)).keys()];
}

/**
 * Lists versions for the model manager and remembers each base path's directory names,
 * so that a version maps back to its real directory (`<base>/00000123` for version 123).
 * Duplicate names are reported once per base path and pair.
 */
export interface VersionDirectoryIndex {
  list(basePath: string): Promise<number[]>;
  /** `<basePath>/<name>` of the version's directory at the last listing; `<basePath>/<version>` if never listed. */
  path(basePath: string, version: number): string;
}

export function createVersionDirectoryIndex(
  onDuplicate: (basePath: string, version: number, kept: string, ignored: string) => void,
): VersionDirectoryIndex {
  const names = new Map<string, Map<number, string>>();
  const reported = new Set<string>();
  return {
    async list(basePath) {
      const dirs = await listVersionDirectories(basePath, (version, kept, ignored) => {
        const key = `${basePath}\u0000${kept}\u0000${ignored}`;
        if (reported.has(key)) return;
        reported.add(key);
        onDuplicate(basePath, version, kept, ignored);
      });
      names.set(basePath, dirs);
      return [...dirs.keys()];
    },
    path(basePath, version) {
      return join(basePath, names.get(basePath)?.get(version) ?? String(version));
    },
  };
}
