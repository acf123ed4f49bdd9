import { availableParallelism } from 'node:os';
import {
  Code,
  ServingError,
  encodeTfsClassifyResponse,
  encodeTfsRegressResponse,
  parseTfsExamplesBody,
  parseTfsJsonText,
  parseTfsPredictJson,
} from '@visionserve/protocol';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { InferenceService } from '../../core/inference-service.js';
import type { HttpApi } from '../http/http-api.js';
import { sendJson } from '../http/send.js';
import { type ConcurrencyLimit, createConcurrencyLimit } from '../shared/concurrency-limit.js';
import type { JsonDecoder } from '../../contracts/json-decoder.js';
import { type BodyReading, tensorRoute } from '../http/tensor-route.js';
import { classifyOn, regressOn } from '../shared/examples-inference.js';
import { predictTfsJsonOn } from '../shared/tfs-json-predict.js';
import { modelMetadataJson, modelStatusJson } from '../shared/tfs-status-json.js';
import { TFS_GET_PATH, TFS_POST_PATH, TFS_REST_PREFIX, modelFromMatch } from './tfs-rest-routes.js';

export interface TfsRestApiOptions {
  /** The in-process inference API; versions carry their assets (labels, image config). */
  readonly service: InferenceService<ServableAssets>;
  /** Image decodes in flight at once (encoded images in tf.Example features). Default: cores, at least 2. */
  readonly imageDecodes?: ConcurrencyLimit | undefined;
  /** Largest request body as received, in bytes (TF Serving has no limit). */
  readonly bodyLimitBytes: number;
  /** Largest body after gzip decompression, in bytes (TF Serving: 100 MB). Default: bodyLimitBytes. */
  readonly decompressedBodyLimitBytes?: number | undefined;
  /** Per-request deadline in ms, body read and inference included (`--rest_api_timeout_in_ms`); 0 disables. */
  readonly requestTimeoutMs: number;
  /**
   * Reads predict bodies off the event loop and sheds requests when its backlog is too
   * long. Default: predict bodies are read on the event loop, with no decode admission.
   */
  readonly jsonDecode?: JsonDecoder | undefined;
}

/**
 * TF Serving's REST API (docs/apis.md): model status, metadata, predict, classify and
 * regress (tf.Examples, see shared/examples-inference.ts). Every response is `application/json`; errors are
 * `{"error": ...}` with TF Serving's status mapping. A `/v1/...` path that matches no
 * route is 400 "Malformed request", as TF Serving answers.
 */
export function createTfsRestApi(options: TfsRestApiOptions): HttpApi {
  const { service, jsonDecode } = options;
  const examples = {
    imageDecodes: options.imageDecodes ?? createConcurrencyLimit(Math.max(2, availableParallelism())),
  };
  return {
    name: 'tfs-rest',
    requestTimeoutMs: options.requestTimeoutMs,
    bodyLimitBytes: options.bodyLimitBytes,
    ...(options.decompressedBodyLimitBytes === undefined
      ? {}
      : { decompressedBodyLimitBytes: options.decompressedBodyLimitBytes }),
    owns: TFS_REST_PREFIX,
    unmatched: ({ method, path }) => {
      throw new ServingError(Code.INVALID_ARGUMENT, `Malformed request: ${method} ${path}`);
    },
    routes: [
      {
        name: 'GetModel',
        methods: ['GET'],
        path: TFS_GET_PATH,
        handle: async ({ res, params }) => {
          const model = modelFromMatch(params!);
          if (params![4] === undefined) {
            sendJson(res, 200, JSON.stringify(modelStatusJson(service.status(model))));
            return;
          }
          const metadata = await service.withServable(model, (servable) =>
            Promise.resolve(modelMetadataJson(servable)),
          );
          sendJson(res, 200, JSON.stringify(metadata));
        },
      },
      tensorRoute<ServableAssets, TfsPostBody>(
        {
          name: 'Predict',
          methods: ['POST'],
          path: TFS_POST_PATH,
          pin: (ctx, fn, call) => service.withServable(modelFromMatch(ctx.params!), fn, call),
          reading: (ctx) => postReading(ctx.params![4]!.toLowerCase(), jsonDecode),
          handle: async ({ ctx, servable, decoded, call }) => {
            if (decoded.method === 'predict') {
              sendJson(ctx.res, 200, await predictTfsJsonOn(servable, decoded.body, call));
              return;
            }
            const { signatureName, input } = decoded.examples;
            sendJson(
              ctx.res,
              200,
              decoded.method === 'classify'
                ? encodeTfsClassifyResponse(
                    (await classifyOn(servable, signatureName, input, examples, call)).results,
                  )
                : encodeTfsRegressResponse(
                    (await regressOn(servable, signatureName, input, examples, call)).values,
                  ),
            );
          },
        },
        jsonDecode,
      ),
    ],
  };
}

/** A TF Serving POST body, decoded: a predict body (JSON as parsed) or classify / regress tf.Examples. */
type TfsPostBody =
  | { readonly method: 'predict'; readonly body: unknown }
  | { readonly method: 'classify' | 'regress'; readonly examples: ReturnType<typeof parseTfsExamplesBody> };

/** How a `:predict` (on a decode thread when there are some), `:classify` or `:regress` body is read. */
function postReading(method: string, jsonDecode: JsonDecoder | undefined): BodyReading<TfsPostBody> {
  if (method === 'predict') {
    return {
      decodeThread: jsonDecode !== undefined,
      decode: async (bytes, ticket) => ({
        method,
        body:
          jsonDecode === undefined
            ? parseTfsPredictJson(bytes)
            : await jsonDecode.readTfsPredictBody(bytes, ticket),
      }),
    };
  }
  return {
    decode: (bytes) => ({
      method: method === 'classify' ? 'classify' : 'regress',
      examples: parseTfsExamplesBody(
        parseTfsJsonText(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')),
      ),
    }),
  };
}
