import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import {
  ConfigError,
  IGNORED_TF_SERVING_FLAGS,
  flagHelpLines,
  type SpareInferenceWorkers,
} from '@visionserve/server/boot';
import { loadServerEntries } from '@visionserve/server/entries';
import type { Command } from './cli-args.js';
import { initialInferenceThreads } from './initial-inference-threads.js';
import { describeMallocTuning, stopWithLauncher } from './malloc-tuning.js';
import { isVersionRequest } from './serve-args.js';

export const SERVE_HELP = `Usage: visionserve serve [flags]

Starts the TF Serving compatible gRPC (:8500) and REST (:8501) APIs and the
SageMaker-style endpoint (:8080: /ping, /invocations, multi-model /models with
SAGEMAKER_MULTI_MODEL=true; --sagemaker_port=-1 disables it).
With no model flag, serves /opt/ml/model when it holds anything (the SageMaker
layout: <version>/model.onnx at its top, or <model>/<version>/model.onnx, plus
code/), else a generated demo model, half_plus_two (y = 0.5 * x + 2), so this
works with no arguments.

Flags (TF Serving names; --flag=value or --flag value; docs/configuration.md):
${flagHelpLines().join('\n')}

Accepted for TF Serving command lines, warned about once and ignored (no meaning here):
${Object.keys(IGNORED_TF_SERVING_FLAGS)
  .map((name) => `  --${name}`)
  .join('\n')}
`;

/** Where SageMaker puts the model (model.tar.gz unpacked). */
const SAGEMAKER_MODEL_DIR = '/opt/ml/model';

async function holdsAnything(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).length > 0;
  } catch {
    return false;
  }
}

/** Runs the server until SIGINT/SIGTERM; resolves with the exit code. */
export async function serveCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (isVersionRequest(argv)) {
    const pkg = createRequire(import.meta.url)('../../package.json') as { version?: string };
    console.log(`visionserve (TensorFlow ModelServer compatible): ${pkg.version ?? 'unknown'}`);
    return 0;
  }
  let demoRoot: string | undefined;
  let spareWorkers: SpareInferenceWorkers | undefined;
  // The server's bundle when it is built and fresh (a third of the start-up CPU), else its modules.
  const entries = await loadServerEntries({ bundle: env['VISIONSERVE_SERVER_BUNDLE'] !== '0' });
  const { configFromEnv, createJsonLogger, parseFlags, resolveServerConfig, startSpareInferenceWorkers } =
    entries.boot;
  try {
    const flags = parseFlags(argv);
    let config = resolveServerConfig(flags, configFromEnv(env));
    // The initial loads' inference threads boot while the server (protocols, protobuf) loads:
    // one model's at once, the other configured models' once the config file is read (before
    // the server's import, whose evaluation would hold that read up for ~0.15 s).
    spareWorkers = startSpareInferenceWorkers({ count: config.instances });
    spareWorkers.add((await initialInferenceThreads(config)) - config.instances);
    const loading = entries.server();
    loading.catch(() => undefined); // awaited below; not unhandled if something fails first
    const logger = createJsonLogger({ level: config.logLevel });
    logger.debug('loading the server', { bundled: entries.bundled });
    const noModel = (): boolean =>
      config.modelBasePath === undefined &&
      config.modelConfigFile === undefined &&
      config.sagemakerModelDir === undefined;
    if (noModel() && (await holdsAnything(SAGEMAKER_MODEL_DIR))) {
      logger.info('serving the SageMaker model directory', { dir: SAGEMAKER_MODEL_DIR });
      config = resolveServerConfig({ ...flags, sagemakerModelDir: SAGEMAKER_MODEL_DIR }, configFromEnv(env));
    }
    if (noModel()) {
      demoRoot = await mkdtemp(join(tmpdir(), 'visionserve-demo-'));
      // Loaded only here: the ONNX writer is not needed when a model is given.
      const { writeDemoRepository } = await import('./tools/demo-models.js');
      const demo = await writeDemoRepository(demoRoot);
      logger.info('no model given: serving the generated demo model', {
        model: demo.modelName,
        basePath: demo.basePath,
      });
      config = resolveServerConfig(
        { ...flags, modelName: demo.modelName, modelBasePath: demo.basePath },
        configFromEnv(env),
      );
    }
    const { startVisionServer } = await loading;
    const server = await startVisionServer(config, logger, {}, { spareWorkers });
    // The handlers go in before "ready" is said: whoever waits for that line may signal at once.
    const stop = stopSignal(logger, env);
    logger.info('visionserve ready', {
      ...server.ports,
      pid: process.pid,
      malloc: describeMallocTuning(process.env),
    });
    try {
      await stop.stopped;
      await server.close();
    } finally {
      stop.dispose();
    }
    return 0;
  } catch (error) {
    if (error instanceof ConfigError || error instanceof entries.boot.ConfigError) {
      console.error(`visionserve: ${error.message}\n(visionserve serve --help lists the flags)`);
      return 2;
    }
    console.error(`visionserve: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  } finally {
    await spareWorkers?.close();
    if (demoRoot !== undefined) await rm(demoRoot, { recursive: true, force: true });
  }
}

/**
 * Resolves on the first SIGINT or SIGTERM, or when the launcher that started this server is gone
 * (malloc-tuning.ts). A second SIGINT (Ctrl-C twice) stops at once, as node does by default; a
 * second SIGTERM is only logged: a supervisor that signals every process of its group (systemd's
 * control-group kill mode) reaches the server twice, through its launcher too.
 */
function stopSignal(
  logger: { info(msg: string, fields?: object): void },
  env: NodeJS.ProcessEnv,
): { readonly stopped: Promise<void>; dispose(): void } {
  let stopping = false;
  let resolveStopped = (): void => undefined;
  const stopped = new Promise<void>((resolve) => {
    resolveStopped = resolve;
  });
  const stop = (signal: string): void => {
    if (stopping) {
      logger.info('already shutting down', { signal });
      return;
    }
    stopping = true;
    logger.info('shutting down', { signal });
    process.off('SIGINT', onInt);
    resolveStopped();
  };
  const onInt = (): void => {
    stop('SIGINT');
  };
  const onTerm = (): void => {
    stop('SIGTERM');
  };
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  const unwatch = stopWithLauncher(env, () => {
    stop('launcher exited');
  });
  return {
    stopped,
    dispose: () => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      unwatch();
    },
  };
}

export const serve: Command = { help: SERVE_HELP, run: serveCommand };
