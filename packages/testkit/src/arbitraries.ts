/**
 * Generators shared by the decoder fuzz targets: tensors of every dtype, structure-aware
 * byte mutations of valid messages (truncation, bit flips, inserted huge varints, ...),
 * hostile text, and a tensor comparison that treats NaN and -0 exactly. Not a test file.
 */
import fc from 'fast-check';
import { DTYPES, type DType, type Tensor, allocate, elementCount, isStringData } from '@visionserve/protocol';

export const NUMERIC_DTYPES = [
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
] as const satisfies readonly DType[];

/** Every dtype the protocol knows (its own table). */
export const ALL_DTYPES: readonly DType[] = DTYPES;

/** A shape of rank 0-4 with at most `maxElements` elements (zero-size dims included). */
export function shapeArb(maxElements = 48, maxRank = 4): fc.Arbitrary<number[]> {
  return fc
    .array(fc.integer({ min: 0, max: 6 }), { maxLength: maxRank })
    .filter((shape) => elementCount(shape) <= maxElements);
}

/** Float32 values including NaN, infinities, -0, subnormals and the extremes. */
const float32Value = fc.oneof(
  fc.float({ noDefaultInfinity: false }),
  fc.constantFrom(NaN, Infinity, -Infinity, -0, 0, 1.401298464324817e-45, 3.4028234663852886e38, -1),
);
const float64Value = fc.oneof(
  fc.double(),
  fc.constantFrom(NaN, Infinity, -Infinity, -0, 5e-324, Number.MAX_VALUE, Number.MIN_VALUE),
);

/** Numeric values for `dtype` that the typed array stores exactly. */
function elementArb(dtype: DType): fc.Arbitrary<number | bigint | boolean | Uint8Array> {
  switch (dtype) {
    case 'float32':
      return float32Value;
    case 'float64':
      return float64Value;
    case 'float16':
    case 'bfloat16':
    case 'uint16':
      return fc.integer({ min: 0, max: 0xffff });
    case 'int8':
      return fc.integer({ min: -128, max: 127 });
    case 'int16':
      return fc.integer({ min: -32768, max: 32767 });
    case 'int32':
      return fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
    case 'uint8':
      return fc.integer({ min: 0, max: 255 });
    case 'uint32':
      return fc.integer({ min: 0, max: 2 ** 32 - 1 });
    case 'int64':
      return fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
    case 'uint64':
      return fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
    case 'bool':
      return fc.boolean();
    case 'string':
      return fc.uint8Array({ maxLength: 12 });
  }
}

export interface TensorArbOptions {
  readonly dtypes?: readonly DType[];
  readonly maxElements?: number;
  readonly maxRank?: number;
  /** Restricts element values (e.g. int64 within +-(2^53-1) for JSON). */
  readonly element?: (dtype: DType) => fc.Arbitrary<number | bigint | boolean | Uint8Array>;
}

/** A dense tensor: dtype from `dtypes`, a small shape, and values of that dtype. */
export function tensorArb(options: TensorArbOptions = {}): fc.Arbitrary<Tensor> {
  const dtypes = options.dtypes ?? ALL_DTYPES;
  return fc
    .tuple(fc.constantFrom(...dtypes), shapeArb(options.maxElements, options.maxRank))
    .chain(([dtype, shape]) =>
      fc
        .array((options.element ?? elementArb)(dtype), {
          minLength: elementCount(shape),
          maxLength: elementCount(shape),
        })
        .map((values) => buildTensor(dtype, shape, values)),
    );
}

export function buildTensor(
  dtype: DType,
  shape: readonly number[],
  values: readonly (number | bigint | boolean | Uint8Array)[],
): Tensor {
  if (dtype === 'string') return { dtype, shape, data: values as Uint8Array[] };
  const data = allocate(dtype, values.length);
  values.forEach((v, i) => {
    (data as unknown as unknown[])[i] = typeof v === 'boolean' ? (v ? 1 : 0) : v;
  });
  return { dtype, shape, data };
}

/** Alias names: plain identifiers mostly, odd unicode sometimes. */
export const aliasArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[a-z][a-z0-9_]{0,7}$/) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }) },
);

/** Same dtype and shape, and equal elements (NaN equals NaN, -0 differs from 0). */
export function sameTensor(a: Tensor, b: Tensor): string | undefined {
  if (a.dtype !== b.dtype) return `dtype ${a.dtype} != ${b.dtype}`;
  if (a.shape.length !== b.shape.length || a.shape.some((d, i) => d !== b.shape[i])) {
    return `shape [${a.shape.join(',')}] != [${b.shape.join(',')}]`;
  }
  if (isStringData(a.data) || isStringData(b.data)) {
    if (!isStringData(a.data) || !isStringData(b.data)) return 'string data mismatch';
    if (a.data.length !== b.data.length) return `string count ${a.data.length} != ${b.data.length}`;
    for (let i = 0; i < a.data.length; i++) {
      if (Buffer.compare(Buffer.from(a.data[i]!), Buffer.from(b.data[i]!)) !== 0)
        return `string ${i} differs`;
    }
    return undefined;
  }
  if (a.data.length !== b.data.length) return `length ${a.data.length} != ${b.data.length}`;
  for (let i = 0; i < a.data.length; i++) {
    const x: unknown = a.data[i];
    const y: unknown = b.data[i];
    if (!Object.is(x, y)) return `element ${i}: ${String(x)} != ${String(y)}`;
  }
  return undefined;
}

