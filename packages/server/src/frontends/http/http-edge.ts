import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code, type ErrorReason, ServingError, httpStatusFor, toServingError } from '@visionserve/protocol';
import type { Logger } from '../../util/logger.js';
import type { InflightBudget, Reservation } from '../shared/inflight-budget.js';
import { credentialsOf } from '../shared/management-guard.js';
import type { RequestEnd, RequestObserver } from '../shared/request-observer.js';
import type { HttpApi, HttpContext, HttpRoute } from './http-api.js';
import { readBody, sendBodyTooLarge } from './read-body.js';
import { watchRequest } from './request-signal.js';
import { type UploadRate, watchUploadRate } from './upload-rate.js';
import { sendJsonError } from './send.js';

/** Largest unread request body drained (read and discarded) after an early answer, in bytes. */
export { DRAIN_UNREAD_BODY_BYTES } from './send.js';

export interface HttpEdgeOptions {
  /** Mounted in order; the first API whose route (or `owns` pattern) matches a path serves it. */
  readonly apis: readonly HttpApi[];
  readonly logger: Logger;
  /**
   * The body of a 404 for a path no API knows, e.g. TF Serving's `No handler for GET /x`
   * or the SageMaker container's `Not Found`.
   */
  readonly notFoundMessage: (method: string, path: string) => string;
  /** Admission by memory: request bodies are reserved against it before they are read. Default: none. */
  readonly budget?: InflightBudget | undefined;
  /** Told of every request (metrics, access logs, tracing). Default: none. */
  readonly observer?: RequestObserver | undefined;
  /**
   * CORS as TF Serving's `--rest_api_enable_cors_support`: every response allows any origin
   * (`Access-Control-Allow-Origin: *`, methods POST, GET, header Content-Type) and OPTIONS
   * preflights are answered 200 when `Origin` is http(s)://..., else 400. Default false.
   */
  readonly cors?: boolean | undefined;
  /** The least rate at which a body being read must arrive (408 and close below it). Default: no minimum. */
  readonly uploadRate?: UploadRate | undefined;
}

/** The edge as a listener sees it: the request handler plus draining. */
export interface HttpEdge {
  readonly handler: HttpHandler;
  /**
   * The handler for requests sent with `Expect: 100-continue` (node:http's 'checkContinue'):
   * `100 Continue` goes out only when a route asks for the body, so a request refused
   * or answered before that (overload, unknown model) costs no upload; such an answer
   * closes the connection, since the client does not send the body it was not asked for.
   */
  readonly checkContinue: HttpHandler;
  /** Requests received and not yet answered. */
  readonly inFlight: number;
  /**
   * From now on every response (those in flight included) carries `Connection: close`,
   * so keep-alive clients finish their current request and reconnect elsewhere.
   */
  drain(): void;
}

/** Statuses every API shares; an API's own table wins. */
const EDGE_STATUS: Partial<Record<ErrorReason, number>> = {
  'body-too-large': 413,
  overloaded: 503,
  'body-too-slow': 408,
};

/** CORS headers, TF Serving's values. */
const CORS_HEADERS: Readonly<Record<string, string>> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'POST, GET',
  'Access-Control-Allow-Headers': 'Content-Type',
};

/** The canonical code closest to an HTTP status (responses written by routes themselves). */
function codeForHttpStatus(status: number): Code {
  if (status < 400) return Code.OK;
  switch (status) {
    case 400:
      return Code.INVALID_ARGUMENT;
    case 401:
      return Code.UNAUTHENTICATED;
    case 403:
      return Code.PERMISSION_DENIED;
    case 404:
      return Code.NOT_FOUND;
    case 408:
    case 504:
      return Code.DEADLINE_EXCEEDED;
    case 409:
      return Code.ALREADY_EXISTS;
    case 413:
    case 429:
    case 507:
      return Code.RESOURCE_EXHAUSTED;
    case 499:
      return Code.CANCELLED;
    case 501:
      return Code.UNIMPLEMENTED;
    case 503:
      return Code.UNAVAILABLE;
    default:
      return status < 500 ? Code.INVALID_ARGUMENT : Code.INTERNAL;
  }
}

/** The metrics/log name of a route. */
function routeName(route: HttpRoute, method: string): string {
  return route.name ?? `${method} ${typeof route.path === 'string' ? route.path : route.path.source}`;
}

/** Node's request handler signature. */
export type HttpHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** The edge's state, shared by the module-level functions below. */
interface Edge {
  readonly options: HttpEdgeOptions;
  /** Responses not finished yet. */
  readonly active: Set<ServerResponse>;
  draining: boolean;
  /** The code of the error each response answered (for observers). */
  readonly errorCodes: WeakMap<ServerResponse, Code>;
  /** Requests sent with `Expect: 100-continue` whose body no route has asked for yet. */
  readonly awaitingContinue: WeakSet<IncomingMessage>;
}

