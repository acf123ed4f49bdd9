/**
 * The part of an HTTP/2 connection (RFC 9113) that both endpoints share, defined once and
 * composed by the server's H2Connection and the client's H2ClientConnection: the peer's
 * SETTINGS (checked and applied), the send windows of the connection and its streams and the
 * WINDOW_UPDATE rules, the receive window of the connection, the control-frame flood limit,
 * PING answers, and the checks of RST_STREAM and GOAWAY frames. Streams, what a frame means
 * for a call, and all writing beyond acks stay with the endpoint (ConnectionEndpoint).
 */
import {
  DEFAULT_FRAME_SIZE,
  DEFAULT_WINDOW,
  ErrorCode,
  Flag,
  FrameType,
  MAX_FRAME_SIZE_LIMIT,
  MAX_WINDOW,
  Setting,
  encodeFrame,
} from './frame.js';
import { FloodGuard } from './flood-guard.js';
import { ReceiveWindow } from './receive-window.js';

/** A protocol violation that ends the connection with GOAWAY `code`. */
export class H2ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** What the core reads and changes of an endpoint's stream. */
export interface SendStream {
  /** Send window the peer gave this stream, bytes (may go negative after a SETTINGS change). */
  sendWindow: number;
}

/** The endpoint a ConnectionCore works for. */
export interface ConnectionEndpoint<S extends SendStream> {
  /**
   * The open stream `id` for a WINDOW_UPDATE; undefined for a closed one (the frame is then
   * ignored). An endpoint that tells idle streams from closed ones throws for an idle one.
   */
  windowStream(id: number): S | undefined;
  /** The open streams (an INITIAL_WINDOW_SIZE change moves their windows). */
  openStreams(): Iterable<S>;
  /** A WINDOW_UPDATE broke the stream's rules: the stream ends with RST_STREAM `code`. */
  streamWindowError(stream: S, code: number): void;
  /** The connection's send window grew: send what waited for it. */
  connectionWindowOpened(): void;
  /** A stream's send window grew: send what it has waiting. */
  streamWindowOpened(stream: S): void;
  /** A control frame (PING, SETTINGS) is about to be answered; may throw (a peer that does not read). */
  answeringControlFrame?(): void;
  write(bytes: Uint8Array): void;
}

export interface ConnectionCoreOptions {
  /** Our receive window for the whole connection, bytes (what we advertised). */
  readonly receiveWindow: number;
  /** Control frames answered per `floodWindowMs` at most: more end the connection (ENHANCE_YOUR_CALM). */
  readonly maxControlFrames: number;
  readonly floodWindowMs: number;
}

const SETTINGS_ACK = encodeFrame(FrameType.SETTINGS, Flag.ACK, 0);

export class ConnectionCore<S extends SendStream> {
  /** The peer's SETTINGS_MAX_FRAME_SIZE. */
  peerMaxFrame = DEFAULT_FRAME_SIZE;
  /** The peer's SETTINGS_INITIAL_WINDOW_SIZE: a new stream's send window. */
  peerInitialWindow = DEFAULT_WINDOW;
  /** The peer's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says). */
  peerMaxStreams = Number.POSITIVE_INFINITY;
  /** The connection's send window (the peer's). */
  sendWindow = DEFAULT_WINDOW;
  /** The connection's receive window (ours). */
  readonly receive: ReceiveWindow;
  private readonly controlFlood: FloodGuard;

  constructor(
    private readonly endpoint: ConnectionEndpoint<S>,
    options: ConnectionCoreOptions,
  ) {
    this.receive = new ReceiveWindow(options.receiveWindow);
    this.controlFlood = new FloodGuard(options.maxControlFrames, options.floodWindowMs);
  }

