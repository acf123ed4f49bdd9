/**
 * Where a gRPC response message should start in the buffer it is received into, so that its
 * largest tensor payload lands on an 8-byte boundary and decodes as a typed-array view
 * instead of being copied again to align it (UnaryCallOptions.responsePadding).
 *
 * Reads only tags and lengths, over the frames as received (no join needed first), and skips
 * payloads without needing their bytes; given only the first part of a message it answers as
 * soon as no later field could hold a larger payload, undefined before that.
 */

/** What to do with a length-delimited field at a nesting depth (0 = the message itself). */
export type PlacementRule = (depth: number, fieldNumber: number) => 'descend' | 'candidate' | 'skip';

/** Thrown when the walk needs bytes that have not arrived yet. */
class NeedMore extends Error {}
/** Thrown for bytes that are not a well-formed message (the decoder reports them). */
class Malformed extends Error {}

/** Reads bytes at absolute positions from received frames; positions past them throw NeedMore. */
class FrameCursor {
  private frame = 0;
  /** Absolute position of the current frame's first byte (relative to the message start). */
  private frameStart: number;
  pos = 0;

  constructor(
    private readonly frames: readonly Uint8Array[],
    start: number,
    private readonly length: number,
  ) {
    this.frameStart = -start;
  }

  byte(): number {
    if (this.pos >= this.length) throw new Malformed();
    let f = this.frames[this.frame];
    while (f !== undefined && this.pos >= this.frameStart + f.byteLength) {
      this.frameStart += f.byteLength;
      f = this.frames[++this.frame];
    }
    if (f === undefined) throw new NeedMore();
    return f[this.pos++ - this.frameStart]!;
  }

  varint(): number {
    let result = 0;
    let shift = 1;
    for (let i = 0; i < 8; i++) {
      const b = this.byte();
      result += (b & 0x7f) * shift;
      if (b < 0x80) return result;
      shift *= 128;
    }
    // Lengths and tags that matter here fit in 7 bytes; anything longer is not a message we place.
    throw new Malformed();
  }
}

/**
 * The offset in [0, 8) for the first byte of a message of `length` bytes, of which `frames`
 * hold the first part from byte `start` of the first frame on; undefined when the frames
 * received so far cannot tell yet. Malformed or unplaceable messages get 0.
 */
export function placeResponse(
  rule: PlacementRule,
  frames: readonly Uint8Array[],
  start: number,
  length: number,
): number | undefined {
  const cursor = new FrameCursor(frames, start, length);
  let bestOffset = 0;
  let bestLength = 0;
  const walk = (end: number, depth: number): boolean => {
    while (cursor.pos < end) {
      const tag = cursor.varint();
      const field = Math.floor(tag / 8);
      switch (tag & 7) {
        case 0:
          cursor.varint();
          break;
        case 1:
          cursor.pos += 8;
          break;
        case 5:
          cursor.pos += 4;
          break;
        case 2: {
          const n = cursor.varint();
          const payloadEnd = cursor.pos + n;
          if (field === 0 || payloadEnd > end) throw new Malformed();
          const what = rule(depth, field);
          if (what === 'descend') {
            if (walk(payloadEnd, depth + 1)) return true;
          } else {
            if (what === 'candidate' && n > bestLength) {
              bestLength = n;
              bestOffset = cursor.pos;
            }
            cursor.pos = payloadEnd;
          }
          break;
        }
        default:
          throw new Malformed();
      }
      if (cursor.pos > end) throw new Malformed();
      // No field in the rest of the message can hold a larger payload: decided.
      if (bestLength > 0 && length - cursor.pos <= bestLength) return true;
    }
    return false;
  };
  try {
    walk(length, 0);
  } catch (error) {
    if (error instanceof NeedMore) return undefined;
    if (error instanceof Malformed) return 0;
    throw error;
  }
  return (8 - (bestOffset % 8)) % 8;
}

/** TF Serving PredictResponse: outputs (1) map entries, their value (2), every length-delimited TensorProto field. */
const PREDICT_RESPONSE_RULE: PlacementRule = (depth, field) =>
  depth === 2
    ? 'candidate'
    : (depth === 0 && field === 1) || (depth === 1 && field === 2)
      ? 'descend'
      : 'skip';

/** KServe ModelInferResponse: raw_output_contents (6). */
const MODEL_INFER_RESPONSE_RULE: PlacementRule = (depth, field) =>
  depth === 0 && field === 6 ? 'candidate' : 'skip';

/** Placement of a PredictResponse: its largest `tensor_content` (or packed typed run) aligned. */
export const predictResponsePadding = (
  frames: readonly Uint8Array[],
  start: number,
  length: number,
): number | undefined => placeResponse(PREDICT_RESPONSE_RULE, frames, start, length);

/** Placement of a ModelInferResponse: its largest `raw_output_contents` entry aligned. */
export const modelInferResponsePadding = (
  frames: readonly Uint8Array[],
  start: number,
  length: number,
): number | undefined => placeResponse(MODEL_INFER_RESPONSE_RULE, frames, start, length);
