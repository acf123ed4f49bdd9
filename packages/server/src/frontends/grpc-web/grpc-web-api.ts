/**
 * gRPC-web on an HTTP edge: the unary methods of gRPC services (the same `GrpcService`
 * objects the HTTP/2 gRPC server serves) answered over HTTP/1.1 for browsers and edge
 * clients, without a proxy in front.
 *
 * Wire (the gRPC-web protocol): `POST /<package.Service>/<Method>` with
 * `Content-Type: application/grpc-web[+proto]` (binary) or `application/grpc-web-text[+proto]`
 * (the same bytes in base64). The body is one length-prefixed message (flag byte 0x00, a
 * 4-byte big-endian length, the message). A successful answer is the response message
 * frame followed by a trailer frame (flag 0x80) holding `grpc-status:0` and `grpc-message:`
 * as HTTP/1 header lines; a failed call is "trailers only": HTTP 200, `grpc-status` and
 * `grpc-message` as response headers, empty body. Bodies over the API's limit and requests
 * refused by the in-flight budget are answered by the edge (HTTP 413 / 503), before the
 * body is read.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Code, ServingError } from '@visionserve/protocol';
import type { Logger } from '../../util/logger.js';
import type { GrpcMethod, GrpcService } from '../grpc/grpc-service.js';
import { encodeGrpcMessage, parseGrpcTimeout, statusOf } from '../grpc/grpc-status.js';
import type { HttpApi, HttpContext, HttpRoute } from '../http/http-api.js';
import { sendJsonError } from '../http/send.js';

export interface GrpcWebApiOptions {
  /** The services served (their unary methods); normally the gRPC server's own. */
  readonly services: readonly GrpcService[];
  readonly logger: Logger;
  /** Largest request message in bytes, before base64 (the text mode body may be 4/3 of it). */
  readonly maxMessageBytes: number;
  /** Deadline of one call in ms when the client sends no `grpc-timeout`; 0: none. */
  readonly requestTimeoutMs: number;
  /**
   * Origins allowed to call cross-origin (answered preflights, `Access-Control-Allow-Origin`);
   * `'*'` allows any; empty: none. Same-origin callers (the console) need none
   * (--grpc_web_cors_origins, --enable_cors).
   */
  readonly corsOrigins: readonly string[];
}

/** Request headers a gRPC-web client sends (preflight `Access-Control-Allow-Headers`). */
const CORS_ALLOW_HEADERS =
  'content-type, x-grpc-web, x-user-agent, grpc-timeout, authorization, connect-protocol-version';
/** Response headers a cross-origin gRPC-web client must read. */
const CORS_EXPOSE_HEADERS = 'grpc-status, grpc-message, grpc-status-details-bin';

/** The request's framing mode from its content type; undefined when it is not gRPC-web. */
export function grpcWebMode(contentType: string | undefined): 'binary' | 'text' | undefined {
  if (contentType === undefined) return undefined;
  const type = contentType.split(';', 1)[0]!.trim().toLowerCase();
  if (type === 'application/grpc-web' || type === 'application/grpc-web+proto') return 'binary';
  if (type === 'application/grpc-web-text' || type === 'application/grpc-web-text+proto') return 'text';
  return undefined;
}

/**
 * Decodes a text-mode body: base64 (standard alphabet), possibly several padded chunks
 * one after the other, as streaming clients send it. Throws INTERNAL on anything else.
 */
export function decodeGrpcWebText(body: Uint8Array): Buffer {
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
    .toString('latin1')
    .replace(/[\r\n]/g, '');
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text)) {
    // Chunks each padded: split after each padding run and check every piece.
    const pieces = text.split(/(?<==)(?=[^=])/);
    const decoded: Buffer[] = [];
    for (const piece of pieces) {
      if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(piece)) {
        throw new ServingError(Code.INTERNAL, 'Malformed grpc-web-text body: not base64');
      }
      decoded.push(Buffer.from(piece, 'base64'));
    }
    return Buffer.concat(decoded);
  }
  return Buffer.from(text, 'base64');
}

