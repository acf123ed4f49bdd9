import { Code, ServingError, parseTfsJsonText } from '@visionserve/protocol';
import type { InferenceService } from '../../core/inference-service.js';
import type { HttpApi } from '../http/http-api.js';
import { sendJson } from '../http/send.js';
import { predictTfsJson } from '../shared/tfs-json-predict.js';
import { modelMetadataJson, modelStatusJson } from '../shared/tfs-status-json.js';
import { TFS_GET_PATH, TFS_POST_PATH, TFS_REST_PREFIX, modelFromMatch } from './tfs-rest-routes.js';

export interface TfsRestApiOptions {
  /** The in-process inference API. */
  readonly service: InferenceService;
  /** Largest request body as received, in bytes (TF Serving has no limit). */
  readonly bodyLimitBytes: number;
  /** Largest body after gzip decompression, in bytes (TF Serving: 100 MB). Default: bodyLimitBytes. */
  readonly decompressedBodyLimitBytes?: number | undefined;
  /** Per-request deadline in ms, body read and inference included (`--rest_api_timeout_in_ms`); 0 disables. */
  readonly requestTimeoutMs: number;
}

/**
 * TF Serving's REST API (docs/protocols.md): model status, metadata and predict;
 * classify/regress answer 501. Every response is `application/json`; errors are
 * `{"error": ...}` with TF Serving's status mapping. A `/v1/...` path that matches no
 * route is 400 "Malformed request", as TF Serving answers.
 */
export function createTfsRestApi(options: TfsRestApiOptions): HttpApi {
  const { service } = options;
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
          if (method !== 'predict') {
            throw new ServingError(
              Code.UNIMPLEMENTED,
              `${method === 'classify' ? 'Classify' : 'Regress'} is not supported by this server: ONNX models expose predict signatures only; use :predict`,
            );
          }
          const call = { signal: ctx.signal, deadline: ctx.deadline };
          // Shed before reading the body when the model's queue is already too long; an
          // admitted request counts as queued until its run is submitted or it ends.
          ctx.res.once('close', service.admit(model, call));
          const body = await ctx.readBody();
          sendJson(
            ctx.res,
            200,
            await predictTfsJson(service, model, parseTfsJsonText(body.toString('utf8')), call),
          );
        },
      },
    ],
  };
}
