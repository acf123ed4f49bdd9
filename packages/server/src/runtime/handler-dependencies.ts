/**
 * A handler's dependencies, the JS equivalent of the SageMaker container's
 * `code/requirements.txt` and `code/lib`: `code/package.json` is installed with npm into
 * the model's own `code/node_modules` before the handler is first imported; a vendored
 * `code/node_modules` (one this module did not install) is used as it is and wins, as
 * `code/lib` wins over requirements.txt in the container.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, constants, cp, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Code, ServingError } from '@visionserve/protocol';
import type { Logger } from '../util/logger.js';

export interface HandlerDependenciesOptions {
  /** Where code directories that cannot be written (a read-only model mount) are copied and installed. */
  readonly cacheDir: string;
  readonly logger: Logger;
  /** The npm command line (program and leading arguments). Default: npm beside this node, else `npm` on PATH. */
  readonly npm?: readonly string[] | undefined;
  /** Longest an installation may take, in ms. Default 600000. */
  readonly timeoutMs?: number | undefined;
}

/** Installs handler dependencies once per code content; concurrent loads share one installation. */
export interface HandlerDependencies {
  /**
   * The module path to import for a handler module: the same path when its `code/` has no
   * package.json, has a vendored node_modules, or was installed before with the same
   * package.json (and lock file); otherwise after `npm ci` (with a package-lock.json) or
   * `npm install` there, in place when the directory is writable, else in a copy under the
   * cache directory. FAILED_PRECONDITION naming the npm failure when installation fails.
   */
  prepare(modulePath: string): Promise<string>;
}

/** Written into node_modules after an installation: tells ours apart from vendored ones. */
const MARKER = '.visionserve-install.json';

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

async function optional(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch {
    return undefined;
  }
}

function defaultNpm(): string[] {
  const beside = join(dirname(process.execPath), 'npm');
  return [beside];
}

/** Runs npm; resolves with the tail of its output, rejects with it on failure. */
function runNpm(
  npm: readonly string[],
  args: readonly string[],
  cwd: string,
  timeoutMs: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(npm[0]!, [...npm.slice(1), ...args], {
      cwd,
      env: { ...process.env, npm_config_update_notifier: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-4000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${npm.join(' ')}: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else {
        const why =
          signal !== null ? `killed (${signal}${signal === 'SIGKILL' ? ', timed out' : ''})` : `exit ${code}`;
        const tail = output.trim().split('\n').slice(-8).join('\n');
        reject(new Error(`npm ${args[0]} ${why}${tail === '' ? '' : `:\n${tail}`}`));
      }
    });
  });
}

export function createHandlerDependencies(options: HandlerDependenciesOptions): HandlerDependencies {
  const npm = options.npm ?? defaultNpm();
  const timeoutMs = options.timeoutMs ?? 600_000;
  const { logger } = options;
  const pending = new Map<string, Promise<string>>();

  const install = async (codeDir: string, hash: string, lock: boolean): Promise<void> => {
    const started = Date.now();
    logger.info('installing handler dependencies', { codeDir, command: lock ? 'npm ci' : 'npm install' });
    const args = lock
      ? ['ci', '--omit=dev', '--no-audit', '--no-fund', '--loglevel=error']
      : [
          'install',
          '--omit=dev',
          '--no-audit',
          '--no-fund',
          '--no-save',
          '--no-package-lock',
          '--loglevel=error',
        ];
    try {
      await runNpm(npm, args, codeDir, timeoutMs);
    } catch (error) {
      throw new ServingError(
        Code.FAILED_PRECONDITION,
        `code/package.json: installing the handler's dependencies failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    await mkdir(join(codeDir, 'node_modules'), { recursive: true });
    await writeFile(
      join(codeDir, 'node_modules', MARKER),
      JSON.stringify({ hash, at: new Date().toISOString() }),
    );
    logger.info('handler dependencies installed', { codeDir, ms: Date.now() - started });
  };

  const prepareDir = async (modulePath: string): Promise<string> => {
    const codeDir = dirname(modulePath);
    const pkg = await optional(join(codeDir, 'package.json'));
    if (pkg === undefined) return modulePath;
    const modules = join(codeDir, 'node_modules');
    const marker = await optional(join(modules, MARKER));
    if (marker === undefined && (await exists(modules))) {
      logger.info('handler dependencies: using the vendored code/node_modules', { codeDir });
      return modulePath;
    }
    const lockFile = await optional(join(codeDir, 'package-lock.json'));
    let hasDependencies = false;
    try {
      const parsed = JSON.parse(pkg.toString('utf8')) as { dependencies?: Record<string, string> };
      hasDependencies = Object.keys(parsed.dependencies ?? {}).length > 0;
    } catch (error) {
      throw new ServingError(
        Code.FAILED_PRECONDITION,
        `code/package.json is not valid JSON: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    if (!hasDependencies) return modulePath;
    const hash = createHash('sha256')
      .update(pkg)
      .update('\0')
      .update(lockFile ?? '')
      .digest('hex');
    const installed = (dir: string): Promise<boolean> =>
      readFile(join(dir, 'node_modules', MARKER), 'utf8').then(
        (text) => (JSON.parse(text) as { hash?: string }).hash === hash,
        () => false,
      );
    if (await installed(codeDir)) return modulePath;
    let writable = true;
    try {
      await access(codeDir, constants.W_OK);
    } catch {
      writable = false;
    }
    if (writable) {
      await install(codeDir, hash, lockFile !== undefined);
      return modulePath;
    }
    // A read-only model directory: install into a copy of code/ (node resolves packages from the module's real path).
    const copy = join(
      options.cacheDir,
      'handler-code',
      createHash('sha256').update(codeDir).update(hash).digest('hex').slice(0, 24),
    );
    if (!(await installed(copy))) {
      const tmp = `${copy}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
      await mkdir(dirname(copy), { recursive: true });
      await cp(codeDir, tmp, { recursive: true, filter: (src) => basename(src) !== 'node_modules' });
      try {
        await install(tmp, hash, lockFile !== undefined);
        await rm(copy, { recursive: true, force: true });
        await rename(tmp, copy);
      } catch (error) {
        await rm(tmp, { recursive: true, force: true });
        throw error;
      }
      logger.info('handler code copied out of a read-only model directory', { from: codeDir, to: copy });
    }
    return join(copy, basename(modulePath));
  };

  return {
    prepare(modulePath) {
      let result = pending.get(modulePath);
      if (result === undefined) {
        result = prepareDir(modulePath);
        // Shares one installation among concurrent loads only; a failed one is tried again with the next load.
        const forget = (): void => {
          pending.delete(modulePath);
        };
        result.then(forget, forget);
        pending.set(modulePath, result);
      }
      return result;
    },
  };
}
