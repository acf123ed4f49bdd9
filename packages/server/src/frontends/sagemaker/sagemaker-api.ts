import { invalidArgument } from '@visionserve/protocol';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { InferenceService } from '../../core/inference-service.js';
import type { ModelRegistry } from '../../core/model-registry.js';
import type { Logger } from '../../util/logger.js';
import type { HttpApi, HttpContext, HttpRoute } from '../http/http-api.js';
import { sendJson } from '../http/send.js';
import type { ManagementGuard } from '../shared/management-guard.js';
import { invocationsRoute } from './invocations.js';
import { createMultiModelApi, notLoaded } from './multi-model-api.js';
import { ping } from './ping.js';
import type { SageMakerInvoker } from './sagemaker-invoker.js';

export interface SageMakerApiOptions {
  /** The in-process inference API (status for /ping, the multi-model API). */
  readonly service: InferenceService<ServableAssets>;
  /** Serves /invocations and /models/{m}/invoke, and knows the default model and execution parameters. */
  readonly invoker: SageMakerInvoker;
  /** Per-model configs (base paths) and, in multi-model mode, load/unload. */
  readonly registry: ModelRegistry;
  readonly logger: Logger;
  /** Resolves a multi-model `POST /models` url to a local model directory; rejects NOT_FOUND otherwise. */
  readonly resolveModelLocation: (url: string) => Promise<string>;
  /** Serve the multi-model API (`/models...`; --sagemaker_multi_model). */
  readonly multiModel: boolean;
  /** Multi-model: most models configured at once (507 above); 0 = no limit. */
  readonly maxModels: number;
  /** Multi-model: refuse loads (507) while the process RSS exceeds this many bytes; 0 = none. */
  readonly memoryLimitBytes: number;
  /** Multi-model: process RSS in bytes. Default process.memoryUsage.rss. */
  readonly rssBytes?: (() => number) | undefined;
  /** Multi-model: a load taking longer is answered 408, in ms. */
  readonly modelLoadTimeoutMs: number;
  /** Largest /invocations body in bytes (413 above). */
  readonly bodyLimitBytes: number;
  /** Deadline of one request in ms, handler included; 0 disables. */
  readonly requestTimeoutMs: number;
  /** TF Serving gRPC port, named in the multi-model load message; undefined when gRPC is off. */
  readonly grpcPort?: number | undefined;
  /** TF Serving REST port, named in the multi-model load message; undefined when REST is off. */
  readonly restPort?: number | undefined;
  /** Who may load and unload models (multi-model `POST /models`, `DELETE /models/{m}`). Default: anyone. */
  readonly managementGuard?: ManagementGuard | undefined;
}

/** Model name of a `/models/{m}` path, percent-decoded. */
function modelName(ctx: HttpContext): string {
  try {
    return decodeURIComponent(ctx.params![1]!);
  } catch {
    throw invalidArgument('Malformed model name in path');
  }
}

/**
 * The SageMaker-style endpoint (docs/sagemaker-endpoint.md) as an HTTP API: `/ping`,
 * `/execution-parameters`, `/invocations` and, with `multiModel`, the multi-model API (`GET /models`,
 * `GET /models/{m}`, `POST /models`, `DELETE /models/{m}`, `POST /models/{m}/invoke`).
 * Errors are `{"error": message}` with TF Serving's status mapping, except the
 * protocol's own: 413 body too large, 415 unsupported Content-Type / Accept, 507 / 408
 * for multi-model loads; a throwing handler is 500 with its message.
 */
export function createSageMakerApi(options: SageMakerApiOptions): HttpApi {
  const { service, registry, logger } = options;
  const guard = options.managementGuard;
  const { multiModel } = options;
  const { invoker } = options;
  const routes: HttpRoute[] = [
    {
      name: 'ping',
      methods: ['GET', 'HEAD'],
      path: '/ping',
      handle: ({ res }) => {
        ping(res, service, invoker.defaultModel(), multiModel);
      },
    },
    {
      name: 'execution-parameters',
      methods: ['GET'],
      path: '/execution-parameters',
      handle: ({ res }) => {
        sendJson(res, 200, JSON.stringify(invoker.executionParameters));
      },
    },
    invocationsRoute(invoker, { name: 'invocations', path: '/invocations' }),
  ];
  if (multiModel) {
    const mme = createMultiModelApi({
      service,
      registry,
      logger,
      resolveModelLocation: options.resolveModelLocation,
      maxModels: options.maxModels,
      memoryLimitBytes: options.memoryLimitBytes,
      rssBytes: options.rssBytes ?? (() => process.memoryUsage.rss()),
      loadTimeoutMs: options.modelLoadTimeoutMs,
      restPort: options.restPort,
      grpcPort: options.grpcPort,
    });
    routes.push(
      {
        name: 'list_models',
        methods: ['GET'],
        path: '/models',
        handle: ({ res }) => {
          mme.list(res);
        },
      },
      {
        name: 'load_model',
        methods: ['POST'],
        path: '/models',
        handle: (ctx) => {
          guard?.check(ctx.credentials(), 'load model');
          return mme.load(ctx);
        },
      },
      {
        name: 'describe_model',
        methods: ['GET'],
        path: /^\/models\/([^/]+)$/,
        handle: (ctx) => {
          mme.describe(ctx.res, modelName(ctx));
        },
      },
      {
        name: 'unload_model',
        methods: ['DELETE'],
        path: /^\/models\/([^/]+)$/,
        handle: (ctx) => {
          guard?.check(ctx.credentials(), 'unload model');
          return mme.unload(ctx.res, modelName(ctx));
        },
      },
      invocationsRoute(invoker, { name: 'invoke_model', path: /^\/models\/([^/]+)\/invoke$/ }, (ctx) => {
        const name = modelName(ctx);
        if (registry.modelConfig(name) === undefined) throw notLoaded(name);
        return name;
      }),
    );
  }
  return {
    name: 'sagemaker',
    routes,
    statusOverrides: { 'unsupported-media-type': 415, 'insufficient-storage': 507, 'load-timeout': 408 },
    requestTimeoutMs: options.requestTimeoutMs,
    bodyLimitBytes: options.bodyLimitBytes,
  };
}
