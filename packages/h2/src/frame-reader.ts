/**
 * Parses HTTP/2 frames straight off socket chunks. DATA payloads are passed on as views of
 * the chunks they arrived in (padding removed), piece by piece, so a large frame is never
 * buffered; every other frame is handed over whole (a view when it lies in one chunk).
 */
import { ErrorCode, FRAME_HEADER_BYTES, FrameType, Flag } from './frame.js';

/** What the reader tells its connection. Views passed in are valid only during the call. */
export interface FrameSink {
  /** A complete frame other than DATA. */
  onFrame(type: number, flags: number, streamId: number, payload: Buffer): void;
  /** A DATA frame begins; `length` is its whole payload (padding included, as flow control counts it). */
  onDataStart(streamId: number, flags: number, length: number): void;
  /** Bytes of the current DATA frame's data, in order. */
  onData(chunk: Buffer): void;
  /** The current DATA frame has ended. */
  onDataEnd(flags: number): void;
  /** A framing error: the connection must end with GOAWAY `code`. */
  onFrameError(code: number, message: string): void;
}

const enum State {
  Header,
  Payload,
  PadLength,
  Data,
  Padding,
  /** The payload of an unknown frame type too long to keep. */
  Skip,
}

/** Frames other than DATA, HEADERS and CONTINUATION longer than this are not buffered (GOAWAY debug data). */
const MAX_CONTROL_PAYLOAD = 16_384;

export class FrameReader {
  private state = State.Header;
  private readonly header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  private headerFill = 0;
  private length = 0;
  private type = 0;
  private flags = 0;
  private streamId = 0;
  /** Payload of a non-DATA frame that straddles chunks. */
  private payload: Buffer | undefined;
  private payloadFill = 0;
  /** DATA bytes (or padding bytes) of the current frame still to come. */
  private left = 0;
  private padding = 0;
  private stopped = false;

  /**
   * @param sink receives the frames.
   * @param maxFrameSize the SETTINGS_MAX_FRAME_SIZE this side advertised: longer frames are FRAME_SIZE_ERROR.
   * @param maxHeaderBlock the longest HEADERS or CONTINUATION payload kept (ENHANCE_YOUR_CALM
   *   above): frames other than DATA are buffered whole, so this bounds a connection's memory.
   */
  constructor(
    private readonly sink: FrameSink,
    private readonly maxFrameSize: number,
    private readonly maxHeaderBlock: number,
  ) {}

  /**
   * Data bytes of the current DATA frame still to come (padding excluded); 0 outside a DATA
   * frame's data. An owner that knows where they belong may read up to this many bytes from
   * its socket straight into place and push that view: it reaches onData as the same view.
   */
  get dataLeft(): number {
    return this.state === State.Data ? this.left : 0;
  }

  /** Stops parsing for good (the connection is ending). */
  stop(): void {
    this.stopped = true;
  }

