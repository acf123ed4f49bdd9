/**
 * Tensors in the binary tensor data extension (and gRPC raw contents): little-endian,
 * row-major, no padding; BOOL one byte per element; BYTES length-prefixed.
 */
import { bytesPerElement, fromBytes, toBytes } from '../dtype.js';
import { invalidArgument } from '../errors.js';
import { type Tensor, isStringData } from '../tensor.js';
import { decodeBytesElements, encodeBytesElements } from './bytes-elements.js';
import { type KServeDatatype, dtypeOfDatatype } from './datatype.js';

/**
 * The tensor that `bytes` hold for a declared datatype and shape of `count` elements.
 * Numeric data is a view of `bytes` when they are aligned for the element size, else an
 * aligned copy; BYTES elements are copied out. INVALID_ARGUMENT naming `what` when the
 * size does not match the shape.
 */
export function tensorFromBinary(
  datatype: KServeDatatype,
  shape: readonly number[],
  count: number,
  bytes: Uint8Array,
  what: string,
): Tensor {
  const dtype = dtypeOfDatatype(datatype);
  if (dtype === 'string') return { dtype, shape, data: decodeBytesElements(bytes, count, what) };
  const expected = count * bytesPerElement(dtype);
  if (bytes.byteLength !== expected) {
    throw invalidArgument(
      `${what}: ${bytes.byteLength} bytes of binary data, but ${datatype} shape [${shape.join(',')}] takes ${expected}`,
    );
  }
  return { dtype, shape, data: fromBytes(dtype, bytes) };
}

/** A tensor's binary form: a view of numeric data (no copy), or the length-prefixed BYTES. */
export function binaryOf(tensor: Tensor): Uint8Array {
  return isStringData(tensor.data) ? encodeBytesElements(tensor.data) : toBytes(tensor.data);
}