/** One request's bookkeeping until its response closes. */
interface RequestState {
  reservation: Reservation | undefined;
  observed: ((end: RequestEnd) => void) | undefined;
  bytesIn: number;
}

interface Found {
  readonly api: HttpApi;
  readonly route: HttpRoute | undefined;
  readonly params: RegExpExecArray | undefined;
  /** Methods of the routes whose path matched (for a 405's Allow). */
  readonly allow: string[];
}

function findRoute(apis: readonly HttpApi[], method: string, path: string): Found | undefined {
  const allow: string[] = [];
  for (const api of apis) {
    let pathMatched = false;
    for (const route of api.routes) {
      const params = typeof route.path === 'string' ? undefined : (route.path.exec(path) ?? null);
      if (params === null || (params === undefined && route.path !== path)) continue;
      pathMatched = true;
      if (route.methods.includes(method)) return { api, route, params, allow };
      allow.push(...route.methods);
    }
    if (pathMatched || api.owns?.test(path) === true)
      return { api, route: undefined, params: undefined, allow };
  }
  return undefined;
}

/** The one error reply: status from the API's overrides, else TF Serving's code mapping. */
function reply(
  edge: Edge,
  api: HttpApi | undefined,
  req: IncomingMessage,
  res: ServerResponse,
  error: unknown,
): void {
  const { logger } = edge.options;
  if (res.destroyed) {
    logger.debug('request ended after the client left', { api: api?.name, error });
    return;
  }
  const serving = toServingError(error);
  edge.errorCodes.set(res, serving.code);
  if (!(error instanceof ServingError)) {
    logger.error('internal error', { api: api?.name, error, method: req.method, url: req.url });
  }
  const reason = serving.reason;
  const status =
    (reason === undefined ? undefined : (api?.statusOverrides?.[reason] ?? EDGE_STATUS[reason])) ??
    httpStatusFor(serving.code);
  if (reason === 'body-too-large') {
    sendBodyTooLarge(req, res, serving.message);
    return;
  }
  const headers: Record<string, string> = {};
  // RFC 7694: say which request encodings would have worked.
  if (reason === 'unsupported-content-encoding') {
    headers['Accept-Encoding'] = (api?.contentEncodings ?? ['gzip']).join(', ');
  }
  // A body left unread: sendJsonError closes the connection or lets Node drain it (send.ts);
  // a body too slow to wait for is never drained.
  if (reason === 'body-too-slow' && !req.complete) headers['Connection'] = 'close';
  if (reason === 'overloaded') headers['Retry-After'] = '1';
  sendJsonError(res, status, serving.message, headers);
}

/** When the response closes: the reservation is released and the observer told. */
function onResponseClose(edge: Edge, req: IncomingMessage, res: ServerResponse, rs: RequestState): void {
  rs.reservation?.release();
  edge.active.delete(res);
  if (rs.observed === undefined) return;
  const sent = res.writableFinished;
  const status = sent ? res.statusCode : 499;
  rs.observed({
    status: String(status),
    code: sent ? (edge.errorCodes.get(res) ?? codeForHttpStatus(status)) : Code.CANCELLED,
    bytesIn: rs.bytesIn || Number(req.headers['content-length'] ?? 0) || 0,
    bytesOut: sent ? Number(res.getHeader('content-length') ?? 0) || 0 : 0,
  });
}

/** TF Serving's CORS on paths no API handles itself; true when the request was a preflight (answered). */
function answerCors(req: IncomingMessage, res: ServerResponse, method: string): boolean {
  for (const [name, value] of Object.entries(CORS_HEADERS)) res.setHeader(name, value);
  if (method !== 'OPTIONS') return false;
  const origin = req.headers.origin;
  if (origin !== undefined && /^https?:\/\//i.test(origin)) {
    res.writeHead(200, { 'Content-Length': '0' }).end();
  } else {
    sendJsonError(res, 400, 'Origin header is missing in CORS preflight');
  }
  return true;
}

/** A request no route takes: 404, or 405 with Allow when the path is known. */
function answerUnrouted(
  edge: Edge,
  req: IncomingMessage,
  res: ServerResponse,
  rs: RequestState,
  found: Found | undefined,
  startedAt: number,
): void {
  const { options } = edge;
  const method = req.method ?? '';
  const path = (req.url ?? '/').split('?', 1)[0]!;
  rs.observed = options.observer?.begin({
    api: found?.api.name ?? 'none',
    transport: 'http',
    method: 'unmatched',
    headers: req.headers,
    signal: undefined,
    startedAt,
  });
  if (found !== undefined && found.allow.length > 0) {
    sendJsonError(res, 405, 'Method Not Allowed', { Allow: [...new Set(found.allow)].join(', ') });
  } else {
    sendJsonError(res, 404, options.notFoundMessage(method, path));
  }
}

