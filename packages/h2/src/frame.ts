/**
 * HTTP/2 frame facts (RFC 9113 section 6) and the frame header writer: the constants every
 * other file of the HTTP/2 transports (the server's and the client's) shares.
 */

/** Frame types (RFC 9113 6). */
export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

/** Frame flags (END_STREAM and ACK share a bit). */
export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

/** Error codes of RST_STREAM and GOAWAY (RFC 9113 7). */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

/** SETTINGS parameters (RFC 9113 6.5.2). */
export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

export const FRAME_HEADER_BYTES = 9;
/** The protocol's SETTINGS_MAX_FRAME_SIZE and window defaults. */
export const DEFAULT_FRAME_SIZE = 16_384;
export const DEFAULT_WINDOW = 65_535;
export const MAX_FRAME_SIZE_LIMIT = 16_777_215;
export const MAX_WINDOW = 2 ** 31 - 1;

/** The client connection preface (RFC 9113 3.4). */
export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Writes a 9-byte frame header at `at` of `out`. */
export function writeFrameHeader(
  out: Uint8Array,
  at: number,
  length: number,
  type: number,
  flags: number,
  streamId: number,
): void {
  out[at] = (length >>> 16) & 0xff;
  out[at + 1] = (length >>> 8) & 0xff;
  out[at + 2] = length & 0xff;
  out[at + 3] = type;
  out[at + 4] = flags;
  out[at + 5] = (streamId >>> 24) & 0x7f;
  out[at + 6] = (streamId >>> 16) & 0xff;
  out[at + 7] = (streamId >>> 8) & 0xff;
  out[at + 8] = streamId & 0xff;
}

/** One whole frame as a new buffer. */
export function encodeFrame(type: number, flags: number, streamId: number, payload?: Uint8Array): Buffer {
  const length = payload?.byteLength ?? 0;
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + length);
  writeFrameHeader(out, 0, length, type, flags, streamId);
  if (payload !== undefined) out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** A frame whose payload is one 32-bit value (RST_STREAM, WINDOW_UPDATE). */
export function encodeUint32Frame(type: number, streamId: number, value: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4);
  writeFrameHeader(out, 0, 4, type, 0, streamId);
  out.writeUInt32BE(value >>> 0, FRAME_HEADER_BYTES);
  return out;
}

/** A GOAWAY frame: the last stream id processed and an error code. */
export function encodeGoaway(lastStreamId: number, code: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 8);
  writeFrameHeader(out, 0, 8, FrameType.GOAWAY, 0, 0);
  out.writeUInt32BE(lastStreamId & 0x7fffffff, FRAME_HEADER_BYTES);
  out.writeUInt32BE(code >>> 0, FRAME_HEADER_BYTES + 4);
  return out;
}

/** A SETTINGS frame of (id, value) pairs. */
export function encodeSettings(settings: readonly (readonly [number, number])[]): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 6 * settings.length);
  writeFrameHeader(out, 0, 6 * settings.length, FrameType.SETTINGS, 0, 0);
  let at = FRAME_HEADER_BYTES;
  for (const [id, value] of settings) {
    out.writeUInt16BE(id, at);
    out.writeUInt32BE(value >>> 0, at + 2);
    at += 6;
  }
  return out;
}

/**
 * A header block as one buffer of frames: a HEADERS frame (END_STREAM if `endStream`), followed
 * by CONTINUATION frames when the block is larger than `maxFrame` (the peer's
 * SETTINGS_MAX_FRAME_SIZE); the last frame carries END_HEADERS. An empty block is one frame.
 */
export function encodeHeaderFrames(
  streamId: number,
  block: Uint8Array,
  maxFrame: number,
  endStream: boolean,
): Buffer {
  const frames = Math.max(1, Math.ceil(block.byteLength / maxFrame));
  const out = Buffer.allocUnsafe(frames * FRAME_HEADER_BYTES + block.byteLength);
  let at = 0;
  for (let i = 0, from = 0; i < frames; i++, from += maxFrame) {
    const length = Math.min(maxFrame, block.byteLength - from);
    const last = i === frames - 1 ? Flag.END_HEADERS : 0;
    const first = i === 0;
    const type = first ? FrameType.HEADERS : FrameType.CONTINUATION;
    writeFrameHeader(out, at, length, type, last | (first && endStream ? Flag.END_STREAM : 0), streamId);
    out.set(block.subarray(from, from + length), at + FRAME_HEADER_BYTES);
    at += FRAME_HEADER_BYTES + length;
  }
  return out;
}
