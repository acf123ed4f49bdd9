/**
 * One HTTP/2 stream of this server's own HTTP/2 (a unary gRPC call), as the gRPC server
 * sees it (GrpcCallStream). Its state and send queue are kept here; frames are read and
 * written by its connection.
 */
import { ReceiveWindow } from '@visionserve/h2';
import type { IncomingHttpHeaders } from 'node:http2';
import type { GrpcCallStream } from '../call-stream.js';
import { NOT_GRPC_BODY, UNSUPPORTED_MEDIA_TYPE, trailersBlock, trailersOnlyBlock } from './response-heads.js';

/** What a stream needs of its connection (H2Connection). */
export interface StreamConnection {
  readonly socket: unknown;
  /** Closed streams whose last socket writes are pending; a stream leaves it when it fires close. */
  readonly lingering: Set<H2Stream>;
  sendResponse(stream: H2Stream, prefix: Uint8Array, chunks: readonly Uint8Array[], length: number): void;
  sendFinalHeaders(stream: H2Stream, block: Uint8Array): void;
  sendPlain(stream: H2Stream, head: Uint8Array, body: Uint8Array): void;
  /** Streaming calls: the response headers; one more message; the trailers after the queued DATA. */
  sendStreamHeaders(stream: H2Stream): void;
  sendStreamData(stream: H2Stream, chunks: readonly Uint8Array[], length: number): void;
  sendStreamTrailers(stream: H2Stream, block: Uint8Array): void;
  /** The call is admitted: the stream's window grows to the whole window (when `needed` bytes do not fit). */
  openStreamWindow(stream: H2Stream, needed: number): void;
  /** Gives back the stream window held while its reader was paused. */
  releaseStreamWindow(stream: H2Stream): void;
  /** Called when a socket write of a stream completes. */
  writeProgress(): void;
  /** Runs `fn` once the socket's next read no longer goes into the stream's room (at once if not). */
  afterRoomReleased(stream: H2Stream, fn: () => void): void;
}

export class H2Stream implements GrpcCallStream {
  /** Bytes this side may still send on the stream (peer's window). */
  sendWindow: number;
  /** Our receive window for the stream: what the peer may still send before we give window back. */
  readonly receive: ReceiveWindow;
  /** The peer has ended its side (END_STREAM). */
  remoteEnded: boolean;
  /** This side's last frame (END_STREAM) has been queued. */
  localEnded = false;
  /** Taken out of its connection: reset, done, or the connection is gone. */
  closed = false;
  /** The request's content-length, or -1 when it has none. */
  declaredLength = -1;
  /** Request DATA bytes received (counted against declaredLength). */
  receivedBytes = 0;
  /** Request DATA read and dropped after this side answered while the client was still sending. */
  droppedBytes = 0;
  /** While answered and the client still sends: when its last DATA (or the answer) came (Date.now()). */
  drainProgressAt = 0;
  /** Response DATA not yet sent for lack of window: views of the response's chunks. */
  queue: Uint8Array[] = [];
  /** Index of the first queued chunk not wholly sent, and bytes of it already sent. */
  queueIndex = 0;
  queueOffset = 0;
  queuedBytes = 0;
  /** When the queued DATA last got window (Date.now()); 0 while it is sending. */
  sendProgressAt = 0;
  /** The trailers frame to send once the queue is empty. */
  trailers: Buffer | undefined;
  /** Socket writes of this stream whose callback has not run: their bytes are still referenced. */
  pendingWrites = 0;
  dataListener: ((chunk: Buffer) => void) | undefined;
  endListener: (() => void) | undefined;
  /**
   * The stream's receive window is the whole window: its call was admitted (openWindow), or the
   * admission window is not smaller. Until then received bytes are not given back.
   */
  windowOpen = false;
  /** The reader is paused: the stream window received is not given back (GrpcCallStream.pauseReading). */
  holdWindow = false;
  /** Response headers of a streaming call have been queued. */
  headersSent = false;
  /** Where the next DATA bytes belong, for reads straight into place (GrpcCallStream.read). */
  into: (() => Uint8Array | undefined) | undefined;
  private closeListener: (() => void) | undefined;
  private closeFired = false;

  constructor(
    private readonly connection: StreamConnection,
    readonly id: number,
    readonly headers: IncomingHttpHeaders,
    sendWindow: number,
    recvWindow: number,
    remoteEnded: boolean,
  ) {
    this.sendWindow = sendWindow;
    this.receive = new ReceiveWindow(recvWindow);
    this.remoteEnded = remoteEnded;
  }

  get socket(): unknown {
    return this.connection.socket;
  }

  /** This side's whole answer, trailers included, has been handed to the socket. */
  get answered(): boolean {
    return this.localEnded && this.queuedBytes === 0 && this.trailers === undefined;
  }

  get writable(): boolean {
    return !this.localEnded && !this.closed;
  }

  read(onData: (chunk: Buffer) => void, onEnd: () => void, into?: () => Uint8Array | undefined): void {
    this.dataListener = onData;
    this.endListener = onEnd;
    this.into = into;
  }

  afterRoomReleased(fn: () => void): void {
    this.connection.afterRoomReleased(this, fn);
  }

  stopReading(): void {
    this.dataListener = undefined;
    this.endListener = undefined;
    this.into = undefined;
  }

  respond(prefix: Uint8Array, chunks: readonly Uint8Array[], length: number): void {
    if (this.writable) this.connection.sendResponse(this, prefix, chunks, length);
  }

  respondStatus(code: number, message: string): void {
    if (this.writable) this.connection.sendFinalHeaders(this, trailersOnlyBlock(code, message));
  }

  sendHeaders(): void {
    if (this.writable && !this.headersSent) {
      this.headersSent = true;
      this.connection.sendStreamHeaders(this);
    }
  }

  sendMessage(prefix: Uint8Array, chunks: readonly Uint8Array[], length: number): void {
    if (this.writable) this.connection.sendStreamData(this, [prefix, ...chunks], prefix.byteLength + length);
  }

  endWithStatus(code: number, message: string): void {
    if (this.writable) this.connection.sendStreamTrailers(this, trailersBlock(code, message));
  }

  openWindow(needed = Number.POSITIVE_INFINITY): void {
    this.connection.openStreamWindow(this, needed);
  }

  pauseReading(): void {
    this.holdWindow = true;
  }

  resumeReading(): void {
    if (!this.holdWindow) return;
    this.holdWindow = false;
    if (!this.closed) this.connection.releaseStreamWindow(this);
  }

  respondUnsupported(): void {
    if (this.writable) this.connection.sendPlain(this, UNSUPPORTED_MEDIA_TYPE, NOT_GRPC_BODY);
  }

  onClose(listener: () => void): void {
    this.closeListener = listener;
  }

  /** The callback of this stream's socket writes. */
  readonly written = (): void => {
    this.connection.writeProgress();
    if (--this.pendingWrites === 0 && this.closed) this.fireClose();
  };

  /** Tells the listener once, when closed and no write of it is pending. */
  fireClose(): void {
    if (this.closeFired) return;
    this.closeFired = true;
    this.queue = [];
    this.connection.lingering.delete(this);
    this.closeListener?.();
  }
}
