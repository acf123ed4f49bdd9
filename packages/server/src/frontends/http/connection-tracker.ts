import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { type ConnectionGuard, type GuardedConnection, tcpSocketOf } from '../shared/connection-guard.js';

/**
 * A keep-alive connection is closed while draining only once it has been idle this long, in
 * ms. A client that loops sends its next request well within it (and gets it answered with
 * `Connection: close`); closing at the first idle instant instead races with that request,
 * which the client then sees reset without an answer.
 */
export const DRAIN_IDLE_MS = 200;

/** How often a draining listener looks for connections to close, in ms. */
const SWEEP_MS = 25;

/** The connections of one HTTP listener, busy or idle since when. */
export interface ConnectionTracker {
  /** Connections open now. */
  readonly size: number;
  /**
   * Closes every connection idle for at least `idleMs` now, then keeps doing so as others
   * turn idle, until none is left or `stop` is called.
   */
  closeWhenIdle(idleMs: number): void;
  /** Destroys every connection at once. */
  destroyAll(): void;
  /** Stops the sweeping started by closeWhenIdle. */
  stop(): void;
  /**
   * An upgrade request (a WebSocket) took its connection over: its first bytes are in, and it
   * is busy until it closes (never evicted as idle; the upgrade handler closes it on drain).
   */
  upgraded(req: IncomingMessage): void;
}

interface HttpConnection {
  readonly guarded: GuardedConnection;
  /** Requests on it not yet answered (pipelining may make it more than one). */
  busy: number;
}

/**
 * Tracks the connections of `server` (plain or TLS) in `guard` from the moment each TCP
 * socket is accepted (the guard may refuse it before node:http or node:tls sees it); the
 * first request head completes its first bytes.
 */
export function trackConnections(server: Server, secure: boolean, guard: ConnectionGuard): ConnectionTracker {
  const connections = new WeakMap<Socket, HttpConnection>();
  let sweeper: NodeJS.Timeout | undefined;

  server.prependListener('connection', (socket: Socket) => {
    const guarded = guard.admit(socket);
    if (guarded !== undefined) connections.set(socket, { guarded, busy: 0 });
  });
  if (secure) {
    server.on('secureConnection', (socket: TLSSocket) => {
      const connection = connections.get(tcpSocketOf(socket));
      if (connection === undefined) return;
      connection.guarded.adopt(socket);
      connections.set(socket, connection);
    });
  }
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const connection = connections.get(req.socket);
    if (connection === undefined) return;
    connection.guarded.started();
    connection.guarded.inFlight(++connection.busy);
    res.once('close', () => {
      connection.guarded.inFlight(--connection.busy);
    });
  };
  server.on('request', onRequest);
  server.on('checkContinue', onRequest);

  const sweep = (idleMs: number): void => {
    const now = Date.now();
    for (const { socket, busy, idleSince } of guard.connections()) {
      if (busy === 0 && now - idleSince >= idleMs) socket.destroy();
    }
    if (guard.size === 0 && sweeper !== undefined) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  };

  return {
    get size() {
      return guard.size;
    },
    closeWhenIdle(idleMs) {
      sweep(idleMs);
      if (guard.size > 0 && sweeper === undefined) {
        sweeper = setInterval(() => {
          sweep(idleMs);
        }, SWEEP_MS);
      }
    },
    destroyAll() {
      guard.destroyAll();
    },
    stop() {
      if (sweeper !== undefined) clearInterval(sweeper);
      sweeper = undefined;
    },
    upgraded(req) {
      const connection = connections.get(req.socket);
      if (connection === undefined) return;
      connection.guarded.started();
      connection.guarded.inFlight(++connection.busy);
      req.socket.once('close', () => {
        connection.guarded.inFlight(--connection.busy);
      });
    },
  };
}
