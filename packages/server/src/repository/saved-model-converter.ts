/**
 * TensorFlow SavedModel -> ONNX, in a Python child process (`python/savedmodel_to_onnx.py`,
 * tf2onnx), cached by content hash. Conversions run one at a time: tf2onnx holds 35-70x
 * the model's weights in memory while it works.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access, mkdir, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import { homedir, setPriority } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Code, ServingError } from '@visionserve/protocol';
import type { Logger } from '../util/logger.js';
import { type ConversionManifest, parseConversionManifest } from './saved-model-manifest.js';

/** The converter script shipped with the server package. */
export const CONVERTER_SCRIPT = fileURLToPath(
  new URL('../../../python/savedmodel_to_onnx.py', import.meta.url),
);

/** Exact versions `visionserve convert --setup` installs (checked to work together on Python 3.11). */
export const CONVERTER_REQUIREMENTS = ['tensorflow-cpu==2.21.0', 'tf2onnx==1.17.0', 'onnx==1.23.2'] as const;

/** The command that sets the converter environment up, for error messages. */
export const SETUP_COMMAND = 'npx visionserve convert --setup';

/** Default cache directory: $VISIONSERVE_CACHE_DIR, else $XDG_CACHE_HOME/visionserve, else ~/.cache/visionserve. */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env['VISIONSERVE_CACHE_DIR']) return env['VISIONSERVE_CACHE_DIR'];
  const base = env['XDG_CACHE_HOME'] || join(homedir(), '.cache');
  return join(base, 'visionserve');
}

/** Python of the environment `visionserve convert --setup` creates under a cache directory. */
export function setupPython(cacheDir: string): string {
  return join(cacheDir, 'converter-venv', 'bin', 'python');
}

export interface SavedModelConverterOptions {
  /**
   * Python interpreter with tensorflow, tf2onnx and onnx. Default: the environment `visionserve
   * convert --setup` made under `cacheDir`, when it exists.
   */
  readonly python?: string | undefined;
  /** Where conversions are cached (`<cacheDir>/savedmodel/<hash>/`). Default: defaultCacheDir(). */
  readonly cacheDir?: string | undefined;
  /** A conversion running longer is killed (its whole process group) and fails. Default 600000 ms. */
  readonly timeoutMs?: number | undefined;
  readonly logger: Logger;
}

/** A converted version: its manifest and the directory its files are in. */
export interface Conversion {
  readonly dir: string;
  readonly manifest: ConversionManifest;
  /** True when it came from the cache. */
  readonly cached: boolean;
}

export interface SavedModelConverter {
  /**
   * The ONNX conversion of the SavedModel in `versionDir` (from the cache when its content
   * hash matches). FAILED_PRECONDITION naming the setup command when there is no converter
   * environment; DEADLINE_EXCEEDED after the timeout; INVALID_ARGUMENT when TensorFlow cannot
   * read the model.
   */
  convert(versionDir: string, signal?: AbortSignal): Promise<Conversion>;
  /** The interpreter conversions use, or undefined when none is set up. */
  python(): Promise<string | undefined>;
}

/** Files whose content defines a SavedModel version (saved_model.pb/.pbtxt, variables/, assets/). */
async function contentFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const entry of await readdir(d, { withFileTypes: true })) {
      const p = join(d, entry.name);
      if (entry.isDirectory()) await walk(p);
      else if (entry.isFile()) out.push(p);
    }
  };
  for (const name of ['saved_model.pb', 'saved_model.pbtxt']) {
    if (await exists(join(dir, name))) out.push(join(dir, name));
  }
  for (const sub of ['variables', 'assets']) {
    if (await exists(join(dir, sub))) await walk(join(dir, sub));
  }
  return out.sort();
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

async function hashFile(hash: ReturnType<typeof createHash>, path: string): Promise<void> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

/** SHA-256 over the model's files (relative names, sizes, bytes), the script and the interpreter. */
export async function conversionKey(versionDir: string, python: string): Promise<string> {
  const hash = createHash('sha256');
  hash.update(await readFile(CONVERTER_SCRIPT));
  hash.update(`\0${python}\0`);
  try {
    hash.update(String((await stat(python)).mtimeMs));
  } catch {
    // A missing interpreter fails later, with its own message.
  }
  for (const file of await contentFiles(versionDir)) {
    const info = await stat(file);
    hash.update(`\0${relative(versionDir, file)}\0${info.size}\0`);
    await hashFile(hash, file);
  }
  return hash.digest('hex').slice(0, 32);
}

interface ChildResult {
  readonly code: number | null;
  readonly timedOut: boolean;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the converter in its own process group; the timeout or an abort kills the whole group. */
function runConverter(
  python: string,
  args: readonly string[],
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [CONVERTER_SCRIPT, ...args], {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TF_CPP_MIN_LOG_LEVEL: '2', CUDA_VISIBLE_DEVICES: '', PYTHONUNBUFFERED: '1' },
    });
    if (child.pid !== undefined) {
      try {
        // Conversions are batch work: leave the cores to serving first.
        setPriority(child.pid, 10);
      } catch {
        // Not permitted here: run at normal priority.
      }
    }
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const kill = (): void => {
      if (child.pid !== undefined && child.exitCode === null) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, timeoutMs);
    const onAbort = (): void => {
      kill();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout = (stdout + d).slice(-65536);
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr = (stderr + d).slice(-65536);
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve({ code, timedOut, stdout, stderr });
    });
  });
}