  push(chunk: Buffer): void {
    let at = 0;
    const end = chunk.byteLength;
    while (at < end && !this.stopped) {
      switch (this.state) {
        case State.Header: {
          if (this.headerFill === 0 && end - at >= FRAME_HEADER_BYTES) {
            this.parseHeader(chunk, at);
            at += FRAME_HEADER_BYTES;
          } else {
            const take = Math.min(FRAME_HEADER_BYTES - this.headerFill, end - at);
            chunk.copy(this.header, this.headerFill, at, at + take);
            this.headerFill += take;
            at += take;
            if (this.headerFill < FRAME_HEADER_BYTES) return;
            this.headerFill = 0;
            this.parseHeader(this.header, 0);
          }
          if (!this.stopped) this.begin();
          break;
        }
        case State.Payload: {
          const need = this.length - this.payloadFill;
          if (this.payload === undefined && end - at >= need) {
            const payload = chunk.subarray(at, at + need);
            at += need;
            this.state = State.Header;
            this.sink.onFrame(this.type, this.flags, this.streamId, payload);
          } else {
            this.payload ??= Buffer.allocUnsafe(this.length);
            const take = Math.min(need, end - at);
            chunk.copy(this.payload, this.payloadFill, at, at + take);
            this.payloadFill += take;
            at += take;
            if (this.payloadFill === this.length) {
              const payload = this.payload;
              this.payload = undefined;
              this.payloadFill = 0;
              this.state = State.Header;
              this.sink.onFrame(this.type, this.flags, this.streamId, payload);
            }
          }
          break;
        }
        case State.PadLength: {
          this.padding = chunk[at]!;
          at++;
          if (this.padding >= this.length) {
            this.fail(ErrorCode.PROTOCOL_ERROR, 'DATA padding longer than the frame');
            return;
          }
          this.left = this.length - 1 - this.padding;
          this.state = this.left > 0 ? State.Data : this.padding > 0 ? State.Padding : State.Header;
          if (this.state === State.Header) this.sink.onDataEnd(this.flags);
          break;
        }
        case State.Data: {
          const take = Math.min(this.left, end - at);
          const piece = at === 0 && take === end ? chunk : chunk.subarray(at, at + take);
          at += take;
          this.left -= take;
          this.sink.onData(piece);
          if (this.left === 0) {
            if (this.padding > 0) {
              this.left = this.padding;
              this.state = State.Padding;
            } else {
              this.state = State.Header;
              this.sink.onDataEnd(this.flags);
            }
          }
          break;
        }
        case State.Skip: {
          const take = Math.min(this.left, end - at);
          at += take;
          this.left -= take;
          if (this.left === 0) {
            this.state = State.Header;
            this.sink.onFrame(this.type, this.flags, this.streamId, EMPTY);
          }
          break;
        }
        case State.Padding: {
          const take = Math.min(this.left, end - at);
          at += take;
          this.left -= take;
          if (this.left === 0) {
            this.state = State.Header;
            this.sink.onDataEnd(this.flags);
          }
          break;
        }
      }
    }
  }

  private parseHeader(from: Buffer, at: number): void {
    this.length = (from[at]! << 16) | (from[at + 1]! << 8) | from[at + 2]!;
    this.type = from[at + 3]!;
    this.flags = from[at + 4]!;
    this.streamId = from.readUInt32BE(at + 5) & 0x7fffffff;
  }

  /** Sets up the state for the frame whose header was just read. */
  private begin(): void {
    if (this.length > this.maxFrameSize) {
      this.fail(
        ErrorCode.FRAME_SIZE_ERROR,
        `Frame of ${this.length} bytes over the ${this.maxFrameSize} allowed`,
      );
      return;
    }
    if (this.type !== FrameType.DATA) {
      if (this.length > MAX_CONTROL_PAYLOAD) {
        if (this.type > FrameType.CONTINUATION) {
          // Unknown types are ignored (RFC 9113 4.1): their payload is skipped, not kept.
          this.left = this.length;
          this.state = State.Skip;
          return;
        }
        if (this.type === FrameType.HEADERS || this.type === FrameType.CONTINUATION) {
          if (this.length > this.maxHeaderBlock) {
            this.fail(ErrorCode.ENHANCE_YOUR_CALM, `Header block fragment of ${this.length} bytes`);
            return;
          }
        } else {
          this.fail(ErrorCode.FRAME_SIZE_ERROR, `Control frame of ${this.length} bytes`);
          return;
        }
      }
      if (this.length === 0) {
        this.sink.onFrame(this.type, this.flags, this.streamId, EMPTY);
      } else this.state = State.Payload;
      return;
    }
    this.sink.onDataStart(this.streamId, this.flags, this.length);
    if (this.stopped) return;
    if ((this.flags & Flag.PADDED) !== 0) {
      if (this.length === 0) {
        this.fail(ErrorCode.FRAME_SIZE_ERROR, 'Padded DATA frame without a pad length');
        return;
      }
      this.state = State.PadLength;
      return;
    }
    this.padding = 0;
    this.left = this.length;
    if (this.length === 0) this.sink.onDataEnd(this.flags);
    else this.state = State.Data;
  }

  private fail(code: number, message: string): void {
    this.stopped = true;
    this.sink.onFrameError(code, message);
  }
}

const EMPTY = Buffer.alloc(0);
