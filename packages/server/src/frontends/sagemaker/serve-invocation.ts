import {
  Code,
  ServingError,
  encodeTfsClassifyResponse,
  encodeTfsRegressResponse,
  invalidArgument,
  notFound,
  parseTfsExamplesBody,
  readFastJsonBody,
} from '@visionserve/protocol';
import type { HandlerHost } from '../../contracts/handler-host.js';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { InferenceService } from '../../core/inference-service.js';
import type { Logger } from '../../util/logger.js';
import type { ConcurrencyLimit } from '../shared/concurrency-limit.js';
import type { DecodeTicket, JsonDecoder } from '../../contracts/json-decoder.js';
import { type ExamplesInferenceOptions, classifyOn, regressOn } from '../shared/examples-inference.js';
import { predictTfsJsonOn } from '../shared/tfs-json-predict.js';
import {
  RESPONSE_CONTENT_TYPE,
  csvToPredictBody,
  jsonLinesToPredictBody,
  jsonToPredictBody,
  mediaType,
  type ResponseKind,
  negotiateResponse,
  requestKindFor,
} from './content-types.js';
import { type InvocationTarget, checkPredictMethod, parseCustomAttributes } from './custom-attributes.js';
import { runHandlerInvocation } from './handler-invocation.js';
import { runImageInvocation } from './image-invocation.js';
import { predictionsAsLines } from './multi-record.js';

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
  /** Reads JSON predict bodies off the event loop, with decode admission; undefined: here, none. */
  readonly jsonDecode?: JsonDecoder | undefined;
}

/** One `/invocations` request, whatever carried it (HTTP, or `visionserve transform` in-process). */
export interface InvocationRequest {
  /**
   * The body, or a reader for it: a reader is called only once the request has passed the
   * checks that need no body (media types, routing, admission), so a refused HTTP request is
   * answered before its body is read.
   */
  readonly body: Uint8Array | (() => Promise<Uint8Array>);
  /** The body's declared length (HTTP Content-Length) when `body` is a reader, for admission. */
  readonly bodyLength?: number | undefined;
  /** Content-Type; absent means JSON. */
  readonly contentType: string | undefined;
  /** Accept; absent means JSON. */
  readonly accept: string | undefined;
  /** The raw `X-Amzn-SageMaker-Custom-Attributes` value ("" when absent). */
  readonly customAttributes: string;
  /** The model a path named (multi-model `POST /models/{m}/invoke`); wins over `tfs-model-name`. */
  readonly model?: string | undefined;
}

/** A successful answer (status 200); failures are ServingErrors. */
export interface InvocationResponse {
  readonly body: Uint8Array;
  readonly contentType: string;
}

/** Deadline and cancellation of one invocation. */
export interface InvocationCall {
  readonly signal: AbortSignal;
  /** When the caller stops waiting (Date.now() clock, ms). */
  readonly deadline?: number | undefined;
}

/** 415: the protocol's answer for an unsupported Content-Type or Accept. */
function unsupportedMediaType(message: string): ServingError {
  return new ServingError(Code.INVALID_ARGUMENT, message, { reason: 'unsupported-media-type' });
}

/** JSON -> JSON Lines response: one line (JSON text never holds raw newlines inside strings). */
function asJsonLine(body: Uint8Array): Uint8Array {
  return body.includes(10)
    ? Buffer.from(
        Buffer.from(body)
          .toString('utf8')
          .replace(/\r?\n\s*/g, ''),
      )
    : body;
}

const readBody = (body: InvocationRequest['body']): Promise<Uint8Array> =>
  typeof body === 'function' ? body() : Promise.resolve(body);

/**
 * Serves one SageMaker `/invocations` request on top of core: routed by the custom
 * attributes (or the path's model), served from one pinned version. The version's
 * `code/inference.{mjs,js}` handles the request when present (in the handler host's
 * worker threads); otherwise JSON / JSON Lines / CSV go through TF Serving's predict (or,
 * with `tfs-method=classify|regress`, its Classify / Regress on tf.Examples) and images
 * through the version's visionserve.json. A multi-record body (JSON Lines or CSV)
 * asked for as `application/jsonlines` is answered line by line, in order: line i is what
 * record i alone would get. Unsupported Content-Type or Accept is 415 before the body is
 * read. The HTTP route and `visionserve transform` both call this, so they answer alike.
 */
