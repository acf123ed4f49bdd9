import {
  Code,
  ServingError,
  encodeTfsClassifyResponse,
  encodeTfsRegressResponse,
  invalidArgument,
  notFound,
  parseTfsExamplesBody,
  readNumericPredictBody,
} from '@visionserve/protocol';
import type { HandlerHost } from '../../contracts/handler-host.js';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { InferenceService } from '../../core/inference-service.js';
import type { Logger } from '../../util/logger.js';
import type { HttpContext } from '../http/http-api.js';
import { sendBody } from '../http/send.js';
import type { ConcurrencyLimit } from '../shared/concurrency-limit.js';
import { type ExamplesInferenceOptions, classifyOn, regressOn } from '../shared/examples-inference.js';
import { predictTfsJsonOn } from '../shared/tfs-json-predict.js';
import {
  RESPONSE_CONTENT_TYPE,
  csvToPredictBody,
  jsonLinesToPredictBody,
  jsonToPredictBody,
  mediaType,
  negotiateResponse,
  requestKindFor,
} from './content-types.js';
import {
  CUSTOM_ATTRIBUTES_HEADER,
  type InvocationTarget,
  checkPredictMethod,
  parseCustomAttributes,
} from './custom-attributes.js';
import { runHandlerInvocation } from './handler-invocation.js';
import { runImageInvocation } from './image-invocation.js';

export interface InvocationsDeps {
  readonly service: InferenceService<ServableAssets>;
  readonly handlerHost: HandlerHost;
  readonly logger: Logger;
  /** Model used without `tfs-model-name`. */
  readonly defaultModel: () => string | undefined;
  /** Image decodes in flight at once (each holds the full-size pixels). */
  readonly imageDecodes: ConcurrencyLimit;
  /** Classify/regress (`tfs-method`) settings; shares imageDecodes. */
  readonly examples: ExamplesInferenceOptions;
  /** TF Serving REST base URL for `context.restUri`; undefined when REST is off. */
  readonly restBaseUrl: string | undefined;
  /** TF Serving gRPC port for `context.grpcPort`; undefined when gRPC is off. */
  readonly grpcPort: number | undefined;
}

/** 415: the protocol's answer for an unsupported Content-Type or Accept. */
function unsupportedMediaType(message: string): ServingError {
  return new ServingError(Code.INVALID_ARGUMENT, message, { reason: 'unsupported-media-type' });
}

/** JSON -> JSON Lines response: one line (JSON text never holds raw newlines inside strings). */
function asJsonLines(body: Uint8Array): Uint8Array {
  return body.includes(10)
    ? Buffer.from(
        Buffer.from(body)
          .toString('utf8')
          .replace(/\r?\n\s*/g, ''),
      )
    : body;
}

/**
 * `POST /invocations` (and multi-model `POST /models/{m}/invoke`): routed by
 * `X-Amzn-SageMaker-Custom-Attributes`, served from one pinned version. The version's
 * `code/inference.{mjs,js}` handles the request when present (in the handler host's
 * worker threads); otherwise JSON / JSON Lines / CSV go through TF Serving's predict and
 * images through the version's visionserve.json. Unsupported Content-Type or Accept is
 * 415, before the body is read.
 */
export async function invoke(ctx: HttpContext, deps: InvocationsDeps, pathModel?: string): Promise<void> {
  const { req, res, signal } = ctx;
  const rawAttributes = req.headers[CUSTOM_ATTRIBUTES_HEADER];
  const attributesHeader = Array.isArray(rawAttributes) ? rawAttributes.join(',') : (rawAttributes ?? '');
  const attributes = parseCustomAttributes(attributesHeader);
  const name = pathModel ?? attributes.modelName ?? deps.defaultModel();
  if (name === undefined) throw notFound('No model is loaded');
  const target: InvocationTarget = {
    name,
    version: attributes.modelVersion,
    method: attributes.method ?? 'predict',
  };
  const contentType = req.headers['content-type'];
  const call = { signal, deadline: ctx.deadline };
  await deps.service.withServable(
    { name, version: target.version },
    async (servable) => {
      const { handlerModulePath, vision } = servable.assets;
      if (handlerModulePath !== undefined) {
        const body = await ctx.readBody();
        const result = await runHandlerInvocation(
          deps,
          target,
          handlerModulePath,
          body,
          { customAttributes: attributesHeader, contentType, accept: req.headers.accept },
          signal,
        );
        sendBody(res, 200, result.body, result.contentType);
        return;
      }
      const kind = requestKindFor(contentType);
      const image = vision.config?.image;
      if (kind === undefined || (kind === 'image' && image === undefined)) {
        const detail =
          kind === 'image'
            ? ` (model ${name} has no image config in visionserve.json and no code/inference.js)`
            : '';
        throw unsupportedMediaType(`Unsupported Media Type: ${mediaType(contentType)}${detail}`);
      }
      const responseKind = negotiateResponse(req.headers.accept);
      if (responseKind === undefined) {
        throw unsupportedMediaType(
          `Unsupported Accept: ${req.headers.accept ?? ''}; this endpoint answers application/json or application/jsonlines`,
        );
      }
      if (kind === 'image') checkPredictMethod(target);
      // Shed before reading the body when the model's queue is already too long; an
      // admitted request counts as queued until its run is submitted or it ends.
      res.once('close', deps.service.admit({ name: servable.name, version: servable.version }, call));
      const body = await ctx.readBody();
      if (body.byteLength === 0) throw invalidArgument('Empty request body');
      let out: Uint8Array;
      if (target.method === 'classify' || target.method === 'regress') {
        // As the container forwards the body to TF Serving's :classify / :regress: tf.Examples.
        const text = body.toString('utf8');
        const examplesBody =
          kind === 'json'
            ? jsonToPredictBody(text)
            : kind === 'csv'
              ? csvToPredictBody(text)
              : jsonLinesToPredictBody(text);
        const { signatureName, input } = parseTfsExamplesBody(examplesBody);
        out =
          target.method === 'classify'
            ? encodeTfsClassifyResponse(
                (await classifyOn(servable, signatureName, input, deps.examples, call)).results,
              )
            : encodeTfsRegressResponse(
                (await regressOn(servable, signatureName, input, deps.examples, call)).values,
              );
      } else if (kind === 'image') {
        out = await runImageInvocation(servable, image!, body, call, deps.imageDecodes);
      } else {
        // A TF Serving body of big numeric tensors is read without JSON.parse (same values).
        const fast = kind === 'json' ? readNumericPredictBody(body) : undefined;
        const text = fast === undefined ? body.toString('utf8') : '';
        const predictBody =
          fast ??
          (kind === 'csv'
            ? csvToPredictBody(text)
            : kind === 'jsonlines'
              ? jsonLinesToPredictBody(text)
              : jsonToPredictBody(text));
        out = await predictTfsJsonOn(servable, predictBody, call);
      }
      sendBody(
        res,
        200,
        responseKind === 'jsonlines' ? asJsonLines(out) : out,
        RESPONSE_CONTENT_TYPE[responseKind],
      );
    },
    call,
  );
}
