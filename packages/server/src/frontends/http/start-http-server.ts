import { type IncomingMessage, createServer } from 'node:http';
import type { Duplex } from 'node:stream';
import { createServer as createHttpsServer } from 'node:https';
import { Server as NetServer } from 'node:net';
import { type ListenerTls, tlsServerOptions, writeTlsBatchesWithoutCopy } from '../shared/listener-tls.js';
import { type GuardReason, createConnectionGuard } from '../shared/connection-guard.js';
import { DRAIN_IDLE_MS, trackConnections } from './connection-tracker.js';
import type { HttpEdge } from './http-edge.js';

/** Connection hygiene of an HTTP listener (the values of its flags, compose/config-settings.ts). */
export interface HttpLimits {
  /**
   * Most connections at once (--max_connections): at the cap the connection idle the longest
   * is closed for a new one, which is refused only when every connection has a request in flight.
   */
  readonly maxConnections: number;
  /** Most connections from one client address, further ones refused at accept; 0: no limit (--max_connections_per_address). */
  readonly maxConnectionsPerAddress: number;
  /**
   * Time from accept to the first complete request head (TLS handshake included), in ms; a
   * connection that has not sent it by then is closed; 0: none (--connection_first_bytes_timeout_ms).
   */
  readonly firstBytesTimeoutMs: number;
  /** Time a client has to send the request headers, in ms (slowloris; --http_headers_timeout_ms). */
  readonly headersTimeoutMs: number;
  /** Time a client has to send the whole request (headers and body), in ms. */
  readonly requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this, in ms (--http_keepalive_timeout_ms). */
  readonly keepAliveTimeoutMs: number;
}

/** Takes the HTTP upgrades (WebSocket) of one listener. */
export interface UpgradeHandler {
  /** Serves or refuses one upgrade request; the socket is its from now on. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Closes what it serves and refuses new upgrades (the listener is draining). */
  drain(): void;
}

export interface StartHttpServerOptions extends HttpLimits {
  /** Interface to bind, e.g. "0.0.0.0" or "127.0.0.1". */
  readonly host: string;
  /** TCP port; 0 picks a free port (read it from the result). */
  readonly port: number;
  /** The edge the requests go to. */
  readonly edge: HttpEdge;
  /** Serve HTTPS (plaintext requests are refused). Default: plain HTTP. */
  readonly tls?: ListenerTls | undefined;
  /** Upgrade requests go here; without it they are closed. */
  readonly upgrade?: UpgradeHandler | undefined;
}

export interface StartedHttpServer {
  /** The bound port. */
  readonly port: number;
  /** Connections open now. */
  readonly connections: number;
  /** Connections closed or refused by each connection limit since start (connection-guard.ts). */
  readonly guardCloses: ReadonlyMap<GuardReason, number>;
  /**
   * Drains: stops accepting connections, answers the requests in flight (and any that
   * arrive on open connections) with `Connection: close`, closes keep-alive connections
   * once they have been idle for DRAIN_IDLE_MS, and resolves once every connection has
   * closed; after `graceMs` (default: no limit) the remaining connections are destroyed.
   */
  close(graceMs?: number): Promise<void>;
}

/** Starts a node:http server; resolves once it is listening, rejects if binding fails. */
export function startHttpServer(options: StartHttpServerOptions): Promise<StartedHttpServer> {
  const { edge, tls } = options;
  const secure = tls === undefined ? undefined : createHttpsServer(tlsServerOptions(tls), edge.handler);
  const server = secure ?? createServer(edge.handler);
  const unsubscribeTls =
    tls === undefined || secure === undefined
      ? undefined
      : tls.subscribe?.((context) => {
          secure.setSecureContext(context);
        });
  secure?.on('secureConnection', writeTlsBatchesWithoutCopy);
  server.on('checkContinue', edge.checkContinue);
  const { upgrade } = options;
  if (upgrade !== undefined) {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      tracker.upgraded(req);
      upgrade.handle(req, socket, head);
    });
  }
  server.headersTimeout = options.headersTimeoutMs;
  server.requestTimeout = options.requestTimeoutMs;
  server.keepAliveTimeout = options.keepAliveTimeoutMs;
  const guard = createConnectionGuard(options);
  const tracker = trackConnections(server, secure !== undefined, guard);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : options.port;
      resolve({
        port,
        get connections() {
          return guard.size;
        },
        guardCloses: guard.counts,
        close: (graceMs?: number) =>
          new Promise<void>((done, fail) => {
            const force =
              graceMs === undefined
                ? undefined
                : setTimeout(() => {
                    tracker.destroyAll();
                  }, graceMs);
            edge.drain();
            options.upgrade?.drain();
            unsubscribeTls?.();
            // Stop accepting, but not http.Server#close: it would also close every idle
            // keep-alive connection at once, racing with requests clients are sending on them.
            NetServer.prototype.close.call(server, (error?: Error) => {
              if (force !== undefined) clearTimeout(force);
              tracker.stop();
              if (error) fail(error);
              else done();
            });
            // Busy connections close after their response (Connection: close); idle ones once
            // they have been idle a moment.
            tracker.closeWhenIdle(DRAIN_IDLE_MS);
          }),
      });
    });
  });
}
