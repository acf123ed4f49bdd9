/**
 * The HTTP/1.1 transport's interface: a call, its result, the options, and the keep-alive
 * rules (http1-transport.ts implements it).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ClientTlsOptions } from './client-tls.js';

export interface HttpTransportOptions {
  /** Base URL, e.g. "http://127.0.0.1:8501" or "https://..."; a path prefix is kept. */
  readonly baseUrl: string;
  /** TLS settings for an https:// base URL (a private CA, a client certificate). */
  readonly tls?: ClientTlsOptions;
  /** Sockets kept per host (and the most requests in flight). Default 16. */
  readonly maxSockets?: number;
  /** Headers sent with every request (e.g. authorization). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Largest accepted response body in bytes. Default 1 GiB. */
  readonly maxResponseBytes?: number;
  /**
   * How long an idle keep-alive socket is kept when the server announced no
   * `Keep-Alive: timeout` (with one: that timeout less 1 s), in ms. Default 4000, below the
   * 5 s that node and uvicorn servers keep idle connections without announcing it.
   */
  readonly idleSocketTimeoutMs?: number;
}

export interface HttpCall {
  readonly method: 'GET' | 'POST';
  /** Path (and query) below the base URL, starting with "/". */
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** The body, or its pieces in order (written without concatenating them). */
  readonly body?: Uint8Array | readonly Uint8Array[];
  /** Aborts the call; its reason (a ServingError) becomes the rejection. */
  readonly signal: AbortSignal;
  /**
   * Where a response body of known length starts in the buffer it is read into: given the
   * response headers, an offset in [0, 8) (e.g. so that binary tensor data after a header of
   * known length is aligned and decodes without a copy). Only alignment changes, never the
   * bytes. Default 0.
   */
  readonly bodyPadding?: (headers: IncomingHttpHeaders) => number;
  /**
   * The call may be sent twice (no effect beyond its answer, e.g. an inference): if a reused
   * keep-alive socket fails before any response byte arrives (the server closed it as the
   * request went out), it is retried once on a new connection. Default: true for GET only.
   */
  readonly idempotent?: boolean;
}

export interface HttpResult {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface HttpTransport {
  /** Resolves with any HTTP status; rejects only for transport failures or aborts. */
  request(call: HttpCall): Promise<HttpResult>;
  /**
   * Closes the idle keep-alive connections; busy ones are not kept once their call ends.
   * Later calls open new connections.
   */
  close(): void;
}

/** Idle keep-alive socket lifetime without a server hint, in ms (HttpTransportOptions.idleSocketTimeoutMs). */
export const DEFAULT_IDLE_SOCKET_TIMEOUT_MS = 4000;

/** How a request on a socket the server closed while it went out fails. */
export const STALE_SOCKET_ERRORS: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE']);

/**
 * How long to keep an idle socket, in ms, given the server's `Keep-Alive` header: its
 * `timeout=N` (seconds) less one second when announced, else `fallbackMs`. 0 or less: do not keep it.
 */
export function idleSocketTimeout(keepAlive: string | undefined, fallbackMs: number): number {
  const hint = keepAlive === undefined ? undefined : /(?:^|[\s,])timeout=(\d+)/i.exec(keepAlive)?.[1];
  return hint === undefined ? fallbackMs : Number(hint) * 1000 - 1000;
}
