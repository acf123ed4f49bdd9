/**
 * A lean gRPC server (unary calls) over node:http2, for every gRPC frontend: TF Serving's
 * PredictionService/ModelService and, beside them, the other protocols' services. It owns
 * framing, deadlines, cancellation, status trailers, admission by bytes and draining; the
 * services own decoding, the core call and encoding. startGrpcServer checks its options,
 * opens the listeners and hands each call's stream to grpc-call-handler.ts (routing, the
 * observer, unary calls), which uses grpc-call.ts (a call's state, headers checks, deadline,
 * answer and end), grpc-message-reader.ts (a unary request message) and grpc-stream-call.ts
 * (streaming calls).
 *
 * Why not grpc-js: on the request path grpc-js concatenated every message out of its DATA
 * frames, kept node's 64 KiB stream window (ten round trips per 600 KB tensor), and gave no
 * hook to refuse a message before buffering it. Here a request message is read once into
 * an exactly sized buffer (placed so that its tensor bytes are 8-byte aligned), admitted
 * against a byte budget as soon as its length prefix arrives, and a response is written as
 * the chunks the encoder produced (tensor bytes are never copied into one message).
 * Compressed request messages (`grpc-encoding` gzip or deflate, as tritonclient's
 * compression_algorithm sends them) are decompressed against the same budget; responses are
 * never compressed.
 */
import type { Logger } from '../../util/logger.js';
import type { InflightBudget } from '../shared/inflight-budget.js';
import type { GuardReason } from '../shared/connection-guard.js';
import type { ListenerTls } from '../shared/listener-tls.js';
import type { RequestObserver } from '../shared/request-observer.js';
import { type CallHandler, createCallHandler } from './grpc-call-handler.js';
import type { GrpcListener, GrpcListenerOptions } from './grpc-listener.js';
import type { GrpcService } from './grpc-service.js';
import { startH2Listener } from './h2/h2-server.js';
import { startNodeListener } from './node-listener.js';
import type { ConnectionLimits, LimitReason } from './connection-lifetime.js';

export interface GrpcServerOptions {
  /** Interface to bind (--host); IPv6 literals may be given bare. */
  readonly host: string;
  /** TCP port (--port); 0 picks a free one (see RunningGrpcServer.port). */
  readonly port: number;
  /**
   * Also serve on this Unix domain socket (TF Serving's --grpc_socket_path), with the same
   * services, limits and TLS. A stale socket file there is replaced. Default none.
   */
  readonly socketPath?: string | undefined;
  /** The services served; two must not share a name. */
  readonly services: readonly GrpcService[];
  readonly logger: Logger;
  /** Largest request message in bytes (RESOURCE_EXHAUSTED above). Default 2147483647, TF Serving's INT32_MAX. */
  readonly maxMessageBytes?: number | undefined;
  /**
   * Admission by memory: a message whose length prefix would take the budget over its
   * limit is refused with UNAVAILABLE before its body is read. Default: no budget.
   */
  readonly budget?: InflightBudget | undefined;
  /** Streams one connection may have open at once (HTTP/2 SETTINGS). Default 1000 (DEFAULT_MAX_CONCURRENT_STREAMS). */
  readonly maxConcurrentStreams?: number | undefined;
  /**
   * HTTP/2 receive window per stream and per connection, in bytes: the most request bytes a
   * client can have sent that this server has not yet read. Default 1 MiB
   * (DEFAULT_RECEIVE_WINDOW_BYTES); keep it below what the kernel socket buffers between the
   * peers hold, or a Node peer can stall the connection (see DEFAULT_RECEIVE_WINDOW_BYTES).
   */
  readonly receiveWindowBytes?: number | undefined;
  /**
   * Lean transport: a stream's receive window until its call is admitted on its message's
   * head, bytes (the whole window follows). Default 65,535 (ADMISSION_WINDOW, the HTTP/2
   * default), so that a refused call costs little of its message; tests whose raw clients
   * write whole messages without waiting for window set it to the receive window.
   */
  readonly admissionWindowBytes?: number | undefined;
  /**
   * Largest DATA frame payload a client may send (HTTP/2 SETTINGS_MAX_FRAME_SIZE), in bytes,
   * 16384 to 16777215. Default 1 MiB (DEFAULT_MAX_FRAME_BYTES).
   */
  readonly maxFrameBytes?: number | undefined;
  /**
   * Lean transport: a response that the client's HTTP/2 flow control holds back with no
   * progress for this long (a window of 0, a client that stopped reading) is reset with
   * CANCEL and its resources released; a connection whose socket writes make no progress
   * for this long is closed. In ms. Default 30000.
   */
  readonly sendStallTimeoutMs?: number | undefined;
  /**
   * A request whose message has not fully arrived this long after its headers is cancelled,
   * in ms (--request_body_timeout_ms).
   */
  readonly bodyTimeoutMs: number;
  /**
   * Most connections at once (--max_connections): at the cap the connection idle the longest
   * is closed (GOAWAY) for a new one, which is refused only when every connection has a call open.
   */
  readonly maxConnections: number;
  /** Most connections from one client address, further ones refused at accept; 0: no limit (--max_connections_per_address). */
  readonly maxConnectionsPerAddress: number;
  /**
   * Time from accept to the client's HTTP/2 preface and SETTINGS (TLS handshake included), in
   * ms; a connection without them by then is closed; 0: none (--connection_first_bytes_timeout_ms).
   */
  readonly firstBytesTimeoutMs: number;
  /**
   * Connection age and idle limits, as gRPC servers apply grpc.max_connection_age_ms,
   * grpc.max_connection_age_grace_ms and grpc.max_connection_idle_ms (connection-lifetime.ts).
   * Default: none (connections live as long as their clients keep them).
   */
  readonly connectionLimits?: ConnectionLimits | undefined;
  /** Told of every call (metrics, access logs, tracing). Default: none. */
  readonly observer?: RequestObserver | undefined;
  /** Serve over TLS (HTTP/2 with ALPN h2; plaintext clients are refused). Default: plaintext. */
  readonly tls?: ListenerTls | undefined;
  /**
   * The HTTP/2 under the calls (--grpc_transport): 'lean', this server's own (h2/: one socket
   * write per response, DATA frames up to the client's SETTINGS_MAX_FRAME_SIZE), or 'node',
   * node:http2.
   */
  readonly transport: GrpcTransport;
}

