/**
 * Typed tensor data in `inference.InferTensorContents` (the gRPC alternative to raw
 * contents): one repeated field per family of datatypes. tritonclient never sends them and
 * visionserve never answers with them, but other clients may send them and other servers
 * may answer with them.
 */
import { type NumericDType, allocate } from '../dtype.js';
import { invalidArgument } from '../errors.js';
import type { Tensor } from '../tensor.js';
import { type KServeDatatype, dtypeOfDatatype } from '../kserve/datatype.js';
import type { InferTensorContents } from '../gen/inference/inference_pb.js';

type ContentsField =
  | 'boolContents'
  | 'intContents'
  | 'int64Contents'
  | 'uintContents'
  | 'uint64Contents'
  | 'fp32Contents'
  | 'fp64Contents'
  | 'bytesContents';

const FIELD_NAMES: Readonly<Record<ContentsField, string>> = {
  boolContents: 'bool_contents',
  intContents: 'int_contents',
  int64Contents: 'int64_contents',
  uintContents: 'uint_contents',
  uint64Contents: 'uint64_contents',
  fp32Contents: 'fp32_contents',
  fp64Contents: 'fp64_contents',
  bytesContents: 'bytes_contents',
};

/** The field that carries each datatype; FP16 and BF16 have none (raw contents only). */
const FIELD_OF: Readonly<Partial<Record<KServeDatatype, ContentsField>>> = {
  BOOL: 'boolContents',
  INT8: 'intContents',
  INT16: 'intContents',
  INT32: 'intContents',
  INT64: 'int64Contents',
  UINT8: 'uintContents',
  UINT16: 'uintContents',
  UINT32: 'uintContents',
  UINT64: 'uint64Contents',
  FP32: 'fp32Contents',
  FP64: 'fp64Contents',
  BYTES: 'bytesContents',
};

const RANGES: Readonly<Partial<Record<KServeDatatype, readonly [number, number]>>> = {
  INT8: [-128, 127],
  INT16: [-32768, 32767],
  UINT8: [0, 255],
  UINT16: [0, 65535],
};

/**
 * The tensor that typed `contents` hold for a declared datatype and shape of `count`
 * elements. INVALID_ARGUMENT naming `what` when the datatype has no typed field, when a
 * field of another datatype holds values, when the number of values differs from `count`,
 * or when an integer does not fit the datatype. BYTES elements are copied out of the message.
 */
export function tensorFromContents(
  datatype: KServeDatatype,
  shape: readonly number[],
  count: number,
  contents: InferTensorContents,
  what: string,
): Tensor {
  const field = FIELD_OF[datatype];
  if (field === undefined) {
    throw invalidArgument(`${what}: datatype ${datatype} cannot be sent as typed contents; use raw contents`);
  }
  for (const other of Object.keys(FIELD_NAMES) as ContentsField[]) {
    if (other !== field && contents[other].length > 0) {
      throw invalidArgument(
        `${what}: typed data in ${FIELD_NAMES[other]}, but datatype ${datatype} takes ${FIELD_NAMES[field]}`,
      );
    }
  }
  const values = contents[field];
  if (values.length !== count) {
    throw invalidArgument(
      `${what}: ${values.length} values in ${FIELD_NAMES[field]}, but shape [${shape.join(',')}] has ${count} elements`,
    );
  }
  const dtype = dtypeOfDatatype(datatype);
  if (field === 'bytesContents') {
    return { dtype: 'string', shape, data: contents.bytesContents.map((b) => b.slice()) };
  }
  const data = allocate(dtype as NumericDType, count);
  if (field === 'boolContents') {
    contents.boolContents.forEach((b, i) => (data[i] = b ? 1 : 0));
  } else if (field === 'int64Contents' || field === 'uint64Contents') {
    // BigInt64Array / BigUint64Array wrap out-of-range values; proto int64/uint64 always fit.
    (data as BigInt64Array | BigUint64Array).set(contents[field]);
  } else {
    const numbers = contents[field];
    const range = RANGES[datatype];
    if (range !== undefined) {
      for (let i = 0; i < numbers.length; i++) {
        const v = numbers[i]!;
        if (v < range[0] || v > range[1]) {
          throw invalidArgument(`${what}: value ${v} at index ${i} does not fit ${datatype}`);
        }
      }
    }
    (data as Exclude<typeof data, BigInt64Array | BigUint64Array>).set(numbers);
  }
  return { dtype, shape, data };
}
