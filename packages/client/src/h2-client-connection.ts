/**
 * One client HTTP/2 connection of our own (RFC 9113: plaintext with prior knowledge, or TLS
 * with ALPN h2) for unary gRPC calls: the preface and SETTINGS exchange, streams opened by one HEADERS frame, request
 * DATA sent within the peer's windows and frame size, response HEADERS (+ CONTINUATION),
 * DATA and trailers, WINDOW_UPDATE, PING, RST_STREAM and GOAWAY. The frame reader and HPACK
 * decoder are the server's (@visionserve/h2).
 *
 * Receive path: the socket reads into one reusable scratch buffer, except while a DATA frame
 * whose stream has its message buffer ready is being read: then the next read goes straight
 * into that buffer (MessageAssembler.target), so a large response is copied once, by the
 * kernel (over TLS: by node, from each decrypted record), into the buffer the caller's tensors
 * view.
 *
 * Anything the server sends that breaks the protocol ends the connection (GOAWAY with the
 * error) and fails its calls with a ServingError; nothing a server sends can throw out of
 * the socket callbacks.
 */
import type net from 'node:net';
import { Code, ServingError } from '@visionserve/protocol';
import {
  CLIENT_PREFACE,
  ConnectionCore,
  type ConnectionEndpoint,
  DEFAULT_WINDOW,
  ErrorCode,
  FRAME_HEADER_BYTES,
  Flag,
  FrameReader,
  FrameType,
  H2ConnectionError,
  HeaderBlockAssembler,
  HeaderListTooLargeError,
  ReceiveWindow,
  Setting,
  readGoaway,
  readResetStream,
  createHpackDecoder,
  encodeHeaderFrames,
  encodeGoaway,
  encodeHeaderBlock,
  encodeSettings,
  encodeUint32Frame,
  writeFrameHeader,
  type FrameSink,
  type HeaderBlock,
  type HpackDecoder,
} from '@visionserve/h2';
import type { MessageAssembler } from './grpc-message-assembler.js';
import {
  type ClientTlsOptions,
  type SocketReads,
  type TlsSessionCache,
  connectSocket,
} from './client-tls.js';

/**
 * Opens a connection's socket, reading through `reads` (net's `onread`); `onFailure` for a
 * failure before the socket is usable (a TLS handshake). Default: TCP or TLS to host:port.
 */
export type H2Connector = (reads: SocketReads, onFailure: (error: Error) => void) => net.Socket;

export interface H2ClientConnectionOptions {
  readonly host: string;
  readonly port: number;
  /** TLS settings (ALPN h2); undefined: plaintext with prior knowledge. */
  readonly tls: ClientTlsOptions | undefined;
  /** TLS sessions kept between the channel's connections. */
  readonly sessions?: TlsSessionCache;
  /** Receive window per stream and for the connection, bytes. */
  readonly windowBytes: number;
  /** SETTINGS_MAX_FRAME_SIZE advertised, bytes. */
  readonly maxFrameBytes: number;
  /** Largest response header list accepted, bytes (SETTINGS_MAX_HEADER_LIST_SIZE). */
  readonly maxHeaderListBytes: number;
  /**
   * The server's first SETTINGS must arrive this long after the connection starts, or the
   * connection fails (UNAVAILABLE) with its calls, in ms. Default HANDSHAKE_TIMEOUT_MS.
   */
  readonly handshakeTimeoutMs?: number;
  /** Opens the socket instead of TCP/TLS to host:port (an in-process transport, a test harness). */
  readonly connect?: H2Connector | undefined;
  /** Called once when the connection can take no new streams (GOAWAY, error, close). */
  readonly onDrain: () => void;
  /** Called once when the connection has ended (every call on it settled). Default: nothing. */
  readonly onClosed?: () => void;
}

/**
 * Errors of calls the server never processed (a stream refused, or above a GOAWAY's last
 * stream id, or queued when the connection went away): safe to send again on a new connection.
 */
