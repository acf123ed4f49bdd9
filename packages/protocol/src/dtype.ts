/**
 * Element types of a visionserve tensor and their storage.
 *
 * Every numeric dtype is stored in the typed array named by {@link TypedArrayFor};
 * `bool` is stored one byte per element (0 or 1), `float16` and `bfloat16` as raw
 * 16-bit patterns, `string` as an array of byte strings.
 */
export type DType =
  | 'float32'
  | 'float64'
  | 'float16'
  | 'bfloat16'
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'uint8'
  | 'uint16'
  | 'uint32'
  | 'uint64'
  | 'bool'
  | 'string';

export const DTYPES: readonly DType[] = [
  'float32',
  'float64',
  'float16',
  'bfloat16',
  'int8',
  'int16',
  'int32',
  'int64',
  'uint8',
  'uint16',
  'uint32',
  'uint64',
  'bool',
  'string',
];

export type NumericDType = Exclude<DType, 'string'>;

export type NumericArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array;

export interface TypedArrayFor {
  float32: Float32Array;
  float64: Float64Array;
  float16: Uint16Array;
  bfloat16: Uint16Array;
  int8: Int8Array;
  int16: Int16Array;
  int32: Int32Array;
  int64: BigInt64Array;
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  bool: Uint8Array;
}

type TypedArrayConstructor = {
  new (length: number): NumericArray;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): NumericArray;
  readonly BYTES_PER_ELEMENT: number;
};

const CONSTRUCTORS: Record<NumericDType, TypedArrayConstructor> = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

export function isDType(value: string): value is DType {
  return (DTYPES as readonly string[]).includes(value);
}

/** Bytes per element; 0 for `string` (variable length). */
export function bytesPerElement(dtype: DType): number {
  return dtype === 'string' ? 0 : CONSTRUCTORS[dtype].BYTES_PER_ELEMENT;
}

/** True for dtypes stored as BigInt64Array / BigUint64Array. */
export function isBigIntDType(dtype: DType): dtype is 'int64' | 'uint64' {
  return dtype === 'int64' || dtype === 'uint64';
}

/** A zero-filled array of `length` elements of `dtype`. */
export function allocate<D extends NumericDType>(dtype: D, length: number): TypedArrayFor[D] {
  return new CONSTRUCTORS[dtype](length) as TypedArrayFor[D];
}

/**
 * Interprets little-endian bytes as elements of `dtype`. Returns a view when the
 * bytes are aligned for the element size, otherwise an aligned copy (protobuf
 * `bytes` fields and binary HTTP bodies are often not aligned). Bool bytes other
 * than 0 and 1 are true: they come back as 1 in a copy, so that every wire form of
 * a bool tensor (bool_val, JSON, raw bytes) gives the runtime the same 0/1 values.
 */
export function fromBytes<D extends NumericDType>(dtype: D, bytes: Uint8Array): TypedArrayFor[D] {
  if (dtype === 'bool' && bytes.some((b) => b > 1)) {
    return Uint8Array.from(bytes, (b) => (b === 0 ? 0 : 1)) as TypedArrayFor[D];
  }
  const ctor = CONSTRUCTORS[dtype];
  const size = ctor.BYTES_PER_ELEMENT;
  const length = bytes.byteLength / size;
  if (bytes.byteOffset % size === 0) {
    return new ctor(bytes.buffer, bytes.byteOffset, length) as TypedArrayFor[D];
  }
  const copy = new ctor(length);
  new Uint8Array(copy.buffer).set(bytes);
  return copy as TypedArrayFor[D];
}

/** The bytes of a typed array, as a view (no copy). Platform is little-endian. */
export function toBytes(data: NumericArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

const bf16Scratch = new Float32Array(1);
const bf16Bits = new Uint32Array(bf16Scratch.buffer);

/** The number a bfloat16 bit pattern holds. */
export function bfloat16ToNumber(bits: number): number {
  bf16Bits[0] = bits << 16;
  return bf16Scratch[0]!;
}

/** The number an IEEE half-precision bit pattern holds. */
export function halfToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

const f32Scratch = new Float32Array(1);
const f32Bits = new Uint32Array(f32Scratch.buffer);

/**
 * Corrects the 16-bit pattern `bits` found by rounding through float32 (which can round
 * twice) to the pattern truly nearest to `value`, ties to the even pattern.
 */
function nearest16(value: number, bits: number, toNumber: (b: number) => number): number {
  if (!Number.isFinite(value)) return bits;
  const here = toNumber(bits);
  if (!Number.isFinite(here) || here === value) return bits;
  // The other candidate lies on the far side of `value`: one step away from zero or towards it.
  const away = here < value === value > 0;
  const other = away ? bits + 1 : bits - 1;
  if ((other & 0x7fff) === 0x7fff || (bits & 0x7fff) === 0) return bits;
  const there = toNumber(other);
  if (!Number.isFinite(there)) return bits;
  const d1 = Math.abs(value - here);
  const d2 = Math.abs(value - there);
  if (d2 < d1 || (d2 === d1 && (other & 1) === 0)) return other;
  return bits;
}

/** Rounds to the nearest integer, ties to even (x >= 0). */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest > 0.5) return floor + 1;
  if (rest < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/**
 * The half-precision bit pattern nearest to `value` (round to nearest, ties to even, as
 * numpy's float16 conversion does): overflow gives infinity, tiny values subnormals or
 * zero, NaN a quiet NaN. Rounds once from the double, never through float32.
 */
export function numberToHalf(value: number): number {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const a = Math.abs(value);
  // 65520 is halfway between the largest half (65504) and 2^16: it and above round to infinity.
  if (a >= 65520) return sign | 0x7c00;
  if (a < 2 ** -14) {
    // Subnormal: units of 2^-24; 1024 units is the smallest normal, which the encoding absorbs.
    return sign | roundHalfEven(a * 2 ** 24);
  }
  let exponent = Math.floor(Math.log2(a));
  // log2 can be off by one next to powers of two.
  if (2 ** exponent > a) exponent--;
  else if (2 ** (exponent + 1) <= a) exponent++;
  let mantissa = roundHalfEven((a / 2 ** exponent - 1) * 1024);
  if (mantissa === 1024) {
    mantissa = 0;
    exponent++;
  }
  if (exponent > 15) return sign | 0x7c00;
  return sign | ((exponent + 15) << 10) | mantissa;
}

/** The bfloat16 bit pattern nearest to a number (round to nearest, ties to even; NaN stays NaN). */
export function numberToBfloat16(value: number): number {
  return nearest16(value, bfloat16ViaFloat32(value), bfloat16ToNumber);
}

function bfloat16ViaFloat32(value: number): number {
  f32Scratch[0] = value;
  const x = f32Bits[0]!;
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return ((x >>> 16) | 0x40) & 0xffff;
  const rounded = x + 0x7fff + ((x >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}

const DT_NAMES: Record<DType, string> = {
  float32: 'DT_FLOAT',
  float64: 'DT_DOUBLE',
  float16: 'DT_HALF',
  bfloat16: 'DT_BFLOAT16',
  int8: 'DT_INT8',
  int16: 'DT_INT16',
  int32: 'DT_INT32',
  int64: 'DT_INT64',
  uint8: 'DT_UINT8',
  uint16: 'DT_UINT16',
  uint32: 'DT_UINT32',
  uint64: 'DT_UINT64',
  bool: 'DT_BOOL',
  string: 'DT_STRING',
};

/** TensorFlow's DataType enum name for a dtype (as printed in proto3 JSON), e.g. "DT_FLOAT". */
export function tfDataTypeName(dtype: DType): string {
  return DT_NAMES[dtype];
}