/**
 * The one message of a unary request body, copied into an ArrayBuffer of its own (placed
 * so that the method's large `bytes` field is 8-byte aligned). Throws a ServingError for
 * bad framing.
 */
export function readUnaryFrame(
  body: Uint8Array,
  method: GrpcMethod,
  maxMessageBytes: number,
): { message: Uint8Array; buffer: ArrayBuffer } {
  if (body.byteLength < 5) throw new ServingError(Code.INTERNAL, 'Incomplete request message');
  const flag = body[0]!;
  if ((flag & 0x80) !== 0) throw new ServingError(Code.INTERNAL, 'A request may not carry trailers');
  if ((flag & 0x01) !== 0) {
    throw new ServingError(Code.UNIMPLEMENTED, 'Compressed messages are not supported (identity only)');
  }
  if (flag !== 0) throw new ServingError(Code.INTERNAL, `Unknown frame flag 0x${flag.toString(16)}`);
  const length = new DataView(body.buffer, body.byteOffset, body.byteLength).getUint32(1);
  if (length > maxMessageBytes) {
    throw new ServingError(
      Code.RESOURCE_EXHAUSTED,
      `Received message larger than max (${length} vs. ${maxMessageBytes})`,
    );
  }
  if (body.byteLength < 5 + length) throw new ServingError(Code.INTERNAL, 'Incomplete request message');
  if (body.byteLength > 5 + length) {
    throw new ServingError(Code.UNIMPLEMENTED, 'More than one request message in a unary call');
  }
  const bytes = body.subarray(5, 5 + length);
  const offset = method.alignment?.(bytes.subarray(0, 1024));
  const shift = offset === undefined ? 0 : (8 - (offset % 8)) % 8;
  const buffer = new ArrayBuffer(length + shift);
  const message = new Uint8Array(buffer, shift, length);
  message.set(bytes);
  return { message, buffer };
}

/** The trailer frame of a status (flag 0x80, HTTP/1 header lines). */
function trailerFrame(code: Code, message: string): Buffer {
  const text = Buffer.from(`grpc-status:${code}\r\ngrpc-message:${encodeGrpcMessage(message)}\r\n`, 'latin1');
  const frame = Buffer.allocUnsafe(5 + text.byteLength);
  frame[0] = 0x80;
  frame.writeUInt32BE(text.byteLength, 1);
  text.copy(frame, 5);
  return frame;
}

/** Which origins may call (CORS). */
interface Cors {
  readonly origins: readonly string[];
  readonly anyOrigin: boolean;
}

/** CORS response headers for this request's Origin (none when it is not allowed). */
function corsHeaders(cors: Cors, headers: IncomingHttpHeaders): Record<string, string> {
  const origin = headers.origin;
  if (origin === undefined || (!cors.anyOrigin && !cors.origins.includes(origin))) return {};
  return {
    'Access-Control-Allow-Origin': cors.anyOrigin ? '*' : origin,
    'Access-Control-Expose-Headers': CORS_EXPOSE_HEADERS,
    ...(cors.anyOrigin ? {} : { Vary: 'Origin' }),
  };
}

function preflight(cors: Cors, { req, res }: HttpContext): void {
  const allowed = corsHeaders(cors, req.headers);
  if (allowed['Access-Control-Allow-Origin'] === undefined) {
    res.writeHead(403, { 'Content-Length': '0' }).end();
    return;
  }
  res
    .writeHead(204, {
      ...allowed,
      'Access-Control-Allow-Methods': 'POST, OPTIONS',
      'Access-Control-Allow-Headers': CORS_ALLOW_HEADERS,
      'Access-Control-Max-Age': '86400',
    })
    .end();
}

