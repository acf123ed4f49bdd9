/**
 * The server side of one HTTP/2 connection (RFC 9113), as much of it as unary gRPC needs:
 * preface and SETTINGS exchange, streams opened by HEADERS (+ CONTINUATION), request DATA
 * passed on as it arrives, responses written as HEADERS + DATA + trailers in one socket
 * write where the windows allow (the rest queued until WINDOW_UPDATE), flow control both
 * ways, PING, RST_STREAM, GOAWAY, and limits on what a hostile peer can make it do.
 * Composed of @visionserve/h2's connection core (settings, windows, control frames), its frame
 * reader, HPACK decoder and request-head checks, and two units of its own: the read placement
 * (read-placement.ts: which buffer each socket read goes into) and the stall watch
 * (stall-watch.ts: streams and sockets a peer stopped reading).
 */
import type { Socket } from 'node:net';
import { Code } from '@visionserve/protocol';
import type { Logger } from '../../../util/logger.js';
import {
  CLIENT_PREFACE,
  DEFAULT_WINDOW,
  ErrorCode,
  FRAME_HEADER_BYTES,
  Flag,
  FrameType,
  INVALID_CONTENT_LENGTH,
  MAX_WINDOW,
  Setting,
  decodeRequestHead,
  encodeFrame,
  encodeGoaway,
  encodeHeaderFrames,
  encodeSettings,
  encodeUint32Frame,
  parseContentLength,
  writeFrameHeader,
  type ConnectionEndpoint,
  type FrameSink,
  type HeaderBlock,
  type RequestHead,
  ConnectionCore,
  FloodGuard,
  FrameReader,
  H2ConnectionError,
  HeaderBlockAssembler,
  readGoaway,
  readResetStream,
  type HpackDecoder,
  createHpackDecoder,
} from '@visionserve/h2';
import { ReadPlacement } from './read-placement.js';
import {
  coalescedResponse,
  endStreamFrame,
  headersFrame,
  okTrailersFrame,
  responseHeadFrame,
} from './response-frames.js';
import { trailersOnlyBlock } from './response-heads.js';
import { StallWatch } from './stall-watch.js';
import { H2Stream, type StreamConnection } from './stream.js';

export interface H2ConnectionOptions {
  /** Receive window per stream, bytes; the connection's is twice as large (CONNECTION_WINDOW_STREAMS). */
  readonly windowBytes: number;
  /**
   * A stream's receive window until its call is admitted (GrpcCallStream.openWindow), bytes;
   * default ADMISSION_WINDOW. Never more than windowBytes.
   */
  readonly admissionWindowBytes?: number | undefined;
  /** SETTINGS_MAX_FRAME_SIZE we advertise, bytes. */
  readonly maxFrameBytes: number;
  /** Told the number of open streams whenever it changes (connection-lifetime.ts). Default none. */
  readonly onActiveStreams?: ((count: number) => void) | undefined;
  /** SETTINGS_MAX_CONCURRENT_STREAMS we advertise and enforce (REFUSED_STREAM past it). */
  readonly maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE we advertise and enforce, bytes. */
  readonly maxHeaderListBytes: number;
  /**
   * A response whose queued DATA gets no window for this long is reset (RST_STREAM CANCEL)
   * and released; a socket whose written bytes make no progress (no write completes) for
   * this long is destroyed; a stream answered early whose client sends no more of its
   * message for this long is reset (NO_ERROR). In ms.
   */
  readonly sendStallMs: number;
  /**
   * A connection that has not sent its preface and SETTINGS this long after it opened, or
   * leaves a header block (HEADERS without END_HEADERS) unfinished this long, is closed, ms.
   */
  readonly headerTimeoutMs: number;
  /**
   * The socket was made with `onread` calling readBuffer() and onRead() (h2-server.ts): no
   * 'data' listener. Default false.
   */
  readonly directReads?: boolean | undefined;
  /** Called once the client's preface and first SETTINGS have arrived. Default none. */
  readonly onPreface?: (() => void) | undefined;
  /** Called synchronously for each new stream; the stream's DATA follows. */
  readonly onStream: (stream: H2Stream) => void;
  /** Called once when the socket has closed. */
  readonly onClose: () => void;
  readonly logger: Logger;
}

/** A response up to this many bytes (with its prefix) is copied into the one buffer written with its head and trailers. */
export const COALESCE_BYTES = 64 * 1024;
/** Most header block bytes (HEADERS + CONTINUATIONs) kept for one block, over the header list limit. */
const HEADER_BLOCK_SLACK = 16 * 1024;
/**
 * The connection receive window in stream windows. The connection's window goes back in front
 * of the next answer (takeWindowUpdate), and on its own once half of it arrived unanswered: with
 * twice the stream window, a request that fits its stream's window (600 KB in 1 MiB) costs no
 * write of its own, and the client still always has at least a stream window left. The window
 * bounds no memory here: bytes count as given back when read, kept or dropped.
 */
const CONNECTION_WINDOW_STREAMS = 2;
/**
 * A stream's receive window until its call is admitted (GrpcCallStream.openWindow), bytes: the
 * HTTP/2 default. A call refused on its message's head (an overloaded model, the byte budget)
 * costs the server at most this much of its message, not the whole of it: at 3x overload,
 * receiving 600 KB messages only to refuse them took most of the server's CPU.
 */
export const ADMISSION_WINDOW = DEFAULT_WINDOW;
/** Flood limits: events of a kind per window before GOAWAY ENHANCE_YOUR_CALM. */
const FLOOD_WINDOW_MS = 10_000;
const MAX_CONTROL_FRAMES = 10_000;
const MAX_EMPTY_FRAMES = 1000;
const MAX_CLIENT_RESETS = 1000;
const MAX_REFUSED_STREAMS = 1000;
/** Control-frame answers (PING and SETTINGS acks) queued on a socket that is not draining. */
const MAX_QUEUED_ACKS = 10_000;
/**
 * Bytes of answers waiting to reach the socket above which the connection stops reading
 * (no new requests) until they drain: a client that sends requests but never reads its
 * answers cannot make the server hold more than this (plus the answers it is writing).
 * Clients that read are never held up by it for long: their windows bound what they send.
 */
