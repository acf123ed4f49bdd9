/**
 * Building and reading tensors on the client: from typed arrays, from nested JS arrays,
 * back to nested arrays; stacking along dimension 0 and splitting back (client-side batching).
 */
import {
  type DType,
  type NumericArray,
  type NumericDType,
  type Tensor,
  type TypedArrayFor,
  allocate,
  bytesPerElement,
  checkShape,
  elementCount,
  invalidArgument,
  isStringData,
  jsonToTensor,
} from '@visionserve/protocol';

/** The DType a typed array holds by default (Uint16Array is read as uint16; use tensorOf for float16). */
export function dtypeOfArray(data: NumericArray): NumericDType {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Float64Array) return 'float64';
  if (data instanceof Int8Array) return 'int8';
  if (data instanceof Int16Array) return 'int16';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof BigInt64Array) return 'int64';
  if (data instanceof Uint8Array) return 'uint8';
  if (data instanceof Uint16Array) return 'uint16';
  if (data instanceof Uint32Array) return 'uint32';
  return 'uint64';
}

/**
 * A tensor over a typed array (no copy); dtype from the array type. `shape` defaults to
 * `[data.length]` and must hold exactly `data.length` elements.
 *
 * Ownership: the tensor aliases `data`; the client only reads it while encoding a request.
 */
export function tensor(data: NumericArray, shape?: readonly number[]): Tensor {
  return tensorOf(dtypeOfArray(data), data, shape);
}

/** A tensor of an explicit dtype: typed arrays of the right type are used as is, plain arrays are copied. */
export function tensorOf<D extends NumericDType>(
  dtype: D,
  data: TypedArrayFor[D] | ArrayLike<number> | ArrayLike<bigint>,
  shape?: readonly number[],
): Tensor {
  const dims = shape ?? [data.length];
  const n = checkShape(dims, 'tensor');
  if (n !== data.length) {
    throw invalidArgument(`tensor: shape [${dims.join(',')}] holds ${n} elements, data has ${data.length}`);
  }
  const ctor = allocate(dtype, 0).constructor as abstract new (...args: never[]) => unknown;
  if (data instanceof ctor) {
    return { dtype, shape: [...dims], data: data as TypedArrayFor[D] };
  }
  const out = allocate(dtype, n) as NumericArray;
  const big = out instanceof BigInt64Array || out instanceof BigUint64Array;
  for (let i = 0; i < n; i++) {
    const v = (data as ArrayLike<number | bigint>)[i]!;
    (out as unknown as (number | bigint)[])[i] = big ? BigInt(v) : Number(v);
  }
  return { dtype, shape: [...dims], data: out };
}

/** A string tensor (TF DT_STRING); text is UTF-8 encoded. */
export function stringTensorOf(values: readonly (string | Uint8Array)[], shape?: readonly number[]): Tensor {
  const dims = shape ?? [values.length];
  if (checkShape(dims, 'tensor') !== values.length) {
    throw invalidArgument(`tensor: shape [${dims.join(',')}] does not hold ${values.length} strings`);
  }
  const encoder = new TextEncoder();
  return {
    dtype: 'string',
    shape: [...dims],
    data: values.map((v) => (typeof v === 'string' ? encoder.encode(v) : v)),
  };
}

/** A nested JS array (or a scalar) as a tensor; the shape comes from the nesting, which must be regular. */
export function fromNested(value: unknown, dtype: DType = 'float32'): Tensor {
  return jsonToTensor(value, dtype, 'value');
}

/** The tensor as nested JS arrays: numbers, bigints (int64/uint64), booleans or strings (UTF-8 decoded). */
export function toNested(t: Tensor): unknown {
  const decoder = new TextDecoder();
  const data = t.data;
  const leaf = (i: number): unknown => {
    if (isStringData(data)) return decoder.decode(data[i]);
    if (t.dtype === 'bool') return data[i] !== 0;
    return data[i];
  };
  if (t.shape.length === 0) return leaf(0);
  const rec = (level: number, offset: number): unknown[] => {
    const size = t.shape[level]!;
    const stride = elementCount(t.shape.slice(level + 1));
    const out = new Array<unknown>(size);
    for (let i = 0; i < size; i++) {
      out[i] = level === t.shape.length - 1 ? leaf(offset + i) : rec(level + 1, offset + i * stride);
    }
    return out;
  };
  return rec(0, 0);
}

/**
 * Stacks tensors along dimension 0 (numpy `concatenate(axis=0)`): all must share the dtype
 * and the dimensions after the first. Returns the single tensor itself when given one.
 */
export function concatTensors(tensors: readonly Tensor[]): Tensor {
  const first = tensors[0];
  if (first === undefined) throw invalidArgument('concatTensors: no tensors');
  if (tensors.length === 1) return first;
  if (first.shape.length === 0) throw invalidArgument('concatTensors: scalars have no dimension 0');
  const rest = first.shape.slice(1);
  let rows = 0;
  for (const t of tensors) {
    if (t.dtype !== first.dtype) {
      throw invalidArgument(`concatTensors: dtype ${t.dtype} differs from ${first.dtype}`);
    }
    if (t.shape.length !== first.shape.length || t.shape.slice(1).some((d, i) => d !== rest[i])) {
      throw invalidArgument(
        `concatTensors: shape [${t.shape.join(',')}] does not match [*,${rest.join(',')}] after dimension 0`,
      );
    }
    rows += t.shape[0]!;
  }
  const shape = [rows, ...rest];
  if (first.dtype === 'string') {
    const out: Uint8Array[] = [];
    for (const t of tensors) out.push(...(t.data as readonly Uint8Array[]));
    return { dtype: 'string', shape, data: out };
  }
  const out = allocate(first.dtype, elementCount(shape));
  const bytes = new Uint8Array(out.buffer);
  let offset = 0;
  for (const t of tensors) {
    const d = t.data as NumericArray;
    bytes.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), offset);
    offset += d.byteLength;
  }
  return { dtype: first.dtype, shape, data: out };
}

/**
 * Splits a tensor along dimension 0 into parts of `sizes` rows (which must add up to
 * dimension 0). Numeric parts are views into the tensor's data (no copy).
 */
export function splitTensor(t: Tensor, sizes: readonly number[]): Tensor[] {
  if (t.shape.length === 0) throw invalidArgument('splitTensor: a scalar has no dimension 0');
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total !== t.shape[0]) {
    throw invalidArgument(`splitTensor: sizes add up to ${total}, dimension 0 is ${t.shape[0]!}`);
  }
  const rest = t.shape.slice(1);
  const rowElements = elementCount(rest);
  const parts: Tensor[] = [];
  let row = 0;
  for (const size of sizes) {
    const start = row * rowElements;
    const end = (row + size) * rowElements;
    const shape = [size, ...rest];
    if (isStringData(t.data)) parts.push({ dtype: 'string', shape, data: t.data.slice(start, end) });
    else parts.push({ dtype: t.dtype, shape, data: t.data.subarray(start, end) });
    row += size;
  }
  return parts;
}

/** Bytes of a tensor's payload as a view (numeric tensors only). */
export function tensorBytes(t: Tensor): Uint8Array {
  if (isStringData(t.data)) throw invalidArgument('tensorBytes: string tensors have no flat byte payload');
  return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.length * bytesPerElement(t.dtype));
}
