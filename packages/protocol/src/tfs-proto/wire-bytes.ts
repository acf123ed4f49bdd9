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
