/**
 * The gRPC server's listener on this server's own HTTP/2 (`grpcTransport: 'lean'`): a TCP
 * server speaking h2c with prior knowledge, or a TLS server that negotiates h2 by ALPN
 * (a client that does not is disconnected), one H2Connection per socket.
 */
import net from 'node:net';
import type { Socket } from 'node:net';
import tls from 'node:tls';
import { type ListenerTls, tlsServerOptions, writeTlsBatchesWithoutCopy } from '../../shared/listener-tls.js';
import {
  type ConnectionGuard,
  type GuardedConnection,
  createConnectionGuard,
  tcpSocketOf,
} from '../../shared/connection-guard.js';
import type { Logger } from '../../../util/logger.js';
import {
  type GrpcListener,
  type GrpcListenerOptions,
  evictGracefully,
  grpcGuardLimits,
  listenOn,
} from '../grpc-listener.js';
import {
  type ConnectionLifetime,
  type ConnectionLimits,
  createLimitCounts,
  hasConnectionLimits,
  watchConnectionLifetime,
} from '../connection-lifetime.js';
import { DEFAULT_HEADER_TIMEOUT_MS, DEFAULT_SEND_STALL_MS, H2Connection } from './connection.js';

/** The buffer of a plain-TCP connection's first read, made before its H2Connection exists. */
const FIRST_READ_BYTES = 16 * 1024;

/** The connections of a listener and its drain: what its sockets and its close share. */
interface ListenerState {
  readonly connections: Set<H2Connection>;
  /** The listener is closing: new connections drain at once. */
  draining: boolean;
  /** Runs when the last connection closed (while closing). */
  onIdle: (() => void) | undefined;
}

/** Makes the H2Connection of an admitted socket (`directReads`: made by withDirectReads). */
type Serve = (socket: Socket, guarded: GuardedConnection, directReads?: boolean) => H2Connection;

export async function startH2Listener(options: GrpcListenerOptions): Promise<GrpcListener> {
  const { logger } = options;
  const state: ListenerState = { connections: new Set(), draining: false, onIdle: undefined };
  const guard = createConnectionGuard(grpcGuardLimits(options));
  const limitCloses = createLimitCounts();
  const serve: Serve = (socket, guarded, directReads = false) =>
    serveConnection(options, state, limitCloses, { socket, guarded, directReads });
  const { server, unsubscribeTls } =
    options.tls === undefined
      ? { server: plainServer(guard, serve), unsubscribeTls: undefined }
      : tlsServer(options.tls, guard, serve, logger);
  server.on('error', (error) => {
    logger.debug('grpc listener error', { error });
  });

  const port = await listenOn(server, options.port, options.host, options.path);

  let closing: Promise<void> | undefined;
  return {
    port,
    get connections() {
      return state.connections.size;
    },
    limitCloses: limitCloses.counts,
    guardCloses: guard.counts,
    close(graceMs) {
      if (closing === undefined) {
        unsubscribeTls?.();
        closing = closeListener(state, server, guard, graceMs, logger);
      }
      return closing;
    },
  };
}

/** One connection on an admitted socket, reporting to the guard and counted by the listener. */
function serveConnection(
  options: GrpcListenerOptions,
  state: ListenerState,
  limitCloses: ReturnType<typeof createLimitCounts>,
  { socket, guarded, directReads }: { socket: Socket; guarded: GuardedConnection; directReads: boolean },
): H2Connection {
  let lifetime: ConnectionLifetime | undefined;
  const connection = new H2Connection(socket, {
    directReads,
    windowBytes: options.windowBytes,
    admissionWindowBytes: options.admissionWindowBytes,
    maxFrameBytes: options.maxFrameBytes,
    maxConcurrentStreams: options.maxConcurrentStreams,
    maxHeaderListBytes: options.maxHeaderListBytes,
    sendStallMs: options.sendStallMs ?? DEFAULT_SEND_STALL_MS,
    headerTimeoutMs: options.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
    logger: options.logger,
    onStream: options.onStream,
    onPreface: () => {
      guarded.started();
      guarded.onEvict(() => {
        evictGracefully(
          () => {
            connection.drain();
          },
          () => {
            connection.destroy();
          },
          () => connection.openStreams,
        );
      });
    },
    onActiveStreams: (count) => {
      guarded.inFlight(count);
      lifetime?.activeStreams(count);
    },
    onClose: () => {
      lifetime?.closed();
      state.connections.delete(connection);
      if (state.connections.size === 0) state.onIdle?.();
    },
  });
  state.connections.add(connection);
  const limits = options.connectionLimits ?? {};
  if (hasConnectionLimits(limits)) lifetime = watchLifetime(connection, limits, limitCloses);
  if (state.draining) connection.drain();
  return connection;
}

