/**
 * The model repository extension on top of core's ModelRegistry: the index lists the
 * configured models (with their versions' states) and the model directories found under
 * the repository roots; load adds a model from a root (or brings back one that was
 * unloaded here); unload removes a configured model. Loads never leave the roots: a name
 * is looked up as one directory directly inside a root, through the repository's
 * confinement (real paths, symlinks followed).
 */
import { Code, ServingError, invalidArgument, notFound } from '@visionserve/protocol';
import type { InferenceService } from '../../core/inference-service.js';
import { DEFAULT_VERSION_POLICY, type ModelConfig } from '../../core/model-config.js';
import type { ModelRegistry } from '../../core/model-registry.js';
import type { ModelState, VersionStatus } from '../../core/model-state.js';
import type { Logger } from '../../util/logger.js';
import { clientLoadFailure } from '../shared/load-failure.js';

/** Model directories under the configured model roots (implemented by the repository layer). */
export interface ModelRoots {
  /** Model name -> real directory, for every valid model directory directly inside a root. */
  list(): Promise<ReadonlyMap<string, string>>;
  /** The real directory of `name` inside a root; NOT_FOUND when there is none. */
  resolve(name: string): Promise<string>;
}

/** Triton's model_control_mode: `explicit` enables load/unload; `none` refuses them. */
export type ModelControlMode = 'none' | 'explicit';

export interface RepositoryIndexEntry {
  readonly name: string;
  readonly version?: string;
  readonly state?: string;
  readonly reason?: string;
}

export interface RepositoryControlOptions {
  readonly service: InferenceService;
  readonly registry: ModelRegistry;
  readonly roots: ModelRoots | undefined;
  readonly mode: ModelControlMode;
  /** Rescans the configured models' version directories (a load of a loaded model). */
  readonly rescan?: (() => Promise<void>) | undefined;
  readonly logger: Logger;
}

export interface RepositoryControl {
  index(readyOnly: boolean): Promise<RepositoryIndexEntry[]>;
  /** Parameter values as the binding decoded them; `config` and `file:` keys are refused. */
  load(name: string, parameters: Readonly<Record<string, unknown>>): Promise<void>;
  unload(name: string): Promise<void>;
}

/** Names a load may look up in the roots (one path segment, no dot-dot). */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,255}$/;

/** Unloaded models remembered for a later load, at most. */
const MAX_REMEMBERED = 1024;

const STATE: Readonly<Record<ModelState, string>> = {
  START: 'LOADING',
  LOADING: 'LOADING',
  AVAILABLE: 'READY',
  UNLOADING: 'UNLOADING',
  END: 'UNAVAILABLE',
};

