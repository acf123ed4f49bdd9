/**
 * The gRPC server's listener on node:http2 (`grpcTransport: 'node'`): an Http2Server (TLS
 * with ALPN h2 when configured) whose streams are handed over as GrpcCallStreams.
 */
import http2 from 'node:http2';
import type { Http2Server, Http2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { type GuardedConnection, createConnectionGuard, tcpSocketOf } from '../shared/connection-guard.js';
import { tlsServerOptions } from '../shared/listener-tls.js';
import {
  type GrpcListener,
  type GrpcListenerOptions,
  evictGracefully,
  grpcGuardLimits,
  listenOn,
} from './grpc-listener.js';
import { NodeCallStream } from './node-call-stream.js';
import { DEFAULT_SEND_STALL_MS } from './h2/connection.js';
import { createLimitCounts, hasConnectionLimits, watchConnectionLifetime } from './connection-lifetime.js';

export async function startNodeListener(options: GrpcListenerOptions): Promise<GrpcListener> {
  const { logger, windowBytes, tls } = options;
  const serverOptions: http2.SecureServerOptions = {
    settings: {
      initialWindowSize: windowBytes,
      maxFrameSize: options.maxFrameBytes,
      maxConcurrentStreams: options.maxConcurrentStreams,
      maxHeaderListSize: options.maxHeaderListBytes,
    },
    // Memory is bounded by the admission budget; nghttp2's own cap (10 MB by default) would
    // refuse streams as soon as a few large messages are in flight.
    maxSessionMemory: 4096,
  };
  const secure =
    tls === undefined
      ? undefined
      : http2.createSecureServer({ ...serverOptions, ...tlsServerOptions(tls), allowHTTP1: false });
  const server: Http2Server | http2.Http2SecureServer = secure ?? http2.createServer(serverOptions);
  const unsubscribeTls =
    tls === undefined || secure === undefined
      ? undefined
      : tls.subscribe?.((context) => {
          secure.setSecureContext(context);
        });
  const sessions = new Set<Http2Session>();
  /**
   * The TCP sockets under the sessions. Destroying a session whose write is stuck on a full
   * socket does not close that socket (node finishes the close only when the write completes),
   * so the grace period's end destroys the sockets themselves.
   */
  const sockets = new Set<Socket>();
  const guard = createConnectionGuard(grpcGuardLimits(options));
  /**
   * The connection whose session node:http2 is making: it emits 'session' synchronously from
   * its own 'connection' (plain) or 'secureConnection' (TLS) listener, which runs after ours.
   */
  let arriving: GuardedConnection | undefined;
  const admitted = new WeakMap<Socket, GuardedConnection>();
  server.prependListener('connection', (socket: Socket) => {
    const guarded = guard.admit(socket);
    if (guarded === undefined) return;
    admitted.set(socket, guarded);
    arriving = guarded;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  secure?.prependListener('secureConnection', (socket: TLSSocket) => {
    arriving = admitted.get(tcpSocketOf(socket));
    arriving?.adopt(socket);
  });
  let draining = false;
  const limits = options.connectionLimits ?? {};
  const limitCloses = createLimitCounts();
  server.on('session', (session) => {
    const guarded = arriving;
    arriving = undefined;
    sessions.add(session);
    if (guarded !== undefined) guardSession(session, guarded);
    const lifetime = hasConnectionLimits(limits)
      ? watchConnectionLifetime(limits, {
          drain: () => {
            if (!session.closed) session.close();
          },
          destroy: () => {
            session.destroy();
            session.socket?.destroy();
          },
          ping: (onAck) => {
            if (session.closed || session.destroyed) return;
            try {
              session.ping((error) => {
                if (error === null) onAck();
              });
            } catch {
              // Not connected yet or too many PINGs unanswered: the timeout decides.
            }
          },
          limited: (reason) => {
            limitCloses.count(reason);
          },
        })
      : undefined;
    if (lifetime !== undefined) {
      let open = 0;
      session.on('stream', (stream) => {
        lifetime.activeStreams(++open);
        stream.once('close', () => {
          lifetime.activeStreams(--open);
        });
      });
    }
    session.on('close', () => {
      lifetime?.closed();
      sessions.delete(session);
    });
    session.on('error', (error) => {
      logger.debug('grpc session error', { error });
    });
    session.on('connect', () => {
      session.setLocalWindowSize(windowBytes);
    });
    if (draining) session.close();
  });
  server.on('sessionError', (error) => {
    logger.debug('grpc session error', { error });
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', (error) => {
      logger.debug('grpc stream error', { error });
    });
    options.onStream(new NodeCallStream(stream, headers, options.sendStallMs ?? DEFAULT_SEND_STALL_MS));
  });

  const port = await listenOn(server, options.port, options.host, options.path);

  let closing: Promise<void> | undefined;
  return {
    port,
    get connections() {
      return sessions.size;
    },
    limitCloses: limitCloses.counts,
    guardCloses: guard.counts,
    close(graceMs) {
      closing ??= new Promise<void>((resolve) => {
        draining = true;
        const force = setTimeout(() => {
          logger.warn('grpc grace period over, cancelling calls', { graceMs, sessions: sessions.size });
          for (const session of sessions) session.destroy();
          for (const socket of sockets) socket.destroy();
          guard.destroyAll();
        }, graceMs);
        unsubscribeTls?.();
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        for (const session of sessions) session.close();
      });
      return closing;
    },
  };
}

/** Reports a session's first SETTINGS and open streams to its guarded connection; evicted, it gets GOAWAY. */
function guardSession(session: Http2Session, guarded: GuardedConnection): void {
  session.once('remoteSettings', () => {
    guarded.started();
  });
  let open = 0;
  session.on('stream', (stream: http2.ServerHttp2Stream) => {
    guarded.inFlight(++open);
    stream.once('close', () => {
      guarded.inFlight(--open);
    });
  });
  guarded.onEvict(() => {
    evictGracefully(
      () => {
        if (!session.closed) session.close();
      },
      () => {
        session.destroy();
        session.socket?.destroy();
      },
      () => open,
    );
  });
}