export type GrpcTransport = 'node' | 'lean';

export interface RunningGrpcServer {
  /** The bound port (the chosen one when 0 was asked for). */
  readonly port: number;
  /** Calls received and not yet answered. */
  readonly inFlight: number;
  /** Connections open now. */
  readonly connections: number;
  /** Connections ended by each connection limit since start (GrpcServerOptions.connectionLimits). */
  readonly limitCloses: ReadonlyMap<LimitReason, number>;
  /** Connections closed or refused by each connection guard limit since start (connection-guard.ts). */
  readonly guardCloses: ReadonlyMap<GuardReason, number>;
  /**
   * Drains: stops accepting connections, sends GOAWAY on every connection (clients open
   * new streams elsewhere; streams already started finish), resolves once every
   * connection has closed, or after `graceMs` by cancelling what is left.
   */
  close(graceMs: number): Promise<void>;
}

/**
 * The default HTTP/2 receive window (per stream and per connection), in bytes.
 *
 * Node's Http2Session stops reading its socket while a write of its own is still on the
 * socket (node_http2.cc: MaybeStopReading when a write is in progress; reading restarts when
 * the write completes). Two Node peers that each have more queued to send than the kernel
 * buffers between them hold therefore stop reading at once and wait on each other for ever
 * (both Recv-Q full in `ss`). A peer can only have as many DATA bytes unread by this server
 * as this window allows, so with a window smaller than the kernel buffers (loopback on Linux
 * holds ≈3.8 MB from a cold start: 4 MiB send buffer + 128 KiB receive buffer) the client's
 * writes always complete, it reads again, and our own writes complete in turn. 1 MiB keeps a
 * 600 KB request to one window and costs little on 34 MB ones (docs/operations.md).
 */
export const DEFAULT_RECEIVE_WINDOW_BYTES = 1024 * 1024;

/**
 * The default SETTINGS_MAX_FRAME_SIZE this server advertises, in bytes (the protocol's
 * default is 16 KiB). Node delivers every DATA frame, and every part of one that straddles a
 * socket read, to JavaScript as its own chunk: a 600 KB request in 16 KiB frames is ~46
 * chunks, in larger frames ~11 (one per 64 KiB socket read). gRPC C-core clients (Python
 * grpcio, tritonclient) send frames up to what the server allows; Node clients always send
 * 16 KiB ones. Frames never exceed the receive window, so a larger value buys nothing.
 */
