/**
 * A lean gRPC server (unary calls) over node:http2, for every gRPC frontend: TF Serving's
 * PredictionService/ModelService and, beside them, the other protocols' services. It owns
 * framing, deadlines, cancellation, status trailers, admission by bytes and draining; the
 * services own decoding, the core call and encoding.
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
import { Code, ServingError } from '@visionserve/protocol';
import type { Logger } from '../../util/logger.js';
import { inflateBounded } from '../shared/bounded-inflate.js';
import type { InflightBudget, Reservation } from '../shared/inflight-budget.js';
import type { GuardReason } from '../shared/connection-guard.js';
import type { ListenerTls } from '../shared/listener-tls.js';
import { credentialsOf } from '../shared/management-guard.js';
import type { RequestEnd, RequestObserver } from '../shared/request-observer.js';
import { createOutputLease } from '../../core/output-lease.js';
import type { GrpcCallStream } from './call-stream.js';
import type { GrpcListener, GrpcListenerOptions } from './grpc-listener.js';
import type {
  GrpcMethod,
  GrpcService,
  GrpcStreamCall,
  GrpcStreamEvents,
  StreamHandler,
} from './grpc-service.js';
import { readStreamMessages } from './stream-messages.js';
import { encodeGrpcMessage, parseGrpcTimeout, statusOf } from './grpc-status.js';
import { startH2Listener } from './h2/h2-server.js';
import { startNodeListener } from './node-listener.js';
import type { ConnectionLimits, LimitReason } from './connection-lifetime.js';

export interface GrpcServerOptions {
  /** Interface to bind; IPv6 literals may be given bare. Default "0.0.0.0". */
  readonly host?: string | undefined;
  /** TCP port; 0 picks a free one (see RunningGrpcServer.port). Default 8500, TF Serving's --port. */
  readonly port?: number | undefined;
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
  /** Streams one connection may have open at once (HTTP/2 SETTINGS). Default 1000. */
  readonly maxConcurrentStreams?: number | undefined;
  /**
   * HTTP/2 receive window per stream and per connection, in bytes: the most request bytes a
   * client can have sent that this server has not yet read. Default 1 MiB
   * (DEFAULT_RECEIVE_WINDOW_BYTES); keep it below what the kernel socket buffers between the
   * peers hold, or a Node peer can stall the connection (see DEFAULT_RECEIVE_WINDOW_BYTES).
   */
  readonly receiveWindowBytes?: number | undefined;
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
  /** A request whose message has not fully arrived this long after its headers is cancelled, in ms. Default 60000. */
  readonly bodyTimeoutMs?: number | undefined;
  /**
   * Most connections at once: at the cap the connection idle the longest is closed (GOAWAY)
   * for a new one, which is refused only when every connection has a call open. Default 4096.
   */
  readonly maxConnections?: number | undefined;
  /** Most connections from one client address (further ones are refused at accept). Default 0: no limit. */
  readonly maxConnectionsPerAddress?: number | undefined;
  /**
   * Time from accept to the client's HTTP/2 preface and SETTINGS (TLS handshake included), in
   * ms; a connection without them by then is closed. Default 10000; 0: none.
   */
  readonly firstBytesTimeoutMs?: number | undefined;
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
   * The HTTP/2 under the calls: 'lean', this server's own (h2/: one socket write per
   * response, DATA frames up to the client's SETTINGS_MAX_FRAME_SIZE), or 'node', node:http2.
   * Default 'lean'.
   */
  readonly transport?: GrpcTransport | undefined;
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

/** TF Serving sets the server's max message size to INT32_MAX. */
export const MAX_GRPC_MESSAGE_BYTES = 2_147_483_647;

/** Bytes of a message's head an alignment probe sees (enough for model spec, dtype and shape). */
const PROBE_BYTES = 1024;
/** Tensor views are placed at this alignment (the largest element size). */
const ALIGNMENT = 8;

/** Message encodings a request may use (`grpc-encoding`); "deflate" is the zlib format, as in gRPC. */
type MessageEncoding = 'gzip' | 'deflate';
const ENCODINGS: readonly string[] = ['gzip', 'deflate'];

