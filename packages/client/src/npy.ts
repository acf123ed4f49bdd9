/**
 * NumPy `.npy` files (format versions 1-3) <-> tensors: little-endian, C order, numeric
 * dtypes and bool. Anything else is INVALID_ARGUMENT with the reason.
 */
import {
  type NumericDType,
  type Tensor,
  allocate,
  bytesPerElement,
  checkShape,
  invalidArgument,
  isStringData,
} from '@visionserve/protocol';

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY

const DESCR_TO_DTYPE: Readonly<Record<string, NumericDType>> = {
  f4: 'float32',
  f8: 'float64',
  f2: 'float16',
  i1: 'int8',
  i2: 'int16',
  i4: 'int32',
  i8: 'int64',
  u1: 'uint8',
  u2: 'uint16',
  u4: 'uint32',
  u8: 'uint64',
  b1: 'bool',
};

/** True when the bytes start with the .npy magic string. */
export function isNpy(bytes: Uint8Array): boolean {
  return MAGIC.every((b, i) => bytes[i] === b);
}

/** Parses a .npy file into a tensor (the data is copied into an aligned array). */
export function parseNpy(bytes: Uint8Array): Tensor {
  if (!isNpy(bytes)) throw invalidArgument('Not a .npy file (bad magic)');
  const major = bytes[6]!;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let headerLength: number;
  let offset: number;
  if (major === 1) {
    headerLength = view.getUint16(8, true);
    offset = 10;
  } else if (major === 2 || major === 3) {
    headerLength = view.getUint32(8, true);
    offset = 12;
  } else {
    throw invalidArgument(`Unsupported .npy format version ${major}`);
  }
  const header = new TextDecoder().decode(bytes.subarray(offset, offset + headerLength));
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header)?.[1];
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || fortran === undefined || shapeText === undefined) {
    throw invalidArgument(`Malformed .npy header: ${header.trim()}`);
  }
  if (fortran === 'True') throw invalidArgument('.npy arrays in Fortran order are not supported');
  const order = descr[0];
  const dtype = DESCR_TO_DTYPE[descr.slice(1)];
  if (dtype === undefined || (order !== '<' && order !== '|' && order !== '=')) {
    throw invalidArgument(`Unsupported .npy dtype '${descr}' (little-endian numeric or bool only)`);
  }
  const shape = shapeText
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map(Number);
  const n = checkShape(shape, '.npy');
  const start = offset + headerLength;
  const size = n * bytesPerElement(dtype);
  if (bytes.byteLength - start < size) {
    throw invalidArgument(`.npy data is truncated: ${bytes.byteLength - start} bytes, expected ${size}`);
  }
  const data = allocate(dtype, n);
  new Uint8Array(data.buffer).set(bytes.subarray(start, start + size));
  return { dtype, shape, data };
}

const DTYPE_TO_DESCR: Readonly<Record<NumericDType, string>> = {
  float32: '<f4',
  float64: '<f8',
  float16: '<f2',
  bfloat16: '<V2',
  int8: '|i1',
  int16: '<i2',
  int32: '<i4',
  int64: '<i8',
  uint8: '|u1',
  uint16: '<u2',
  uint32: '<u4',
  uint64: '<u8',
  bool: '|b1',
};

/** Writes a numeric tensor as a version-1 .npy file (bfloat16 as raw 2-byte voids). */
export function encodeNpy(t: Tensor): Uint8Array {
  if (isStringData(t.data) || t.dtype === 'string')
    throw invalidArgument('encodeNpy: string tensors are not supported');
  const dims = t.shape.length === 1 ? `${t.shape[0]!},` : t.shape.join(', ');
  let header = `{'descr': '${DTYPE_TO_DESCR[t.dtype]}', 'fortran_order': False, 'shape': (${dims}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const payload = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  const out = new Uint8Array(10 + header.length + payload.byteLength);
  out.set(MAGIC, 0);
  out[6] = 1;
  out[7] = 0;
  new DataView(out.buffer).setUint16(8, header.length, true);
  out.set(new TextEncoder().encode(header), 10);
  out.set(payload, 10 + header.length);
  return out;
}
