/**
 * The frames of this server's answers, built from the constant header blocks of
 * response-heads.ts: response headers, OK trailers, the one buffer of a small answer, and the
 * frames of a non-gRPC answer.
 */
import { FRAME_HEADER_BYTES, Flag, FrameType, writeFrameHeader } from '@visionserve/h2';
import { OK_TRAILERS, RESPONSE_HEAD } from './response-heads.js';

const WINDOW_UPDATE_BYTES = FRAME_HEADER_BYTES + 4;

/** A HEADERS frame of `block` (with END_HEADERS and `flags`), as a new buffer. */
export function headersFrame(streamId: number, block: Uint8Array, flags: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + block.byteLength);
  writeFrameHeader(out, 0, block.byteLength, FrameType.HEADERS, Flag.END_HEADERS | flags, streamId);
  out.set(block, FRAME_HEADER_BYTES);
  return out;
}

/** The response headers of a gRPC call. */
export function responseHeadFrame(streamId: number): Buffer {
  return headersFrame(streamId, RESPONSE_HEAD, 0);
}

/** The trailers of an OK call (END_STREAM). */
export function okTrailersFrame(streamId: number): Buffer {
  return headersFrame(streamId, OK_TRAILERS, Flag.END_STREAM);
}

/** An empty DATA frame with END_STREAM. */
export function endStreamFrame(streamId: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  writeFrameHeader(out, 0, 0, FrameType.DATA, Flag.END_STREAM, streamId);
  return out;
}

/**
 * A whole answer in one buffer: the connection's WINDOW_UPDATE of `windowBack` bytes (none if
 * 0), the response headers, one DATA frame of `total` bytes (`prefix`, then `chunks`) and the OK
 * trailers. The caller checked that `total` fits the windows and the peer's frame size.
 */
export function coalescedResponse(
  streamId: number,
  windowBack: number,
  prefix: Uint8Array,
  chunks: readonly Uint8Array[],
  total: number,
): Buffer {
  const lead = windowBack > 0 ? WINDOW_UPDATE_BYTES : 0;
  const headBytes = FRAME_HEADER_BYTES + RESPONSE_HEAD.byteLength;
  const trailerBytes = FRAME_HEADER_BYTES + OK_TRAILERS.byteLength;
  const out = Buffer.allocUnsafe(lead + headBytes + FRAME_HEADER_BYTES + total + trailerBytes);
  if (windowBack > 0) {
    writeFrameHeader(out, 0, 4, FrameType.WINDOW_UPDATE, 0, 0);
    out.writeUInt32BE(windowBack, FRAME_HEADER_BYTES);
  }
  writeFrameHeader(out, lead, RESPONSE_HEAD.byteLength, FrameType.HEADERS, Flag.END_HEADERS, streamId);
  out.set(RESPONSE_HEAD, lead + FRAME_HEADER_BYTES);
  let at = lead + headBytes;
  writeFrameHeader(out, at, total, FrameType.DATA, 0, streamId);
  at += FRAME_HEADER_BYTES;
  out.set(prefix, at);
  at += prefix.byteLength;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  const trailerFlags = Flag.END_HEADERS | Flag.END_STREAM;
  writeFrameHeader(out, at, OK_TRAILERS.byteLength, FrameType.HEADERS, trailerFlags, streamId);
  out.set(OK_TRAILERS, at + FRAME_HEADER_BYTES);
  return out;
}
