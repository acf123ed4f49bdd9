import type { Server } from 'node:http';
import type { Socket } from 'node:net';

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
}

interface ConnectionState {
  /** Requests on it not yet answered (pipelining may make it more than one). */
  busy: number;
  /** When it last turned idle (or was accepted). */
  idleSince: number;
}

/** Tracks the connections of `server` (plain or TLS) from the moment it is called. */
export function trackConnections(server: Server, secure: boolean): ConnectionTracker {
  const connections = new Map<Socket, ConnectionState>();
  let sweeper: NodeJS.Timeout | undefined;

  server.on(secure ? 'secureConnection' : 'connection', (socket: Socket) => {
    connections.set(socket, { busy: 0, idleSince: Date.now() });
    socket.once('close', () => connections.delete(socket));
  });
  server.on('request', (req, res) => {
    const state = connections.get(req.socket);
    if (state === undefined) return;
    state.busy++;
    res.once('close', () => {
      state.busy--;
      if (state.busy === 0) state.idleSince = Date.now();
    });
  });

  const sweep = (idleMs: number): void => {
    const now = Date.now();
    for (const [socket, state] of connections) {
      if (state.busy === 0 && now - state.idleSince >= idleMs) socket.destroy();
    }
    if (connections.size === 0 && sweeper !== undefined) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  };

  return {
    get size() {
      return connections.size;
    },
    closeWhenIdle(idleMs) {
      sweep(idleMs);
      if (connections.size > 0 && sweeper === undefined) {
        sweeper = setInterval(() => {
          sweep(idleMs);
        }, SWEEP_MS);
      }
    },
    destroyAll() {
      for (const socket of connections.keys()) socket.destroy();
    },
    stop() {
      if (sweeper !== undefined) clearInterval(sweeper);
      sweeper = undefined;
    },
  };
}
