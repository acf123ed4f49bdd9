/**
 * The HTTP/1.1 transport over node:https with keep-alive, for https:// (http1-transport.ts
 * serves plain http://).
 *
 * Idle keep-alive sockets race with the server closing them: a request written on a socket
 * the server has just closed fails with EPIPE or ECONNRESET although the server never saw it.
 * So idle sockets are dropped a second before the server's `Keep-Alive: timeout=N` hint
 * (node 20's agent ignores the hint unless it has a timeout of its own), and a call marked
 * idempotent that fails that way on a reused socket, before any response byte, is sent once
 * more on a new connection (the rule browsers and node's documentation give for this race).
 */
import https from 'node:https';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Code, ServingError } from '@visionserve/protocol';
import { abortReason } from './call-options.js';
import {
  DEFAULT_IDLE_SOCKET_TIMEOUT_MS,
  type HttpCall,
  type HttpResult,
  type HttpTransport,
  type HttpTransportOptions,
  STALE_SOCKET_ERRORS,
  idleSocketTimeout,
} from './http-call.js';

export function createNodeHttpsTransport(base: URL, options: HttpTransportOptions): HttpTransport {
  const prefix = base.pathname.replace(/\/+$/, '');
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 16 };
  const agent = new https.Agent(agentOptions);
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
  agent.reuseSocket = (socket: Duplex, req: ClientRequest): void => {
    // The idle timeout is the free socket's; a request in progress keeps its own.
    setSocketTimeout(socket, 0);
    reuseSocket(socket, req);
  };
  const maxBytes = options.maxResponseBytes ?? 1024 * 1024 * 1024;
  const request = https.request;

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
