import { lstat, unlink } from 'node:fs/promises';
import type { Server } from 'node:net';
import type { Logger } from '../../util/logger.js';
import type { ConnectionGuardLimits, GuardReason } from '../shared/connection-guard.js';
import type { ListenerTls } from '../shared/listener-tls.js';
import type { GrpcCallStream } from './call-stream.js';
import type { ConnectionLimits, LimitReason } from './connection-lifetime.js';

/** What both transports give the gRPC server: calls' streams in, a port and a drain out. */
export interface GrpcListenerOptions {
  readonly host: string;
  readonly port: number;
  /** A Unix domain socket path to listen on instead of host and port. */
  readonly path?: string | undefined;
  readonly logger: Logger;
  readonly windowBytes: number;
  /** Lean transport: a stream's window until its call is admitted (H2ConnectionOptions). */
  readonly admissionWindowBytes?: number | undefined;
  readonly maxFrameBytes: number;
  readonly maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE, bytes. */
  readonly maxHeaderListBytes: number;
  /**
   * Most connections at once: at the cap the connection idle the longest (no open call) is
   * closed (GOAWAY) for a new one, which is refused only when every connection has a call open.
   */
  readonly maxConnections: number;
  /** Most connections from one client address; 0: no limit. */
  readonly maxConnectionsPerAddress: number;
  /**
   * Time from accept to the client's HTTP/2 preface and SETTINGS (TLS handshake included),
   * in ms; a connection without them by then is closed; 0: none.
   */
  readonly firstBytesTimeoutMs: number;
  /**
   * A response the peer's flow control holds back with no progress for this long is reset
   * (CANCEL) and released (both transports); on the lean transport a socket whose writes
   * stall this long is also destroyed, ms. Default 30000 (DEFAULT_SEND_STALL_MS).
   */
  readonly sendStallMs?: number | undefined;
  /**
   * Lean transport: a connection without preface and SETTINGS this long after it opened, or
   * with a header block unfinished this long, is closed, ms. Default 10000
   * (DEFAULT_HEADER_TIMEOUT_MS). The node transport ignores it.
   */
  readonly headerTimeoutMs?: number | undefined;
  readonly tls: ListenerTls | undefined;
  /** Connection age and idle limits (connection-lifetime.ts). Default none. */
  readonly connectionLimits?: ConnectionLimits | undefined;
  /** Called synchronously for every new stream. */
  readonly onStream: (stream: GrpcCallStream) => void;
}

export interface GrpcListener {
  readonly port: number;
  /** Connections open now. */
  readonly connections: number;
  /** Connections ended by each connection limit since start (connection-lifetime.ts). */
  readonly limitCloses: ReadonlyMap<LimitReason, number>;
  /** Connections closed or refused by each connection guard limit since start (connection-guard.ts). */
  readonly guardCloses: ReadonlyMap<GuardReason, number>;
  /**
   * Stops accepting connections and sends GOAWAY on every one; resolves once all have
   * closed, destroying what is left after graceMs.
   */
  close(graceMs: number): Promise<void>;
}

/**
 * Binds `server` (either transport's) and resolves with the bound port (the chosen one for
 * 0), or 0 when it listens on the Unix domain socket `path`.
 */
export async function listenOn(server: Server, port: number, host: string, path?: string): Promise<number> {
  if (path !== undefined) await removeStaleSocket(path);
  return new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    const bound = (): void => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : path === undefined ? port : 0);
    };
    if (path === undefined) server.listen(port, host, bound);
    else server.listen(path, bound);
  });
}

/**
 * A socket file left at `path` by a server that did not close (a crash, SIGKILL) is removed,
 * as gRPC does before it binds a unix: address; any other file there is left alone (the
 * bind then fails with EADDRINUSE).
 */
async function removeStaleSocket(path: string): Promise<void> {
  try {
    if ((await lstat(path)).isSocket()) await unlink(path);
  } catch {
    // Nothing there.
  }
}

/** The connection guard's limits from the listener's options. */
export function grpcGuardLimits(options: GrpcListenerOptions): ConnectionGuardLimits {
  return {
    maxConnections: options.maxConnections,
    maxConnectionsPerAddress: options.maxConnectionsPerAddress,
    firstBytesTimeoutMs: options.firstBytesTimeoutMs,
  };
}

/**
 * An idle gRPC connection evicted at the connection cap gets a graceful close (GOAWAY, so a
 * client reconnects before its next call rather than failing it); it is destroyed this long
 * after unless a call the client sent before reading the GOAWAY is still open, in ms.
 */
export const EVICT_GRACE_MS = 1000;

/** Closes an evicted connection: `drain` now, `destroy` after EVICT_GRACE_MS if no call is open. */
export function evictGracefully(drain: () => void, destroy: () => void, openCalls: () => number): void {
  drain();
  setTimeout(() => {
    if (openCalls() === 0) destroy();
  }, EVICT_GRACE_MS).unref();
}
