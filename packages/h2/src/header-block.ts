/**
 * Header-block assembly (RFC 9113 §4.3, §6.2, §6.10): a HEADERS frame's fragment (padding
 * and priority removed) and the CONTINUATION frames that follow it on the same stream, up to
 * a byte limit and a frame limit, as one block for the HPACK decoder.
 */
import { ErrorCode, Flag } from './frame.js';
import { H2ConnectionError } from './connection-core.js';

export interface HeaderBlock {
  readonly streamId: number;
  /** The HEADERS frame's flags (END_STREAM, PRIORITY, ...). */
  readonly flags: number;
  readonly block: Buffer;
  /** The HEADERS frame's priority made the stream depend on itself (a stream error). */
  readonly selfDependent: boolean;
}

interface Pending {
  readonly streamId: number;
  readonly flags: number;
  readonly selfDependent: boolean;
  readonly parts: Buffer[];
  bytes: number;
  frames: number;
}

export class HeaderBlockAssembler {
  private pending: Pending | undefined;

  constructor(
    /** Most bytes of one block (HEADERS + CONTINUATIONs). */
    private readonly maxBytes: number,
    /** Most CONTINUATION frames of one block. */
    private readonly maxContinuations = Number.POSITIVE_INFINITY,
    /** Called for each empty fragment that does not end its block (a flood limit may throw). */
    private readonly onEmptyFragment: () => void = () => undefined,
  ) {}

  /** A block is being continued: any frame but its CONTINUATION is a connection error. */
  get open(): boolean {
    return this.pending !== undefined;
  }

  /** A HEADERS frame: the whole block when it ends here (END_HEADERS), else undefined. */
  headers(flags: number, streamId: number, payload: Buffer): HeaderBlock | undefined {
    if (streamId === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS on stream 0');
    let from = 0;
    let to = payload.byteLength;
    if ((flags & Flag.PADDED) !== 0) {
      if (to < 1)
        throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'Padded HEADERS without a pad length');
      from = 1;
      to -= payload[0]!;
    }
    if ((flags & Flag.PRIORITY) !== 0) from += 5;
    if (from > to)
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS padding longer than the frame');
    const selfDependent =
      (flags & Flag.PRIORITY) !== 0 && (payload.readUInt32BE(from - 5) & 0x7fffffff) === streamId;
    const fragment = payload.subarray(from, to);
    if ((flags & Flag.END_HEADERS) !== 0) return { streamId, flags, block: fragment, selfDependent };
    if (fragment.byteLength === 0) this.onEmptyFragment();
    this.pending = {
      streamId,
      flags,
      selfDependent,
      parts: [Buffer.from(fragment)],
      bytes: fragment.byteLength,
      frames: 0,
    };
    return undefined;
  }

  /** A CONTINUATION frame: the whole block when it ends here, else undefined. */
  continuation(flags: number, streamId: number, payload: Buffer): HeaderBlock | undefined {
    const p = this.pending;
    if (p === undefined || p.streamId !== streamId) {
      throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'CONTINUATION without a header block');
    }
    if ((flags & Flag.END_HEADERS) === 0 && payload.byteLength === 0) this.onEmptyFragment();
    p.bytes += payload.byteLength;
    if (p.bytes > this.maxBytes)
      throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Header block too large');
    if (++p.frames > this.maxContinuations) {
      throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'Too many CONTINUATION frames');
    }
    if (payload.byteLength > 0) p.parts.push(Buffer.from(payload));
    if ((flags & Flag.END_HEADERS) === 0) return undefined;
    this.pending = undefined;
    return {
      streamId,
      flags: p.flags,
      block: Buffer.concat(p.parts, p.bytes),
      selfDependent: p.selfDependent,
    };
  }
}