export function createRepositoryControl(options: RepositoryControlOptions): RepositoryControl {
  const { service, registry, roots, logger } = options;
  /** Models unloaded here, with the config to restore on load. */
  const unloaded = new Map<string, ModelConfig>();
  /** Loads and unloads in progress per name: the next one waits for it. */
  const busy = new Map<string, Promise<void>>();

  const statusOf = (name: string): VersionStatus[] => {
    try {
      return service.status({ name });
    } catch {
      return [];
    }
  };

  const requireExplicit = (): void => {
    if (options.mode !== 'explicit') {
      throw new ServingError(
        Code.UNAVAILABLE,
        'explicit model load / unload is not allowed: start the server with --kserve_model_control_mode=explicit',
      );
    }
  };

  const serialised = async (name: string, task: () => Promise<void>): Promise<void> => {
    const previous = busy.get(name) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(task);
    const tail = run.catch(() => undefined);
    busy.set(name, tail);
    try {
      await run;
    } finally {
      if (busy.get(name) === tail) busy.delete(name);
    }
  };

  /**
   * After a load settled: fine if a version is AVAILABLE, else the failure is thrown (and a
   * model added by this load is removed again, so that it does not linger without versions).
   */
  const settle = async (name: string, added: boolean): Promise<void> => {
    const statuses = statusOf(name);
    if (statuses.some((s) => s.state === 'AVAILABLE')) return;
    if (added) await registry.removeModel(name).catch(() => undefined);
    const failure = statuses.find((s) => s.error !== undefined)?.error;
    if (failure === undefined) {
      throw notFound(`failed to load '${name}': no version directory with a model.onnx`);
    }
    const message = `failed to load '${name}': ${failure.message}`;
    throw clientLoadFailure(failure, message, Code.FAILED_PRECONDITION);
  };

  return {
    async index(readyOnly) {
      const entries: RepositoryIndexEntry[] = [];
      const configured = new Set(service.modelNames());
      for (const name of configured) {
        const statuses = statusOf(name);
        if (statuses.length === 0 && !readyOnly) {
          entries.push({ name, state: 'UNAVAILABLE', reason: 'no version found' });
        }
        for (const s of [...statuses].sort((a, b) => a.version - b.version)) {
          const state = STATE[s.state];
          if (readyOnly && state !== 'READY') continue;
          entries.push({
            name,
            version: String(s.version),
            state,
            ...(s.error === undefined ? {} : { reason: s.error.message }),
          });
        }
      }
      if (!readyOnly) {
        for (const name of unloaded.keys()) {
          if (!configured.has(name)) entries.push({ name, state: 'UNAVAILABLE', reason: 'unloaded' });
        }
        const found = roots === undefined ? new Map<string, string>() : await roots.list();
        for (const name of found.keys()) {
          if (!configured.has(name) && !unloaded.has(name)) entries.push({ name });
        }
      }
      return entries.sort((a, b) =>
        a.name === b.name ? Number(a.version ?? 0) - Number(b.version ?? 0) : a.name < b.name ? -1 : 1,
      );
    },

    load(name, parameters) {
      requireExplicit();
      for (const key of Object.keys(parameters)) {
        if (key === 'config' || key.startsWith('file:')) {
          throw new ServingError(
            Code.UNIMPLEMENTED,
            `load parameter "${key.slice(0, 64)}" is not supported: models load from their directories under the model roots`,
          );
        }
      }
      return serialised(name, async () => {
        if (registry.modelConfig(name) !== undefined) {
          // Loaded already: pick up new version directories, as a Triton reload would.
          await options.rescan?.();
          await settle(name, false);
          return;
        }
        let config = unloaded.get(name);
        if (config === undefined) {
          if (!MODEL_NAME.test(name)) {
            throw invalidArgument(
              `Invalid model name "${name.slice(0, 64)}": use letters, digits, ".", "_", "-"`,
            );
          }
          if (roots === undefined) throw notFound(`failed to load '${name}': no model roots are configured`);
          const basePath = await roots.resolve(name);
          // Confined like every model a client loads from the roots: a version directory or
          // model file symlinked out of its directory is refused (PERMISSION_DENIED).
          config = {
            name,
            basePath,
            versionPolicy: DEFAULT_VERSION_POLICY,
            versionLabels: {},
            confined: true,
          };
        }
        await registry.addModel(config);
        await settle(name, true);
        unloaded.delete(name);
        logger.info('kserve: model loaded', { model: name });
      });
    },

    unload(name) {
      requireExplicit();
      return serialised(name, async () => {
        const config = registry.modelConfig(name);
        if (config === undefined) {
          if (unloaded.has(name)) return;
          const inRoots = roots !== undefined && MODEL_NAME.test(name) && (await roots.list()).has(name);
          if (inRoots) return;
          throw notFound(`failed to unload '${name}': no such model`);
        }
        await registry.removeModel(name);
        unloaded.delete(name);
        unloaded.set(name, config);
        if (unloaded.size > MAX_REMEMBERED) unloaded.delete(unloaded.keys().next().value!);
        logger.info('kserve: model unloaded', { model: name });
      });
    },
  };
}