/** A trailers-only answer: the status in the headers, no body. */
function answerStatus(cors: Cors, ctx: HttpContext, contentType: string, error: unknown): void {
  const { res } = ctx;
  if (res.headersSent || res.destroyed) return;
  const { code, message } = statusOf(error);
  res
    .writeHead(200, {
      ...corsHeaders(cors, ctx.req.headers),
      'Content-Type': contentType,
      'Content-Length': '0',
      'grpc-status': String(code),
      'grpc-message': encodeGrpcMessage(message),
      ...(ctx.req.complete ? {} : { Connection: 'close' }),
    })
    .end();
}

/** The call's deadline: the edge's, or the client's grpc-timeout when sooner (then timed here). */
function callDeadline(
  ctx: HttpContext,
  controller: AbortController,
): { deadline: number | undefined; timer: NodeJS.Timeout | undefined } {
  let deadline = ctx.deadline;
  const timeoutMs = parseGrpcTimeout(ctx.req.headers['grpc-timeout']);
  if (timeoutMs === undefined) return { deadline, timer: undefined };
  const own = Date.now() + timeoutMs;
  if (deadline !== undefined && own >= deadline) return { deadline, timer: undefined };
  deadline = own;
  const timer = setTimeout(
    () => {
      controller.abort(new ServingError(Code.DEADLINE_EXCEEDED, 'Deadline exceeded'));
    },
    Math.min(timeoutMs, 2 ** 31 - 1),
  );
  return { deadline, timer };
}

/** The answer: the message frame and the OK trailer frame, base64 in text mode. */
function writeAnswer(
  cors: Cors,
  ctx: HttpContext,
  mode: 'binary' | 'text',
  contentType: string,
  chunks: readonly Uint8Array[],
): void {
  const { req, res } = ctx;
  let length = 0;
  for (const c of chunks) length += c.byteLength;
  const prefix = Buffer.allocUnsafe(5);
  prefix[0] = 0;
  prefix.writeUInt32BE(length, 1);
  const trailer = trailerFrame(Code.OK, '');
  if (res.headersSent || res.destroyed) return;
  const headers = { ...corsHeaders(cors, req.headers), 'Content-Type': contentType };
  if (mode === 'text') {
    const text = Buffer.from(Buffer.concat([prefix, ...chunks, trailer]).toString('base64'), 'latin1');
    res.writeHead(200, { ...headers, 'Content-Length': String(text.byteLength) }).end(text);
    return;
  }
  res.writeHead(200, { ...headers, 'Content-Length': String(5 + length + trailer.byteLength) });
  res.write(prefix);
  for (const c of chunks) if (c.byteLength > 0) res.write(c);
  res.end(trailer);
}

/** Errors the edge answers itself (415, 413, 503) instead of a gRPC status. */
function edgeAnswers(error: unknown): boolean {
  return (
    error instanceof ServingError &&
    (error.reason === 'unsupported-media-type' ||
      error.reason === 'body-too-large' ||
      error.reason === 'overloaded')
  );
}

/**
 * A refusal (UNAVAILABLE) once the call's deadline has passed is what gRPC answers then,
 * DEADLINE_EXCEEDED; any other error as it is.
 */
function pastDeadline(error: unknown, deadline: number | undefined): unknown {
  const late = deadline !== undefined && Date.now() >= deadline;
  return late && error instanceof ServingError && error.code === Code.UNAVAILABLE
    ? new ServingError(Code.DEADLINE_EXCEEDED, 'Deadline exceeded')
    : error;
}