const WRITE_HIGH_WATER = 16 * 1024 * 1024;
/** Streams reset by this side whose late HEADERS are still recognised and ignored. */
const RESET_MEMORY = 1024;
/**
 * Request bytes read and dropped after an early answer (a refusal while the client is still
 * sending its message) before the stream is reset instead: see localDone.
 */
export const DRAIN_ANSWERED_BYTES = 16 * 1024 * 1024;
/** Default of H2ConnectionOptions.headerTimeoutMs, ms. */
export const DEFAULT_HEADER_TIMEOUT_MS = 10_000;
/** Default of H2ConnectionOptions.sendStallMs, ms. */
export const DEFAULT_SEND_STALL_MS = 30_000;
/** After a GOAWAY for an error, the socket is destroyed if the peer has not closed it by then, ms. */
const ERROR_CLOSE_MS = 1000;
/**
 * A graceful close announces itself first (GOAWAY naming the highest possible stream id, then a
 * PING); the final GOAWAY, naming the last stream processed, follows the PING's answer, or this
 * long without one, ms.
 */
const DRAIN_PING_MS = 1000;
/** Once this side has ended the socket, the peer has this long to close its side, ms. */
const LINGER_CLOSE_MS = 2000;
/** The largest stream id (2^31 - 1): a GOAWAY naming it refuses nothing the client has sent. */
const MAX_STREAM_ID = 0x7fffffff;

export class H2Connection implements FrameSink, StreamConnection {
  readonly socket: Socket;
  private readonly reader: FrameReader;
  private readonly decoder: HpackDecoder;
  private readonly streams = new Map<number, H2Stream>();
  /** Closed streams whose last socket writes have not completed (their bytes are still referenced). */
  readonly lingering = new Set<H2Stream>();
  /** Streams with response DATA waiting for window. */
  private readonly blocked = new Set<H2Stream>();
  /** Streams answered while the client still sends: their DATA is dropped until END_STREAM. */
  private readonly draining = new Set<H2Stream>();
  /** Runs when the client answers our keepalive PING. */
  private pingAck: (() => void) | undefined;
  private prefaceFill = 0;
  private gotSettings = false;
  /** The last stream id processed (opened or answered): what a GOAWAY names. */
  private lastStreamId = 0;
  /** The highest stream id any HEADERS used, refused ones included: streams up to it are not idle. */
  private highestStreamId = 0;
  /** Streams this side reset, the most recent RESET_MEMORY (sendReset). */
  private readonly resetIds = new Set<number>();
  /** Peer settings, the windows both ways, the control-frame flood limit (shared with the client). */
  private readonly core: ConnectionCore<H2Stream>;
  /** The stream the current DATA frame is for (undefined: a closed stream, its data dropped). */
  private dataStream: H2Stream | undefined;
  /** HEADERS + CONTINUATION assembly. */
  private readonly headerBlocks: HeaderBlockAssembler;
  /** The final GOAWAY went out (or the client sent one): new streams are refused. */
  private goawaySent = false;
  /** The first GOAWAY of a graceful close went out; the final one waits for the PING's answer. */
  private drainAnnounced = false;
  private drainTimer: NodeJS.Timeout | undefined;
  /** This side ended the socket: whatever the client still sends is read and dropped. */
  private ended = false;
  private closed = false;
  private queuedAcks = 0;
  /** Runs while the handshake or a header block is unfinished (headerTimeoutMs). */
  private headerTimer: NodeJS.Timeout | undefined;
  /** Streams blocked or answered early, and socket writes, that a peer stopped reading (stall-watch.ts). */
  private readonly stalls: StallWatch<H2Stream>;
  /** Reading is paused while more than WRITE_HIGH_WATER bytes wait to reach the socket. */
  private paused = false;
  /** With directReads: the buffer of each socket read (read-placement.ts). */
  private readonly placement = new ReadPlacement<H2Stream>();
  private readonly emptyFlood = new FloodGuard(MAX_EMPTY_FRAMES, FLOOD_WINDOW_MS);
  private readonly resetFlood = new FloodGuard(MAX_CLIENT_RESETS, FLOOD_WINDOW_MS);
  private readonly refusedFlood = new FloodGuard(MAX_REFUSED_STREAMS, FLOOD_WINDOW_MS);
  /**
   * Until the client acknowledges our SETTINGS it may not know SETTINGS_MAX_CONCURRENT_STREAMS
   * (RFC 9113 §6.5.2: unlimited until then): streams it opens past the limit are refused but
   * not counted as a flood, up to MAX_REFUSED_STREAMS per connection.
   */
  private settingsAcked = false;
  private refusedBeforeAck = 0;
  /** Writes are held until the end of this turn of the event loop (holdWrites). */
  private writesHeld = false;

  constructor(
    socket: Socket,
    private readonly options: H2ConnectionOptions,
  ) {
    this.socket = socket;
    this.core = new ConnectionCore<H2Stream>(this.coreEndpoint(), {
      receiveWindow: Math.min(CONNECTION_WINDOW_STREAMS * options.windowBytes, MAX_WINDOW),
      maxControlFrames: MAX_CONTROL_FRAMES,
      floodWindowMs: FLOOD_WINDOW_MS,
    });
    this.headerBlocks = new HeaderBlockAssembler(
      options.maxHeaderListBytes + HEADER_BLOCK_SLACK,
      Number.POSITIVE_INFINITY,
      () => {
        if (this.emptyFlood.hit())
          throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many empty frames');
      },
    );
    this.reader = new FrameReader(
      this,
      options.maxFrameBytes,
      options.maxHeaderListBytes + HEADER_BLOCK_SLACK,
    );
    this.decoder = createHpackDecoder({ maxHeaderListBytes: options.maxHeaderListBytes });
    this.stalls = new StallWatch<H2Stream>({
      sendStallMs: options.sendStallMs,
      socket,
      blocked: this.blocked,
      draining: this.draining,
      resetStream: (stream, code) => {
        this.resetStream(stream, code);
      },
      closed: () => this.closed,
      logger: options.logger,
    });
    this.writeOpening();
    if (options.directReads === true) socket.resume();
    else socket.on('data', this.onSocketData);
    this.armHeaderTimer();
    socket.on('error', (error) => {
      options.logger.debug('grpc connection error', { error });
    });
    socket.on('drain', this.onSocketDrain);
    socket.once('close', this.onSocketClose);
  }