/** The plain-TCP (h2c) server: each accepted socket remade with direct reads when Node allows. */
function plainServer(guard: ConnectionGuard, serve: Serve): net.Server {
  return net.createServer({ noDelay: true, pauseOnConnect: true }, (accepted) => {
    let connection: H2Connection | undefined;
    const socket = withDirectReads(accepted, {
      buffer: () => connection?.readBuffer() ?? Buffer.allocUnsafeSlow(FIRST_READ_BYTES),
      callback: (nread, buffer) => {
        connection?.onRead(nread, buffer);
        return true; // the connection pauses the socket itself (write backpressure)
      },
    });
    if (socket === null) return;
    const guarded = guard.admit(socket ?? accepted);
    if (guarded === undefined) return;
    if (socket === undefined) {
      serve(accepted, guarded);
      accepted.resume();
    } else connection = serve(socket, guarded, true);
  });
}

/** The TLS server: h2 by ALPN (others are disconnected), its TCP sockets admitted before the handshake. */
function tlsServer(
  listenerTls: ListenerTls,
  guard: ConnectionGuard,
  serve: Serve,
  logger: Logger,
): { server: tls.Server; unsubscribeTls: (() => void) | undefined } {
  const admitted = new WeakMap<Socket, GuardedConnection>();
  const secure = tls.createServer({ ...tlsServerOptions(listenerTls), ALPNProtocols: ['h2'] }, (socket) => {
    const guarded = admitted.get(tcpSocketOf(socket));
    if (socket.alpnProtocol !== 'h2' || guarded === undefined) {
      socket.destroy();
      return;
    }
    guarded.adopt(socket);
    writeTlsBatchesWithoutCopy(socket);
    serve(socket, guarded);
  });
  secure.prependListener('connection', (socket: Socket) => {
    const guarded = guard.admit(socket);
    if (guarded !== undefined) admitted.set(socket, guarded);
  });
  secure.on('tlsClientError', (error) => {
    logger.debug('grpc tls error', { error });
  });
  const unsubscribeTls = listenerTls.subscribe?.((context) => {
    secure.setSecureContext(context);
  });
  return { server: secure, unsubscribeTls };
}

/**
 * Closes the listener: no new connections, every connection drains (GOAWAY), and what is left
 * at the end of `graceMs` is destroyed. Resolves once the listener and every connection closed.
 */
function closeListener(
  state: ListenerState,
  server: net.Server,
  guard: ConnectionGuard,
  graceMs: number,
  logger: Logger,
): Promise<void> {
  return new Promise<void>((resolve) => {
    state.draining = true;
    let listenerClosed = false;
    const done = (): void => {
      if (!listenerClosed || state.connections.size > 0) return;
      clearTimeout(force);
      resolve();
    };
    const force = setTimeout(() => {
      logger.warn('grpc grace period over, cancelling calls', {
        graceMs,
        connections: state.connections.size,
      });
      for (const connection of state.connections) connection.destroy();
      guard.destroyAll();
    }, graceMs);
    state.onIdle = done;
    server.close(() => {
      listenerClosed = true;
      done();
    });
    for (const connection of state.connections) connection.drain();
  });
}

/** TF Serving's connection limits (age, idle, keepalive) applied to one connection. */
function watchLifetime(
  connection: H2Connection,
  limits: ConnectionLimits,
  limitCloses: ReturnType<typeof createLimitCounts>,
): ConnectionLifetime {
  return watchConnectionLifetime(limits, {
    drain: () => {
      connection.drain();
    },
    destroy: () => {
      connection.destroy();
    },
    ping: (onAck) => {
      connection.ping(onAck);
    },
    limited: (reason) => {
      limitCloses.count(reason);
    },
  });
}

/**
 * The accepted socket made again over the same TCP handle with `onread`, so that the
 * connection picks the buffer of every read (H2Connection.readBuffer: a request message's
 * bytes are read straight to where it is assembled, and no stream machinery or 64 KB
 * allocation runs per read). Node gives `onread` only to sockets it builds from a handle, so
 * the accepted one (paused on connect, nothing read yet) hands its handle over and is
 * destroyed without it. Undefined when the accepted socket has no handle to hand over (a
 * Node whose internals differ): it is then read with 'data' events as TLS sockets are; null
 * when making the new socket failed (the connection is closed).
 */
function withDirectReads(accepted: Socket, onread: net.OnReadOpts): Socket | undefined | null {
  const holder = accepted as unknown as { _handle?: object | null };
  const handle = holder._handle as { readStart?: unknown; useUserBuffer?: unknown } | null | undefined;
  if (
    handle === undefined ||
    handle === null ||
    typeof handle.readStart !== 'function' ||
    typeof handle.useUserBuffer !== 'function'
  )
    return undefined;
  holder._handle = null;
  let socket: Socket;
  try {
    const options = { handle, readable: true, writable: true, onread } as net.SocketConstructorOpts;
    socket = new net.Socket(options);
  } catch {
    // Half made over the handle: the connection is dropped rather than read two ways.
    holder._handle = handle;
    accepted.destroy();
    return null;
  }
  accepted.destroy();
  return socket;
}
