/**
 * The gRPC server's listener on this server's own HTTP/2 (`grpcTransport: 'lean'`): a TCP
 * server speaking h2c with prior knowledge, or a TLS server that negotiates h2 by ALPN
 * (a client that does not is disconnected), one H2Connection per socket.
 */
import net from 'node:net';
import type { Socket } from 'node:net';
import tls from 'node:tls';
import { tlsServerOptions, writeTlsBatchesWithoutCopy } from '../../shared/listener-tls.js';
import { type GuardedConnection, createConnectionGuard, tcpSocketOf } from '../../shared/connection-guard.js';
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

export async function startH2Listener(options: GrpcListenerOptions): Promise<GrpcListener> {
  const { logger } = options;
  const connections = new Set<H2Connection>();
  let draining = false;
  let onIdle: (() => void) | undefined;

  const guard = createConnectionGuard(grpcGuardLimits(options));
  const limits = options.connectionLimits ?? {};
  const limitCloses = createLimitCounts();
  const serve = (socket: Socket, guarded: GuardedConnection, directReads = false): H2Connection => {
    let lifetime: ConnectionLifetime | undefined;
    const connection = new H2Connection(socket, {
      directReads,
      windowBytes: options.windowBytes,
      maxFrameBytes: options.maxFrameBytes,
      maxConcurrentStreams: options.maxConcurrentStreams,
      maxHeaderListBytes: options.maxHeaderListBytes,
      sendStallMs: options.sendStallMs ?? DEFAULT_SEND_STALL_MS,
      headerTimeoutMs: options.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
      logger,
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
        connections.delete(connection);
        if (connections.size === 0) onIdle?.();
      },
    });
    connections.add(connection);
    if (hasConnectionLimits(limits)) lifetime = watchLifetime(connection, limits, limitCloses);
    if (draining) connection.drain();
    return connection;
  };

  const { tls: listenerTls } = options;
  let server: net.Server;
  let unsubscribeTls: (() => void) | undefined;
  if (listenerTls === undefined) {
    server = net.createServer({ noDelay: true, pauseOnConnect: true }, (accepted) => {
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
  } else {
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
    unsubscribeTls = listenerTls.subscribe?.((context) => {
      secure.setSecureContext(context);
    });
    server = secure;
  }
  server.on('error', (error) => {
    logger.debug('grpc listener error', { error });
  });

  const port = await listenOn(server, options.port, options.host, options.path);

  let closing: Promise<void> | undefined;
  return {
    port,
    get connections() {
      return connections.size;
    },
    limitCloses: limitCloses.counts,
    guardCloses: guard.counts,
    close(graceMs) {
      closing ??= new Promise<void>((resolve) => {
        draining = true;
        unsubscribeTls?.();
        let listenerClosed = false;
        const done = (): void => {
          if (!listenerClosed || connections.size > 0) return;
          clearTimeout(force);
          resolve();
        };
        const force = setTimeout(() => {
          logger.warn('grpc grace period over, cancelling calls', { graceMs, connections: connections.size });
          for (const connection of connections) connection.destroy();
          guard.destroyAll();
        }, graceMs);
        onIdle = done;
        server.close(() => {
          listenerClosed = true;
          done();
        });
        for (const connection of connections) connection.drain();
      });
      return closing;
    },
  };
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
