/**
 * Commands that run the server in process (`transform`, `video`): their argv split into the
 * command's own options and the server flags (TF Serving names), and the in-process server
 * those flags describe.
 */
import {
  FLAGS,
  type RunningVisionServer,
  type ServerConfig,
  configFromEnv,
  createJsonLogger,
  parseFlags,
  resolveServerConfig,
  startVisionServer,
} from '@visionserve/server';
import { UsageError } from './cli-args.js';

export interface SplitArgs {
  readonly options: Map<string, string>;
  readonly serverArgs: string[];
  /** Arguments that are no option (only where `positionals` allows them). */
  readonly positionals: string[];
}

/**
 * Splits argv into this command's options (each takes a value) and the server flags;
 * anything else is a usage error, or a positional argument when `positionals` is true.
 */
export function splitServerArgs(
  argv: readonly string[],
  commandOptions: ReadonlySet<string>,
  positionals = false,
): SplitArgs {
  const options = new Map<string, string>();
  const serverArgs: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) {
      if (!positionals) throw new UsageError(`unexpected argument "${arg}"`);
      rest.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    if (commandOptions.has(name)) {
      const value = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
      options.set(name, value);
      continue;
    }
    const spec = FLAGS[name.replaceAll('-', '_')];
    if (spec === undefined) throw new UsageError(`unknown option --${name}`);
    serverArgs.push(arg);
    const next = argv[i + 1];
    if (eq < 0 && next !== undefined && !next.startsWith('--') && spec.type !== 'bool') {
      serverArgs.push(next);
      i++;
    }
  }
  return { options, serverArgs, positionals: rest };
}

/**
 * The server the flags describe, in this process: no listeners, no polling, no load
 * shedding (the command paces itself). A usage error when the flags name no model.
 */
export async function startInProcessServer(
  serverArgs: readonly string[],
  env: NodeJS.ProcessEnv,
  orEndpoint = true,
): Promise<{ server: RunningVisionServer; config: ServerConfig }> {
  const flags = parseFlags([...serverArgs]);
  const config = resolveServerConfig(
    {
      grpcPort: -1,
      restPort: -1,
      sagemakerPort: -1,
      fileSystemPollSeconds: 0,
      maxQueueWaitMs: 0,
      maxJsonDecodeBacklogMs: 0,
      logLevel: 'warn',
      ...flags,
    },
    configFromEnv(env),
  );
  if (
    config.modelBasePath === undefined &&
    config.modelConfigFile === undefined &&
    config.sagemakerModelDir === undefined
  ) {
    throw new UsageError(
      `give the model (--model_base_path, --sagemaker_model_dir or --model_config_file)${orEndpoint ? ' or --endpoint' : ''}`,
    );
  }
  const server = await startVisionServer(config, createJsonLogger({ level: config.logLevel }));
  return { server, config };
}
