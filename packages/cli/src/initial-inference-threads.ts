/**
 * How many inference threads the initial model loads take, as far as the flags and the model
 * config file tell before the server is loaded: `serve` starts that many spare inference
 * workers at once, so that none of the initial loads waits for a thread to boot.
 */
import { readFile } from 'node:fs/promises';
import type { ServerConfig } from '@visionserve/server/boot';

export interface InitialInferenceThreadsOptions {
  /** At most this many threads (a config file with hundreds of models must not start hundreds at once). Default 16. */
  readonly max?: number;
}

/**
 * `--model_instances` per model in `--model_config_file` (one version each: a version policy
 * that serves more starts their threads when they load), else `--model_instances` (one model,
 * or a SageMaker directory whose models are not known yet). A config file that cannot be read
 * or parsed counts as one model: the server reports the problem when it reads the file itself.
 */
export async function initialInferenceThreads(
  config: Pick<ServerConfig, 'instances' | 'modelConfigFile'>,
  options: InitialInferenceThreadsOptions = {},
): Promise<number> {
  const max = options.max ?? 16;
  let models = 1;
  if (config.modelConfigFile !== undefined) {
    try {
      // Loaded here: `serve` imports this module before it starts the first spares.
      const { parsePbtxt } = await import('@visionserve/protocol/pbtxt');
      const root = parsePbtxt(await readFile(config.modelConfigFile, 'utf8'));
      models = 0;
      for (const list of root.fields) {
        if (list.name !== 'model_config_list' || list.value.kind !== 'message') continue;
        models += list.value.fields.filter((f) => f.name === 'config').length;
      }
    } catch {
      models = 1;
    }
  }
  return Math.min(max, Math.max(1, models) * Math.max(1, config.instances));
}
