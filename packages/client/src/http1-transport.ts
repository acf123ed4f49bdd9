/**
 * The client's HTTP/1.1 transport, for http:// and https://: keep-alive connections whose
 * socket reads a response body of known length straight into the one buffer that the caller
 * gets (`onread`, see http1-response-reader.ts; over TLS node copies each decrypted record there).
 * node:http and node:https copied every body read twice more (the parser hands each piece
 * out as a fresh buffer, the caller assembled them): on a 34 MB answer that was about two
 * thirds of the client's CPU and a full garbage collection per answer.
 *
 * One request at a time per connection (no pipelining), at most `maxSockets` connections;
 * further calls wait for one. An idle connection is dropped a second before the server's
 * `Keep-Alive: timeout=N` (or after `idleSocketTimeoutMs`): a request written on a socket the
 * server has just closed fails with EPIPE or ECONNRESET although the server never saw it, so
 * an idempotent call whose reused connection turns out closed before any response byte
 * (ECONNRESET, EPIPE, end of stream) is sent once more on a new one (the rule browsers and
 * node's documentation give for this race). An abort ends the call's connection (HTTP/1.1
 * cannot cancel a request otherwise).
 */
import type net from 'node:net';
import { Code, ServingError } from '@visionserve/protocol';
import { abortReason } from './call-options.js';
import { type SocketTarget, connectSocket, hostOf, usesTls } from './client-tls.js';
import {
  DEFAULT_IDLE_SOCKET_TIMEOUT_MS,
  type HttpCall,
  type HttpResult,
  type HttpTransport,
  type HttpTransportOptions,
  STALE_SOCKET_ERRORS,
  idleSocketTimeout,
} from './http-call.js';
import {
  DEFAULT_MAX_HEAD_BYTES,
  HTTP_TOKEN,
  type Http1Response,
  Http1ResponseReader,
} from './http1-response-reader.js';

/** Read buffer for heads, small bodies and chunked ones (node's own size). */
const SCRATCH_BYTES = 64 * 1024;

/** What node:http refuses in a header value (the head is written as latin1: nothing above 0xff). */
const HEADER_VALUE_BAD = /[^\t\x20-\x7e\x80-\xff]/;
/** What node:http refuses in a request path. */
const PATH_BAD = /[^\u0021-\u00ff]/;
/** Request fields this transport writes itself; a caller's are dropped. */
const OWN_FIELDS: ReadonlySet<string> = new Set(['content-length', 'connection', 'transfer-encoding']);

/** Why an exchange failed, and whether the request may be sent again elsewhere. */
class ExchangeFailure extends Error {
  constructor(
    readonly error: ServingError,
    /** A reused connection failed before any byte of the response: the server likely never saw it. */
    readonly stale: boolean,
  ) {
    super(error.message);
  }
}

interface Exchange {
  readonly reader: Http1ResponseReader;
  resolve(response: Http1Response): void;
  reject(failure: ExchangeFailure): void;
}

