/**
 * The Open Inference Protocol (KServe v2) HTTP/REST binding with Triton's extensions
 * (binary tensor data, classification, model repository, model configuration,
 * statistics), as an HttpApi over the protocol-neutral KServeService. The stock
 * `tritonclient.http` works against it unchanged. Every body is JSON except inference
 * responses with binary outputs; errors are `{"error": message}` with Triton's statuses
 * (400 bad request, 404 unknown model or path, 503 not ready, 501 unsupported, 500
 * internal).
 */
import type { ServerResponse } from 'node:http';
import { Code, ServingError, invalidArgument, parseTfsJsonText } from '@visionserve/protocol';
import {
  INFERENCE_HEADER_CONTENT_LENGTH,
  type HttpInferBody,
  type InferRequest,
  decodeHttpInferRequest,
  encodeHttpInferResponse,
  outputIsBinary,
} from '@visionserve/protocol/kserve';
import type { JsonDecoder } from '../../../contracts/json-decoder.js';
import type { ServableAssets } from '../../../contracts/servable-assets.js';
import { type BodyReading, tensorRoute } from '../../http/tensor-route.js';
import type { ManagementGuard } from '../../shared/management-guard.js';
import type { ContentEncoding, HttpApi, HttpContext, HttpRoute } from '../../http/http-api.js';
import { compressBody, negotiateEncoding } from '../../http/response-encoding.js';
import { sendJson, sendJsonError } from '../../http/send.js';
import type { KServeModelRef, KServeService } from '../kserve-service.js';

export interface KServeHttpApiOptions {
  /** The protocol-neutral KServe operations. */
  readonly kserve: KServeService;
  /** Largest request body as received, in bytes. */
  readonly bodyLimitBytes: number;
  /** Largest request body after decompression, in bytes. Default: bodyLimitBytes. */
  readonly decompressedBodyLimitBytes?: number | undefined;
  /** Deadline of one request in ms, body read included; 0 disables. */
  readonly requestTimeoutMs: number;
  /** Who may load and unload models through the repository extension. Default: anyone. */
  readonly managementGuard?: ManagementGuard | undefined;
  /**
   * Reads inference bodies without binary data off the event loop, and admits them against
   * its decode backlog before they are read. Default: read on the event loop, no such admission.
   */
  readonly jsonDecode?: JsonDecoder | undefined;
}

/** Request and response encodings Triton supports ("deflate" is zlib-wrapped). */
const ENCODINGS: readonly ContentEncoding[] = ['gzip', 'deflate'];

/** Largest body of the repository calls (index, load, unload), in bytes. */
const CONTROL_BODY_LIMIT = 64 * 1024;

/** `/v2/models/{m}[/versions/{v}]`, then a suffix; groups: name, version, suffix. */
const MODEL = String.raw`^/v2/models/([^/]+)(?:/versions/([0-9]+))?`;
const MODEL_GET = new RegExp(`${MODEL}(?:/(ready|config|stats))?$`);
const MODEL_INFER = new RegExp(`${MODEL}/infer$`);
const REPOSITORY_CONTROL = /^\/v2\/repository\/models\/([^/]+)\/(load|unload)$/;
const NAMED_REPOSITORY = /^\/v2\/repository\/[^/]+\/(?:index|models\/[^/]+\/(?:load|unload))$/;
const OWNS = /^\/v2(?:\/|$)/;

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw invalidArgument('Malformed percent-encoding in the path');
  }
}

function modelRef(params: RegExpExecArray): KServeModelRef {
  return { name: decodeSegment(params[1]!), version: params[2] ?? '' };
}

function header(ctx: HttpContext, name: string): string | undefined {
  const value = ctx.req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A JSON object body, or `{}` when the body is empty. */
async function jsonBody(ctx: HttpContext): Promise<Record<string, unknown>> {
  const body = await ctx.readBody(CONTROL_BODY_LIMIT);
  if (body.byteLength === 0 || body.toString('utf8').trim() === '') return {};
  const json = parseTfsJsonText(body.toString('utf8'));
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw invalidArgument('Request body must be a JSON object');
  }
  return json as Record<string, unknown>;
}

