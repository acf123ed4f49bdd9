import { availableParallelism } from 'node:os';
import type { HandlerHost } from '../../contracts/handler-host.js';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { InferenceService } from '../../core/inference-service.js';
import type { Logger } from '../../util/logger.js';
import { type ConcurrencyLimit, createConcurrencyLimit } from '../shared/concurrency-limit.js';
import type { JsonDecoder } from '../../contracts/json-decoder.js';
import type { CallOptions, Servable } from '../../core/inference-service.js';
import {
  type InvocationCall,
  type InvocationHead,
  type InvocationPlan,
  type InvocationRequest,
  type InvocationResponse,
  type InvocationsDeps,
  invocationTarget,
  planInvocation,
  serveInvocation,
} from './serve-invocation.js';

/**
 * What `GET /execution-parameters` tells SageMaker Batch Transform (and what
 * `visionserve transform` uses when a job leaves a setting open).
 */
export interface ExecutionParameters {
  /** Parallel /invocations requests a transform job should keep open. */
  readonly MaxConcurrentTransforms: number;
  /** `MULTI_RECORD`: a request may hold many records, one per line. */
  readonly BatchStrategy: 'MULTI_RECORD' | 'SINGLE_RECORD';
  /** Largest request a job should send, in MiB. */
  readonly MaxPayloadInMB: number;
}

export interface SageMakerInvokerOptions {
  /** The in-process inference API; versions carry their assets (visionserve.json, labels, handler). */
  readonly service: InferenceService<ServableAssets>;
  readonly logger: Logger;
  /** Runs `code/inference.{mjs,js}` modules off the main thread (the runtime's handler host). */
  readonly handlerHost: HandlerHost;
  /** Model used without `tfs-model-name`. Default: the first configured model. */
  readonly defaultModelName?: string | undefined;
  /** TF Serving REST base URL for `context.restUri`, e.g. "http://127.0.0.1:8501"; undefined when REST is off. */
  readonly restBaseUrl?: string | undefined;
  /** TF Serving gRPC port for `context.grpcPort`; undefined when gRPC is off. */
  readonly grpcPort?: number | undefined;
  /** Image decodes in flight at once (each holds the full-size pixels), shared with the other protocols. Default: a limit of its own, max(2, cores). */
  readonly imageDecodes?: ConcurrencyLimit | undefined;
  /** The answer of `GET /execution-parameters`. */
  readonly executionParameters: ExecutionParameters;
  /** Reads JSON predict bodies off the event loop, with decode admission. Default: on the event loop. */
  readonly jsonDecode?: JsonDecoder | undefined;
}

/** The SageMaker invocation logic on top of core, with no transport: used by the HTTP API and in-process callers. */
export interface SageMakerInvoker {
  /** Serves one /invocations request (see serveInvocation); failures are ServingErrors. */
  invoke(request: InvocationRequest, call: InvocationCall): Promise<InvocationResponse>;
  /** Pins the version an invocation names (path model, `tfs-model-name`, default model) for `fn`. */
  withServable<T>(
    head: InvocationHead,
    fn: (servable: Servable<ServableAssets>) => Promise<T>,
    call: CallOptions,
  ): Promise<T>;
  /** The checks of an invocation that need no body, and how it is answered (planInvocation). */
  plan(servable: Servable<ServableAssets>, head: InvocationHead): InvocationPlan;
  /** Reads JSON predict bodies off the event loop, when there is such a pool. */
  readonly jsonDecode: JsonDecoder | undefined;
  /** The model /invocations uses without `tfs-model-name`, if any is configured. */
  defaultModel(): string | undefined;
  readonly executionParameters: ExecutionParameters;
}

export function createSageMakerInvoker(options: SageMakerInvokerOptions): SageMakerInvoker {
  const { service } = options;
  const defaultModel = (): string | undefined => options.defaultModelName ?? service.modelNames()[0];
  const imageDecodes = options.imageDecodes ?? createConcurrencyLimit(Math.max(2, availableParallelism()));
  const deps: InvocationsDeps = {
    service,
    handlerHost: options.handlerHost,
    logger: options.logger,
    defaultModel,
    imageDecodes,
    examples: { imageDecodes },
    restBaseUrl: options.restBaseUrl,
    grpcPort: options.grpcPort,
    jsonDecode: options.jsonDecode,
  };
  return {
    invoke: (request, call) => serveInvocation(deps, request, call),
    withServable: (head, fn, call) => {
      const { name, version } = invocationTarget(deps, head);
      return service.withServable({ name, version }, fn, call);
    },
    plan: (servable, head) => planInvocation(deps, servable, invocationTarget(deps, head), head),
    jsonDecode: options.jsonDecode,
    defaultModel,
    executionParameters: Object.freeze({ ...options.executionParameters }),
  };
}