export async function serveInvocation(
  deps: InvocationsDeps,
  request: InvocationRequest,
  call: InvocationCall,
): Promise<InvocationResponse> {
  const attributes = parseCustomAttributes(request.customAttributes);
  const name = request.model ?? attributes.modelName ?? deps.defaultModel();
  if (name === undefined) throw notFound('No model is loaded');
  const target: InvocationTarget = {
    name,
    version: attributes.modelVersion,
    method: attributes.method ?? 'predict',
  };
  const { contentType, accept } = request;
  const { signal } = call;
  return deps.service.withServable(
    { name, version: target.version },
    async (servable): Promise<InvocationResponse> => {
      const { handlerModulePath, vision } = servable.assets;
      if (handlerModulePath !== undefined) {
        const body = await readBody(request.body);
        return runHandlerInvocation(
          deps,
          target,
          handlerModulePath,
          body,
          { customAttributes: request.customAttributes, contentType, accept },
          signal,
        );
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
      const responseKind = negotiateResponse(accept);
      if (responseKind === undefined) {
        throw unsupportedMediaType(
          `Unsupported Accept: ${accept ?? ''}; this endpoint answers application/json or application/jsonlines`,
        );
      }
      if (kind === 'image') checkPredictMethod(target);
      // Shed before reading the body when the model's queue is already too long; an
      // admitted request counts as queued until its run is submitted or it ends.
      const release = deps.service.admit({ name: servable.name, version: servable.version }, call);
      let ticket: DecodeTicket | undefined;
      const answerKind: ResponseKind = responseKind;
      try {
        // The same before a JSON predict body joins the decode backlog.
        if (kind === 'json' && target.method === 'predict' && deps.jsonDecode !== undefined) {
          const length = typeof request.body === 'function' ? request.bodyLength : request.body.byteLength;
          ticket = deps.jsonDecode.admit(length ?? 0, call);
        }
        return await admitted(answerKind);
      } finally {
        ticket?.release();
        release();
      }
      async function admitted(responseKind: ResponseKind): Promise<InvocationResponse> {
        const body = Buffer.from(await readBody(request.body));
        if (body.byteLength === 0) throw invalidArgument('Empty request body');
        const contentTypeOut = RESPONSE_CONTENT_TYPE[responseKind];
        if (kind === 'image') {
          const out = await runImageInvocation(servable, image!, body, call, deps.imageDecodes);
          return { body: responseKind === 'jsonlines' ? asJsonLine(out) : out, contentType: contentTypeOut };
        }
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
          const out =
            target.method === 'classify'
              ? encodeTfsClassifyResponse(
                  (await classifyOn(servable, signatureName, input, deps.examples, call)).results,
                )
              : encodeTfsRegressResponse(
                  (await regressOn(servable, signatureName, input, deps.examples, call)).values,
                );
          return { body: responseKind === 'jsonlines' ? asJsonLine(out) : out, contentType: contentTypeOut };
        }
        const multiRecord = kind === 'csv' || kind === 'jsonlines';
        // A TF Serving body or a bare list of big numeric tensors is read without JSON.parse
        // (same values).
        const fast =
          kind !== 'json'
            ? undefined
            : deps.jsonDecode === undefined
              ? readFastJsonBody('sagemaker-json', body)
              : await deps.jsonDecode.read('sagemaker-json', body, ticket);
        const text = fast === undefined ? body.toString('utf8') : '';
        const predictBody =
          fast ??
          (kind === 'csv'
            ? csvToPredictBody(text)
            : kind === 'jsonlines'
              ? jsonLinesToPredictBody(text)
              : jsonToPredictBody(text));
        const out = await predictTfsJsonOn(servable, predictBody, call);
        if (responseKind === 'json') return { body: out, contentType: contentTypeOut };
        return {
          body: multiRecord ? predictionsAsLines(out) : asJsonLine(out),
          contentType: contentTypeOut,
        };
      }
    },
    call,
  );
}