class Http1Connection {
  readonly socket: net.Socket;
  /** Responses completed on this connection. */
  served = 0;
  /** No further request may use it. */
  gone = false;
  /** Ended: the transport has been told (onGone). */
  private ended = false;
  /** Why the connection ended, when it failed before a request was on it. */
  private failure: ServingError | undefined;
  private exchange: Exchange | undefined;
  private readonly scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES);

  constructor(
    target: SocketTarget,
    /** host:port as in the URL, for messages. */
    authority: string,
    private readonly onGone: (connection: Http1Connection) => void,
  ) {
    this.socket = connectSocket(
      target,
      'http/1.1',
      {
        buffer: () => this.exchange?.reader.room() ?? this.scratch,
        callback: (n: number, buffer: Uint8Array) => {
          this.onRead(n, buffer);
          return true;
        },
      },
      (error) => {
        this.destroy(
          new ServingError(Code.UNAVAILABLE, `HTTP request to ${authority} failed: ${error.message}`),
        );
      },
    );
    this.socket.setKeepAlive(true, 1000);
    this.socket.on('error', (error: NodeJS.ErrnoException) => {
      this.end(
        new ServingError(Code.UNAVAILABLE, `HTTP request to ${authority} failed: ${error.message}`),
        STALE_SOCKET_ERRORS.has(error.code ?? ''),
      );
    });
    this.socket.on('end', () => {
      this.end(undefined, true);
    });
    this.socket.on('close', () => {
      this.end(undefined, true);
    });
    this.socket.on('timeout', () => {
      this.destroy();
    });
  }

  /** Sends a request (head, then the body's pieces) and resolves with its response. */
  send(head: Buffer, pieces: readonly Uint8Array[], reader: Http1ResponseReader): Promise<Http1Response> {
    return new Promise<Http1Response>((resolve, reject) => {
      if (this.gone) {
        // Failed before the request was on it (e.g. a connect error raised at once).
        reject(
          new ExchangeFailure(this.failure ?? new ServingError(Code.UNAVAILABLE, 'Connection closed'), false),
        );
        return;
      }
      this.exchange = { reader, resolve, reject };
      this.socket.cork();
      this.socket.write(head);
      for (const piece of pieces) if (piece.byteLength > 0) this.socket.write(piece);
      this.socket.uncork();
    });
  }

  /** Ends the connection; a request on it fails with `error` (UNAVAILABLE when not given). */
  destroy(error?: ServingError): void {
    this.end(error ?? new ServingError(Code.UNAVAILABLE, 'Connection closed'), false);
    this.socket.destroy();
  }

  private onRead(n: number, buffer: Uint8Array): void {
    const exchange = this.exchange;
    if (exchange === undefined) {
      // Bytes nobody asked for: the connection cannot be trusted with the next request.
      this.destroy();
      return;
    }
    let extra = 0;
    try {
      if (buffer !== this.scratch) {
        exchange.reader.advance(n);
      } else {
        extra = n - exchange.reader.push(buffer.subarray(0, n));
      }
    } catch (error) {
      this.destroy(error instanceof ServingError ? error : new ServingError(Code.INTERNAL, String(error)));
      return;
    }
    if (!exchange.reader.done) return;
    this.exchange = undefined;
    this.served += 1;
    const response = exchange.reader.response();
    // Bytes after the response, or a server that closes: not reused.
    if (extra > 0 || !response.keepAlive) this.gone = true;
    exchange.resolve(response);
    if (extra > 0) this.destroy();
  }

  /** The connection ended (error, end of stream, close) or is being ended. */
  private end(error: ServingError | undefined, mayBeStale: boolean): void {
    const exchange = this.exchange;
    this.exchange = undefined;
    this.gone = true;
    this.failure ??= error;
    if (exchange !== undefined) {
      let failure = error;
      if (failure === undefined) {
        try {
          exchange.reader.end(); // completes a body that runs to the end of the connection
          this.served += 1;
          exchange.resolve(exchange.reader.response());
        } catch (cut) {
          failure = cut instanceof ServingError ? cut : new ServingError(Code.UNAVAILABLE, String(cut));
        }
      }
      if (failure !== undefined) {
        exchange.reject(
          new ExchangeFailure(failure, mayBeStale && this.served > 0 && !exchange.reader.received),
        );
      }
    }
    if (!this.ended) {
      this.ended = true;
      this.onGone(this);
    }
  }
}

interface Waiter {
  readonly wake: () => void;
}