/** The chunks as one byte array. */
export const concat = (chunks: readonly Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(chunks));

/** One edit of a byte string. Positions are taken modulo the length at the time of the edit. */
export type Mutation =
  | { readonly kind: 'truncate'; readonly at: number }
  | { readonly kind: 'flip'; readonly at: number; readonly bit: number }
  | { readonly kind: 'set'; readonly at: number; readonly value: number }
  | { readonly kind: 'insert'; readonly at: number; readonly bytes: Uint8Array }
  | { readonly kind: 'delete'; readonly at: number; readonly length: number }
  | { readonly kind: 'duplicate'; readonly at: number; readonly length: number }
  | { readonly kind: 'hugeVarint'; readonly at: number; readonly bytes: Uint8Array };

/** Varints that declare huge lengths or values (or run past 10 bytes). */
const HUGE_VARINTS: readonly Uint8Array[] = [
  Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x0f),
  Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x07),
  Uint8Array.of(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01),
  Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
  Uint8Array.of(0xe8, 0x07),
  Uint8Array.of(0x7f),
];

export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ maxLength: 8 }) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 16 }) }),
  fc.record({
    kind: fc.constant('duplicate' as const),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 32 }),
  }),
  fc.record({
    kind: fc.constant('hugeVarint' as const),
    at: fc.nat(),
    bytes: fc.constantFrom(...HUGE_VARINTS),
  }),
);

/** Applies the edits in order. */
export function mutate(bytes: Uint8Array, mutations: readonly Mutation[]): Uint8Array {
  let out = Buffer.from(bytes);
  for (const m of mutations) {
    const n = out.length;
    const at = n === 0 ? 0 : m.at % (n + 1);
    switch (m.kind) {
      case 'truncate':
        out = out.subarray(0, at);
        break;
      case 'flip':
        if (n > 0) out[at % n]! ^= 1 << m.bit;
        break;
      case 'set':
        if (n > 0) out[at % n] = m.value;
        break;
      case 'insert':
      case 'hugeVarint':
        out = Buffer.concat([out.subarray(0, at), m.bytes, out.subarray(at)]);
        break;
      case 'delete':
        out = Buffer.concat([out.subarray(0, at), out.subarray(at + m.length)]);
        break;
      case 'duplicate':
        out = Buffer.concat([out.subarray(0, at + m.length), out.subarray(at)]);
        break;
    }
  }
  return new Uint8Array(out);
}

/** Bytes from a valid message with 0-4 edits, or (sometimes) raw random bytes. */
export function mutatedBytesArb(valid: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc.oneof(
    {
      weight: 8,
      arbitrary: fc.tuple(valid, fc.array(mutationArb, { maxLength: 4 })).map(([b, m]) => mutate(b, m)),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }) },
  );
}

/** Text edits: the byte mutations applied to the UTF-8 text, decoded back (lossy for broken sequences). */
export function mutatedTextArb(
  valid: fc.Arbitrary<string>,
  pieces: readonly string[] = [],
): fc.Arbitrary<string> {
  const splice = fc
    .tuple(valid, fc.nat(), fc.constantFrom(...(pieces.length > 0 ? pieces : [''])))
    .map(([text, at, piece]) => {
      const i = at % (text.length + 1);
      return text.slice(0, i) + piece + text.slice(i);
    });
  return fc.oneof(
    { weight: 3, arbitrary: valid },
    {
      weight: 4,
      arbitrary: fc
        .tuple(valid, fc.array(mutationArb, { minLength: 1, maxLength: 3 }))
        .map(([text, m]) => Buffer.from(mutate(Buffer.from(text, 'utf8'), m)).toString('utf8')),
    },
    { weight: 3, arbitrary: splice },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
  );
}

/** Strings meant to trip parsers: odd unicode, lone surrogates, NUL, BOM, very long runs. */
export const hostileStringArb: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '',
    '\u0000',
    '\uFEFF',
    '\uD800',
    '\uDC00x',
    '\u202E',
    '\u0000\uFDD0NaN',
    '𝕏',
    'é',
    '\r\n',
    '%00',
    '%',
    '%zz',
    '..',
    '/',
    '__proto__',
    'constructor',
    'x'.repeat(5000),
  ),
);