interface CallState {
  readonly stream: GrpcCallStream;
  /** Called when the call ends (the head admission's release). */
  release?: (() => void) | undefined;
  /** The request's `grpc-encoding` when it compresses messages. */
  encoding?: MessageEncoding;
  readonly controller: AbortController;
  answered: boolean;
  /** A streaming call has sent its response headers: its status goes in trailers. */
  headersSent?: boolean;
  reservation: Reservation | undefined;
  timers: NodeJS.Timeout[];
  /** Epoch ms by which the client wants its answer (grpc-timeout), if it set one. */
  deadline?: number;
  /** Observer hook: the status the call ended with and its message sizes. */
  code: Code;
  bytesIn: number;
  bytesOut: number;
}

/** Ends a call with a status (trailers-only: a response message is only sent with status OK). */
function finish(call: CallState, error: unknown): void {
  if (call.answered) return;
  call.answered = true;
  const { code, message } = statusOf(error);
  call.code = code;
  const { stream } = call;
  stream.stopReading();
  if (!stream.writable) return;
  if (call.headersSent === true) stream.endWithStatus(code, encodeGrpcMessage(message));
  else stream.respondStatus(code, encodeGrpcMessage(message));
}

/**
 * Ends a call the server gives up on (deadline, no message in time, a stream message over
 * the limit): the handler learns it through the signal, as for a reset, and stops its work.
 */
function abortCall(call: CallState, error: ServingError): void {
  call.controller.abort(error);
  finish(call, error);
}

/** The 5-byte gRPC length prefix of an uncompressed message of `length` bytes. */
function messagePrefix(length: number): Buffer {
  const prefix = Buffer.allocUnsafe(5);
  prefix[0] = 0;
  prefix.writeUInt32BE(length, 1);
  return prefix;
}

/**
 * Gives the call's reserved request bytes back to the budget, once the transport no longer
 * holds the message's buffer for a read (GrpcCallStream.afterRoomReleased).
 */
function releaseReservation(call: { reservation: Reservation | undefined; stream: GrpcCallStream }): void {
  const reservation = call.reservation;
  if (reservation === undefined) return;
  call.reservation = undefined;
  if (call.stream.afterRoomReleased === undefined) reservation.release();
  else
    call.stream.afterRoomReleased(() => {
      reservation.release();
    });
}

/**
 * An exactly sized ArrayBuffer for a request message that is about to be overwritten in full,
 * left uninitialised: `new ArrayBuffer` zero-fills (a 600 KB memset per request for nothing).
 * The few alignment bytes before the message are never read.
 */
function messageBuffer(byteLength: number): ArrayBuffer {
  return Buffer.allocUnsafeSlow(byteLength).buffer;
}

/** A client reset this close to the deadline counts as the deadline passing, in ms. */
const DEADLINE_SLACK_MS = 100;

function isGrpcContentType(value: string | undefined): boolean {
  return (
    value !== undefined &&
    (value === 'application/grpc' ||
      value.startsWith('application/grpc+') ||
      value.startsWith('application/grpc;'))
  );
}

