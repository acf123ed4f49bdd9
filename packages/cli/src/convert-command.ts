import { spawn } from 'node:child_process';
import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  CONVERTER_REQUIREMENTS,
  CONVERTER_SCRIPT,
  createJsonLogger,
  createSavedModelConverter,
  defaultCacheDir,
  setupPython,
} from '@visionserve/server';
import { type Command, UsageError, flag, numberOption, parseCommandArgs, stringOption } from './cli-args.js';

const HELP = `Usage: visionserve convert --setup [--python python3] [--cache-dir DIR]
       visionserve convert SAVED_MODEL_DIR [--python PY] [--cache-dir DIR] [--timeout SECONDS] [--json]

TensorFlow SavedModels are served by converting them to ONNX (tf2onnx), one file per signature,
keeping the signature names, input/output keys, dtypes and method names. The server converts a
SavedModel version when it loads it; this command sets the converter up, or converts ahead of
time (the server then finds the result in its cache: same --cache-dir, same content).

  --setup           create the converter environment: a Python venv in <cache-dir>/converter-venv
                    with ${CONVERTER_REQUIREMENTS.join(' ')} (about 1.7 GB)
  SAVED_MODEL_DIR   a version directory (holds saved_model.pb) or a model base directory
                    (numeric version directories); every version found is converted
  --python PY       the interpreter: for --setup the one that creates the venv (default python3),
                    otherwise one that has tensorflow, tf2onnx and onnx (default: the venv --setup made)
  --cache-dir DIR   conversion cache (default $VISIONSERVE_CACHE_DIR or ~/.cache/visionserve)
  --timeout S       longest conversion in seconds (default 600)
  --json            print the result as JSON

Exit codes: 0 every signature converted, 1 a signature or version failed (the ops without an
ONNX equivalent are named), 2 usage error.`;

function run(command: string, args: readonly string[]): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('close', (code) => {
      resolvePromise(code ?? 1);
    });
  });
}

async function setup(python: string, cacheDir: string): Promise<number> {
  const venv = join(cacheDir, 'converter-venv');
  console.error(`visionserve convert: creating ${venv} with ${python}`);
  if ((await run(python, ['-m', 'venv', venv])) !== 0) {
    console.error(`visionserve convert: "${python} -m venv" failed (install the python3-venv package?)`);
    return 1;
  }
  const pip = join(venv, 'bin', 'pip');
  console.error(`visionserve convert: installing ${CONVERTER_REQUIREMENTS.join(' ')} (a few minutes)`);
  if ((await run(pip, ['install', '-q', '--disable-pip-version-check', ...CONVERTER_REQUIREMENTS])) !== 0) {
    console.error('visionserve convert: pip install failed');
    return 1;
  }
  const check = await run(setupPython(cacheDir), [CONVERTER_SCRIPT, '--check']);
  if (check !== 0) return 1;
  console.error(`visionserve convert: ready; the server uses ${setupPython(cacheDir)} by default`);
  return 0;
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** The version directories under `dir`: itself when it holds a SavedModel, else its numeric subdirectories that do. */
async function versionDirs(dir: string): Promise<string[]> {
  const has = async (d: string): Promise<boolean> =>
    (await stat(join(d, 'saved_model.pb')).catch(() => undefined)) !== undefined ||
    (await stat(join(d, 'saved_model.pbtxt')).catch(() => undefined)) !== undefined;
  if (await has(dir)) return [dir];
  if (!(await isDir(dir))) throw new UsageError(`${dir} is not a directory`);
  const out: string[] = [];
  for (const name of (await readdir(dir))
    .filter((n) => /^\d+$/.test(n))
    .sort((a, b) => Number(a) - Number(b))) {
    if (await has(join(dir, name))) out.push(join(dir, name));
  }
  if (out.length === 0)
    throw new UsageError(`${dir} holds no saved_model.pb (nor version directories with one)`);
  return out;
}

export const convert: Command = {
  help: HELP,
  async run(argv, env) {
    const { values, positionals } = parseCommandArgs(argv, {
      setup: { type: 'boolean' },
      python: { type: 'string' },
      'cache-dir': { type: 'string' },
      timeout: { type: 'string' },
      json: { type: 'boolean' },
    });
    const cacheDir = resolve(stringOption(values, 'cache-dir') ?? defaultCacheDir(env));
    const python = stringOption(values, 'python');
    if (flag(values, 'setup')) {
      if (positionals.length > 0) throw new UsageError('--setup takes no SavedModel directory');
      return setup(python ?? 'python3', cacheDir);
    }
    if (positionals.length !== 1) throw new UsageError('expects one SavedModel directory (or --setup)');
    const timeout = numberOption(values, 'timeout', { min: 1, integer: true }) ?? 600;
    const converter = createSavedModelConverter({
      python: python ?? env['VISIONSERVE_CONVERTER_PYTHON'],
      cacheDir,
      timeoutMs: timeout * 1000,
      logger: createJsonLogger({ level: 'warn' }),
    });
    const report: Record<string, unknown>[] = [];
    let failed = false;
    for (const dir of await versionDirs(resolve(positionals[0]!))) {
      const started = performance.now();
      try {
        const { dir: out, manifest, cached } = await converter.convert(dir);
        const signatures = Object.fromEntries(
          Object.entries(manifest.signatures).map(([name, s]) => [
            name,
            s.status === 'ok'
              ? {
                  status: 'ok',
                  method: s.methodName,
                  onnx: join(out, s.onnx!),
                  examples: s.examples !== undefined,
                }
              : { status: s.status, error: s.error, unsupportedOps: s.unsupportedOps },
          ]),
        );
        if (Object.values(manifest.signatures).some((s) => s.status !== 'ok')) failed = true;
        report.push({
          version: dir,
          output: out,
          cached,
          seconds: (performance.now() - started) / 1000,
          signatures,
        });
      } catch (error) {
        failed = true;
        report.push({ version: dir, error: error instanceof Error ? error.message : String(error) });
      }
    }
    if (flag(values, 'json')) {
      console.log(JSON.stringify(report, null, 1));
    } else {
      for (const r of report) {
        if (typeof r['error'] === 'string') {
          console.log(`${String(r['version'])}: FAILED ${r['error']}`);
          continue;
        }
        const secs = (r['seconds'] as number).toFixed(1);
        console.log(
          `${String(r['version'])} -> ${String(r['output'])}${r['cached'] === true ? ' (cached)' : ''} ${secs} s`,
        );
        for (const [name, s] of Object.entries(r['signatures'] as Record<string, Record<string, unknown>>)) {
          console.log(
            s['status'] === 'ok'
              ? `  ${name}: ok (${String(s['method'])}${s['examples'] === true ? ', tf.Example inputs parsed by the server' : ''})`
              : `  ${name}: ${String(s['status'])}: ${String(s['error'])}`,
          );
        }
      }
    }
    return failed ? 1 : 0;
  },
};
