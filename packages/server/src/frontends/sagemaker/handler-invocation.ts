import {
  ServingError,
  httpStatusFor,
  invalidArgument,
  parseTfsJsonText,
  toServingError,
} from '@visionserve/protocol';
import type {
  HandlerBridge,
  HandlerContextData,
  HandlerHost,
  HandlerResult,
} from '../../contracts/handler-host.js';
import type { InferenceService } from '../../core/inference-service.js';
import type { Logger } from '../../util/logger.js';
import { type InvocationTarget, checkPredictMethod } from './custom-attributes.js';
import { predictTfsJson } from '../shared/tfs-json-predict.js';

/** Request facts for `context`, besides the target and the body length. */
export interface HandlerRequestFacts {
  readonly customAttributes: string;
  readonly contentType: string | undefined;
  readonly accept: string | undefined;
}

export interface HandlerInvocationDeps {
  readonly service: InferenceService;
  readonly handlerHost: HandlerHost;
  readonly logger: Logger;
  /** TF Serving REST base URL, e.g. "http://127.0.0.1:8501"; undefined when REST is off. */
  readonly restBaseUrl: string | undefined;
  readonly grpcPort: number | undefined;
}

/**
 * Main-thread side of a user handler call: `context.predict` runs in-process on the
 * request's model (unless the handler names another); the model server step runs
 * the input handler's TF Serving REST body and answers like TF Serving, errors
 * included (status + `{"error"}`), so the output handler sees them.
 */
function bridgeFor(deps: HandlerInvocationDeps, target: InvocationTarget): HandlerBridge {
  const { service, logger } = deps;
  return {
    async predict(inputs, predictOptions, signal) {
      const { modelName, modelVersion, outputFilter } = predictOptions;
      if (modelName !== undefined && typeof modelName !== 'string') {
        throw invalidArgument('modelName must be a string');
      }
      if (modelVersion !== undefined && !Number.isSafeInteger(modelVersion)) {
        throw invalidArgument('modelVersion must be an integer');
      }
      if (
        outputFilter !== undefined &&
        !(Array.isArray(outputFilter) && outputFilter.every((o) => typeof o === 'string'))
      ) {
        throw invalidArgument('outputFilter must be a list of output names');
      }
      const model =
        modelName === undefined || modelName === target.name
          ? { name: target.name, version: modelVersion ?? target.version }
          : { name: modelName, version: modelVersion };
      const response = await service.predict({ model, inputs, outputFilter }, { signal });
      return response.outputs;
    },
    async modelServer(body, signal) {
      try {
        const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
        checkPredictMethod(target);
        const model = { name: target.name, version: target.version };
        const out = await predictTfsJson(service, model, parseTfsJsonText(text), { signal });
        return { status: 200, headers: { 'content-type': 'application/json' }, body: out };
      } catch (error) {
        const serving = toServingError(error);
        if (!(error instanceof ServingError)) logger.error('sagemaker: model server step failed', { error });
        return {
          status: httpStatusFor(serving.code),
          headers: { 'content-type': 'application/json' },
          body: Buffer.from(JSON.stringify({ error: serving.message })),
        };
      }
    },
  };
}

/** Runs one request through the model's handler module in the handler host. */
export function runHandlerInvocation(
  deps: HandlerInvocationDeps,
  target: InvocationTarget,
  modulePath: string,
  body: Uint8Array,
  facts: HandlerRequestFacts,
  signal: AbortSignal,
): Promise<HandlerResult> {
  const context: HandlerContextData = {
    modelName: target.name,
    modelVersion: target.version === undefined ? undefined : String(target.version),
    method: target.method,
    restUri:
      deps.restBaseUrl === undefined
        ? undefined
        : `${deps.restBaseUrl}/v1/models/${encodeURIComponent(target.name)}${
            target.version === undefined ? '' : `/versions/${target.version}`
          }:${target.method}`,
    grpcPort: deps.grpcPort,
    customAttributes: facts.customAttributes,
    requestContentType: facts.contentType ?? 'application/json',
    acceptHeader: facts.accept ?? 'application/json',
    contentLength: body.byteLength,
  };
  return deps.handlerHost.invoke({ modulePath, body, context }, bridgeFor(deps, target), signal);
}
