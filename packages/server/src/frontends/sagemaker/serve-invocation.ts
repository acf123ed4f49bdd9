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
import type { Servable } from '../../core/inference-service.js';
import type { ImageConfig } from '@visionserve/vision';
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
import { runImageInvocation } from '../shared/image-invocation.js';
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

/** An invocation without its body: what routing, media types and admission look at. */
export type InvocationHead = Omit<InvocationRequest, 'body' | 'bodyLength'>;

/**
 * The model, version and method an invocation names: the path's model, else the custom
 * attributes' `tfs-model-name`, else the default model (NOT_FOUND when none is loaded).
 */
export function invocationTarget(deps: InvocationsDeps, head: InvocationHead): InvocationTarget {
  const attributes = parseCustomAttributes(head.customAttributes);
  const name = head.model ?? attributes.modelName ?? deps.defaultModel();
  if (name === undefined) throw notFound('No model is loaded');
  return { name, version: attributes.modelVersion, method: attributes.method ?? 'predict' };
}

/** How one invocation is answered once its body is in (planInvocation). */
export interface InvocationPlan {
  /** The body is a JSON predict body for the decode threads (`decodeJson`). */
  readonly decodeThread: boolean;
  /**
   * Answers from the body; `decoded` holds the decode threads' reading of a JSON predict body
   * (readFastJsonBody 'sagemaker-json': undefined when the fast reader does not take it).
   */
  answer(
    body: Uint8Array,
    decoded: DecodedJson | undefined,
    call: InvocationCall,
  ): Promise<InvocationResponse>;
}

/**
 * The checks of an invocation that need no body, on its pinned version: the version's
 * handler module takes any body; otherwise an unsupported Content-Type or Accept is 415, an
 * image needs the version's image config and the predict method. Throws to refuse.
 */
export function planInvocation(
  deps: InvocationsDeps,
  servable: Servable<ServableAssets>,
  target: InvocationTarget,
  head: InvocationHead,
): InvocationPlan {
  const { handlerModulePath, vision } = servable.assets;
  const { contentType, accept } = head;
  if (handlerModulePath !== undefined) {
    return {
      decodeThread: false,
      answer: (body, _decoded, call) =>
        runHandlerInvocation(
          deps,
          target,
          handlerModulePath,
          body,
          { customAttributes: head.customAttributes, contentType, accept },
          call.signal,
        ),
    };
  }
  const kind = requestKindFor(contentType);
  const image = vision.config?.image;
  if (kind === undefined || (kind === 'image' && image === undefined)) {
    const detail =
      kind === 'image'
        ? ` (model ${target.name} has no image config in visionserve.json and no code/inference.js)`
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
  return {
    decodeThread: kind === 'json' && target.method === 'predict' && deps.jsonDecode !== undefined,
    answer: (body, decoded, call) =>
      answerInvocation(deps, servable, { target, kind, responseKind, image }, body, decoded, call),
  };
}

/** What planInvocation learnt from the head. */
interface InvocationKinds {
  readonly target: InvocationTarget;
  readonly kind: NonNullable<ReturnType<typeof requestKindFor>>;
  readonly responseKind: ResponseKind;
  readonly image: ImageConfig | undefined;
}

async function answerInvocation(
  deps: InvocationsDeps,
  servable: Servable<ServableAssets>,
  { target, kind, responseKind, image }: InvocationKinds,
  bytes: Uint8Array,
  decoded: DecodedJson | undefined,
  call: InvocationCall,
): Promise<InvocationResponse> {
  if (bytes.byteLength === 0) throw invalidArgument('Empty request body');
  const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const contentType = RESPONSE_CONTENT_TYPE[responseKind];
  const asRequested = (out: Uint8Array): InvocationResponse => ({
    body: responseKind === 'jsonlines' ? asJsonLine(out) : out,
    contentType,
  });
  if (kind === 'image')
    return asRequested(await runImageInvocation(servable, image!, body, call, deps.imageDecodes));
  if (target.method === 'classify' || target.method === 'regress') {
    // As the container forwards the body to TF Serving's :classify / :regress: tf.Examples.
    const { signatureName, input } = parseTfsExamplesBody(bodyToPredictBody(kind, body.toString('utf8')));
    return asRequested(
      target.method === 'classify'
        ? encodeTfsClassifyResponse(
            (await classifyOn(servable, signatureName, input, deps.examples, call)).results,
          )
        : encodeTfsRegressResponse(
            (await regressOn(servable, signatureName, input, deps.examples, call)).values,
          ),
    );
  }
  // A TF Serving body or a bare list of big numeric tensors is read without JSON.parse (same values).
  const quick =
    kind !== 'json'
      ? undefined
      : decoded !== undefined
        ? decoded.fast
        : readFastJsonBody('sagemaker-json', body);
  const out = await predictTfsJsonOn(servable, quick ?? bodyToPredictBody(kind, body.toString('utf8')), call);
  if (responseKind === 'json') return { body: out, contentType };
  return {
    body: kind === 'csv' || kind === 'jsonlines' ? predictionsAsLines(out) : asJsonLine(out),
    contentType,
  };
}

/** A JSON, CSV or JSON Lines body as a TF Serving predict body. */
function bodyToPredictBody(kind: InvocationKinds['kind'], text: string): unknown {
  return kind === 'csv'
    ? csvToPredictBody(text)
    : kind === 'jsonlines'
      ? jsonLinesToPredictBody(text)
      : jsonToPredictBody(text);
}

/** A JSON predict body as the decode threads read it. */
export interface DecodedJson {
  /** readFastJsonBody('sagemaker-json', body), undefined when that reader does not take it. */
  readonly fast: unknown;
}

/** The decode threads' reading of a JSON predict body of an invocation (releases `ticket`). */
export async function decodeInvocationJson(
  jsonDecode: JsonDecoder,
  body: Uint8Array,
  ticket: DecodeTicket | undefined,
): Promise<DecodedJson> {
  return { fast: await jsonDecode.read('sagemaker-json', body, ticket) };
}

/**
 * Serves one SageMaker `/invocations` request in process (`visionserve transform`) on top of
 * core: routed by the custom attributes (or the path's model), served from one pinned
 * version. The version's `code/inference.{mjs,js}` handles the request when present (in
 * the handler host's worker threads); otherwise JSON / JSON Lines / CSV go through TF
 * Serving's predict (or, with `tfs-method=classify|regress`, its Classify / Regress on
 * tf.Examples) and images through the version's visionserve.json. A multi-record body
 * (JSON Lines or CSV) asked for as `application/jsonlines` is answered line by line, in
 * order: line i is what record i alone would get. Unsupported Content-Type or Accept is 415
 * before the body is read. The HTTP route (a tensor route of the edge) answers the same way
 * from the same plan.
 */
export function serveInvocation(
  deps: InvocationsDeps,
  request: InvocationRequest,
  call: InvocationCall,
): Promise<InvocationResponse> {
  const target = invocationTarget(deps, request);
  return deps.service.withServable(
    { name: target.name, version: target.version },
    async (servable) => {
      const plan = planInvocation(deps, servable, target, request);
      servable.admit(call);
      const body = await readBody(request.body);
      const decoder = plan.decodeThread ? deps.jsonDecode : undefined;
      const ticket = decoder?.admit(body.byteLength, call);
      try {
        const decoded = decoder === undefined ? undefined : await decodeInvocationJson(decoder, body, ticket);
        return await plan.answer(body, decoded, call);
      } finally {
        ticket?.release();
      }
    },
    call,
  );
}
