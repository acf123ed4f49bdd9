/**
 * A small HTTP/1.1 client over node:http(s) with keep-alive, used by the REST and
 * /invocations clients. Non-2xx answers become ServingErrors (see errorFromHttp).
 *
 * Idle keep-alive sockets race with the server closing them: a request written on a socket
 * the server has just closed fails with EPIPE or ECONNRESET although the server never saw it.
 * So idle sockets are dropped a second before the server's `Keep-Alive: timeout=N` hint
 * (node 20's agent ignores the hint unless it has a timeout of its own), and a call marked
 * idempotent that fails that way on a reused socket, before any response byte, is sent once
 * more on a new connection (the rule browsers and node's documentation give for this race).
 */
import http from 'node:http';
import https from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Code, ServingError, codeForHttpStatus } from '@visionserve/protocol';
import { abortReason } from './call-options.js';

export interface HttpTransportOptions {
  /** Base URL, e.g. "http://127.0.0.1:8501"; a path prefix is kept. */
  readonly baseUrl: string;
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
  /** Closes idle keep-alive sockets. */
  close(): void;
}

export function createHttpTransport(options: HttpTransportOptions): HttpTransport {
  const base = new URL(options.baseUrl.includes('://') ? options.baseUrl : `http://${options.baseUrl}`);
  const secure = base.protocol === 'https:';
  if (!secure && base.protocol !== 'http:') {
    throw new ServingError(Code.INVALID_ARGUMENT, `Unsupported URL scheme ${base.protocol}`);
  }
  const prefix = base.pathname.replace(/\/+$/, '');
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 16 };
  const agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  const idleMs = options.idleSocketTimeoutMs ?? DEFAULT_IDLE_SOCKET_TIMEOUT_MS;
  // node's own (which returns whether to keep the socket; its typing says void) keeps the hint
  // only when the agent has a timeout of its own, and then only if shorter.
  const keepSocketAlive = agent.keepSocketAlive.bind(agent) as (socket: Duplex) => boolean;
  agent.keepSocketAlive = (socket: Duplex): boolean => {
    if (!keepSocketAlive(socket)) return false;
    const res = (socket as { _httpMessage?: { res?: IncomingMessage } })._httpMessage?.res;
    const hint = res?.headers['keep-alive'];
    const timeoutMs = idleSocketTimeout(typeof hint === 'string' ? hint : undefined, idleMs);
    if (timeoutMs <= 0) return false;
    setSocketTimeout(socket, timeoutMs);
    return true;
  };
  const reuseSocket = agent.reuseSocket.bind(agent);
  agent.reuseSocket = (socket: Duplex, req: http.ClientRequest): void => {
    // The idle timeout is the free socket's; a request in progress keeps its own.
    setSocketTimeout(socket, 0);
    reuseSocket(socket, req);
  };
  const maxBytes = options.maxResponseBytes ?? 1024 * 1024 * 1024;
  const request = secure ? https.request : http.request;

  const send = (call: HttpCall, retryStale: boolean): Promise<HttpResult> =>
    new Promise<HttpResult>((resolve, reject) => {
      if (call.signal.aborted) {
        reject(abortReason(call.signal));
        return;
      }
      const headers: Record<string, string | number> = { ...options.headers, ...call.headers };
      const pieces: readonly Uint8Array[] =
        call.body === undefined ? [] : call.body instanceof Uint8Array ? [call.body] : call.body;
      if (call.body !== undefined) headers['content-length'] = pieces.reduce((n, p) => n + p.byteLength, 0);
      let settled = false;
      let responded = false;
      const fail = (error: ServingError): void => {
        if (settled) return;
        settled = true;
        call.signal.removeEventListener('abort', onAbort);
        req.destroy();
        reject(error);
      };
      const req = request(
        {
          protocol: base.protocol,
          hostname: base.hostname,
          port: base.port,
          path: prefix + call.path,
          method: call.method,
          agent,
          headers,
        },
        (res) => {
          responded = true;
          const declared = Number(res.headers['content-length']);
          if (declared > maxBytes) {
            fail(
              new ServingError(
                Code.RESOURCE_EXHAUSTED,
                `Response of ${declared} bytes exceeds the limit of ${maxBytes}`,
              ),
            );
            return;
          }
          // With a known length, read into one buffer as the body arrives (saves a copy of large
          // bodies). Not from Buffer's shared pool when placed: the caller's tensors may be
          // views of it.
          const known = Number.isSafeInteger(declared) && declared >= 0;
          const pad = known && call.bodyPadding ? call.bodyPadding(res.headers) & 7 : 0;
          const whole = known
            ? pad === 0 && !call.bodyPadding
              ? Buffer.allocUnsafe(declared)
              : Buffer.from(Buffer.allocUnsafeSlow(pad + declared).buffer, pad, declared)
            : undefined;
          const chunks: Buffer[] = [];
          let received = 0;
          res.on('data', (chunk: Buffer) => {
            if (received + chunk.length > (known ? declared : maxBytes)) {
              fail(
                new ServingError(
                  Code.RESOURCE_EXHAUSTED,
                  `Response body exceeds ${known ? 'its Content-Length' : `the limit of ${maxBytes} bytes`}`,
                ),
              );
              return;
            }
            if (whole) chunk.copy(whole, received);
            else chunks.push(chunk);
            received += chunk.length;
          });
          res.on('end', () => {
            if (settled) return;
            if (whole && received !== declared) {
              fail(
                new ServingError(Code.UNAVAILABLE, `Response ended after ${received} of ${declared} bytes`),
              );
              return;
            }
            settled = true;
            call.signal.removeEventListener('abort', onAbort);
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: whole ?? (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received)),
            });
          });
          res.on('error', (error: Error) => {
            fail(new ServingError(Code.UNAVAILABLE, `Response failed: ${error.message}`));
          });
        },
      );
      const onAbort = (): void => {
        fail(abortReason(call.signal));
      };
      call.signal.addEventListener('abort', onAbort, { once: true });
      req.on('error', (error: NodeJS.ErrnoException) => {
        if (
          retryStale &&
          !settled &&
          !responded &&
          req.reusedSocket &&
          STALE_SOCKET_ERRORS.has(error.code ?? '') &&
          !call.signal.aborted
        ) {
          settled = true;
          call.signal.removeEventListener('abort', onAbort);
          req.destroy();
          resolve(send(call, false));
          return;
        }
        fail(new ServingError(Code.UNAVAILABLE, `HTTP request to ${base.host} failed: ${error.message}`));
      });
      req.cork();
      for (const piece of pieces) req.write(piece);
      req.end();
    });

  return {
    request(call) {
      return send(call, call.idempotent ?? call.method === 'GET');
    },
    close() {
      agent.destroy();
    },
  };
}