export const NOT_PROCESSED = new WeakSet<ServingError>();

function notProcessed(message: string): ServingError {
  const error = new ServingError(Code.UNAVAILABLE, message);
  NOT_PROCESSED.add(error);
  return error;
}

/** Control frames (PING, SETTINGS) answered per FLOOD_WINDOW_MS at most: more ends the connection. */
const MAX_CONTROL_FRAMES = 1000;
const FLOOD_WINDOW_MS = 10_000;
/** How long the server has to send its first SETTINGS, ms. */
export const HANDSHAKE_TIMEOUT_MS = 20_000;
/** Streams opened before the server's SETTINGS say its limit (RFC 9113 §6.5.2 asks for at least 100). */
const PRE_SETTINGS_STREAMS = 100;
/** CONTINUATION frames one header block may have. */
const MAX_CONTINUATIONS = 128;

/** What a stream tells its call. Called at most once each, except onHeaders (headers, then trailers). */
export interface ClientStreamHandler {
  /** The message's bytes go here. */
  readonly assembler: MessageAssembler;
  /** A header block: response headers (first) or trailers. `endStream`: the response ended with it. */
  onHeaders(fields: Readonly<Record<string, string>>, endStream: boolean): void;
  /** The assembler refused DATA: the stream has been reset; the call fails with this. */
  onDataError(error: ServingError): void;
  /** The response ended after DATA (END_STREAM on a DATA frame). */
  onEnd(): void;
  /** The stream or connection failed (RST_STREAM, GOAWAY, protocol error, socket closed). */
  onError(error: ServingError): void;
}

export interface ClientStream {
  /** Resets the stream with CANCEL; no handler is called after this. */
  cancel(): void;
}

/** Header block bytes kept for one block (HEADERS + CONTINUATIONs), over the header list limit. */
const HEADER_BLOCK_SLACK = 16_384;
/** Scratch buffer the socket reads into when not reading DATA into place, bytes. */
const SCRATCH_BYTES = 64 * 1024;
/** DATA still to come in a frame below which it is read into scratch anyway (the syscall costs more than the copy). */
const DIRECT_MIN_BYTES = 16 * 1024;
/** Highest client stream id (RFC 9113 5.1.1). */
const MAX_STREAM_ID = 2 ** 31 - 1;

/** gRPC's mapping of an RST_STREAM error code to a status code (grpc's PROTOCOL-HTTP2 doc). */
function codeOfReset(code: number): Code {
  switch (code) {
    case ErrorCode.REFUSED_STREAM:
      return Code.UNAVAILABLE;
    case ErrorCode.CANCEL:
      return Code.CANCELLED;
    case ErrorCode.ENHANCE_YOUR_CALM:
      return Code.RESOURCE_EXHAUSTED;
    case ErrorCode.INADEQUATE_SECURITY:
      return Code.PERMISSION_DENIED;
    default:
      return Code.INTERNAL;
  }
}

interface Waiting {
  readonly headers: readonly (readonly [string, string])[];
  readonly parts: readonly Uint8Array[];
  readonly handler: ClientStreamHandler;
  /** Opened only once the server's SETTINGS arrived (a call sent again after a refusal). */
  readonly afterSettings: boolean;
  /** Set once the stream is open. */
  stream: StreamState | undefined;
  /** Cancelled or failed while waiting. */
  gone: boolean;
}

interface StreamState {
  readonly id: number;
  readonly handler: ClientStreamHandler;
  /** Request DATA not yet sent: the whole length-prefixed message, as views. */
  pending: Uint8Array[];
  pendingBytes: number;
  /** Send window the peer gave this stream, bytes (may go negative after a SETTINGS change). */
  sendWindow: number;
  /** Our receive window for the stream. */
  readonly receive: ReceiveWindow;
  sawHeaders: boolean;
  /** The peer's side ended (END_STREAM) or the stream was reset: nothing more is taken. */
  closed: boolean;
}