/** The last JSON line the converter printed. */
function replyOf(stdout: string): { ok?: boolean; error?: string } {
  const lines = stdout.trim().split('\n').reverse();
  for (const line of lines) {
    try {
      return JSON.parse(line) as { ok?: boolean; error?: string };
    } catch {
      // Not the reply line.
    }
  }
  return {};
}

/** The converter, with its cache and its one-at-a-time queue. */
export function createSavedModelConverter(options: SavedModelConverterOptions): SavedModelConverter {
  const cacheDir = options.cacheDir ?? defaultCacheDir();
  const timeoutMs = options.timeoutMs ?? 600_000;
  const log = options.logger;
  let queue: Promise<unknown> = Promise.resolve();
  /** Conversions in progress by key, so concurrent loads of one model share one. */
  const running = new Map<string, Promise<Conversion>>();

  async function python(): Promise<string | undefined> {
    if (options.python !== undefined) return options.python;
    const candidate = setupPython(cacheDir);
    return (await exists(candidate)) ? candidate : undefined;
  }

  async function readCached(dir: string): Promise<ConversionManifest | undefined> {
    try {
      return parseConversionManifest(JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')));
    } catch {
      return undefined;
    }
  }

  async function convertNow(
    versionDir: string,
    py: string,
    key: string,
    signal?: AbortSignal,
  ): Promise<Conversion> {
    const root = join(cacheDir, 'savedmodel');
    const dir = join(root, key);
    const cached = await readCached(dir);
    if (cached !== undefined) return { dir, manifest: cached, cached: true };
    await mkdir(root, { recursive: true });
    const work = join(root, `${key}.tmp-${process.pid}-${Date.now()}`);
    const started = performance.now();
    log.info('converting SavedModel to ONNX', { python: py });
    try {
      const result = await runConverter(
        py,
        ['--saved-model', versionDir, '--out-dir', work],
        timeoutMs,
        signal,
      );
      const reply = replyOf(result.stdout);
      if (result.timedOut) {
        throw new ServingError(
          Code.DEADLINE_EXCEEDED,
          `SavedModel conversion did not finish within ${Math.round(timeoutMs / 1000)} s (raise --saved_model_conversion_timeout_seconds)`,
        );
      }
      if (signal?.aborted) throw new ServingError(Code.CANCELLED, 'SavedModel conversion cancelled');
      if (result.code === 3) {
        throw new ServingError(
          Code.FAILED_PRECONDITION,
          `The SavedModel converter environment (${py}) is incomplete: ${reply.error ?? 'import failed'}. Run "${SETUP_COMMAND}"`,
        );
      }
      if (result.code !== 0 || reply.ok !== true) {
        const detail =
          reply.error ?? (result.stderr.trim().split('\n').at(-1) || `exit code ${String(result.code)}`);
        log.error('SavedModel conversion failed', { stderr: result.stderr.slice(-4000) });
        throw new ServingError(Code.INVALID_ARGUMENT, `SavedModel conversion failed: ${detail}`);
      }
      const manifest = await readCached(work);
      if (manifest === undefined)
        throw new ServingError(Code.INTERNAL, 'SavedModel conversion wrote no valid manifest');
      await rm(dir, { recursive: true, force: true });
      await rename(work, dir);
      log.info('SavedModel converted', { ms: Math.round(performance.now() - started), key });
      return { dir, manifest, cached: false };
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  return {
    python,
    async convert(versionDir, signal) {
      const py = await python();
      if (py === undefined) {
        throw new ServingError(
          Code.FAILED_PRECONDITION,
          `This version is a TensorFlow SavedModel; serving it needs the SavedModel converter (tensorflow + tf2onnx), which is not set up: run "${SETUP_COMMAND}" or pass --saved_model_converter_python`,
        );
      }
      if (!(await exists(py))) {
        throw new ServingError(
          Code.FAILED_PRECONDITION,
          `The SavedModel converter's Python (${py}) does not exist: run "${SETUP_COMMAND}" or fix --saved_model_converter_python`,
        );
      }
      const key = await conversionKey(versionDir, py);
      const dir = join(cacheDir, 'savedmodel', key);
      const cached = await readCached(dir);
      if (cached !== undefined) return { dir, manifest: cached, cached: true };
      const pending = running.get(key);
      if (pending !== undefined) return pending;
      const run = queue.then(() => convertNow(versionDir, py, key, signal));
      queue = run.catch(() => undefined);
      running.set(key, run);
      try {
        return await run;
      } finally {
        running.delete(key);
      }
    },
  };
}