/** Throws unless `value` is an integer in [min, max] (HTTP/2's limits for the setting). */
function checkRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`gRPC server option ${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const { logger } = options;
  const host = options.host ?? '0.0.0.0';
  const maxMessageBytes = options.maxMessageBytes ?? MAX_GRPC_MESSAGE_BYTES;
  const windowBytes = options.receiveWindowBytes ?? DEFAULT_RECEIVE_WINDOW_BYTES;
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  checkRange('receiveWindowBytes', windowBytes, 65_535, 2 ** 31 - 1);
  checkRange('maxFrameBytes', maxFrameBytes, 16_384, 16_777_215);
  const bodyTimeoutMs = options.bodyTimeoutMs ?? 60_000;
  const methods = new Map<string, GrpcMethod>();
  /** Observer hook: API and method labels by path. */
  const labels = new Map<string, { api: string; method: string }>();
  for (const service of options.services) {
    for (const [name, method] of Object.entries(service.methods)) {
      const path = `/${service.name}/${name}`;
      if (methods.has(path)) throw new Error(`gRPC method ${path} registered twice`);
      methods.set(path, method);
      labels.set(path, { api: service.api ?? service.name, method: name });
    }
  }

  let inFlight = 0;

  /** A streaming call: request messages to the handler as they come, its messages back as it sends them. */
  const serveStream = (
    call: CallState,
    method: GrpcMethod,
    handler: StreamHandler,
    deadline: number | undefined,
  ): void => {
    const { stream } = call;
    // The call holds no reservation of its own; each message being read holds one (stream-messages.ts).
    const streamCall: GrpcStreamCall = {
      signal: call.controller.signal,
      deadline,
      metadata: stream.headers,
      credentials: () => credentialsOf(stream.headers, stream.socket),
      send(chunks) {
        if (call.answered || !stream.writable) return;
        if (call.headersSent !== true) {
          call.headersSent = true;
          stream.sendHeaders();
        }
        let length = 0;
        for (const c of chunks) length += c.byteLength;
        call.bytesOut += length;
        stream.sendMessage(messagePrefix(length), chunks, length);
      },
      pause: () => {
        stream.pauseReading();
      },
      resume: () => {
        stream.resumeReading();
      },
      end(error) {
        if (error !== undefined) {
          finish(call, error);
          return;
        }
        if (call.answered) return;
        call.answered = true;
        stream.stopReading();
        if (!stream.writable) return;
        if (call.headersSent === true) stream.endWithStatus(Code.OK, '');
        else stream.respondStatus(Code.OK, '');
      },
    };
    let events: GrpcStreamEvents;
    try {
      events = handler(streamCall);
    } catch (error) {
      finish(call, error);
      return;
    }
    const onMessage = (message: Uint8Array): void => {
      call.bytesIn += message.byteLength;
      events.onMessage(message);
    };
    stream.read(
      readStreamMessages(
        {
          maxMessageBytes: Math.min(maxMessageBytes, method.maxMessageBytes ?? maxMessageBytes),
          encoding: call.encoding,
          budget: options.budget,
        },
        onMessage,
        (error) => {
          abortCall(call, error);
        },
      ),
      () => {
        events.onEnd();
      },
    );
  };

  const respond = (call: CallState, chunks: readonly Uint8Array[]): void => {
    if (call.answered) return;
    call.answered = true;
    const { stream } = call;
    if (!stream.writable) return;
    let length = 0;
    for (const c of chunks) length += c.byteLength;
    call.bytesOut = length;
    stream.respond(messagePrefix(length), chunks, length);
  };

  /**
   * A compressed request message, decompressed into its own buffer and placed for the
   * method's alignment probe like an uncompressed one. Output is counted against the byte
   * budget as it is produced (UNAVAILABLE when the budget runs out) and stops at
   * maxMessageBytes (RESOURCE_EXHAUSTED): a compression bomb costs at most the budget.
   */
  const decompress = async (
    call: CallState,
    method: GrpcMethod,
    bytes: Uint8Array,
  ): Promise<{ message: Uint8Array; buffer: ArrayBuffer }> => {
    const { chunks, total } = await inflateBounded(call.encoding === 'gzip' ? 'gzip' : 'deflate', bytes, {
      maxBytes: maxMessageBytes,
      grow: call.reservation === undefined ? undefined : (more) => call.reservation!.grow(more),
      fail: (failure) =>
        failure.kind === 'too-large'
          ? new ServingError(
              Code.RESOURCE_EXHAUSTED,
              `Decompressed message larger than max (${maxMessageBytes})`,
            )
          : failure.kind === 'overloaded'
            ? new ServingError(
                Code.UNAVAILABLE,
                'Server is overloaded: too many request bytes in flight; retry later',
                { reason: 'overloaded' },
              )
            : new ServingError(
                Code.INTERNAL,
                `Cannot decompress the ${call.encoding!} message: ${failure.message}`,
              ),
    });
    const head = Buffer.concat(chunks, Math.min(total, PROBE_BYTES));
    const offset = method.alignment?.(head);
    const shift = offset === undefined ? 0 : (ALIGNMENT - (offset % ALIGNMENT)) % ALIGNMENT;
    const buffer = messageBuffer(total + shift);
    const message = new Uint8Array(buffer, shift, total);
    let at = 0;
    for (const c of chunks) {
      message.set(c, at);
      at += c.byteLength;
    }
    return { message, buffer };
  };

  /**
   * Reads the one message of a unary request into an exactly sized buffer, reserving its
   * size against the budget as soon as the length prefix is known.
   */
  const readMessage = (
    call: CallState,
    method: GrpcMethod,
  ): Promise<{ message: Uint8Array; buffer: ArrayBuffer }> =>
    new Promise((resolve, reject) => {
      const { stream } = call;
      const prefix = new Uint8Array(5);
      let prefixFill = 0;
      let length = -1;
      let compressed = false;
      /** Bytes of the message kept until the alignment probe has seen enough. */
      let head: Buffer[] | undefined = [];
      let headBytes = 0;
      let target: Uint8Array | undefined;
      let buffer: ArrayBuffer | undefined;
      let fill = 0;
      const fail = (error: ServingError): void => {
        cleanup();
        dropReservation();
        reject(error);
      };
      /**
       * A message abandoned before it was whole: its buffer is garbage and the rest of it is
       * read and dropped, so its bytes leave the in-flight budget now rather than when the
       * client ends the stream (a client that stops sending would hold them until the
       * send-stall timeout).
       */
      const dropReservation = (): void => {
        releaseReservation(call);
      };
      /** Admits the call on the message's head and places the message; false when refused. */
      const place = (): boolean => {
        const seen = Buffer.concat(head!, headBytes);
        head = undefined;
        // A compressed head cannot be read: such calls are admitted when their run is submitted.
        if (method.admit !== undefined && !compressed) {
          try {
            const release = method.admit(seen, {
              signal: call.controller.signal,
              deadline: call.deadline,
              body: { received: () => fill, total: length },
            });
            call.release = release;
          } catch (error) {
            fail(error instanceof ServingError ? error : new ServingError(Code.INTERNAL, 'Internal error'));
            return false;
          }
        }
        // A compressed message is read as it is and placed once it is decompressed.
        const offset = compressed ? undefined : method.alignment?.(seen);
        const shift = offset === undefined ? 0 : (ALIGNMENT - (offset % ALIGNMENT)) % ALIGNMENT;
        buffer = messageBuffer(length + shift);
        target = new Uint8Array(buffer, shift, length);
        target.set(seen, 0);
        fill = seen.byteLength;
        return true;
      };
      const onData = (chunk: Buffer): void => {
        let at = 0;
        if (length < 0) {
          const take = Math.min(5 - prefixFill, chunk.byteLength);
          prefix.set(chunk.subarray(0, take), prefixFill);
          prefixFill += take;
          at = take;
          if (prefixFill < 5) return;
          if (prefix[0] !== 0 && (prefix[0] !== 1 || call.encoding === undefined)) {
            fail(
              new ServingError(
                Code.INTERNAL,
                'Compressed message without a supported grpc-encoding (gzip, deflate)',
              ),
            );
            return;
          }
          compressed = prefix[0] === 1;
          length = new DataView(prefix.buffer).getUint32(1);
          if (length > maxMessageBytes) {
            fail(
              new ServingError(
                Code.RESOURCE_EXHAUSTED,
                `Received message larger than max (${length} vs. ${maxMessageBytes})`,
              ),
            );
            return;
          }
          if (options.budget !== undefined) {
            call.reservation = options.budget.tryReserve(length);
            if (call.reservation === undefined) {
              fail(
                new ServingError(
                  Code.UNAVAILABLE,
                  'Server is overloaded: too many request bytes in flight; retry later',
                  {
                    reason: 'overloaded',
                  },
                ),
              );
              return;
            }
          }
        }
        const rest = at === 0 ? chunk : chunk.subarray(at);
        if (rest.byteLength === 0) {
          if (length === 0 && target === undefined && !place()) return;
        } else if (target === undefined) {
          // Bytes past the declared length (a second message) must not reach place().
          if (headBytes + rest.byteLength > length) {
            fail(new ServingError(Code.UNIMPLEMENTED, 'More than one request message in a unary call'));
            return;
          }
          headBytes += rest.byteLength;
          if (headBytes >= Math.min(length, PROBE_BYTES)) {
            head!.push(rest);
            if (!place()) return;
          } else {
            // Kept past this call: a copy (the view is only valid during it).
            head!.push(Buffer.from(rest));
          }
        } else {
          if (fill + rest.byteLength > length) {
            fail(new ServingError(Code.UNIMPLEMENTED, 'More than one request message in a unary call'));
            return;
          }
          // Bytes the transport read straight into place (into) are already there.
          if (rest.buffer !== target.buffer || rest.byteOffset !== target.byteOffset + fill) {
            target.set(rest, fill);
          }
          fill += rest.byteLength;
        }
        if (target !== undefined && fill > length) {
          fail(new ServingError(Code.UNIMPLEMENTED, 'More than one request message in a unary call'));
        }
      };
      const onEnd = (): void => {
        cleanup();
        if (length >= 0 && target === undefined && head !== undefined && headBytes >= length && !place())
          return;
        if (target === undefined || fill !== length) {
          dropReservation();
          reject(new ServingError(Code.INTERNAL, 'Incomplete request message'));
          return;
        }
        if (!compressed) {
          resolve({ message: target, buffer: buffer! });
          return;
        }
        decompress(call, method, target).then(resolve, reject);
      };
      const onAbort = (): void => {
        cleanup();
        dropReservation();
        reject(call.controller.signal.reason as ServingError);
      };
      const cleanup = (): void => {
        stream.stopReading();
        call.controller.signal.removeEventListener('abort', onAbort);
      };
      /** The room left in the placed message: where the transport may read the next bytes. */
      const into = (): Uint8Array | undefined =>
        target !== undefined && fill < length ? target.subarray(fill) : undefined;
      stream.read(onData, onEnd, into);
      call.controller.signal.addEventListener('abort', onAbort, { once: true });
    });

  const handleStream = (stream: GrpcCallStream): void => {
    const { headers } = stream;
    const call: CallState = {
      stream,
      controller: new AbortController(),
      answered: false,
      reservation: undefined,
      timers: [],
      code: Code.OK,
      bytesIn: 0,
      bytesOut: 0,
    };
    inFlight++;
    const outputLease = createOutputLease();
    // --- observer hook
    let observed: ((end: RequestEnd) => void) | undefined;
    if (options.observer !== undefined) {
      const label = labels.get(headers[':path'] ?? '');
      observed = options.observer.begin({
        api: label?.api ?? 'grpc',
        transport: 'grpc',
        method: label?.method ?? 'unknown',
        headers,
        signal: call.controller.signal,
        startedAt: performance.now(),
      });
    }
    stream.onClose(() => {
      inFlight--;
      call.release?.();
      // Every DATA frame has been handed to the socket, or the stream is gone: the pooled
      // output memory the response viewed may be refilled.
      outputLease.release();
      if (observed !== undefined) {
        const code = call.answered ? call.code : Code.CANCELLED;
        observed({ status: Code[code], code, bytesIn: call.bytesIn, bytesOut: call.bytesOut });
      }
      for (const t of call.timers) clearTimeout(t);
      releaseReservation(call);
      if (!call.answered) {
        call.answered = true;
        // Clients reset the stream when their deadline passes, usually a little before our
        // timer (which started when the headers arrived) fires: that is a deadline, not a cancel.
        const expired = call.deadline !== undefined && Date.now() >= call.deadline - DEADLINE_SLACK_MS;
        call.controller.abort(
          expired
            ? new ServingError(Code.DEADLINE_EXCEEDED, 'Deadline exceeded')
            : new ServingError(Code.CANCELLED, 'Request cancelled by the client'),
        );
      }
    });
    const path = headers[':path'] ?? '';
    if (headers[':method'] !== 'POST' || !isGrpcContentType(headers['content-type'])) {
      stream.respondUnsupported();
      call.answered = true;
      return;
    }
    const method = methods.get(path);
    if (method === undefined) {
      finish(call, new ServingError(Code.UNIMPLEMENTED, `Method not found: ${path}`));
      return;
    }
    const encoding = headers['grpc-encoding'];
    if (encoding !== undefined && encoding !== 'identity') {
      if (typeof encoding !== 'string' || !ENCODINGS.includes(encoding)) {
        finish(
          call,
          new ServingError(Code.UNIMPLEMENTED, `Message encoding "${String(encoding)}" is not supported`),
        );
        return;
      }
      call.encoding = encoding as MessageEncoding;
    }
    let deadline: number | undefined;
    try {
      const timeoutMs = parseGrpcTimeout(headers['grpc-timeout']);
      if (timeoutMs !== undefined) deadline = call.deadline = Date.now() + timeoutMs;
    } catch (error) {
      finish(call, error);
      return;
    }
    const expire = (): void => {
      abortCall(call, new ServingError(Code.DEADLINE_EXCEEDED, 'Deadline exceeded'));
    };
    if (deadline !== undefined) {
      const left = deadline - Date.now();
      if (left <= 0) {
        expire();
        return;
      }
      if (left < 2 ** 31) call.timers.push(setTimeout(expire, left));
    }
    if (method.stream !== undefined) {
      // A stream's messages come when the client has them: no body timeout, only its deadline.
      serveStream(call, method, method.stream, deadline);
      return;
    }
    const bodyTimer = setTimeout(() => {
      abortCall(
        call,
        new ServingError(Code.CANCELLED, `Request message not received within ${bodyTimeoutMs} ms`),
      );
    }, bodyTimeoutMs);
    call.timers.push(bodyTimer);
    readMessage(call, method)
      .then(({ message, buffer }) => {
        clearTimeout(bodyTimer);
        call.bytesIn = message.byteLength;
        return method.handler(message, {
          signal: call.controller.signal,
          deadline,
          metadata: headers,
          messageBuffer: buffer,
          outputLease,
          credentials: () => credentialsOf(headers, stream.socket),
        });
      })
      .then(
        (chunks) => {
          respond(call, chunks);
        },
        (error: unknown) => {
          const cause =
            call.controller.signal.aborted && !(error instanceof ServingError)
              ? (call.controller.signal.reason as unknown)
              : error;
          if (!(cause instanceof ServingError)) logger.error('grpc handler failed', { path, error: cause });
          finish(call, cause);
        },
      );
  };

  const listenerOptions: GrpcListenerOptions = {
    host: host.includes(':') && !host.startsWith('[') ? host : host.replace(/^\[|\]$/g, ''),
    port: options.port ?? 8500,
    logger,
    windowBytes,
    maxFrameBytes,
    maxConcurrentStreams: options.maxConcurrentStreams ?? 1000,
    maxHeaderListBytes: 64 * 1024,
    maxConnections: options.maxConnections ?? 4096,
    maxConnectionsPerAddress: options.maxConnectionsPerAddress,
    firstBytesTimeoutMs: options.firstBytesTimeoutMs,
    sendStallMs: options.sendStallTimeoutMs,
    tls: options.tls,
    connectionLimits: options.connectionLimits,
    onStream: handleStream,
  };
  const startListener = (o: GrpcListenerOptions): Promise<GrpcListener> =>
    (options.transport ?? 'lean') === 'lean' ? startH2Listener(o) : startNodeListener(o);
  const tcp = await startListener(listenerOptions);
  const { port } = tcp;
  logger.info('grpc server listening', { host, port, transport: options.transport ?? 'lean' });
  const listeners = [tcp];
  if (options.socketPath !== undefined) {
    try {
      listeners.push(await startListener({ ...listenerOptions, path: options.socketPath }));
    } catch (error) {
      await tcp.close(0);
      throw error;
    }
    logger.info('grpc server listening', { socketPath: options.socketPath });
  }

  let closing: Promise<void> | undefined;
  return {
    port,
    get inFlight() {
      return inFlight;
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