function parametersOf(body: Record<string, unknown>): Record<string, unknown> {
  const parameters = body['parameters'];
  if (parameters === undefined) return {};
  if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
    throw invalidArgument('"parameters" must be an object');
  }
  return parameters as Record<string, unknown>;
}

/** Writes an inference response: JSON, or JSON + binary outputs, compressed when asked. */
async function sendInferBody(
  ctx: HttpContext,
  body: HttpInferBody,
  encoding: ContentEncoding | undefined,
): Promise<void> {
  const { res } = ctx;
  const headers: Record<string, string> = {
    'Content-Type': body.binaryBytes > 0 ? 'application/octet-stream' : 'application/json',
  };
  // Set only when binary data follows; it is the uncompressed JSON's length.
  if (body.binaryBytes > 0) headers[INFERENCE_HEADER_CONTENT_LENGTH] = String(body.json.byteLength);
  if (encoding !== undefined) {
    const whole = Buffer.concat([body.json, ...body.binary]);
    const compressed = await compressBody(whole, encoding);
    if (res.headersSent || res.destroyed) return;
    res.writeHead(200, {
      ...headers,
      'Content-Encoding': encoding,
      'Content-Length': String(compressed.byteLength),
    });
    res.end(compressed);
    return;
  }
  if (res.headersSent || res.destroyed) return;
  res.writeHead(200, {
    ...headers,
    'Content-Length': String(body.json.byteLength + body.binaryBytes),
  });
  // One segment where possible: headers, JSON and binary chunks leave together.
  res.cork();
  res.write(body.json);
  for (const chunk of body.binary) res.write(chunk);
  res.end();
}

function sendStatus(res: ServerResponse, ok: boolean, key: 'live' | 'ready'): void {
  sendJson(res, ok ? 200 : 400, JSON.stringify({ [key]: ok }));
}

