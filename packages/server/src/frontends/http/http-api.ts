import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorReason } from '@visionserve/protocol';
import type { ManagementCredentials } from '../shared/management-guard.js';

/** One request as a route handler sees it. */
export interface HttpContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** HTTP method, upper case. */
  readonly method: string;
  /** Path without the query string (not decoded). */
  readonly path: string;
  /** The match of the route's path pattern (capture groups); undefined for exact paths. */
  readonly params: RegExpExecArray | undefined;
  /** Aborted when the client disconnects (CANCELLED) or the API's deadline passes (DEADLINE_EXCEEDED). */
  readonly signal: AbortSignal;
  /** When the API's request timeout expires (Date.now() clock, ms); undefined without a timeout. */
  readonly deadline: number | undefined;
  /**
   * Reads the whole body within the API's limits, or within `limitBytes` (before and
   * after decompression) when given. Over a limit it rejects with a `body-too-large` ServingError,
   * which the edge answers 413. `placement`: see BodyPlacement. The body's memory belongs to
   * this request alone (see readBody): its own, or the caller's `into` memory.
   */
  readBody(limitBytes?: number, placement?: BodyPlacement): Promise<Buffer>;
  /** The caller's token and client certificate, for a ManagementGuard. */
  credentials(): ManagementCredentials;
}

/** Where readBody puts a body (see ReadBodyOptions). */
export interface BodyPlacement {
  /** A byte of the body to place 8-byte aligned. */
  readonly alignAt?: number | undefined;
  /**
   * Memory of the caller's for an identity body of declared length `bytes` (the view it
   * returns is exactly that long), or undefined for a buffer of the request's own.
   */
  readonly into?: ((bytes: number) => Uint8Array | undefined) | undefined;
}

export interface HttpRoute {
  /**
   * Name of the operation in metrics, logs and spans (bounded: never from the request).
   * Default: "<METHOD> <path or pattern source>".
   */
  readonly name?: string;
  /** Methods this route answers; another method on a matching path gets 405 with Allow. */
  readonly methods: readonly string[];
  /** An exact path, or a pattern tested against the path (anchor it). */
  readonly path: string | RegExp;
  /**
   * Writes the response, or throws: a ServingError is answered `{"error": message}` with
   * the API's status for it; anything else is logged and answered 500 "Internal error".
   */
  handle(ctx: HttpContext): Promise<void> | void;
}

/**
 * One HTTP API (TF Serving REST, SageMaker, ...): routes plus the protocol's own
 * answers, mounted on an HTTP edge. Owns no sockets; the edge owns body limits,
 * deadlines, abort signals and error replies.
 */
export interface HttpApi {
  /** Short name for logs (and metrics labels), e.g. "tfs-rest". */
  readonly name: string;
  readonly routes: readonly HttpRoute[];
  /**
   * Paths this API owns beyond its routes: a request on such a path that no route
   * matches is answered by `unmatched` (TF Serving answers any `/v1/...` it cannot parse
   * with 400 "Malformed request").
   */
  readonly owns?: RegExp;
  readonly unmatched?: (ctx: HttpContext) => Promise<void> | void;
  /**
   * Paths on which this API answers CORS itself (preflights included, e.g. gRPC-web's own
   * headers): the edge's `--rest_api_enable_cors_support` headers are not added there.
   * Default: none.
   */
  readonly corsPaths?: RegExp;
  /** Protocol-specific statuses for error reasons (e.g. 415 for unsupported-media-type). */
  readonly statusOverrides?: Partial<Readonly<Record<ErrorReason, number>>>;
  /** Deadline of one request in ms, body read and handler included; 0 disables. */
  readonly requestTimeoutMs: number;
  /** Largest body `readBody` accepts, as received, in bytes. */
  readonly bodyLimitBytes: number;
  /** Largest body after decompression, in bytes. Default: bodyLimitBytes. */
  readonly decompressedBodyLimitBytes?: number;
  /**
   * Request Content-Encodings `readBody` decodes besides identity. Default `['gzip']`
   * (TF Serving); "deflate" is the zlib format (RFC 1950), as Triton and Python's zlib use it.
   */
  readonly contentEncodings?: readonly ContentEncoding[];
}

/** A compressed request or response body encoding. */
export type ContentEncoding = 'gzip' | 'deflate';
