/**
 * Path confinement for files named by configs or requests: a path is only used
 * when its real path (every symlink followed) lies inside an allowed directory.
 */
import { open, realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { Code, ServingError, notFound } from '@visionserve/protocol';

/** True when `child` is `parent` or lies below it (both absolute, normalised). */
export function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

async function realOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await realpath(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // Names a client may send that cannot exist: treated as absent (404), not as a fault (500).
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG' || code === 'ELOOP')
      return undefined;
    throw error;
  }
}

/**
 * The real path of `relativePath` under `baseDir`, or undefined when it does not
 * exist. `relativePath` must be relative and may not contain `..` segments; a path
 * whose real location (after symlinks) is outside the real `baseDir` is refused
 * with PERMISSION_DENIED, as is a base dir that does not exist (NOT_FOUND).
 */
export async function resolveConfined(baseDir: string, relativePath: string): Promise<string | undefined> {
  if (relativePath === '' || isAbsolute(relativePath) || relativePath.split(/[\\/]/).includes('..')) {
    throw new ServingError(
      Code.PERMISSION_DENIED,
      `Path "${relativePath}" must be relative to the model directory and may not contain ".."`,
    );
  }
  const base = await realOrUndefined(baseDir);
  // The host path stays out of the message: it can reach clients.
  if (base === undefined) throw notFound(`Model directory does not exist`);
  const real = await realOrUndefined(resolve(base, relativePath));
  if (real === undefined) return undefined;
  if (!isInside(base, real)) {
    throw new ServingError(
      Code.PERMISSION_DENIED,
      `Path "${relativePath}" resolves outside the model directory (symlink escape refused)`,
    );
  }
  return real;
}

/**
 * Reads a regular file confined to `baseDir` (see resolveConfined); undefined when
 * absent. Files larger than `maxBytes` are refused with INVALID_ARGUMENT.
 */
export async function readConfined(
  baseDir: string,
  relativePath: string,
  maxBytes: number,
): Promise<Buffer | undefined> {
  const real = await resolveConfined(baseDir, relativePath);
  if (real === undefined) return undefined;
  const handle = await open(real, 'r');
  try {
    const s = await handle.stat();
    if (!s.isFile()) throw new ServingError(Code.INVALID_ARGUMENT, `"${relativePath}" is not a regular file`);
    if (s.size > maxBytes) {
      throw new ServingError(
        Code.INVALID_ARGUMENT,
        `"${relativePath}" is ${s.size} bytes; the limit is ${maxBytes} bytes`,
      );
    }
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/**
 * Resolves a model location given by a client (SageMaker `POST /models` `url`) to the
 * real path of an existing directory (or, with `kind` "file", a model archive) inside one of `roots`. Refused with NOT_FOUND,
 * never touching anything outside the roots: `..` segments, relative paths,
 * non-`file:` URL schemes, paths that do not exist or are not directories, and
 * paths whose real location (symlinks followed) is outside every root.
 */
export async function resolveModelLocation(
  url: string,
  roots: readonly string[],
  kind: 'directory' | 'file' = 'directory',
): Promise<string> {
  let path = url;
  if (/^[a-z][a-z0-9+.-]*:/i.test(path)) {
    if (!path.startsWith('file://')) throw notFound(`Unsupported model url scheme: ${url}`);
    try {
      path = decodeURIComponent(new URL(path).pathname);
    } catch {
      throw notFound(`Invalid model url: ${url}`);
    }
  }
  if (path.includes('\0') || path.split(/[\\/]/).includes('..')) {
    throw notFound(`Invalid model path (".." is not allowed): ${url}`);
  }
  if (!isAbsolute(path)) throw notFound(`Model path must be absolute: ${url}`);
  const lexical = resolve(path);
  const realRoots = (await Promise.all(roots.map((r) => realOrUndefined(resolve(r))))).filter(
    (r): r is string => r !== undefined,
  );
  // Check the lexical path first so that nothing outside the roots is even stat'ed.
  const lexicalRoots = roots.map((r) => resolve(r));
  if (![...lexicalRoots, ...realRoots].some((root) => isInside(root, lexical))) {
    throw notFound(`Model path ${url} is outside the allowed model roots`);
  }
  const real = await realOrUndefined(lexical);
  if (real === undefined) throw notFound(`Could not find model path ${url}`);
  if (!realRoots.some((root) => isInside(root, real))) {
    throw notFound(`Model path ${url} resolves outside the allowed model roots`);
  }
  const s = await stat(real);
  if (kind === 'directory' && !s.isDirectory()) throw notFound(`Model path ${url} is not a directory`);
  if (kind === 'file' && !s.isFile()) throw notFound(`Model archive ${url} is not a file`);
  return real;
}

/**
 * For models whose files must stay inside their base path (loaded through a confined API
 * such as the SageMaker multi-model endpoint): refuses with PERMISSION_DENIED a version
 * directory or model file whose real path (symlinks followed) leaves the real base path.
 */
export async function checkVersionConfined(
  basePath: string,
  versionPath: string,
  modelFile: string,
): Promise<void> {
  const base = await realOrUndefined(basePath);
  if (base === undefined) throw notFound('Model directory does not exist');
  for (const path of [versionPath, resolve(versionPath, modelFile)]) {
    const real = await realOrUndefined(path);
    if (real !== undefined && !isInside(base, real)) {
      throw new ServingError(
        Code.PERMISSION_DENIED,
        `${relative(basePath, path)} resolves outside the model directory (symlink escape refused)`,
      );
    }
  }
}