/** The KServe v2 HTTP API; mount it on an HTTP edge next to other APIs (it owns `/v2`). */
export function createKServeHttpApi(options: KServeHttpApiOptions): HttpApi {
  const { kserve, jsonDecode } = options;
  const routes: HttpRoute[] = [
    {
      name: 'GET /v2',
      methods: ['GET'],
      path: /^\/v2\/?$/,
      handle: ({ res }) => {
        sendJson(res, 200, JSON.stringify(kserve.serverMetadata()));
      },
    },
    {
      methods: ['GET'],
      path: '/v2/health/live',
      handle: ({ res }) => {
        sendStatus(res, kserve.serverLive(), 'live');
      },
    },
    {
      methods: ['GET'],
      path: '/v2/health/ready',
      handle: ({ res }) => {
        sendStatus(res, kserve.serverReady(), 'ready');
      },
    },
    {
      methods: ['GET'],
      path: '/v2/models/stats',
      handle: ({ res }) => {
        sendJson(res, 200, JSON.stringify(kserve.statistics()));
      },
    },
    {
      name: 'GET /v2/models/{model}[/versions/{version}][/ready|/config|/stats]',
      methods: ['GET'],
      path: MODEL_GET,
      handle: async ({ res, params, signal }) => {
        const ref = modelRef(params!);
        switch (params![3]) {
          case 'ready': {
            const ready = kserve.modelReady(ref);
            if (ready) sendJson(res, 200, JSON.stringify({ name: ref.name, ready }));
            else sendJsonError(res, 400, 'Model version not ready');
            return;
          }
          case 'config':
            sendJson(res, 200, JSON.stringify(await kserve.modelConfig(ref, signal)));
            return;
          case 'stats':
            sendJson(res, 200, JSON.stringify(kserve.statistics(ref)));
            return;
          default:
            sendJson(res, 200, JSON.stringify(await kserve.modelMetadata(ref, signal)));
        }
      },
    },
    tensorRoute<ServableAssets, InferRequest>(
      {
        name: 'POST /v2/models/{model}[/versions/{version}]/infer',
        methods: ['POST'],
        path: MODEL_INFER,
        pin: (ctx, fn, call) => kserve.withServable(modelRef(ctx.params!), fn, call),
        reading: (ctx) => inferReading(header(ctx, INFERENCE_HEADER_CONTENT_LENGTH), jsonDecode),
        handle: async ({ ctx, servable, decoded: request, call, ownedBuffers, outputLease }) => {
          const encoded = await kserve.inferOn(servable, request, {
            ...call,
            outputLease,
            ownedBuffers,
            encode: (response) => {
              const requested = new Map(request.outputs?.map((o) => [o.name, o]));
              return encodeHttpInferResponse(
                response,
                response.outputs.map((o) => outputIsBinary(request, requested.get(o.name))),
              );
            },
          });
          await sendInferBody(ctx, encoded, negotiateEncoding(header(ctx, 'accept-encoding'), ENCODINGS));
        },
      },
      jsonDecode,
    ),
    {
      methods: ['POST'],
      path: '/v2/repository/index',
      handle: async (ctx) => {
        const body = await jsonBody(ctx);
        const ready = body['ready'] ?? false;
        if (typeof ready !== 'boolean') throw invalidArgument('"ready" must be true or false');
        sendJson(ctx.res, 200, JSON.stringify(await kserve.repositoryIndex(ready)));
      },
    },
    {
      name: 'POST /v2/repository/models/{model}/load|unload',
      methods: ['POST'],
      path: REPOSITORY_CONTROL,
      handle: async (ctx) => {
        options.managementGuard?.check(ctx.credentials(), `${ctx.params![2]!} model`);
        const name = decodeSegment(ctx.params![1]!);
        const parameters = parametersOf(await jsonBody(ctx));
        if (ctx.params![2] === 'load') await kserve.loadModel(name, parameters);
        else {
          const dependents = parameters['unload_dependents'];
          if (dependents !== undefined && typeof dependents !== 'boolean') {
            throw invalidArgument('unload_dependents must be true or false');
          }
          await kserve.unloadModel(name);
        }
        sendJson(ctx.res, 200, '{}');
      },
    },
    {
      name: 'POST /v2/repository/{repository}/...',
      methods: ['POST'],
      path: NAMED_REPOSITORY,
      handle: () => {
        throw new ServingError(Code.UNIMPLEMENTED, "'repository_name' specification is not supported");
      },
    },
  ];
  return {
    name: 'kserve-http',
    routes,
    owns: OWNS,
    // Unmatched `/v2/...` paths: 405 when a route knows the path, else 404 "Not Found" (Triton's answers).
    unmatched: ({ res, method, path }) => {
      const allow = routes
        .filter((r) => (typeof r.path === 'string' ? r.path === path : r.path.test(path)))
        .flatMap((r) => r.methods);
      if (allow.length > 0 && !allow.includes(method)) {
        sendJsonError(res, 405, 'Method Not Allowed', { Allow: [...new Set(allow)].join(', ') });
      } else {
        sendJsonError(res, 404, 'Not Found');
      }
    },
    statusOverrides: { 'unsupported-content-encoding': 501 },
    requestTimeoutMs: options.requestTimeoutMs,
    bodyLimitBytes: options.bodyLimitBytes,
    ...(options.decompressedBodyLimitBytes === undefined
      ? {}
      : { decompressedBodyLimitBytes: options.decompressedBodyLimitBytes }),
    contentEncodings: ENCODINGS,
  };
}

/**
 * How an infer body is read: binary tensor data after the JSON header (its length in
 * Inference-Header-Content-Length) placed 8-byte aligned; an all-JSON body on a decode thread
 * (numeric `data` straight into typed arrays).
 */
function inferReading(
  headerLength: string | undefined,
  jsonDecode: JsonDecoder | undefined,
): BodyReading<InferRequest> {
  const alignAt = headerLength === undefined ? undefined : Number(headerLength);
  const decoder = headerLength === undefined ? jsonDecode : undefined;
  return {
    decodeThread: decoder !== undefined,
    alignAt: alignAt !== undefined && Number.isSafeInteger(alignAt) ? alignAt : undefined,
    decode: async (body, ticket) => {
      const fastHeader =
        decoder === undefined
          ? undefined
          : (((await decoder.read('kserve-infer', body, ticket)) as Record<string, unknown> | undefined) ??
            null);
      return decodeHttpInferRequest(body, headerLength, fastHeader);
    },
  };
}
