import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code, type ErrorReason, ServingError, httpStatusFor, toServingError } from '@visionserve/protocol';
import type { Logger } from '../../util/logger.js';
import type { InflightBudget, Reservation } from '../shared/inflight-budget.js';
import { credentialsOf } from '../shared/management-guard.js';
import type { RequestEnd, RequestObserver } from '../shared/request-observer.js';
import type { HttpApi, HttpContext, HttpRoute } from './http-api.js';
import { readBody, sendBodyTooLarge } from './read-body.js';
import { watchRequest } from './request-signal.js';
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
const EDGE_STATUS: Partial<Record<ErrorReason, number>> = { 'body-too-large': 413, overloaded: 503 };

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

/**
 * The one HTTP edge every HTTP API is mounted on: routing (404 / 405 with Allow),
 * one AbortSignal per request (client disconnect, the API's deadline), body reading
 * with the API's limits, and one error reply (`{"error": message}` with the status from
 * the API's override table, else TF Serving's code mapping; a 413 lingers so that the
 * client can read it; internal faults are logged, never sent).
 */
export function createHttpEdge(options: HttpEdgeOptions): HttpEdge {
  const { apis, logger, budget } = options;
  const active = new Set<ServerResponse>();
  let draining = false;

  const find = (
    method: string,
    path: string,
  ):
    | { api: HttpApi; route: HttpRoute | undefined; params: RegExpExecArray | undefined; allow: string[] }
    | undefined => {
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
  };

  /** The code of the error each response answered (for observers). */
  const errorCodes = new WeakMap<ServerResponse, Code>();

  const reply = (
    api: HttpApi | undefined,
    req: IncomingMessage,
    res: ServerResponse,
    error: unknown,
  ): void => {
    if (res.destroyed) {
      logger.debug('request ended after the client left', { api: api?.name, error });
      return;
    }
    const serving = toServingError(error);
    errorCodes.set(res, serving.code);
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
    if (reason === 'overloaded') headers['Retry-After'] = '1';
    sendJsonError(res, status, serving.message, headers);
  };

  /** Requests sent with `Expect: 100-continue` whose body no route has asked for yet. */
  const awaitingContinue = new WeakSet<IncomingMessage>();

  const handler: HttpHandler = (req, res) => {
    active.add(res);
    if (draining) res.setHeader('Connection', 'close');
    let reservation: Reservation | undefined;
    let observed: ((end: RequestEnd) => void) | undefined;
    let bytesIn = 0;
    res.once('close', () => {
      reservation?.release();
      active.delete(res);
      if (observed !== undefined) {
        const sent = res.writableFinished;
        const status = sent ? res.statusCode : 499;
        observed({
          status: String(status),
          code: sent ? (errorCodes.get(res) ?? codeForHttpStatus(status)) : Code.CANCELLED,
          bytesIn: bytesIn || Number(req.headers['content-length'] ?? 0) || 0,
          bytesOut: sent ? Number(res.getHeader('content-length') ?? 0) || 0 : 0,
        });
      }
    });
    const method = req.method ?? '';
    const path = (req.url ?? '/').split('?', 1)[0]!;
    if (options.cors === true && !apis.some((a) => a.corsPaths?.test(path) === true)) {
      for (const [name, value] of Object.entries(CORS_HEADERS)) res.setHeader(name, value);
      if (method === 'OPTIONS') {
        const origin = req.headers.origin;
        if (origin !== undefined && /^https?:\/\//i.test(origin)) {
          res.writeHead(200, { 'Content-Length': '0' }).end();
        } else {
          sendJsonError(res, 400, 'Origin header is missing in CORS preflight');
        }
        return;
      }
    }
    const found = find(method, path);
    const startedAt = options.observer === undefined ? 0 : performance.now();
    if (found === undefined) {
      observed = options.observer?.begin({
        api: 'none',
        transport: 'http',
        method: 'unmatched',
        headers: req.headers,
        signal: undefined,
        startedAt,
      });
      sendJsonError(res, 404, options.notFoundMessage(method, path));
      return;
    }
    const { api, route, params, allow } = found;
    if (route === undefined && api.unmatched === undefined) {
      observed = options.observer?.begin({
        api: api.name,
        transport: 'http',
        method: 'unmatched',
        headers: req.headers,
        signal: undefined,
        startedAt,
      });
      if (allow.length > 0) {
        sendJsonError(res, 405, 'Method Not Allowed', { Allow: [...new Set(allow)].join(', ') });
      } else {
        sendJsonError(res, 404, options.notFoundMessage(method, path));
      }
      return;
    }
    const watch = watchRequest(res, api.requestTimeoutMs);
    if (options.observer !== undefined) {
      observed = options.observer.begin({
        api: api.name,
        transport: 'http',
        method: route === undefined ? 'unmatched' : routeName(route, method),
        headers: req.headers,
        signal: watch.signal,
        startedAt,
      });
    }
    const ctx: HttpContext = {
      req,
      res,
      method,
      path,
      params,
      signal: watch.signal,
      deadline: api.requestTimeoutMs > 0 ? Date.now() + api.requestTimeoutMs : undefined,
      credentials: () => credentialsOf(req.headers, req.socket),
      readBody: (limitBytes, placement) => {
        if (awaitingContinue.delete(req) && !res.headersSent) {
          if (!draining) res.removeHeader('Connection');
          res.writeContinue();
        }
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
                  if (reservation === undefined) {
                    reservation = budget.tryReserve(bytes);
                    return reservation !== undefined;
                  }
                  return reservation.grow(bytes);
                },
        }).then((body) => {
          bytesIn += body.byteLength;
          return body;
        });
      },
    };
    new Promise<void>((resolve) => {
      resolve(route === undefined ? api.unmatched!(ctx) : route.handle(ctx));
    })
      .catch((error: unknown) => {
        reply(api, req, res, error);
      })
      .finally(() => {
        watch.dispose();
      });
  };

  return {
    handler,
    checkContinue(req, res) {
      awaitingContinue.add(req);
      res.setHeader('Connection', 'close');
      handler(req, res);
    },
    get inFlight() {
      return active.size;
    },
    drain() {
      draining = true;
      for (const res of active) if (!res.headersSent) res.setHeader('Connection', 'close');
    },
  };
}
