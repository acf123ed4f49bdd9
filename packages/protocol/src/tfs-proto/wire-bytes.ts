/** Hand-written protobuf wire fragments shared by the codecs' fast paths. */

/** Field numbers of TensorProto's packed float and int32 fields. */
export const TENSOR_FLOAT_VAL_FIELD = 5;
export const TENSOR_DOUBLE_VAL_FIELD = 6;
export const TENSOR_INT_VAL_FIELD = 7;

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

/** The typed arrays whose values TensorProto carries as `int_val` (int32 varints). */
export type Int32Family = Int8Array | Int16Array | Int32Array | Uint8Array | Uint16Array;

/**
 * The packed `int_val` payload of `values`: one int32 varint each, a negative value as ten
 * bytes (sign-extended to 64 bits), as protobuf writes int32. Sized in a first pass.
 */
export function packInt32Varints(values: Int32Family): Uint8Array {
  if (values instanceof Uint8Array) return packUint8Varints(values);
  let size = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    size += v < 0 ? 10 : v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (let i = 0; i < values.length; i++) {
    let v = values[i]!;
    if (v >= 0) {
      while (v >= 0x80) {
        out[at++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      out[at++] = v;
      continue;
    }
    // Two's complement over 64 bits: the low 32 bits, then 32 one bits.
    let low = v >>> 0;
    for (let k = 0; k < 4; k++) {
      out[at++] = (low & 0x7f) | 0x80;
      low >>>= 7;
    }
    out[at++] = low | 0xf0; // the low word's last 4 bits and 3 one bits of the high word
    out[at++] = 0xff;
    out[at++] = 0xff;
    out[at++] = 0xff;
    out[at++] = 0xff;
    out[at++] = 0x01;
  }
  return out;
}

/**
 * packInt32Varints for uint8 (images), without branches on the value: a byte below 0x80 is
 * its own varint, one above is itself (its top bit is the continuation bit) followed by 0x01.
 */
function packUint8Varints(values: Uint8Array): Uint8Array {
  let size = values.length;
  for (let i = 0; i < values.length; i++) size += values[i]! >>> 7;
  // One spare byte: each value writes the 0x01 after it, which the next one overwrites when unused.
  const out = new Uint8Array(size + 1);
  let at = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    out[at] = v;
    out[at + 1] = 1;
    at += 1 + (v >>> 7);
  }
  return out.subarray(0, size);
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

/** Wire types of the protobuf encoding. */
export const VARINT = 0;
export const LENGTH_DELIMITED = 2;

/** Appends the varint encoding of a non-negative integer below 2^53 to `out`. */
export function pushVarint(out: number[], value: number): void {
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}

/** Appends an int64 varint (negative values as 10-byte two's complement, as protobuf writes them). */
export function pushInt64(out: number[], value: number | bigint): void {
  if (typeof value === 'number' && value >= 0 && Number.isSafeInteger(value)) {
    pushVarint(out, value);
    return;
  }
  let v = BigInt.asUintN(64, BigInt(value));
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
}

/** Appends a field's tag. */
export function pushTag(out: number[], field: number, wireType: number): void {
  pushVarint(out, field * 8 + wireType);
}

/** Appends a length-delimited field holding `bytes`. */
export function pushBytesField(out: number[], field: number, bytes: ArrayLike<number>): void {
  pushTag(out, field, LENGTH_DELIMITED);
  pushVarint(out, bytes.length);
  for (let i = 0; i < bytes.length; i++) out.push(bytes[i]!);
}

const utf8 = new TextEncoder();

/** Appends a proto3 string field (nothing for the empty string, its default). */
export function pushStringField(out: number[], field: number, value: string): void {
  if (value !== '') pushBytesField(out, field, utf8.encode(value));
}