/** One unary call: read the framed message, run the method, answer with trailers. */
async function call(
  options: GrpcWebApiOptions,
  cors: Cors,
  ctx: HttpContext,
  method: GrpcMethod,
  path: string,
): Promise<void> {
  const { req } = ctx;
  const mode = grpcWebMode(req.headers['content-type']);
  if (mode === undefined) {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      'gRPC-web needs Content-Type application/grpc-web(+proto) or application/grpc-web-text(+proto)',
      { reason: 'unsupported-media-type' },
    );
  }
  const contentType = mode === 'text' ? 'application/grpc-web-text+proto' : 'application/grpc-web+proto';
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onAbort = (): void => {
    controller.abort(ctx.signal.reason);
  };
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  /** Once the body is in, every answer is a gRPC status (the edge answers only the read's refusals). */
  let bodyRead = false;
  let deadline: number | undefined;
  try {
    const scheduled = callDeadline(ctx, controller);
    deadline = scheduled.deadline;
    timer = scheduled.timer;
    let body: Uint8Array;
    try {
      body = await ctx.readBody();
    } catch (error) {
      // Over the body limit or the in-flight budget: the edge answers 413 / 503 (and lingers).
      if (error instanceof ServingError && error.reason !== undefined) throw error;
      answerStatus(cors, ctx, contentType, error);
      return;
    }
    bodyRead = true;
    const { message, buffer } = readUnaryFrame(
      mode === 'text' ? decodeGrpcWebText(body) : body,
      method,
      options.maxMessageBytes,
    );
    const chunks = await method.handler(message, {
      signal: controller.signal,
      deadline: scheduled.deadline,
      metadata: req.headers,
      messageBuffer: buffer,
      credentials: () => ctx.credentials(),
    });
    if (controller.signal.aborted) throw controller.signal.reason;
    writeAnswer(cors, ctx, mode, contentType, chunks);
  } catch (error) {
    if (!bodyRead && edgeAnswers(error)) throw error;
    const cause =
      controller.signal.aborted && !(error instanceof ServingError)
        ? (controller.signal.reason as unknown)
        : pastDeadline(error, deadline);
    if (!(cause instanceof ServingError))
      options.logger.error('grpc-web handler failed', { path, error: cause });
    answerStatus(cors, ctx, contentType, cause);
  } finally {
    clearTimeout(timer);
    ctx.signal.removeEventListener('abort', onAbort);
  }
}

/** A request for no method of ours: 405 for other methods, else UNIMPLEMENTED as gRPC-web. */
function unmatched(cors: Cors, ctx: HttpContext): void {
  if (ctx.method === 'OPTIONS') {
    preflight(cors, ctx);
    return;
  }
  if (ctx.method !== 'POST') {
    sendJsonError(ctx.res, 405, 'Method Not Allowed', { Allow: 'POST, OPTIONS' });
    return;
  }
  answerStatus(
    cors,
    ctx,
    grpcWebMode(ctx.req.headers['content-type']) === 'text'
      ? 'application/grpc-web-text+proto'
      : 'application/grpc-web+proto',
    new ServingError(Code.UNIMPLEMENTED, `Method not found: ${ctx.path}`),
  );
}

/** gRPC-web for `services` as an HTTP API named "grpc-web" (one route per method). */
export function createGrpcWebApi(options: GrpcWebApiOptions): HttpApi {
  const { maxMessageBytes } = options;
  const origins = options.corsOrigins;
  const cors: Cors = { origins, anyOrigin: origins.includes('*') };
  const routes: HttpRoute[] = [];
  const names: string[] = [];
  for (const service of options.services) {
    names.push(service.name.replace(/\./g, '\\.'));
    for (const [name, method] of Object.entries(service.methods)) {
      const path = `/${service.name}/${name}`;
      routes.push({
        name,
        methods: ['POST', 'OPTIONS'],
        path,
        handle: (ctx) => {
          if (ctx.method === 'OPTIONS') {
            preflight(cors, ctx);
            return;
          }
          return call(options, cors, ctx, method, path);
        },
      });
    }
  }
  const owns = new RegExp(`^/(?:${names.join('|')})/`);
  return {
    name: 'grpc-web',
    routes,
    owns,
    corsPaths: owns,
    unmatched: (ctx) => {
      unmatched(cors, ctx);
    },
    statusOverrides: { 'unsupported-media-type': 415 },
    requestTimeoutMs: options.requestTimeoutMs,
    bodyLimitBytes: Math.ceil(((maxMessageBytes + 5) * 4) / 3) + 4,
    contentEncodings: [],
  };
}
