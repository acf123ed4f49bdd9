/**
 * Where a received PredictResponse should start in the buffer it is joined into, so that its
 * largest tensor payload (`tensor_content`, or a packed `float_val`/`double_val` run) lands on
 * an 8-byte boundary: the decoder then hands that payload out as a typed-array view instead of
 * copying it to align it (34 MB responses: one copy per response instead of two).
 *
 * Reads only tags and lengths, over the frames as they were received (no join needed first).
 */

/** Sequential reader over a list of byte chunks, from a given absolute position. */
class FrameCursor {
  private frame = 0;
  private at = 0;
  /** Position relative to where the cursor started. */
  pos = 0;

  constructor(private readonly frames: readonly Uint8Array[]) {}

  skip(n: number): void {
    let left = n;
    while (left > 0) {
      const f = this.frames[this.frame];
      if (f === undefined) throw new RangeError('past the end');
      const step = Math.min(left, f.byteLength - this.at);
      left -= step;
      this.at += step;
      this.pos += step;
      if (this.at === f.byteLength) {
        this.frame++;
        this.at = 0;
      }
    }
  }

  byte(): number {
    let f = this.frames[this.frame];
    while (f !== undefined && this.at >= f.byteLength) {
      this.frame++;
      this.at = 0;
      f = this.frames[this.frame];
    }
    if (f === undefined) throw new RangeError('past the end');
    this.pos++;
    return f[this.at++]!;
  }

  varint(): number {
    let result = 0;
    let shift = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.byte();
      result += (b & 0x7f) * shift;
      if (b < 0x80) return result;
      shift *= 128;
    }
    throw new RangeError('varint too long');
  }

  /** Skips the payload of a field with this wire type (the tag already read). */
  skipField(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.skip(8);
        return;
      case 2:
        this.skip(this.varint());
        return;
      case 5:
        this.skip(4);
        return;
      default:
        throw new RangeError(`wire type ${wireType}`);
    }
  }
}

/**
 * The offset in [0, 8) at which to put the first byte of the message so that its largest
 * TensorProto payload is 8-byte aligned; 0 when the message holds none or is malformed (the
 * decoder reports that). `frames` hold the message from byte `start` of the first frame on,
 * `length` bytes in all.
 */
export function predictResponsePadding(frames: readonly Uint8Array[], start: number, length: number): number {
  const cursor = new FrameCursor(frames);
  try {
    cursor.skip(start);
    cursor.pos = 0;
    let bestOffset = 0;
    let bestLength = 0;
    while (cursor.pos < length) {
      const tag = cursor.varint();
      if (tag !== ((1 << 3) | 2)) {
        cursor.skipField(tag & 7);
        continue;
      }
      // outputs: map<string, TensorProto> entry; the TensorProto is its field 2.
      const entryEnd = cursor.varint() + cursor.pos;
      while (cursor.pos < entryEnd) {
        const entryTag = cursor.varint();
        if (entryTag !== ((2 << 3) | 2)) {
          cursor.skipField(entryTag & 7);
          continue;
        }
        const tensorEnd = cursor.varint() + cursor.pos;
        while (cursor.pos < tensorEnd) {
          const tensorTag = cursor.varint();
          if ((tensorTag & 7) !== 2) {
            cursor.skipField(tensorTag & 7);
            continue;
          }
          const n = cursor.varint();
          if (n > bestLength) {
            bestLength = n;
            bestOffset = cursor.pos;
          }
          cursor.skip(n);
        }
      }
    }
    return (8 - (bestOffset % 8)) % 8;
  } catch (error) {
    if (error instanceof RangeError) return 0;
    throw error;
  }
}
