/**
 * The JSON `data` of an OIP tensor: a flat or nested row-major list of JSON numbers,
 * booleans (BOOL) or strings (BYTES, UTF-8).
 */
import { type NumericDType, allocate, bfloat16ToNumber, halfToNumber } from '../dtype.js';
import { Code, ServingError, invalidArgument } from '../errors.js';
import type { JsonWriter } from '../json-writer.js';
import { type Tensor, isStringData } from '../tensor.js';
import { isNonFiniteToken, jsonNumberValue } from '../tfs-json-decode.js';
import { PackedNumbers } from '../numeric-json.js';
import { type KServeDatatype, dtypeOfDatatype } from './datatype.js';
import { numberToBfloat16, numberToHalf } from './half.js';

/** Deepest list nesting accepted in `data`. */
export const MAX_DATA_NESTING = 64;

const INT_RANGES: Readonly<Partial<Record<NumericDType, readonly [number, number]>>> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
  int64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
};

function describe(leaf: unknown): string {
  if (Array.isArray(leaf)) return 'a list';
  if (leaf === null) return 'null';
  if (isNonFiniteToken(leaf)) return String(jsonNumberValue(leaf));
  if (typeof leaf === 'object') return 'an object';
  if (typeof leaf === 'string') return JSON.stringify(leaf.length > 32 ? `${leaf.slice(0, 32)}...` : leaf);
  if (typeof leaf === 'number' || typeof leaf === 'boolean') return String(leaf);
  return typeof leaf;
}

/**
 * Visits the leaves of a nested list in row-major order. INVALID_ARGUMENT for nesting
 * deeper than MAX_DATA_NESTING; stops (returning false) as soon as `visit` does.
 */
function forEachLeaf(data: unknown, what: string, visit: (leaf: unknown) => boolean): void {
  if (!Array.isArray(data)) {
    visit(data);
    return;
  }
  // Iterative: nesting depth is bounded, and no recursion depends on the input.
  const lists: unknown[][] = [data];
  const positions: number[] = [0];
  while (lists.length > 0) {
    const top = lists.length - 1;
    const list = lists[top]!;
    const at = positions[top]!;
    if (at >= list.length) {
      lists.pop();
      positions.pop();
      continue;
    }
    positions[top] = at + 1;
    const item: unknown = list[at];
    if (Array.isArray(item)) {
      if (lists.length >= MAX_DATA_NESTING) {
        throw invalidArgument(`${what}: data nested deeper than ${MAX_DATA_NESTING} lists`);
      }
      lists.push(item);
      positions.push(0);
    } else if (!visit(item)) {
      return;
    }
  }
}

export interface JsonDataOptions {
  /**
   * Read BF16 `data` as numbers rounded to bfloat16 (responses: the server writes BF16
   * outputs as JSON numbers). Requests refuse BF16 in JSON, as Triton does. Default false.
   */
  readonly bf16FromNumbers?: boolean;
}

/**
 * The tensor a JSON `data` value holds for a declared datatype and shape (its element
 * count already checked, see checkShape). Flat and nested lists are both accepted; the
 * number of leaves must equal `count`. Leaves are counted before anything is allocated.
 * INVALID_ARGUMENT for a wrong count or a value the datatype cannot hold (JSON BOOL
 * must be true/false; integers must be exact and in range; int64/uint64 beyond
 * +-(2^53 - 1) cannot travel in JSON); BF16 only with `bf16FromNumbers`.
 */
export function tensorFromJsonData(
  datatype: KServeDatatype,
  shape: readonly number[],
  count: number,
  data: unknown,
  what: string,
  options: JsonDataOptions = {},
): Tensor {
  if (data instanceof PackedNumbers) return tensorFromPackedData(datatype, shape, count, data, what, options);
  let leaves = 0;
  forEachLeaf(data, what, () => ++leaves <= count);
  if (leaves !== count) throw countMismatch(what, leaves, count, shape);
  const dtype = dtypeOfDatatype(datatype);
  const bad = (leaf: unknown, extra = ''): ServingError =>
    invalidArgument(`${what}: ${describe(leaf)} is not a valid ${datatype} value${extra}`);
  let i = 0;
  if (dtype === 'string') {
    const out: Uint8Array[] = [];
    const encoder = new TextEncoder();
    forEachLeaf(data, what, (leaf) => {
      if (typeof leaf !== 'string' || isNonFiniteToken(leaf)) throw bad(leaf);
      out.push(encoder.encode(leaf));
      return true;
    });
    return { dtype, shape, data: out };
  }
  if (dtype === 'bfloat16' && options.bf16FromNumbers !== true) {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      `${what}: BF16 data cannot be given as JSON; send it in binary (binary_data_size)`,
    );
  }
  const out = allocate(dtype, count);
  if (dtype === 'bool') {
    forEachLeaf(data, what, (leaf) => {
      if (typeof leaf !== 'boolean') throw bad(leaf, ' (BOOL values are true or false)');
      out[i++] = leaf ? 1 : 0;
      return true;
    });
  } else if (dtype === 'float32' || dtype === 'float64' || dtype === 'float16' || dtype === 'bfloat16') {
    forEachLeaf(data, what, (leaf) => {
      const v = jsonNumberValue(leaf);
      if (v === undefined) throw bad(leaf);
      out[i++] = dtype === 'float16' ? numberToHalf(v) : dtype === 'bfloat16' ? numberToBfloat16(v) : v;
      return true;
    });
  } else {
    const [lo, hi] = INT_RANGES[dtype]!;
    const big = dtype === 'int64' || dtype === 'uint64';
    forEachLeaf(data, what, (leaf) => {
      if (typeof leaf !== 'number' || !Number.isInteger(leaf)) throw bad(leaf);
      if (leaf < lo || leaf > hi) {
        throw bad(
          leaf,
          big ? ' (beyond +-(2^53 - 1) JSON cannot carry it exactly)' : ` (range [${lo}, ${hi}])`,
        );
      }
      out[i++] = big ? BigInt(leaf) : leaf;
      return true;
    });
  }
  return { dtype, shape, data: out };
}