/** Waits in line for a connection to become free (or the call to be aborted). */
function waitForRoom(waiters: Waiter[], signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const waiter: Waiter = {
      wake: () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
    };
    const onAbort = (): void => {
      waiters.splice(waiters.indexOf(waiter), 1);
      reject(abortReason(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    waiters.push(waiter);
  });
}

/**
 * The request head: one value per field whatever its case (later entries, the call's, override
 * the client's), Host unless given, keep-alive, and the body length.
 */
function requestHead(
  host: string,
  path: string,
  headers: readonly (readonly [string, string])[],
  method: HttpCall['method'],
  bodyBytes: number,
): Buffer {
  if (PATH_BAD.test(path))
    throw new ServingError(Code.INVALID_ARGUMENT, 'Invalid characters in the request path');
  const fields = new Map<string, [string, string]>();
  for (const [name, value] of headers) {
    if (!HTTP_TOKEN.test(name) || HEADER_VALUE_BAD.test(value)) {
      throw new ServingError(Code.INVALID_ARGUMENT, `Invalid HTTP header ${JSON.stringify(name)}`);
    }
    const key = name.toLowerCase();
    if (!OWN_FIELDS.has(key)) fields.set(key, [name, value]);
  }
  const lines = [`${method} ${path} HTTP/1.1`];
  if (!fields.has('host')) lines.push(`Host: ${host}`);
  for (const [name, value] of fields.values()) lines.push(`${name}: ${value}`);
  lines.push('Connection: keep-alive');
  if (bodyBytes > 0 || method !== 'GET') lines.push(`Content-Length: ${bodyBytes}`);
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

export function createHttp1Transport(base: URL, options: HttpTransportOptions): HttpTransport {
  const tls = usesTls(base, options.tls, `${base.protocol}//${base.host}`) ? (options.tls ?? {}) : undefined;
  const host = hostOf(base);
  const port = base.port === '' ? (tls === undefined ? 80 : 443) : Number(base.port);
  const target: SocketTarget = { host, port, tls, sessions: { session: undefined } };
  const prefix = base.pathname.replace(/\/+$/, '');
  const maxSockets = options.maxSockets ?? 16;
  const maxBytes = options.maxResponseBytes ?? 1024 * 1024 * 1024;
  const idleMs = options.idleSocketTimeoutMs ?? DEFAULT_IDLE_SOCKET_TIMEOUT_MS;

  /** Every connection not yet gone, idle or busy. */
  const open = new Set<Http1Connection>();
  /** Idle connections, the most recently used last. */
  const idle: Http1Connection[] = [];
  const waiters: Waiter[] = [];

  const wakeOne = (): void => {
    waiters.shift()?.wake();
  };

  const forget = (connection: Http1Connection): void => {
    if (!open.delete(connection)) return;
    const at = idle.indexOf(connection);
    if (at !== -1) idle.splice(at, 1);
    wakeOne();
  };

  /** An idle connection (unless `fresh`), else a new one within maxSockets, else waits. */
  const acquire = async (signal: AbortSignal, fresh: boolean): Promise<Http1Connection> => {
    for (let woken = false; ; woken = true) {
      if (signal.aborted) {
        if (woken) wakeOne(); // the room this call was woken for goes to the next in line
        throw abortReason(signal);
      }
      if (!fresh) {
        const reused = idle.pop();
        if (reused !== undefined) {
          reused.socket.setTimeout(0);
          reused.socket.ref();
          return reused;
        }
      } else if (open.size >= maxSockets && idle.length > 0) {
        idle[0]!.destroy(); // makes room for the new connection
      }
      if (open.size < maxSockets) {
        const connection = new Http1Connection(target, base.host, forget);
        open.add(connection);
        return connection;
      }
      await waitForRoom(waiters, signal);
    }
  };

  /** After a complete response: back to the idle list for as long as the server keeps it, or closed. */
  const release = (connection: Http1Connection, response: Http1Response): void => {
    if (connection.gone) {
      connection.destroy();
      return;
    }
    const hint = response.headers['keep-alive'];
    const timeoutMs = idleSocketTimeout(typeof hint === 'string' ? hint : undefined, idleMs);
    if (timeoutMs <= 0) {
      connection.destroy();
      return;
    }
    connection.socket.setTimeout(timeoutMs);
    connection.socket.unref();
    idle.push(connection);
    wakeOne();
  };

  const send = async (call: HttpCall, retryStale: boolean, fresh: boolean): Promise<HttpResult> => {
    if (call.signal.aborted) throw abortReason(call.signal);
    const pieces: readonly Uint8Array[] =
      call.body === undefined ? [] : call.body instanceof Uint8Array ? [call.body] : call.body;
    const head = requestHead(
      base.host,
      prefix + call.path,
      [...Object.entries(options.headers ?? {}), ...Object.entries(call.headers ?? {})],
      call.method,
      pieces.reduce((n, p) => n + p.byteLength, 0),
    );
    const connection = await acquire(call.signal, fresh);
    if (call.signal.aborted) {
      // Aborted while the acquired connection was on its way to us: it goes unused.
      connection.destroy();
      throw abortReason(call.signal);
    }
    const reader = new Http1ResponseReader(
      call.method,
      { maxHeadBytes: DEFAULT_MAX_HEAD_BYTES, maxBodyBytes: maxBytes },
      call.bodyPadding,
    );
    const onAbort = (): void => {
      connection.destroy(abortReason(call.signal));
    };
    call.signal.addEventListener('abort', onAbort, { once: true });
    let response: Http1Response;
    try {
      response = await connection.send(head, pieces, reader);
    } catch (failure) {
      connection.destroy();
      if (!(failure instanceof ExchangeFailure)) throw failure;
      if (failure.stale && retryStale && !call.signal.aborted) return await send(call, false, true);
      throw failure.error;
    } finally {
      call.signal.removeEventListener('abort', onAbort);
    }
    release(connection, response);
    return { status: response.status, headers: response.headers, body: response.body };
  };

  return {
    request(call) {
      return send(call, call.idempotent ?? call.method === 'GET', false);
    },
    close() {
      for (const connection of idle.splice(0)) connection.destroy();
      // The busy ones are not reused: ended when their call is.
      for (const connection of open) connection.gone = true;
    },
  };
}
