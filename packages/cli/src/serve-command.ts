import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, FLAGS, configFromEnv, parseFlags, resolveServerConfig } from '@visionserve/server';
import { startVisionServer } from '@visionserve/server';
import { writeDemoRepository } from './tools/demo-models.js';
import { createJsonLogger } from '@visionserve/server';
import type { Command } from './cli-args.js';

export const SERVE_HELP = `Usage: visionserve serve [flags]

Starts the TF Serving compatible gRPC (:8500) and REST (:8501) APIs and the
SageMaker-style endpoint (:8080: /ping, /invocations, multi-model /models with
SAGEMAKER_MULTI_MODEL=true; --sagemaker_port=-1 disables it).
With neither --model_base_path nor --model_config_file, serves a generated
demo model, half_plus_two (y = 0.5 * x + 2), so this works with no arguments.

Flags (TF Serving names; --flag=value or --flag value):
${Object.entries(FLAGS)
  .map(([name, spec]) => `  --${name.padEnd(44)} ${spec.help}`)
  .join('\n')}
`;

/** Runs the server until SIGINT/SIGTERM; resolves with the exit code. */
export async function serveCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let demoRoot: string | undefined;
  try {
    const flags = parseFlags(argv);
    let config = resolveServerConfig(flags, configFromEnv(env));
    const logger = createJsonLogger({ level: config.logLevel });
    if (config.modelBasePath === undefined && config.modelConfigFile === undefined) {
      demoRoot = await mkdtemp(join(tmpdir(), 'visionserve-demo-'));
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
    const server = await startVisionServer(config, logger);
    // The handlers go in before "ready" is said: whoever waits for that line may signal at once.
    const stopped = new Promise<void>((resolve) => {
      const stop = (signal: string): void => {
        logger.info('shutting down', { signal });
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
        resolve();
      };
      const onInt = (): void => {
        stop('SIGINT');
      };
      const onTerm = (): void => {
        stop('SIGTERM');
      };
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onTerm);
    });
    logger.info('visionserve ready', { ...server.ports });
    await stopped;
    await server.close();
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`visionserve: ${error.message}\n(visionserve serve --help lists the flags)`);
      return 2;
    }
    console.error(`visionserve: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  } finally {
    if (demoRoot !== undefined) await rm(demoRoot, { recursive: true, force: true });
  }
}

export const serve: Command = { help: SERVE_HELP, run: serveCommand };
