import type { ServerResponse } from 'node:http';
import { Code, ServingError, invalidArgument, notFound, parseTfsJsonText } from '@visionserve/protocol';
import type { InferenceService } from '../../core/inference-service.js';
import type { ModelRegistry } from '../../core/model-registry.js';
import type { Logger } from '../../util/logger.js';
import { clientLoadFailure } from '../shared/load-failure.js';
import type { HttpContext } from '../http/http-api.js';
import { sendJson } from '../http/send.js';
import { modelStatusJson } from '../shared/tfs-status-json.js';

/** What the multi-model API needs besides core. */
export interface MultiModelApiOptions {
  readonly service: InferenceService;
  readonly registry: ModelRegistry;
  readonly logger: Logger;
  /** Resolves a `POST /models` url to a real model directory inside the allowed roots; NOT_FOUND otherwise. */
  readonly resolveModelLocation: (url: string) => Promise<string>;
  /** Most models configured at once; 0 = no limit. */
  readonly maxModels: number;
  /** Loads are refused while `rssBytes()` exceeds this; 0 = no limit. */
  readonly memoryLimitBytes: number;
  readonly rssBytes: () => number;
  /** A load taking longer is answered 408 (it goes on in the background). */
  readonly loadTimeoutMs: number;
  /** The ports a loaded model is served on, for the success message. */
  readonly restPort?: number | undefined;
  readonly grpcPort?: number | undefined;
}

/** The container's words for a model that is not loaded (404). */
export const notLoaded = (name: string): ServingError => notFound(`Model ${name} is not loaded yet.`);

/** Model names accepted by `POST /models` (they appear in URL paths). */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,255}$/;

/** 507 Insufficient Storage in the container: a model or memory limit is reached. */
const insufficientStorage = (message: string): ServingError =>
  new ServingError(Code.RESOURCE_EXHAUSTED, message, { reason: 'insufficient-storage' });

/** 408 Request Timeout in the container: a load took longer than loadTimeoutMs. */
const loadTimeout = (message: string): ServingError =>
  new ServingError(Code.DEADLINE_EXCEEDED, message, { reason: 'load-timeout' });

/**
 * The SageMaker multi-model endpoint API (docs/sagemaker-endpoint.md), with the TF Serving
 * container's shapes and wording: list (model -> TF Serving status), describe, load (every
 * version found under the url, as the container configures it), unload. Models loaded here
 * join the served set like configured ones (TF Serving REST/gRPC see them too); a later
 * `reloadConfig` (config file change or gRPC HandleReloadConfigRequest) replaces the whole
 * set, including them.
 */
export function createMultiModelApi(options: MultiModelApiOptions): {
  list(res: ServerResponse): void;
  describe(res: ServerResponse, name: string): void;
  load(ctx: HttpContext): Promise<void>;
  unload(res: ServerResponse, name: string): Promise<void>;
} {
  const { service, registry, logger } = options;
  let pendingLoads = 0;

  const statusOf = (name: string): unknown => {
    try {
      return modelStatusJson(service.status({ name }));
    } catch {
      return { model_version_status: [] };
    }
  };

  return {
    list(res) {
      const models: Record<string, unknown> = {};
      for (const name of service.modelNames()) models[name] = statusOf(name);
      sendJson(res, 200, JSON.stringify(models));
    },

    describe(res, name) {
      if (registry.modelConfig(name) === undefined) throw notLoaded(name);
      sendJson(res, 200, JSON.stringify({ model: statusOf(name) }));
    },

    async load(ctx) {
      const { res } = ctx;
      const body = await ctx.readBody(64 * 1024);
      const parsed = parseTfsJsonText(body.toString('utf8'));
      const fields =
        typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
          ? (parsed as Record<string, unknown>)
          : {};
      const name = fields['model_name'];
      const url = fields['url'];
      if (typeof name !== 'string' || name === '')
        throw invalidArgument('Invalid request: missing model_name');
      if (typeof url !== 'string' || url === '') throw invalidArgument('Invalid request: missing url');
      if (!MODEL_NAME.test(name)) {
        throw invalidArgument(
          `Invalid model_name "${name.slice(0, 64)}": use letters, digits, ".", "_", "-"`,
        );
      }
      if (registry.modelConfig(name) !== undefined) {
        throw new ServingError(Code.ALREADY_EXISTS, `Model ${name} is already loaded.`);
      }
      if (options.maxModels > 0 && service.modelNames().length + pendingLoads >= options.maxModels) {
        throw insufficientStorage(
          `Cannot load model ${name}: the limit of ${options.maxModels} loaded models is reached`,
        );
      }
      if (options.memoryLimitBytes > 0 && options.rssBytes() > options.memoryLimitBytes) {
        throw insufficientStorage(`Cannot load model ${name}: memory limit reached`);
      }
      const basePath = await options.resolveModelLocation(url);
      pendingLoads++;
      const loading = registry
        .addModel({ name, basePath, versionPolicy: { kind: 'all' }, versionLabels: {}, confined: true })
        .finally(() => {
          pendingLoads--;
        });
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(loadTimeout(`Timed out loading model ${name} after ${options.loadTimeoutMs} ms`));
        }, options.loadTimeoutMs);
      });
      /** After the load settles: a model with no AVAILABLE version is removed again, and the failure returned. */
      const settleLoad = async (): Promise<ServingError | undefined> => {
        let statuses: ReturnType<InferenceService['status']> = [];
        try {
          statuses = service.status({ name });
        } catch {
          // No version was found at all: handled below.
        }
        if (statuses.some((s) => s.state === 'AVAILABLE')) return undefined;
        await registry.removeModel(name).catch(() => undefined);
        const failure = statuses.find((s) => s.error !== undefined)?.error;
        return failure === undefined
          ? notFound(`Could not find valid base path ${url} for servable ${name}`)
          : clientLoadFailure(failure, `Failed to load model ${name}: ${failure.message}`);
      };
      try {
        await Promise.race([loading, timeout]);
      } catch (error) {
        if (error instanceof ServingError && error.reason === 'load-timeout') {
          logger.warn('multi-model load timed out; it continues in the background', { model: name });
          // A load that fails after the 408 must not leave a configured model with no version.
          void loading
            .catch(() => undefined)
            .then(settleLoad)
            .then((failure) => {
              if (failure)
                logger.warn('multi-model: late load failed; model removed', { model: name, error: failure });
            });
        }
        throw error;
      } finally {
        clearTimeout(timer);
      }
      const failure = await settleLoad();
      if (failure) throw failure;
      logger.info('multi-model: loaded', { model: name, basePath });
      const ports =
        options.restPort === undefined || options.grpcPort === undefined
          ? ''
          : `, listening on rest port ${options.restPort} and grpc port ${options.grpcPort}`;
      sendJson(res, 200, JSON.stringify({ success: `Successfully loaded model ${name}${ports}.` }));
    },

    async unload(res, name) {
      const config = registry.modelConfig(name);
      if (config === undefined) throw notLoaded(name);
      await registry.removeModel(name);
      logger.info('multi-model: unloaded', { model: name });
      sendJson(res, 200, JSON.stringify({ success: `Successfully unloaded model ${name}.` }));
    },
  };
}
