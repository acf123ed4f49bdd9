/**
 * The gRPC server's listener on node:http2 (`grpcTransport: 'node'`): an Http2Server (TLS
 * with ALPN h2 when configured) whose streams are handed over as GrpcCallStreams.
 */
import http2 from 'node:http2';
import type { Http2Server, Http2Session } from 'node:http2';
import type { Socket } from 'node:net';
import { tlsServerOptions } from '../shared/listener-tls.js';
import { type GrpcListener, type GrpcListenerOptions, listenOn } from './grpc-listener.js';
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
  server.maxConnections = options.maxConnections;
  const sessions = new Set<Http2Session>();
  /**
   * The TCP sockets under the sessions. Destroying a session whose write is stuck on a full
   * socket does not close that socket (node finishes the close only when the write completes),
   * so the grace period's end destroys the sockets themselves.
   */
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  let draining = false;
  const limits = options.connectionLimits ?? {};
  const limitCloses = createLimitCounts();
  server.on('session', (session) => {
    sessions.add(session);
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
    close(graceMs) {
      closing ??= new Promise<void>((resolve) => {
        draining = true;
        const force = setTimeout(() => {
          logger.warn('grpc grace period over, cancelling calls', { graceMs, sessions: sessions.size });
          for (const session of sessions) session.destroy();
          for (const socket of sockets) socket.destroy();
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