/** `data` holds `leaves` elements (for a nested list: more than `count` once it passed it). */
function countMismatch(what: string, leaves: number, count: number, shape: readonly number[]): ServingError {
  return invalidArgument(
    `${what}: data has ${leaves > count ? `more than ${count}` : leaves} elements, but shape [${shape.join(',')}] needs ${count}`,
  );
}

/**
 * tensorFromJsonData for `data` the fast reader packed (readFastJsonBody): the same tensor
 * or the same error as for the JSON list it was read from, checked in the same order.
 */
function tensorFromPackedData(
  datatype: KServeDatatype,
  shape: readonly number[],
  count: number,
  data: PackedNumbers,
  what: string,
  options: JsonDataOptions,
): Tensor {
  const leaves = data.length;
  if (leaves !== count) throw countMismatch(what, leaves, count, shape);
  const dtype = dtypeOfDatatype(datatype);
  const bad = (leaf: number, extra = ''): ServingError =>
    invalidArgument(`${what}: ${describe(leaf)} is not a valid ${datatype} value${extra}`);
  // Every leaf is a number: the first one is what BYTES and BOOL refuse.
  if (dtype === 'string') throw bad(data.exactValues()[0]!);
  if (dtype === 'bfloat16' && options.bf16FromNumbers !== true) {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      `${what}: BF16 data cannot be given as JSON; send it in binary (binary_data_size)`,
    );
  }
  if (dtype === 'bool') throw bad(data.exactValues()[0]!, ' (BOOL values are true or false)');
  if (dtype === 'float32' && data.length === count) return { dtype, shape, data: data.float32Values() };
  const out = allocate(dtype, count);
  if (dtype === 'float32') {
    data.toFloat32(out as Float32Array);
    return { dtype, shape, data: out };
  }
  const values = data.exactValues();
  if (dtype === 'float64') {
    (out as Float64Array).set(values);
  } else if (dtype === 'float16' || dtype === 'bfloat16') {
    const toBits = dtype === 'float16' ? numberToHalf : numberToBfloat16;
    for (let i = 0; i < count; i++) out[i] = toBits(values[i]!);
  } else {
    const [lo, hi] = INT_RANGES[dtype]!;
    const big = dtype === 'int64' || dtype === 'uint64';
    for (let i = 0; i < count; i++) {
      const leaf = values[i]!;
      if (!Number.isInteger(leaf)) throw bad(leaf);
      if (leaf < lo || leaf > hi) {
        throw bad(
          leaf,
          big ? ' (beyond +-(2^53 - 1) JSON cannot carry it exactly)' : ` (range [${lo}, ${hi}])`,
        );
      }
      out[i] = big ? BigInt(leaf) : leaf;
    }
  }
  return { dtype, shape, data: out };
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Writes a tensor's elements as a flat JSON list. BYTES elements become JSON strings and
 * must be UTF-8 (INVALID_ARGUMENT naming `what` otherwise: such outputs need binary data);
 * FP16 and BF16 are written as numbers (Triton refuses them in JSON; clients read them).
 */
export function writeJsonData(w: JsonWriter, tensor: Tensor, what: string): void {
  const data = tensor.data;
  w.byte(0x5b); // [
  if (isStringData(data)) {
    for (let i = 0; i < data.length; i++) {
      if (i > 0) w.byte(0x2c);
      let text: string;
      try {
        text = fatalUtf8.decode(data[i]);
      } catch {
        throw invalidArgument(
          `${what}: element ${i} is not UTF-8 text and cannot be returned as JSON; request the output with binary_data`,
        );
      }
      w.string(text);
    }
  } else {
    const n = data.length;
    switch (tensor.dtype) {
      case 'float32':
        for (let i = 0; i < n; i++) {
          if (i > 0) w.byte(0x2c);
          w.float32(data[i] as number);
        }
        break;
      case 'float64':
        for (let i = 0; i < n; i++) {
          if (i > 0) w.byte(0x2c);
          w.float64(data[i] as number);
        }
        break;
      case 'float16':
      case 'bfloat16': {
        const toNumber = tensor.dtype === 'float16' ? halfToNumber : bfloat16ToNumber;
        for (let i = 0; i < n; i++) {
          if (i > 0) w.byte(0x2c);
          w.float32(toNumber(data[i] as number));
        }
        break;
      }
      case 'bool':
        for (let i = 0; i < n; i++) {
          if (i > 0) w.byte(0x2c);
          w.ascii(data[i] === 0 ? 'false' : 'true');
        }
        break;
      default:
        for (let i = 0; i < n; i++) {
          if (i > 0) w.byte(0x2c);
          w.ascii(String(data[i]));
        }
    }
  }
  w.byte(0x5d); // ]
}