export class H2ClientConnection implements FrameSink {
  private readonly socket: net.Socket;
  private readonly reader: FrameReader;
  private readonly hpack: HpackDecoder;
  private readonly streams = new Map<number, StreamState>();
  private readonly scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES);
  private nextId = 1;
  private draining = false;
  private failed: ServingError | undefined;
  /** Peer settings, the windows both ways, the control-frame flood limit (shared with the server). */
  private readonly core: ConnectionCore<StreamState>;
  /** The stream of the DATA frame being read (undefined: none, or one no longer open). */
  private dataStream: StreamState | undefined;
  /** HEADERS + CONTINUATION assembly. */
  private readonly headerBlocks: HeaderBlockAssembler;
  /** Calls opened here (streams open or waiting) not yet settled: the socket is ref'd while any. */
  private inFlight = 0;
  /** Calls waiting for a stream under the server's limit, in order. */
  private readonly waiting: Waiting[] = [];
  /** The server's first SETTINGS has arrived. */
  private gotSettings = false;

  constructor(private readonly options: H2ClientConnectionOptions) {
    this.hpack = createHpackDecoder({ maxHeaderListBytes: options.maxHeaderListBytes });
    this.core = new ConnectionCore<StreamState>(this.coreEndpoint(), {
      receiveWindow: options.windowBytes,
      maxControlFrames: MAX_CONTROL_FRAMES,
      floodWindowMs: FLOOD_WINDOW_MS,
    });
    this.headerBlocks = new HeaderBlockAssembler(
      options.maxHeaderListBytes + HEADER_BLOCK_SLACK,
      MAX_CONTINUATIONS,
    );
    this.reader = new FrameReader(
      this,
      options.maxFrameBytes,
      options.maxHeaderListBytes + HEADER_BLOCK_SLACK,
    );
    const connect: H2Connector =
      options.connect ?? ((reads, onFailure) => connectSocket(options, 'h2', reads, onFailure));
    this.socket = connect(
      {
        buffer: () => this.nextReadBuffer(),
        callback: (n: number, buffer: Uint8Array) => {
          this.onRead(n, buffer);
          return true;
        },
      },
      (error) => {
        this.fail(new ServingError(Code.UNAVAILABLE, `Connection failed: ${error.message}`));
      },
    );
    this.socket.unref();
    this.socket.on('error', (error: Error) => {
      this.fail(new ServingError(Code.UNAVAILABLE, `Connection failed: ${error.message}`));
    });
    this.socket.on('end', () => {
      this.fail(new ServingError(Code.UNAVAILABLE, 'Connection closed by the server'));
    });
    this.socket.on('close', () => {
      this.fail(new ServingError(Code.UNAVAILABLE, 'Connection closed'));
    });
    const window = options.windowBytes;
    this.socket.cork();
    this.socket.write(CLIENT_PREFACE);
    this.socket.write(
      encodeSettings([
        [Setting.ENABLE_PUSH, 0],
        [Setting.INITIAL_WINDOW_SIZE, window],
        [Setting.MAX_FRAME_SIZE, options.maxFrameBytes],
        [Setting.MAX_HEADER_LIST_SIZE, options.maxHeaderListBytes],
      ]),
    );
    if (window > DEFAULT_WINDOW) {
      this.socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, 0, window - DEFAULT_WINDOW));
    }
    this.socket.uncork();
    // A peer that accepts the connection but never speaks HTTP/2 would otherwise hold every
    // call without a deadline for ever.
    this.handshakeTimer = setTimeout(() => {
      if (!this.gotSettings)
        this.fail(new ServingError(Code.UNAVAILABLE, 'No HTTP/2 SETTINGS from the server in time'));
    }, options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS);
    this.handshakeTimer.unref();
  }

  private readonly handshakeTimer: NodeJS.Timeout;

  /** Whether new streams may be opened here. */
  get usable(): boolean {
    return !this.draining && this.failed === undefined && this.nextId <= MAX_STREAM_ID;
  }

  /**
   * Opens a stream: HEADERS (the fields, in order) then the request message (`parts`
   * concatenated, sent as DATA within the windows, END_STREAM on the last frame).
   */
  open(
    headers: readonly (readonly [string, string])[],
    parts: readonly Uint8Array[],
    handler: ClientStreamHandler,
    /** Wait for the server's SETTINGS first (a call sent again after it was refused). */
    afterSettings = false,
  ): ClientStream {
    const entry: Waiting = { headers, parts, handler, afterSettings, stream: undefined, gone: false };
    if (this.inFlight++ === 0) this.socket.ref();
    // Past the server's SETTINGS_MAX_CONCURRENT_STREAMS a call waits for a stream to close.
    if (this.waiting.length > 0 || !this.mayStart(entry)) this.waiting.push(entry);
    else this.start(entry);
    return {
      cancel: () => {
        const stream = entry.stream;
        if (stream === undefined) {
          if (entry.gone) return;
          entry.gone = true;
          this.waiting.splice(this.waiting.indexOf(entry), 1);
          if (--this.inFlight === 0) this.socket.unref();
          return;
        }
        if (!this.streams.has(stream.id)) return;
        // The reset leaves before the HEADERS of a call that forget() lets start (see endedByPeer).
        if (this.failed === undefined)
          this.socket.write(encodeUint32Frame(FrameType.RST_STREAM, stream.id, ErrorCode.CANCEL));
        this.forget(stream);
      },
    };
  }

  /** Opens the stream of a call: HEADERS, then its request within the windows. */
  private start(entry: Waiting): void {
    const { headers, parts, handler } = entry;
    const id = this.nextId;
    this.nextId += 2;
    if (this.nextId > MAX_STREAM_ID) this.drain();
    const block = encodeHeaderBlock(headers);
    let bytes = 0;
    for (const part of parts) bytes += part.byteLength;
    const stream: StreamState = {
      id,
      handler,
      pending: parts.filter((p) => p.byteLength > 0),
      pendingBytes: bytes,
      sendWindow: this.core.peerInitialWindow,
      receive: new ReceiveWindow(this.options.windowBytes),
      sawHeaders: false,
      closed: false,
    };
    this.streams.set(id, stream);
    entry.stream = stream;
    this.socket.cork();
    this.socket.write(encodeHeaderFrames(id, block, this.core.peerMaxFrame, bytes === 0));
    if (bytes > 0) this.flush(stream);
    this.socket.uncork();
  }

  /**
   * Whether a call may open its stream now: under the server's limit, which is taken as at most
   * PRE_SETTINGS_STREAMS until its SETTINGS arrive.
   */
  private mayStart(entry: Waiting): boolean {
    if (entry.afterSettings && !this.gotSettings) return false;
    const limit = this.gotSettings
      ? this.core.peerMaxStreams
      : Math.min(this.core.peerMaxStreams, PRE_SETTINGS_STREAMS);
    return this.streams.size < limit;
  }

  /** Opens waiting calls, in order, while the server's limit allows. */
  private startWaiting(): void {
    while (this.waiting.length > 0 && this.usable && this.mayStart(this.waiting[0]!)) {
      this.start(this.waiting.shift()!);
    }
  }

  /** Fails the calls still waiting for a stream (never sent: safe to send elsewhere). */
  private failWaiting(error: ServingError): void {
    const waiting = this.waiting.splice(0);
    for (const entry of waiting) {
      entry.gone = true;
      --this.inFlight;
    }
    if (waiting.length > 0 && this.inFlight === 0) this.socket.unref();
    for (const entry of waiting) entry.handler.onError(error);
  }

  /** Ends the connection: GOAWAY, then the socket; calls in flight fail UNAVAILABLE. */
  close(): void {
    if (this.failed !== undefined) return;
    this.socket.end(encodeGoaway(0, ErrorCode.NO_ERROR));
    this.fail(new ServingError(Code.UNAVAILABLE, 'Channel closed'));
  }

  // ---- send side

  /** Sends as much of the stream's request as the windows allow. */
  private flush(stream: StreamState): void {
    while (stream.pendingBytes > 0) {
      const allowed = Math.min(
        stream.sendWindow,
        this.core.sendWindow,
        this.core.peerMaxFrame,
        stream.pendingBytes,
      );
      if (allowed <= 0) return;
      stream.sendWindow -= allowed;
      this.core.sendWindow -= allowed;
      stream.pendingBytes -= allowed;
      const head = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
      writeFrameHeader(
        head,
        0,
        allowed,
        FrameType.DATA,
        stream.pendingBytes === 0 ? Flag.END_STREAM : 0,
        stream.id,
      );
      this.socket.write(head);
      let left = allowed;
      while (left > 0) {
        const part = stream.pending[0]!;
        if (part.byteLength <= left) {
          this.socket.write(part);
          left -= part.byteLength;
          stream.pending.shift();
        } else {
          this.socket.write(part.subarray(0, left));
          stream.pending[0] = part.subarray(left);
          left = 0;
        }
      }
    }
  }

  private flushAll(): void {
    this.socket.cork();
    for (const stream of this.streams.values()) {
      if (stream.pendingBytes > 0) this.flush(stream);
      if (this.core.sendWindow <= 0) break;
    }
    this.socket.uncork();
  }

  // ---- receive side

  private nextReadBuffer(): Uint8Array {
    const left = this.reader.dataLeft;
    if (left >= DIRECT_MIN_BYTES && this.dataStream !== undefined && !this.dataStream.closed) {
      const target = this.dataStream.handler.assembler.target(left);
      if (target !== undefined && target.byteLength >= DIRECT_MIN_BYTES) return target;
    }
    return this.scratch;
  }

  private onRead(n: number, buffer: Uint8Array): void {
    if (this.failed !== undefined) return;
    const chunk =
      buffer === this.scratch
        ? this.scratch.subarray(0, n)
        : Buffer.from(buffer.buffer, buffer.byteOffset, n);
    // Whatever this read makes us send (WINDOW_UPDATE, SETTINGS and PING acks, request DATA) leaves in one write.
    this.socket.cork();
    try {
      this.reader.push(chunk);
    } catch (error) {
      // Handlers run user callbacks only through promises; this is a fault of ours or the peer's bytes.
      this.protocolError(
        error instanceof H2ConnectionError ? error.code : ErrorCode.INTERNAL_ERROR,
        error instanceof Error ? error.message : String(error),
      );
    }
    if (this.core.receive.halfUsed && this.failed === undefined) {
      this.socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, 0, this.core.receive.release()));
    }
    this.socket.uncork();
  }

  onFrameError(code: number, message: string): void {
    this.protocolError(code, message);
  }

  onDataStart(streamId: number, _flags: number, length: number): void {
    if (this.headerBlocks.open)
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA inside a header block');
    if (streamId === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on stream 0');
    if (!this.core.receive.take(length)) {
      throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'DATA beyond the connection window');
    }
    const stream = this.streams.get(streamId);
    this.dataStream = stream;
    if (stream === undefined) {
      if (streamId >= this.nextId || (streamId & 1) === 0) {
        throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `DATA on stream ${streamId}, never opened`);
      }
      return; // a stream we cancelled: its bytes are dropped (and count against the connection)
    }
    if (!stream.sawHeaders)
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA before response headers');
    if (!stream.receive.take(length)) {
      this.resetStream(stream, ErrorCode.FLOW_CONTROL_ERROR);
      stream.handler.onError(new ServingError(Code.INTERNAL, 'Server sent DATA beyond the stream window'));
    }
  }

  onData(chunk: Buffer): void {
    const stream = this.dataStream;
    if (stream === undefined || stream.closed) return;
    const error = stream.handler.assembler.push(chunk);
    if (error) {
      this.resetStream(stream, ErrorCode.CANCEL);
      stream.handler.onDataError(error);
    }
  }

  onDataEnd(flags: number): void {
    const stream = this.dataStream;
    this.dataStream = undefined;
    if (stream === undefined || stream.closed) return;
    if ((flags & Flag.END_STREAM) !== 0) {
      this.endedByPeer(stream);
      stream.handler.onEnd();
      return;
    }
    if (stream.receive.halfUsed) {
      this.socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, stream.id, stream.receive.release()));
    }
  }

  onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    if (this.headerBlocks.open && type !== FrameType.CONTINUATION) {
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'Header block interrupted by another frame');
    }
    switch (type) {
      case FrameType.HEADERS:
        this.onHeaderBlock(this.headerBlocks.headers(flags, streamId, payload));
        break;
      case FrameType.CONTINUATION:
        this.onHeaderBlock(this.headerBlocks.continuation(flags, streamId, payload));
        break;
      case FrameType.SETTINGS:
        this.onSettings(flags, streamId, payload);
        break;
      case FrameType.PING:
        this.core.onPing(flags, streamId, payload);
        break;
      case FrameType.WINDOW_UPDATE:
        this.core.onWindowUpdate(streamId, payload);
        break;
      case FrameType.RST_STREAM:
        this.onResetStream(streamId, readResetStream(streamId, payload));
        break;
      case FrameType.GOAWAY: {
        const { lastStreamId, code } = readGoaway(streamId, payload);
        this.onGoaway(lastStreamId, code);
        break;
      }
      case FrameType.PUSH_PROMISE:
        throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PUSH_PROMISE with push disabled');
      default:
        // PRIORITY and unknown frame types are ignored.
        break;
    }
  }

  private onResetStream(streamId: number, code: number): void {
    const stream = this.streams.get(streamId);
    if (stream === undefined) return;
    this.forget(stream);
    stream.handler.onError(
      code === ErrorCode.REFUSED_STREAM && !stream.sawHeaders
        ? notProcessed(`Stream refused by the server (HTTP/2 error ${code}); call not processed`)
        : new ServingError(codeOfReset(code), `Stream reset by the server (HTTP/2 error ${code})`),
    );
  }

  private onGoaway(last: number, code: number): void {
    this.drain();
    for (const stream of [...this.streams.values()]) {
      if (stream.id <= last) continue;
      this.forget(stream);
      stream.handler.onError(
        notProcessed(`Connection going away (HTTP/2 error ${code}); call not processed`),
      );
    }
    if (this.streams.size === 0) this.close();
  }

  private onHeaderBlock(whole: HeaderBlock | undefined): void {
    if (whole !== undefined)
      this.headerBlock(whole.streamId, whole.block, (whole.flags & Flag.END_STREAM) !== 0);
  }

  /** A whole header block: decoded always (the HPACK state is the connection's), delivered if the stream is live. */
  private headerBlock(streamId: number, block: Uint8Array, endStream: boolean): void {
    // No prototype: a header named like an Object property (constructor, __proto__) is just a header.
    const fields = Object.create(null) as Record<string, string>;
    let tooLarge = false;
    try {
      this.hpack.decode(block, (name, value) => {
        fields[name] = name in fields ? `${fields[name]!},${value}` : value;
      });
    } catch (error) {
      if (!(error instanceof HeaderListTooLargeError)) {
        throw new H2ConnectionError(ErrorCode.COMPRESSION_ERROR, `Bad header block: ${String(error)}`);
      }
      tooLarge = true;
    }
    const stream = this.streams.get(streamId);
    if (stream === undefined) {
      if (streamId >= this.nextId || (streamId & 1) === 0) {
        throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS on stream ${streamId}, never opened`);
      }
      return;
    }
    if (tooLarge) {
      this.resetStream(stream, ErrorCode.CANCEL);
      stream.handler.onError(new ServingError(Code.RESOURCE_EXHAUSTED, 'Response header list too large'));
      return;
    }
    if (stream.sawHeaders && !endStream) {
      this.resetStream(stream, ErrorCode.PROTOCOL_ERROR);
      stream.handler.onError(new ServingError(Code.INTERNAL, 'Trailers without END_STREAM'));
      return;
    }
    stream.sawHeaders = true;
    if (endStream) this.endedByPeer(stream);
    stream.handler.onHeaders(fields, endStream);
  }

  private onSettings(flags: number, streamId: number, payload: Buffer): void {
    if (!this.core.onSettings(flags, streamId, payload)) {
      this.hpack.settingsAcknowledged();
      return;
    }
    if (!this.gotSettings) clearTimeout(this.handshakeTimer);
    this.gotSettings = true;
    this.flushAll();
    this.startWaiting();
  }

  /** What the connection core needs of this connection. */
  private coreEndpoint(): ConnectionEndpoint<StreamState> {
    return {
      windowStream: (id) => this.streams.get(id),
      openStreams: () => this.streams.values(),
      streamWindowError: (stream, code) => {
        this.resetStream(stream, code);
        stream.handler.onError(new ServingError(Code.INTERNAL, 'Bad WINDOW_UPDATE from the server'));
      },
      connectionWindowOpened: () => {
        this.flushAll();
      },
      streamWindowOpened: (stream) => {
        this.socket.cork();
        this.flush(stream);
        this.socket.uncork();
      },
      write: (bytes) => {
        this.socket.write(bytes);
      },
    };
  }

  // ---- endings

  private forget(stream: StreamState): void {
    if (stream.closed) return;
    stream.closed = true;
    stream.pending = [];
    stream.pendingBytes = 0;
    this.streams.delete(stream.id);
    if (--this.inFlight === 0) this.socket.unref();
    if (this.waiting.length > 0 && this.failed === undefined) this.startWaiting();
    if (this.draining && this.streams.size === 0 && this.failed === undefined) this.close();
  }

  /**
   * The server ended the stream. If part of the request was still unsent, the stream is reset
   * (CANCEL) so that the server stops waiting for the rest: the call is over either way.
   * The reset is written before forget(), which starts waiting calls: until the server reads
   * it the stream still counts against its SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §5.1.2),
   * and a HEADERS ahead of it was refused (REFUSED_STREAM, counted by servers as a flood).
   */
  private endedByPeer(stream: StreamState): void {
    if (stream.pendingBytes > 0 && this.failed === undefined)
      this.socket.write(encodeUint32Frame(FrameType.RST_STREAM, stream.id, ErrorCode.CANCEL));
    this.forget(stream);
  }

  private resetStream(stream: StreamState, code: number): void {
    this.socket.write(encodeUint32Frame(FrameType.RST_STREAM, stream.id, code));
    this.forget(stream);
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    this.options.onDrain();
    this.failWaiting(notProcessed('Connection going away; call not sent'));
  }

  private protocolError(code: number, message: string): void {
    if (this.failed !== undefined) return;
    this.reader.stop();
    this.socket.end(encodeGoaway(0, code));
    this.fail(new ServingError(Code.INTERNAL, `HTTP/2 protocol error from the server: ${message}`));
  }

  private fail(error: ServingError): void {
    if (this.failed !== undefined) return;
    this.failed = error;
    clearTimeout(this.handshakeTimer);
    this.drain();
    this.reader.stop();
    this.failWaiting(error);
    const streams = [...this.streams.values()];
    for (const stream of streams) this.forget(stream);
    for (const stream of streams) stream.handler.onError(error);
    this.options.onClosed?.();
    if (!this.socket.destroyed) {
      // Give a GOAWAY written by close()/protocolError() a moment to leave, then drop the socket.
      setTimeout(() => this.socket.destroy(), 1000).unref();
    }
  }
}