  /** Our SETTINGS, and the connection window beyond the default. */
  private writeOpening(): void {
    const { socket, options } = this;
    socket.setNoDelay(true);
    socket.cork();
    socket.write(
      encodeSettings([
        [Setting.MAX_CONCURRENT_STREAMS, options.maxConcurrentStreams],
        [Setting.INITIAL_WINDOW_SIZE, this.openingWindow],
        [Setting.MAX_FRAME_SIZE, options.maxFrameBytes],
        [Setting.MAX_HEADER_LIST_SIZE, options.maxHeaderListBytes],
      ]),
    );
    if (this.core.receive.size > DEFAULT_WINDOW) {
      socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, 0, this.core.receive.size - DEFAULT_WINDOW));
    }
    socket.uncork();
  }

  private readonly onSocketDrain = (): void => {
    this.queuedAcks = 0;
    this.stalls.writeProgress();
    if (this.paused && !this.closed) {
      this.paused = false;
      this.socket.resume();
    }
  };

  private readonly onSocketClose = (): void => {
    this.closed = true;
    this.stalls.stop();
    if (this.headerTimer !== undefined) clearTimeout(this.headerTimer);
    if (this.drainTimer !== undefined) clearTimeout(this.drainTimer);
    this.reader.stop();
    // No read will come: the room the socket held is free.
    this.placement.release();
    for (const stream of this.streams.values()) {
      stream.closed = true;
      stream.pendingWrites = 0;
      stream.fireClose();
    }
    // The socket is gone: nothing references the streams' bytes any more.
    for (const stream of this.lingering) {
      stream.pendingWrites = 0;
      stream.fireClose();
    }
    this.streams.clear();
    this.blocked.clear();
    this.options.onClose();
  };

  /** A new stream's receive window: the admission window, or the whole window when that is smaller. */
  private get openingWindow(): number {
    return Math.min(this.options.admissionWindowBytes ?? ADMISSION_WINDOW, this.options.windowBytes);
  }

  /** Streams open now. */
  get openStreams(): number {
    return this.streams.size;
  }

  /**
   * Starts a graceful close in two steps, so that no call the client sends meanwhile is lost:
   * GOAWAY NO_ERROR naming the highest possible stream id and a PING (the client opens no more
   * streams, those already sent are still served); once the PING is answered (every stream
   * the client sent before it has arrived) or after DRAIN_PING_MS, GOAWAY NO_ERROR with the
   * last stream id processed. Open streams finish; the socket is ended when the last closes.
   */
  drain(): void {
    if (this.drainAnnounced || this.goawaySent || this.closed) return;
    this.drainAnnounced = true;
    this.socket.cork();
    this.socket.write(encodeGoaway(MAX_STREAM_ID, ErrorCode.NO_ERROR));
    this.socket.write(DRAIN_PING_FRAME);
    this.socket.uncork();
    this.drainTimer = setTimeout(() => {
      this.finishDrain();
    }, DRAIN_PING_MS);
    this.drainTimer.unref();
  }

  /** The final GOAWAY of a graceful close (drain). */
  private finishDrain(): void {
    if (this.drainTimer !== undefined) clearTimeout(this.drainTimer);
    this.drainTimer = undefined;
    if (this.goawaySent || this.closed) return;
    this.goawaySent = true;
    this.socket.write(encodeGoaway(this.lastStreamId, ErrorCode.NO_ERROR));
    if (this.streams.size === 0) this.endSocket();
  }

  /**
   * Ends this side of the socket after a graceful close, and keeps reading (and dropping) what
   * the client still sends until it closes its side: closing with unread bytes would make the
   * kernel reset the connection, and a reset can discard the GOAWAY before the client reads it.
   * No frame is parsed after this call; what the frame being handled writes still goes out (the
   * end waits for the current read to finish). The socket is destroyed LINGER_CLOSE_MS after
   * everything queued reached the kernel, if the client has not closed its side by then.
   */
  private endSocket(): void {
    if (this.ended || this.closed) return;
    this.ended = true;
    this.reader.stop();
    this.clearHeaderTimer();
    if (this.paused) {
      this.paused = false;
      this.socket.resume();
    }
    setImmediate(() => {
      if (this.closed) return;
      this.socket.once('finish', () => {
        setTimeout(() => {
          this.socket.destroy();
        }, LINGER_CLOSE_MS).unref();
      });
      this.socket.end();
    });
  }

  /**
   * Sends a keepalive PING; `onAck` runs when the client answers it. One at a time: a PING
   * while another is unanswered replaces its callback.
   */
  ping(onAck: () => void): void {
    if (this.closed || this.ended) return;
    this.pingAck = onAck;
    this.socket.write(encodeFrame(FrameType.PING, 0, 0, KEEPALIVE_PING));
  }

  /** Closes the socket now. */
  destroy(): void {
    this.socket.destroy();
  }

  /**
   * With directReads: the buffer the socket's next read goes into (ReadPlacement.next): inside a
   * DATA frame whose stream says where its bytes belong (H2Stream.into), that room, cut to the
   * frame's data still to come; otherwise the unused end of the connection's current slab.
   */
  readBuffer(): Uint8Array {
    const stream = this.closed || this.ended ? undefined : this.dataStream;
    return this.placement.next(stream, this.reader.dataLeft);
  }

  afterRoomReleased(stream: H2Stream, fn: () => void): void {
    this.placement.afterRoomReleased(stream, fn);
  }

  /** With directReads: `nread` bytes arrived at the start of `buffer` (from readBuffer). */
  onRead(nread: number, buffer: Uint8Array): void {
    this.onSocketData(this.placement.arrived(nread, buffer));
  }

  private readonly onSocketData = (chunk: Buffer): void => {
    if (this.closed || this.ended) return;
    this.holdWrites();
    try {
      const frames = this.prefaceFill < CLIENT_PREFACE.byteLength ? this.takePreface(chunk) : chunk;
      if (frames.byteLength === 0) return;
      this.reader.push(frames);
      // The connection window goes back with the next answer (takeWindowUpdate); on its own
      // once half of it arrived unanswered.
      if (this.core.receive.halfUsed && !this.closed && !this.ended) {
        this.socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, 0, this.core.receive.release()));
      }
    } catch (error) {
      this.fail(error);
    }
  };

  /**
   * Holds this connection's writes (cork) until the end of the event loop's turn: the frames
   * that the turn's reads and answers produce (answers, refusals, WINDOW_UPDATEs, resets) leave
   * in one socket write. A write per read or per answer was the largest part of the main
   * thread's time at 3x overload (the send syscall on loopback runs much of the receiver's
   * side too). The turn's other callbacks are all the delay it adds.
   */
  private holdWrites(): void {
    if (this.writesHeld) return;
    this.writesHeld = true;
    this.socket.cork();
    setImmediate(this.releaseWrites);
  }

  private readonly releaseWrites = (): void => {
    this.writesHeld = false;
    this.socket.uncork();
  };

  /** Checks the client preface's bytes at the start of `chunk`; the rest of the chunk. */
  private takePreface(chunk: Buffer): Buffer {
    const take = Math.min(CLIENT_PREFACE.byteLength - this.prefaceFill, chunk.byteLength);
    if (!chunk.subarray(0, take).equals(CLIENT_PREFACE.subarray(this.prefaceFill, this.prefaceFill + take))) {
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'Not an HTTP/2 client preface');
    }
    this.prefaceFill += take;
    return chunk.subarray(take);
  }

  private armHeaderTimer(): void {
    if (this.headerTimer !== undefined) clearTimeout(this.headerTimer);
    this.headerTimer = setTimeout(() => {
      this.headerTimer = undefined;
      if (this.gotSettings)
        this.connectionError(ErrorCode.PROTOCOL_ERROR, 'Header block not finished in time');
      else this.socket.destroy();
    }, this.options.headerTimeoutMs);
    this.headerTimer.unref();
  }

  private clearHeaderTimer(): void {
    if (this.headerTimer === undefined) return;
    clearTimeout(this.headerTimer);
    this.headerTimer = undefined;
  }

  /** Called when one of the streams' socket writes completes. */
  writeProgress(): void {
    this.stalls.writeProgress();
  }

  // --- FrameSink

  onFrameError(code: number, message: string): void {
    this.connectionError(code, message);
  }

  onDataStart(streamId: number, flags: number, length: number): void {
    this.checkDataFrame(streamId, flags, length);
    const stream = this.streams.get(streamId);
    this.dataStream = undefined;
    if (stream === undefined) this.dataOnClosedStream(streamId);
    else if (this.acceptData(stream, length)) this.dataStream = stream;
  }

  /** The connection errors a DATA frame can be; its bytes are taken from the connection window. */
  private checkDataFrame(streamId: number, flags: number, length: number): void {
    if (this.headerBlocks.open)
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA inside a header block');
    if (!this.gotSettings)
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'First frame is not SETTINGS');
    if (streamId === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on stream 0');
    // Every DATA byte is given back to the connection window, read or dropped.
    if (!this.core.receive.take(length)) {
      throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'DATA past the connection window');
    }
    if (length === 0 && (flags & Flag.END_STREAM) === 0 && this.emptyFlood.hit()) {
      throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many empty frames');
    }
  }

  /** DATA on a stream that is not open: idle (a connection error) or closed (its bytes dropped). */
  private dataOnClosedStream(streamId: number): void {
    if (streamId > this.highestStreamId)
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on an idle stream');
    // Closed. After this side's reset the peer may not have seen it yet: dropped. Otherwise the
    // peer had ended the stream, or reset it: STREAM_CLOSED (RFC 9113 §6.1), once per stream.
    if (!this.resetIds.has(streamId)) {
      if (this.refusedFlood.hit())
        throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many frames on closed streams');
      this.sendReset(streamId, ErrorCode.STREAM_CLOSED);
    }
  }

  /**
   * Counts a DATA frame of `length` bytes against an open stream: false when it ends the stream
   * (a stream error) or its bytes are to be dropped.
   */
  private acceptData(stream: H2Stream, length: number): boolean {
    if (stream.remoteEnded) {
      this.resetStream(stream, ErrorCode.STREAM_CLOSED);
      return false;
    }
    if (!stream.receive.take(length)) {
      this.resetStream(stream, ErrorCode.FLOW_CONTROL_ERROR);
      return false;
    }
    stream.receivedBytes += length;
    if (stream.declaredLength >= 0 && stream.receivedBytes > stream.declaredLength) {
      // More than content-length: malformed (RFC 9113 §8.1.1).
      this.resetStream(stream, ErrorCode.PROTOCOL_ERROR);
      return false;
    }
    if (stream.localEnded) {
      stream.droppedBytes += length;
      stream.drainProgressAt = Date.now();
      if (stream.droppedBytes > DRAIN_ANSWERED_BYTES) {
        this.resetStream(stream, ErrorCode.NO_ERROR);
        return false;
      }
    }
    return true;
  }

  onData(chunk: Buffer): void {
    this.dataStream?.dataListener?.(chunk);
  }

  onDataEnd(flags: number): void {
    const stream = this.dataStream;
    if (stream === undefined) return;
    this.dataStream = undefined;
    if ((flags & Flag.END_STREAM) !== 0) {
      this.endRemote(stream);
    } else if (!stream.windowOpen) {
      // Not admitted yet: the window is held. Answered meanwhile (refused; an answer still
      // queued for window gets here from localDone), a client that has used it all is stopped.
      if (stream.answered) this.resetOutOfWindow(stream);
    } else if (stream.receive.halfUsed && !stream.closed && !stream.holdWindow) {
      this.socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, stream.id, stream.receive.release()));
    }
  }

  onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    if (this.headerBlocks.open && type !== FrameType.CONTINUATION) {
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'Frame inside a header block');
    }
    if (!this.gotSettings && type !== FrameType.SETTINGS) {
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'First frame is not SETTINGS');
    }
    switch (type) {
      case FrameType.HEADERS:
        this.onHeaders(flags, streamId, payload);
        return;
      case FrameType.CONTINUATION:
        this.onContinuation(flags, streamId, payload);
        return;
      case FrameType.SETTINGS:
        this.onSettings(flags, streamId, payload);
        return;
      case FrameType.WINDOW_UPDATE:
        this.core.onWindowUpdate(streamId, payload);
        return;
      case FrameType.PING:
        if (this.core.onPing(flags, streamId, payload)) this.onPingAck(payload);
        return;
      case FrameType.RST_STREAM:
        this.onResetStream(streamId, payload);
        return;
      case FrameType.PRIORITY:
        this.onPriority(streamId, payload);
        return;
      case FrameType.GOAWAY:
        this.onGoaway(streamId, payload);
        return;
      case FrameType.PUSH_PROMISE:
        throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      default:
        // Unknown frame types are ignored (RFC 9113 4.1), but not without limit.
        if (this.emptyFlood.hit())
          throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many unknown frames');
    }
  }

  // --- frames

  /** A PING ACK: the answer to our keepalive PING (its payload is ours) or to the drain's. */
  private onPingAck(payload: Buffer): void {
    if (payload.equals(KEEPALIVE_PING)) {
      const ack = this.pingAck;
      this.pingAck = undefined;
      ack?.();
    } else if (this.drainAnnounced && payload.equals(DRAIN_PING)) {
      this.finishDrain();
    }
  }

  /** Priorities are not used, but a malformed PRIORITY is still a stream error (RFC 9113 §6.3, §5.3.1). */
  private onPriority(streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PRIORITY on stream 0');
    if (this.emptyFlood.hit())
      throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many PRIORITY frames');
    if (payload.byteLength !== 5) this.streamError(streamId, ErrorCode.FRAME_SIZE_ERROR);
    else if ((payload.readUInt32BE(0) & 0x7fffffff) === streamId)
      this.streamError(streamId, ErrorCode.PROTOCOL_ERROR);
  }

  /** The client opens no more streams; those open finish. */
  private onGoaway(streamId: number, payload: Buffer): void {
    readGoaway(streamId, payload);
    if (this.goawaySent) return;
    this.goawaySent = true;
    if (this.drainTimer !== undefined) clearTimeout(this.drainTimer);
    if (this.streams.size === 0) this.endSocket();
  }

  private onSettings(flags: number, streamId: number, payload: Buffer): void {
    // An ACK is what tells the client's streams over the limit from a flood (see refusedBeforeAck).
    if ((flags & Flag.ACK) !== 0 && streamId === 0) this.settingsAcked = true;
    if (!this.core.onSettings(flags, streamId, payload)) return;
    if (!this.gotSettings) {
      this.gotSettings = true;
      this.clearHeaderTimer();
      this.options.onPreface?.();
    }
    this.flushBlocked();
  }

  /** What the connection core needs of this connection. */
  private coreEndpoint(): ConnectionEndpoint<H2Stream> {
    return {
      windowStream: (id) => {
        const stream = this.streams.get(id);
        if (stream === undefined && id > this.highestStreamId)
          throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
        return stream;
      },
      openStreams: () => this.streams.values(),
      streamWindowError: (stream, code) => {
        this.resetStream(stream, code);
      },
      connectionWindowOpened: () => {
        this.flushBlocked();
      },
      streamWindowOpened: (stream) => {
        if (stream.queuedBytes > 0) this.flushStream(stream, undefined);
      },
      answeringControlFrame: () => {
        if (this.socket.writableNeedDrain && ++this.queuedAcks > MAX_QUEUED_ACKS) {
          throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Control frames not read by the peer');
        }
      },
      write: (bytes) => {
        this.socket.write(bytes);
      },
    };
  }

  private onResetStream(streamId: number, payload: Buffer): void {
    readResetStream(streamId, payload);
    const stream = this.streams.get(streamId);
    if (stream === undefined) {
      if (streamId > this.highestStreamId)
        throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
      return;
    }
    if (!stream.localEnded && this.resetFlood.hit()) {
      throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many streams reset by the client');
    }
    this.closeStream(stream);
  }

  private onHeaders(flags: number, streamId: number, payload: Buffer): void {
    const whole = this.headerBlocks.headers(flags, streamId, payload);
    if (whole === undefined) {
      this.armHeaderTimer();
      return;
    }
    this.onHeaderBlock(whole);
  }

  private onContinuation(flags: number, streamId: number, payload: Buffer): void {
    const whole = this.headerBlocks.continuation(flags, streamId, payload);
    if (whole === undefined) return;
    this.clearHeaderTimer();
    this.onHeaderBlock(whole);
  }

  private onHeaderBlock({ streamId, flags, block, selfDependent }: HeaderBlock): void {
    const head = this.decodeHead(block, selfDependent);
    const existing = this.streams.get(streamId);
    if (existing !== undefined) {
      this.onTrailers(existing, flags);
      return;
    }
    if (!this.takeStreamId(streamId)) return;
    const endStream = (flags & Flag.END_STREAM) !== 0;
    const declaredLength = this.admitRequest(streamId, endStream, head);
    if (declaredLength !== undefined) this.openStream(streamId, head.headers, endStream, declaredLength);
  }

  /** Decodes a header block (the decoder's table changes also for a stream that is then refused). */
  private decodeHead(block: Uint8Array, selfDependent: boolean): RequestHead {
    try {
      return decodeRequestHead(this.decoder, block, selfDependent);
    } catch {
      throw new H2ConnectionError(ErrorCode.COMPRESSION_ERROR, 'Malformed header block');
    }
  }

  /** Trailers from the client: they must end the stream. */
  private onTrailers(stream: H2Stream, flags: number): void {
    if ((flags & Flag.END_STREAM) === 0) this.resetStream(stream, ErrorCode.PROTOCOL_ERROR);
    else if (stream.remoteEnded) this.resetStream(stream, ErrorCode.STREAM_CLOSED);
    else this.endRemote(stream);
  }

  /**
   * A HEADERS frame's stream id, not of an open stream: false when nothing opens (a late HEADERS
   * on a stream this side reset; after GOAWAY, refused), a connection error when not a valid new id.
   */
  private takeStreamId(streamId: number): boolean {
    if (streamId % 2 === 0)
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'Even stream id from a client');
    // Trailers (or a late HEADERS) on a stream we reset: ignored, the block is decoded above.
    if (this.resetIds.has(streamId)) return false;
    if (streamId <= this.highestStreamId)
      throw new H2ConnectionError(
        ErrorCode.PROTOCOL_ERROR,
        'HEADERS with a stream id not above the last one',
      );
    this.highestStreamId = streamId;
    if (this.goawaySent) {
      this.sendReset(streamId, ErrorCode.REFUSED_STREAM);
      return false;
    }
    this.lastStreamId = streamId;
    return true;
  }

  /**
   * The request's content-length (-1: none) when a stream opens for it; undefined when it is
   * refused (malformed, too large, past the concurrency limit), counted against the flood limits.
   */
  private admitRequest(streamId: number, endStream: boolean, head: RequestHead): number | undefined {
    if (head.tooLarge || head.malformed || !head.complete) {
      if (this.refusedFlood.hit())
        throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many bad streams');
      if (head.tooLarge && !head.malformed) this.refuseTooLarge(streamId, endStream);
      else this.sendReset(streamId, ErrorCode.PROTOCOL_ERROR);
      return undefined;
    }
    if (this.streams.size >= this.options.maxConcurrentStreams) {
      const unaware = !this.settingsAcked && ++this.refusedBeforeAck <= MAX_REFUSED_STREAMS;
      if (!unaware && this.refusedFlood.hit())
        throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many refused streams');
      this.sendReset(streamId, ErrorCode.REFUSED_STREAM);
      return undefined;
    }
    const declaredLength = parseContentLength(head.headers['content-length']);
    if (declaredLength === INVALID_CONTENT_LENGTH || (endStream && declaredLength > 0)) {
      if (this.refusedFlood.hit())
        throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many bad streams');
      this.sendReset(streamId, ErrorCode.PROTOCOL_ERROR);
      return undefined;
    }
    return declaredLength;
  }

  /** Request metadata past the header list limit: a gRPC status the client can show, rather than a bare reset. */
  private refuseTooLarge(streamId: number, endStream: boolean): void {
    const block = trailersOnlyBlock(
      Code.RESOURCE_EXHAUSTED,
      `Request metadata larger than ${this.options.maxHeaderListBytes} bytes`,
    );
    this.socket.write(encodeHeaderFrames(streamId, block, this.core.peerMaxFrame, true));
    if (!endStream) this.sendReset(streamId, ErrorCode.NO_ERROR);
  }

  private openStream(
    streamId: number,
    headers: Record<string, string>,
    endStream: boolean,
    declaredLength: number,
  ): void {
    const stream = new H2Stream(
      this,
      streamId,
      headers,
      this.core.peerInitialWindow,
      this.openingWindow,
      endStream,
    );
    stream.windowOpen = this.openingWindow >= this.options.windowBytes;
    stream.declaredLength = declaredLength;
    this.streams.set(streamId, stream);
    this.options.onActiveStreams?.(this.streams.size);
    this.options.onStream(stream);
    if (endStream && !stream.closed) stream.endListener?.();
  }

  // --- stream life

  private endRemote(stream: H2Stream): void {
    if (stream.declaredLength >= 0 && stream.receivedBytes !== stream.declaredLength) {
      this.resetStream(stream, ErrorCode.PROTOCOL_ERROR);
      return;
    }
    stream.remoteEnded = true;
    const end = stream.endListener;
    stream.stopReading();
    end?.();
    if (stream.answered && !stream.closed) {
      this.closeStream(stream);
    }
  }

  /**
   * Writes RST_STREAM `code` and remembers the stream (the last RESET_MEMORY of them): frames
   * the peer sent before it saw the reset, trailers included, are then ignored (RFC 9113 §5.1).
   */
  private sendReset(streamId: number, code: number): void {
    this.socket.write(encodeUint32Frame(FrameType.RST_STREAM, streamId, code));
    this.resetIds.add(streamId);
    if (this.resetIds.size > RESET_MEMORY) {
      for (const id of this.resetIds) {
        this.resetIds.delete(id);
        break;
      }
    }
  }

  /** Ends a stream with RST_STREAM `code` (a stream error); the connection goes on. */
  private resetStream(stream: H2Stream, code: number): void {
    this.sendReset(stream.id, code);
    this.closeStream(stream);
  }

  /**
   * A stream error on `streamId` whatever its state: the stream, if open, is reset; otherwise a
   * bare RST_STREAM is written (not remembered, so a later HEADERS on an idle id still opens it).
   */
  private streamError(streamId: number, code: number): void {
    const stream = this.streams.get(streamId);
    if (stream !== undefined) this.resetStream(stream, code);
    else this.socket.write(encodeUint32Frame(FrameType.RST_STREAM, streamId, code));
  }

  private closeStream(stream: H2Stream): void {
    if (stream.closed) return;
    stream.closed = true;
    stream.stopReading();
    stream.queue = [];
    stream.queuedBytes = 0;
    stream.trailers = undefined;
    this.streams.delete(stream.id);
    this.options.onActiveStreams?.(this.streams.size);
    this.blocked.delete(stream);
    this.draining.delete(stream);
    if (this.dataStream === stream) this.dataStream = undefined;
    if (stream.pendingWrites === 0) stream.fireClose();
    else this.lingering.add(stream);
    if (this.goawaySent && this.streams.size === 0) this.endSocket();
  }

  /**
   * After this side's last frame is queued: the stream closes, or, while the client is still
   * sending (an early answer: a refusal on the message's length or head), once its END_STREAM
   * arrives. Until then its DATA is read and dropped, and its window given back, up to
   * DRAIN_ANSWERED_BYTES; past that it is reset (NO_ERROR). A stream answered before its window
   * was opened (refused on its head) is reset (NO_ERROR) once its client has used that window:
   * it could not finish its message without more.
   */
  private localDone(stream: H2Stream): void {
    if (this.resetOutOfWindow(stream)) return;
    if (!stream.remoteEnded) {
      stream.stopReading();
      stream.drainProgressAt = Date.now();
      this.draining.add(stream);
      this.stalls.arm();
      return;
    }
    this.closeStream(stream);
  }

  /**
   * A stream answered before its window was opened (refused on its head) whose client has used
   * all of that window cannot finish its message without window this side will not give: it is
   * reset (RST_STREAM NO_ERROR, RFC 9113 §8.1). The caller has sent the whole answer. Whether
   * it was reset.
   */
  private resetOutOfWindow(stream: H2Stream): boolean {
    if (stream.remoteEnded || stream.windowOpen || stream.closed || !stream.receive.exhausted) return false;
    this.resetStream(stream, ErrorCode.NO_ERROR);
    return true;
  }

  // --- writing

  private writeFor(stream: H2Stream, chunk: Uint8Array): void {
    stream.pendingWrites++;
    this.socket.write(chunk, stream.written);
  }

  /**
   * The connection window received since the last WINDOW_UPDATE, now counted as given back:
   * the caller writes the update in front of an answer (the socket is corked, so both leave
   * in one write). On its own it would cost a write, and on loopback a wakeup of the client,
   * per request. 0 when there is nothing to give back or the connection is ending.
   */
  private takeWindowUpdate(): number {
    if (this.core.receive.unacked === 0 || this.ended || this.closed) return 0;
    return this.core.receive.release();
  }

  /** Writes the connection's WINDOW_UPDATE, if any, ahead of the frames about to be written. */
  private writeWindowUpdate(): void {
    const n = this.takeWindowUpdate();
    if (n > 0) this.socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, 0, n));
  }

  /** A HEADERS frame with END_STREAM: a trailers-only or non-gRPC answer. */
  sendFinalHeaders(stream: H2Stream, block: Uint8Array): void {
    stream.localEnded = true;
    const out = this.finalHeaderFrames(stream.id, block);
    this.holdWrites();
    this.writeWindowUpdate();
    this.writeFor(stream, out);
    this.localDone(stream);
  }

  /** A non-gRPC answer: `head` (status, content-type), then `body` as DATA, then an empty DATA ending the stream. */
  sendPlain(stream: H2Stream, head: Uint8Array, body: Uint8Array): void {
    stream.localEnded = true;
    this.queueAnswer(stream, body.byteLength > 0 ? [body] : [], body.byteLength, endStreamFrame(stream.id));
    this.flushStream(stream, headersFrame(stream.id, head, 0));
  }

  /**
   * A header block with END_STREAM as one buffer: a HEADERS frame, followed by CONTINUATION
   * frames when the block is larger than the peer's SETTINGS_MAX_FRAME_SIZE.
   */
  private finalHeaderFrames(streamId: number, block: Uint8Array): Buffer {
    return encodeHeaderFrames(streamId, block, this.core.peerMaxFrame, true);
  }

  /**
   * Response headers, one DATA message (prefix + chunks) and OK trailers: one buffer in one
   * write when the message is small and fits the windows, otherwise queued and sent as the
   * windows allow (views of the chunks).
   */
  sendResponse(stream: H2Stream, prefix: Uint8Array, chunks: readonly Uint8Array[], length: number): void {
    stream.localEnded = true;
    const total = prefix.byteLength + length;
    if (
      total <= COALESCE_BYTES &&
      total <= this.core.peerMaxFrame &&
      total <= this.core.sendWindow &&
      total <= stream.sendWindow &&
      this.blocked.size === 0
    ) {
      const out = coalescedResponse(stream.id, this.takeWindowUpdate(), prefix, chunks, total);
      this.core.sendWindow -= total;
      stream.sendWindow -= total;
      this.holdWrites();
      this.writeFor(stream, out);
      this.localDone(stream);
      this.checkHighWater();
      return;
    }
    const queue: Uint8Array[] = [prefix];
    for (const c of chunks) if (c.byteLength > 0) queue.push(c);
    this.queueAnswer(stream, queue, total, okTrailersFrame(stream.id));
    this.flushStream(stream, responseHeadFrame(stream.id));
  }

  /** Makes `queue` (`bytes` in all) the stream's DATA to send, `trailers` the frame after it. */
  private queueAnswer(stream: H2Stream, queue: Uint8Array[], bytes: number, trailers: Buffer): void {
    stream.queue = queue;
    stream.queueIndex = 0;
    stream.queueOffset = 0;
    stream.queuedBytes = bytes;
    stream.trailers = trailers;
  }

  /** A streaming call's response headers (its messages and trailers follow). */
  sendStreamHeaders(stream: H2Stream): void {
    const head = responseHeadFrame(stream.id);
    this.socket.cork();
    this.writeWindowUpdate();
    this.writeFor(stream, head);
    this.socket.uncork();
  }

  /** One more message of a streaming call, queued behind the unsent ones and sent as the windows allow. */
  sendStreamData(stream: H2Stream, chunks: readonly Uint8Array[], length: number): void {
    if (stream.queuedBytes === 0) {
      stream.queue = [];
      stream.queueIndex = 0;
      stream.queueOffset = 0;
    }
    for (const c of chunks) if (c.byteLength > 0) stream.queue.push(c);
    stream.queuedBytes += length;
    this.flushStream(stream, undefined);
  }

  /** A streaming call's trailers, sent once its queued messages are. */
  sendStreamTrailers(stream: H2Stream, block: Uint8Array): void {
    stream.localEnded = true;
    stream.trailers = this.finalHeaderFrames(stream.id, block);
    this.flushStream(stream, undefined);
  }

  /**
   * The stream's call is admitted: its window grows from the admission window to the whole one,
   * in one WINDOW_UPDATE (none when the `needed` bytes still to come fit in what is left of it).
   */
  openStreamWindow(stream: H2Stream, needed: number): void {
    if (stream.windowOpen) return;
    stream.windowOpen = true;
    if (stream.closed || stream.remoteEnded || stream.localEnded || this.ended || this.closed) return;
    if (needed <= stream.receive.size - stream.receive.unacked) return;
    const more = this.options.windowBytes - stream.receive.size;
    stream.receive.grow(more);
    const increment = more + (stream.holdWindow ? 0 : stream.receive.release());
    this.socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, stream.id, increment));
  }

  /** Gives the stream window received while the call's reader was paused back to the client. */
  releaseStreamWindow(stream: H2Stream): void {
    if (stream.receive.unacked === 0 || stream.remoteEnded || this.ended || this.closed) return;
    this.socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, stream.id, stream.receive.release()));
  }

  /** Sends what the windows allow of a stream's queued DATA (then its trailers); `lead` goes first. */
  private flushStream(stream: H2Stream, lead: Buffer | undefined): void {
    const out: Uint8Array[] = [];
    if (lead !== undefined) out.push(lead);
    this.takeDataFrames(stream, out);
    let done = false;
    if (stream.queuedBytes === 0 && stream.trailers !== undefined) {
      out.push(stream.trailers);
      stream.trailers = undefined;
      stream.queue = [];
      done = true;
      this.blocked.delete(stream);
    } else if (stream.queuedBytes > 0) {
      this.blocked.add(stream);
      if (stream.sendProgressAt === 0) stream.sendProgressAt = Date.now();
      this.stalls.arm();
    } else {
      // A streaming call's messages so far are all sent; it waits for its next one.
      this.blocked.delete(stream);
    }
    if (out.length === 0) return;
    this.holdWrites();
    this.writeWindowUpdate();
    const last = out.length - 1;
    for (let i = 0; i < last; i++) this.socket.write(out[i]!);
    this.writeFor(stream, out[last]!);
    if (done) this.localDone(stream);
    this.checkHighWater();
  }

  /**
   * Appends to `out` the DATA frames (headers, then views of the queued chunks) that the windows
   * and the peer's frame size allow of the stream's queue, and takes them from the windows.
   */
  private takeDataFrames(stream: H2Stream, out: Uint8Array[]): void {
    const { queue } = stream;
    let index = stream.queueIndex;
    let offset = stream.queueOffset;
    while (stream.queuedBytes > 0) {
      const n = Math.min(this.core.peerMaxFrame, this.core.sendWindow, stream.sendWindow, stream.queuedBytes);
      if (n <= 0) break;
      const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
      writeFrameHeader(header, 0, n, FrameType.DATA, 0, stream.id);
      out.push(header);
      let need = n;
      while (need > 0) {
        const c = queue[index]!;
        const available = c.byteLength - offset;
        if (available <= need) {
          out.push(offset === 0 ? c : c.subarray(offset));
          need -= available;
          index++;
          offset = 0;
        } else {
          out.push(c.subarray(offset, offset + need));
          offset += need;
          need = 0;
        }
      }
      this.core.sendWindow -= n;
      stream.sendWindow -= n;
      stream.queuedBytes -= n;
      stream.sendProgressAt = 0;
      this.stalls.sent(n);
    }
    stream.queueIndex = index;
    stream.queueOffset = offset;
  }

  private checkHighWater(): void {
    if (this.socket.writableLength > 0) this.stalls.arm();
    if (!this.paused && this.socket.writableLength > WRITE_HIGH_WATER) {
      this.paused = true;
      this.socket.pause();
    }
  }

  private flushBlocked(): void {
    for (const stream of this.blocked) {
      if (this.core.sendWindow <= 0) return;
      this.flushStream(stream, undefined);
    }
  }

  // --- errors

  private fail(error: unknown): void {
    if (error instanceof H2ConnectionError) this.connectionError(error.code, error.message);
    else {
      this.options.logger.error('grpc connection failed', { error });
      this.connectionError(ErrorCode.INTERNAL_ERROR, 'Internal error');
    }
  }

  /** A connection error: GOAWAY `code`, every stream closed, the socket ended. */
  private connectionError(code: number, message: string): void {
    if (this.closed) return;
    if (this.ended) {
      // Ending already: no more frames; a fault now only closes the socket.
      this.socket.destroy();
      return;
    }
    this.options.logger.debug('grpc connection error', { code, message });
    this.reader.stop();
    this.closed = true;
    this.socket.write(encodeGoaway(this.lastStreamId, code));
    this.socket.end();
    for (const stream of [...this.streams.values()]) this.closeStream(stream);
    setTimeout(() => this.socket.destroy(), ERROR_CLOSE_MS).unref();
  }
}

/** The payload of this server's keepalive PINGs. */
const KEEPALIVE_PING = Buffer.from('vs-alive', 'latin1');
/** The payload of the PING that follows a graceful close's first GOAWAY (drain). */
const DRAIN_PING = Buffer.from('vs-drain', 'latin1');
const DRAIN_PING_FRAME = encodeFrame(FrameType.PING, 0, 0, DRAIN_PING);
