/**
 * Open Inference Protocol (KServe v2) tensor datatypes and their visionserve dtypes.
 * The model configuration spells the same types `TYPE_<datatype>`, except BYTES, which is
 * `TYPE_STRING` there.
 */
import type { DType } from '../dtype.js';

/** A protocol datatype string. BF16 is Triton's addition to the OIP list. */
export type KServeDatatype =
  | 'BOOL'
  | 'UINT8'
  | 'UINT16'
  | 'UINT32'
  | 'UINT64'
  | 'INT8'
  | 'INT16'
  | 'INT32'
  | 'INT64'
  | 'FP16'
  | 'FP32'
  | 'FP64'
  | 'BF16'
  | 'BYTES';

const BY_DATATYPE: Readonly<Record<KServeDatatype, DType>> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BF16: 'bfloat16',
  BYTES: 'string',
};

const BY_DTYPE: Readonly<Record<DType, KServeDatatype>> = {
  bool: 'BOOL',
  uint8: 'UINT8',
  uint16: 'UINT16',
  uint32: 'UINT32',
  uint64: 'UINT64',
  int8: 'INT8',
  int16: 'INT16',
  int32: 'INT32',
  int64: 'INT64',
  float16: 'FP16',
  float32: 'FP32',
  float64: 'FP64',
  bfloat16: 'BF16',
  string: 'BYTES',
};

/** Every protocol datatype, in the order of the model configuration's DataType enum. */
export const KSERVE_DATATYPES: readonly KServeDatatype[] = Object.keys(BY_DATATYPE) as KServeDatatype[];

export function isKServeDatatype(value: unknown): value is KServeDatatype {
  return typeof value === 'string' && Object.hasOwn(BY_DATATYPE, value);
}

/** The dtype a protocol datatype is stored as. */
export function dtypeOfDatatype(datatype: KServeDatatype): DType {
  return BY_DATATYPE[datatype];
}

/** The protocol datatype of a dtype (`string` is BYTES). */
export function datatypeOfDtype(dtype: DType): KServeDatatype {
  return BY_DTYPE[dtype];
}

/** The model configuration's DataType enum name of a dtype, e.g. "TYPE_FP32", "TYPE_STRING". */
export function configDataTypeName(dtype: DType): string {
  return dtype === 'string' ? 'TYPE_STRING' : `TYPE_${BY_DTYPE[dtype]}`;
}
