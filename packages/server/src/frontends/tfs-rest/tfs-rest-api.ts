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
import type { JsonDecoder, LentBody } from '../../contracts/json-decoder.js';
import { classifyOn, regressOn } from '../shared/examples-inference.js';
import { predictTfsJson } from '../shared/tfs-json-predict.js';
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
      {
        name: 'Predict',
        methods: ['POST'],
        path: TFS_POST_PATH,
        handle: async (ctx) => {
          const model = modelFromMatch(ctx.params!);
          const method = ctx.params![4]!.toLowerCase();
          const call = { signal: ctx.signal, deadline: ctx.deadline };
          // Shed before reading the body when the model's queue is already too long; an
          // admitted request counts as queued until its run is submitted or it ends.
          ctx.res.once('close', service.admit(model, call));
          // The same before the body's JSON joins the decode backlog.
          const ticket =
            method === 'predict'
              ? jsonDecode?.admit(Number(ctx.req.headers['content-length'] ?? 0), call)
              : undefined;
          if (ticket !== undefined) {
            ctx.res.once('close', () => {
              ticket.release();
            });
          }
          if (method === 'predict' && jsonDecode !== undefined) {
            // A big body goes into memory its decode thread reads as it is, lent until the
            // tensors read from it have been answered (or the request failed).
            let lent: LentBody | undefined;
            try {
              const bytes = await ctx.readBody(undefined, {
                into: (length) => (lent = jsonDecode.bodyBuffer(length))?.bytes,
              });
              const timed = { ...call, arrivedAt: process.hrtime.bigint() };
              const body = await jsonDecode.readTfsPredictBody(bytes, ticket);
              sendJson(ctx.res, 200, await predictTfsJson(service, model, body, timed));
            } finally {
              lent?.release();
            }
            return;
          }
          const bytes = await ctx.readBody();
          // Statistics time the request from here (the body is in).
          const timed = { ...call, arrivedAt: process.hrtime.bigint() };
          if (method === 'predict') {
            sendJson(ctx.res, 200, await predictTfsJson(service, model, parseTfsPredictJson(bytes), timed));
            return;
          }
          const { signatureName, input } = parseTfsExamplesBody(parseTfsJsonText(bytes.toString('utf8')));
          const answer = await service.withServable(
            model,
            async (servable) =>
              method === 'classify'
                ? encodeTfsClassifyResponse(
                    (await classifyOn(servable, signatureName, input, examples, call)).results,
                  )
                : encodeTfsRegressResponse(
                    (await regressOn(servable, signatureName, input, examples, call)).values,
                  ),
            timed,
          );
          sendJson(ctx.res, 200, answer);
        },
      },
    ],
  };
}