/** The request as routes see it: params, signal and deadline, credentials, the body on demand. */
function contextFor(
  edge: Edge,
  req: IncomingMessage,
  res: ServerResponse,
  rs: RequestState,
  found: Found,
  watch: ReturnType<typeof watchRequest>,
): HttpContext {
  const { api, params } = found;
  const { budget } = edge.options;
  return {
    req,
    res,
    method: req.method ?? '',
    path: (req.url ?? '/').split('?', 1)[0]!,
    params,
    signal: watch.signal,
    deadline: api.requestTimeoutMs > 0 ? Date.now() + api.requestTimeoutMs : undefined,
    credentials: () => credentialsOf(req.headers, req.socket),
    readBody: (limitBytes, placement) => {
      if (edge.awaitingContinue.delete(req) && !res.headersSent) {
        if (!edge.draining) res.removeHeader('Connection');
        res.writeContinue();
      }
      const { uploadRate } = edge.options;
      const stopWatch =
        uploadRate === undefined
          ? undefined
          : watchUploadRate(req, uploadRate, (error) => {
              watch.abort(error);
            });
      return readBody(req, {
        alignAt: placement?.alignAt,
        into: placement?.into,
        limitBytes: limitBytes ?? api.bodyLimitBytes,
        decompressedLimitBytes: limitBytes ?? api.decompressedBodyLimitBytes ?? api.bodyLimitBytes,
        encodings: api.contentEncodings,
        signal: watch.signal,
        reserve:
          budget === undefined
            ? undefined
            : (bytes) => {
                if (rs.reservation === undefined) {
                  rs.reservation = budget.tryReserve(bytes);
                  return rs.reservation !== undefined;
                }
                return rs.reservation.grow(bytes);
              },
      })
        .then((body) => {
          rs.bytesIn += body.byteLength;
          return body;
        })
        .finally(() => {
          stopWatch?.();
        });
    },
  };
}

function handle(edge: Edge, req: IncomingMessage, res: ServerResponse): void {
  const { options } = edge;
  edge.active.add(res);
  if (edge.draining) res.setHeader('Connection', 'close');
  const rs: RequestState = { reservation: undefined, observed: undefined, bytesIn: 0 };
  res.once('close', () => {
    onResponseClose(edge, req, res, rs);
  });
  const method = req.method ?? '';
  const path = (req.url ?? '/').split('?', 1)[0]!;
  if (options.cors === true && !options.apis.some((a) => a.corsPaths?.test(path) === true)) {
    if (answerCors(req, res, method)) return;
  }
  const found = findRoute(options.apis, method, path);
  const startedAt = options.observer === undefined ? 0 : performance.now();
  if (found === undefined || (found.route === undefined && found.api.unmatched === undefined)) {
    answerUnrouted(edge, req, res, rs, found, startedAt);
    return;
  }
  const { api, route } = found;
  const watch = watchRequest(res, api.requestTimeoutMs);
  if (options.observer !== undefined) {
    rs.observed = options.observer.begin({
      api: api.name,
      transport: 'http',
      method: route === undefined ? 'unmatched' : routeName(route, method),
      headers: req.headers,
      signal: watch.signal,
      startedAt,
    });
  }
  const ctx = contextFor(edge, req, res, rs, found, watch);
  new Promise<void>((resolve) => {
    resolve(route === undefined ? api.unmatched!(ctx) : route.handle(ctx));
  })
    .catch((error: unknown) => {
      reply(edge, api, req, res, error);
    })
    .finally(() => {
      watch.dispose();
    });
}

/**
 * The one HTTP edge every HTTP API is mounted on: routing (404 / 405 with Allow),
 * one AbortSignal per request (client disconnect, the API's deadline), body reading
 * with the API's limits, and one error reply (`{"error": message}` with the status from
 * the API's override table, else TF Serving's code mapping; a 413 lingers so that the
 * client can read it; internal faults are logged, never sent).
 */
export function createHttpEdge(options: HttpEdgeOptions): HttpEdge {
  const edge: Edge = {
    options,
    active: new Set(),
    draining: false,
    errorCodes: new WeakMap(),
    awaitingContinue: new WeakSet(),
  };
  const handler: HttpHandler = (req, res) => {
    handle(edge, req, res);
  };
  return {
    handler,
    checkContinue(req, res) {
      edge.awaitingContinue.add(req);
      res.setHeader('Connection', 'close');
      handler(req, res);
    },
    get inFlight() {
      return edge.active.size;
    },
    drain() {
      edge.draining = true;
      for (const res of edge.active) if (!res.headersSent) res.setHeader('Connection', 'close');
    },
  };
}
