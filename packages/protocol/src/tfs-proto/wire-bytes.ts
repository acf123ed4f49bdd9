/** Hand-written protobuf wire fragments shared by the codecs' fast paths. */

/** Field numbers of TensorProto's packed float fields. */
export const TENSOR_FLOAT_VAL_FIELD = 5;
export const TENSOR_DOUBLE_VAL_FIELD = 6;

/** The varint encoding of a non-negative integer below 2^53. */
export function varintBytes(value: number): number[] {
  const out: number[] = [];
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return out;
}

/** A varint at `pos` of `buf`: [value, next position], or undefined when truncated or too long. */
export function readVarint(buf: Uint8Array, pos: number): [number, number] | undefined {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 8 && pos < buf.length; i++) {
    const b = buf[pos++]!;
    value += (b & 0x7f) * scale;
    if (b < 0x80) return [value, pos];
    scale *= 128;
  }
  return undefined;
}

/** Skips one field's value; undefined when it runs past the bytes seen or the wire type is invalid. */
export function skipValue(buf: Uint8Array, pos: number, wireType: number): number | undefined {
  switch (wireType) {
    case 0:
      return readVarint(buf, pos)?.[1];
    case 1:
      return pos + 8;
    case 2: {
      const len = readVarint(buf, pos);
      return len === undefined ? undefined : len[1] + len[0];
    }
    case 5:
      return pos + 4;
    default:
      return undefined;
  }
}