  /**
   * A SETTINGS frame: checked, applied, counted and acknowledged. Returns false for an ACK
   * (nothing applied), true for the peer's settings.
   */
  onSettings(flags: number, streamId: number, payload: Buffer): boolean {
    if (streamId !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if ((flags & Flag.ACK) !== 0) {
      if (payload.byteLength !== 0)
        throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      return false;
    }
    if (payload.byteLength % 6 !== 0)
      throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS length not a multiple of 6');
    /** The frame's last INITIAL_WINDOW_SIZE, applied once after the loop (a frame may hold thousands). */
    let initialWindow = -1;
    for (let at = 0; at < payload.byteLength; at += 6) {
      const id = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      switch (id) {
        case Setting.ENABLE_PUSH:
          if (value > 1)
            throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS_ENABLE_PUSH not 0 or 1');
          break;
        case Setting.INITIAL_WINDOW_SIZE:
          if (value > MAX_WINDOW)
            throw new H2ConnectionError(
              ErrorCode.FLOW_CONTROL_ERROR,
              'SETTINGS_INITIAL_WINDOW_SIZE too large',
            );
          initialWindow = value;
          break;
        case Setting.MAX_FRAME_SIZE:
          if (value < DEFAULT_FRAME_SIZE || value > MAX_FRAME_SIZE_LIMIT) {
            throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS_MAX_FRAME_SIZE out of range');
          }
          this.peerMaxFrame = value;
          break;
        case Setting.MAX_CONCURRENT_STREAMS:
          this.peerMaxStreams = value;
          break;
        default:
        // HEADER_TABLE_SIZE: our encoder uses no dynamic table; MAX_HEADER_LIST_SIZE: our
        // header blocks are small; unknown ones are ignored.
      }
    }
    if (initialWindow >= 0) this.applyInitialWindow(initialWindow);
    this.controlFrame();
    this.endpoint.write(SETTINGS_ACK);
    return true;
  }

  private applyInitialWindow(value: number): void {
    if (value === this.peerInitialWindow) return;
    const delta = value - this.peerInitialWindow;
    this.peerInitialWindow = value;
    for (const stream of this.endpoint.openStreams()) {
      stream.sendWindow += delta;
      if (stream.sendWindow > MAX_WINDOW) {
        throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'Stream window past 2^31-1');
      }
    }
  }

  /** A WINDOW_UPDATE frame (RFC 9113 §6.9). */
  onWindowUpdate(streamId: number, payload: Buffer): void {
    if (payload.byteLength !== 4)
      throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'WINDOW_UPDATE not 4 bytes');
    const increment = payload.readUInt32BE(0) & 0x7fffffff;
    if (streamId === 0) {
      if (increment === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
      this.sendWindow += increment;
      if (this.sendWindow > MAX_WINDOW)
        throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'Connection window past 2^31-1');
      this.endpoint.connectionWindowOpened();
      return;
    }
    const stream = this.endpoint.windowStream(streamId);
    if (stream === undefined) return;
    if (increment === 0) {
      this.endpoint.streamWindowError(stream, ErrorCode.PROTOCOL_ERROR);
      return;
    }
    if (stream.sendWindow + increment > MAX_WINDOW) {
      this.endpoint.streamWindowError(stream, ErrorCode.FLOW_CONTROL_ERROR);
      return;
    }
    stream.sendWindow += increment;
    this.endpoint.streamWindowOpened(stream);
  }

  /** A PING frame: a ping is answered (counted as a control frame); true for an ACK, which the endpoint handles. */
  onPing(flags: number, streamId: number, payload: Buffer): boolean {
    if (streamId !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PING on a stream');
    if (payload.byteLength !== 8) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'PING not 8 bytes');
    if ((flags & Flag.ACK) !== 0) return true;
    this.controlFrame();
    this.endpoint.write(encodeFrame(FrameType.PING, Flag.ACK, 0, payload));
    return false;
  }

  /** Counts a control frame we answer: a flood of them ends the connection (ENHANCE_YOUR_CALM). */
  controlFrame(): void {
    if (this.controlFlood.hit())
      throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many control frames');
    this.endpoint.answeringControlFrame?.();
  }
}

/** The error code of an RST_STREAM frame, checked (RFC 9113 §6.4). */
export function readResetStream(streamId: number, payload: Buffer): number {
  if (streamId === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
  if (payload.byteLength !== 4)
    throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'RST_STREAM not 4 bytes');
  return payload.readUInt32BE(0);
}

/** The last stream id and error code of a GOAWAY frame, checked (RFC 9113 §6.8). */
export function readGoaway(streamId: number, payload: Buffer): { lastStreamId: number; code: number } {
  if (streamId !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'GOAWAY on a stream');
  if (payload.byteLength < 8)
    throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'GOAWAY shorter than 8 bytes');
  return { lastStreamId: payload.readUInt32BE(0) & 0x7fffffff, code: payload.readUInt32BE(4) };
}