export const DEFAULT_MAX_FRAME_BYTES = 1024 * 1024;

/** Streams a connection may have open at once unless grpc.max_concurrent_streams says otherwise. */
export const DEFAULT_MAX_CONCURRENT_STREAMS = 1000;

/** TF Serving sets the server's max message size to INT32_MAX. */
export const MAX_GRPC_MESSAGE_BYTES = 2_147_483_647;

/** Throws unless `value` is an integer in [min, max] (HTTP/2's limits for the setting). */
function checkRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`gRPC server option ${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const { logger } = options;
  const { host, transport } = options;
  const windowBytes = options.receiveWindowBytes ?? DEFAULT_RECEIVE_WINDOW_BYTES;
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  checkRange('receiveWindowBytes', windowBytes, 65_535, 2 ** 31 - 1);
  checkRange('maxFrameBytes', maxFrameBytes, 16_384, 16_777_215);
  // Below the HTTP/2 default a client that sends before it has our SETTINGS breaks the window.
  if (options.admissionWindowBytes !== undefined) {
    checkRange('admissionWindowBytes', options.admissionWindowBytes, 65_535, windowBytes);
  }
  const calls = createCallHandler({
    services: options.services,
    logger,
    limits: { maxMessageBytes: options.maxMessageBytes ?? MAX_GRPC_MESSAGE_BYTES, budget: options.budget },
    bodyTimeoutMs: options.bodyTimeoutMs,
    observer: options.observer,
  });
  const listenerOptions: GrpcListenerOptions = {
    host: host.includes(':') && !host.startsWith('[') ? host : host.replace(/^\[|\]$/g, ''),
    port: options.port,
    logger,
    windowBytes,
    admissionWindowBytes: options.admissionWindowBytes,
    maxFrameBytes,
    maxConcurrentStreams: options.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS,
    maxHeaderListBytes: 64 * 1024,
    maxConnections: options.maxConnections,
    maxConnectionsPerAddress: options.maxConnectionsPerAddress,
    firstBytesTimeoutMs: options.firstBytesTimeoutMs,
    sendStallMs: options.sendStallTimeoutMs,
    tls: options.tls,
    connectionLimits: options.connectionLimits,
    onStream: (stream) => {
      calls.handle(stream);
    },
  };
  const listeners = await startListeners(listenerOptions, transport, options.socketPath);
  logger.info('grpc server listening', { host, port: listeners[0]!.port, transport });
  if (options.socketPath !== undefined)
    logger.info('grpc server listening', { socketPath: options.socketPath });
  return runningServer(listeners, calls, logger);
}

/** The TCP listener, and one on the Unix domain socket `socketPath` when given (same options). */
async function startListeners(
  options: GrpcListenerOptions,
  transport: GrpcTransport,
  socketPath: string | undefined,
): Promise<GrpcListener[]> {
  const start = (o: GrpcListenerOptions): Promise<GrpcListener> =>
    transport === 'lean' ? startH2Listener(o) : startNodeListener(o);
  const tcp = await start(options);
  if (socketPath === undefined) return [tcp];
  try {
    return [tcp, await start({ ...options, path: socketPath })];
  } catch (error) {
    await tcp.close(0);
    throw error;
  }
}

function runningServer(
  listeners: readonly GrpcListener[],
  calls: CallHandler,
  logger: Logger,
): RunningGrpcServer {
  const { port } = listeners[0]!;
  let closing: Promise<void> | undefined;
  return {
    port,
    get inFlight() {
      return calls.inFlight;
    },
    get connections() {
      return listeners.reduce((n, l) => n + l.connections, 0);
    },
    get limitCloses() {
      return mergeCounts(listeners.map((l) => l.limitCloses));
    },
    get guardCloses() {
      return mergeCounts(listeners.map((l) => l.guardCloses));
    },
    close(graceMs) {
      closing ??= Promise.all(listeners.map((l) => l.close(graceMs))).then(() => {
        logger.info('grpc server closed', { port });
      });
      return closing;
    },
  };
}

function mergeCounts<K>(maps: readonly ReadonlyMap<K, number>[]): ReadonlyMap<K, number> {
  if (maps.length === 1) return maps[0]!;
  const merged = new Map<K, number>();
  for (const m of maps) for (const [k, n] of m) merged.set(k, (merged.get(k) ?? 0) + n);
  return merged;
}