/** The agent's sockets are net.Sockets (TLS ones too), typed as Duplex by the agent's hooks. */
function setSocketTimeout(socket: Duplex, ms: number): void {
  (socket as Duplex & { setTimeout?: (ms: number) => unknown }).setTimeout?.(ms);
}

/** Idle keep-alive socket lifetime without a server hint, in ms (HttpTransportOptions.idleSocketTimeoutMs). */
export const DEFAULT_IDLE_SOCKET_TIMEOUT_MS = 4000;

/** How a request on a socket the server closed while it went out fails. */
const STALE_SOCKET_ERRORS: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE']);

/**
 * How long to keep an idle socket, in ms, given the server's `Keep-Alive` header: its
 * `timeout=N` (seconds) less one second when announced, else `fallbackMs`. 0 or less: do not keep it.
 */
export function idleSocketTimeout(keepAlive: string | undefined, fallbackMs: number): number {
  const hint = keepAlive === undefined ? undefined : /(?:^|[\s,])timeout=(\d+)/i.exec(keepAlive)?.[1];
  return hint === undefined ? fallbackMs : Number(hint) * 1000 - 1000;
}

/**
 * The ServingError for a non-2xx answer: the code from the HTTP status (codeForHttpStatus,
 * the inverse of TF Serving's table) and the message of a `{"error": "..."}` body, else
 * the start of the body.
 */
export function errorFromHttp(result: HttpResult): ServingError {
  const text = result.body.toString('utf8');
  let message = text.slice(0, 1024);
  try {
    const json = JSON.parse(text) as unknown;
    if (
      typeof json === 'object' &&
      json !== null &&
      typeof (json as { error?: unknown }).error === 'string'
    ) {
      message = (json as { error: string }).error;
    }
  } catch {
    // not JSON: keep the text
  }
  if (message === '') message = `HTTP ${result.status}`;
  return new ServingError(codeForHttpStatus(result.status), message);
}
