/**
 * Fast decoding of typed inputs: TensorProtoView (see
 * proto/visionserve/predict_request_view.proto) carries `float_val` / `double_val`
 * as the raw packed bytes, which become a Float32Array / Float64Array view (or one
 * aligned copy) instead of one JS number per element, and `int_val` as its packed
 * varints, read straight into the tensor's Int8/16/32 or Uint8/16 array (a 1.2 M-pixel
 * uint8 image was a 1.2 M-element JS array first, then copied, and kept the main
 * thread's collector busy).
 */
import { create } from '@bufbuild/protobuf';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { allocate, fromBytes, type DType } from '../dtype.js';
import { invalidArgument } from '../errors.js';
import {
  TENSOR_DOUBLE_VAL_FIELD,
  TENSOR_FLOAT_VAL_FIELD,
  TENSOR_INT_VAL_FIELD,
  packInt32Varints,
  readVarint,
  skipValue,
} from './wire-bytes.js';
import type { Tensor } from '../tensor.js';
import {
  INT_VAL_RANGE,
  dtypeFromDataType,
  shapeFromProto,
  tensorFromContent,
  tensorFromProto,
} from './tf-tensor-codec.js';
import { TensorProtoSchema } from '../gen/tensorflow/core/framework/tensor_pb.js';
import type { PredictRequest } from '../gen/tensorflow_serving/apis/predict_pb.js';
import {
  type PredictRequestView,
  PredictRequestViewSchema,
  type TensorProtoView,
} from '../gen/visionserve/predict_request_view_pb.js';
import { elementCount } from '../tensor.js';

function packedValues(
  bytes: Uint8Array,
  size: 4 | 8,
  field: string,
  what: string,
): Float32Array | Float64Array {
  if (bytes.byteLength % size !== 0) {
    throw invalidArgument(`${what}: ${field} holds ${bytes.byteLength} bytes, not a whole number of values`);
  }
  return size === 4 ? fromBytes('float32', bytes) : fromBytes('float64', bytes);
}

/** The dtypes TensorFlow carries in `int_val`, and the typed arrays they decode into. */
type IntValDType = 'int8' | 'int16' | 'int32' | 'uint8' | 'uint16';
const INT_VAL_DTYPES: ReadonlySet<DType> = new Set(['int8', 'int16', 'int32', 'uint8', 'uint16']);

const INT32_RANGE: readonly [number, number] = [-(2 ** 31), 2 ** 31 - 1];

/**
 * Reads a packed run of int32 varints as protobuf does (the low 32 bits of a varint of up to
 * ten bytes, so negative values, written in ten bytes, come back negative) into `out` from
 * index 0, each value checked against `range` first (the regular decoder's message, naming
 * `dtype`). Answers how many values were read, or -1 at a value past `limit` (nothing after
 * it is read). A run that ends inside a varint, or a varint longer than ten bytes, is
 * INVALID_ARGUMENT.
 */
function readInt32Run(
  bytes: Uint8Array,
  out: { [index: number]: number },
  limit: number,
  range: readonly [number, number],
  dtype: string,
  what: string,
): number {
  const [min, max] = range;
  const end = bytes.length;
  let pos = 0;
  let count = 0;
  while (pos < end) {
    let b = bytes[pos++]!;
    let value = b & 0x7f;
    if (b >= 0x80) {
      // Bits 7-31 come from bytes 2-5; bytes 6-10 only extend the sign (or carry high bits
      // that int32 drops).
      let shift = 7;
      let length = 1;
      do {
        if (pos >= end) throw invalidArgument(`${what}: int_val ends inside a value`);
        if (++length > 10) throw invalidArgument(`${what}: int_val holds a varint longer than 10 bytes`);
        b = bytes[pos++]!;
        if (shift < 32) value |= (b & 0x7f) << shift;
        shift += 7;
      } while (b >= 0x80);
    }
    value |= 0;
    if (value < min || value > max)
      throw invalidArgument(`${what}: int_val value ${value} is out of range for ${dtype}`);
    if (count === limit) return -1;
    out[count++] = value;
  }
  return count;
}

/** int_val as numbers (for the regular decoder's fallback). */
function int32Values(bytes: Uint8Array, what: string): number[] {
  const out: number[] = [];
  readInt32Run(bytes, out, Infinity, INT32_RANGE, 'int32', what);
  return out;
}

/**
 * int_val straight into a new array of `dtype` holding `n` elements, when the run holds
 * exactly `n` values; undefined otherwise (padding and count errors: the regular decoder).
 * Values out of range for `dtype` are refused with the regular decoder's message, which it
 * too gives before any count error: values are checked in order, and reading stops only at
 * one past `n`, whose own range the regular decoder then checks.
 */
export function intValTensorData(
  bytes: Uint8Array,
  dtype: IntValDType,
  n: number,
  what: string,
): Int8Array | Int16Array | Int32Array | Uint8Array | Uint16Array | undefined {
  // A value takes 1-10 bytes: other counts cannot match (and a huge declared shape with a
  // short run allocates nothing here).
  if (n > bytes.length || n * 10 < bytes.length) return undefined;
  const out = allocate(dtype, n);
  const count = readInt32Run(bytes, out, n, INT_VAL_RANGE[dtype] ?? INT32_RANGE, dtype, what);
  return count === n ? out : undefined;
}

/** Decodes a tensor from its view; same semantics and errors as tensorFromProto. */
export function tensorFromProtoView(view: TensorProtoView, what: string): Tensor {
  const hasFloat = view.floatVal.byteLength > 0;
  const hasDouble = view.doubleVal.byteLength > 0;
  const floats = hasFloat ? packedValues(view.floatVal, 4, 'float_val', what) : undefined;
  const doubles = hasDouble ? packedValues(view.doubleVal, 8, 'double_val', what) : undefined;
  // tensor_content wins over typed values (tensorFromProto), without building a TensorProto.
  if (view.tensorContent.byteLength > 0) {
    return tensorFromContent(view.dtype, view.tensorShape, view.tensorContent, what);
  }
  if (floats || doubles) {
    const dtype = dtypeFromDataType(view.dtype, what);
    const values = dtype === 'float32' ? floats : dtype === 'float64' ? doubles : undefined;
    if (values !== undefined) {
      const shape = shapeFromProto(view.tensorShape, what);
      // The common case: every value sent, in the field that matches the dtype.
      if (values.length === elementCount(shape) && !(floats && doubles)) {
        return { dtype, shape, data: values };
      }
    }
  }
  if (view.intVal.byteLength > 0) {
    const dtype = dtypeFromDataType(view.dtype, what);
    if (INT_VAL_DTYPES.has(dtype)) {
      const shape = shapeFromProto(view.tensorShape, what);
      const data = intValTensorData(view.intVal, dtype as IntValDType, elementCount(shape), what);
      if (data !== undefined) return { dtype, shape, data };
    }
  }
  // Everything else (broadcast, padding, mismatches and their errors) goes through the regular decoder.
  return tensorFromProto(
    create(TensorProtoSchema, {
      dtype: view.dtype,
      ...(view.tensorShape ? { tensorShape: view.tensorShape } : {}),
      versionNumber: view.versionNumber,
      tensorContent: view.tensorContent,
      halfVal: view.halfVal,
      floatVal: floats ? Array.from(floats) : [],
      doubleVal: doubles ? Array.from(doubles) : [],
      intVal: int32Values(view.intVal, what),
      stringVal: view.stringVal,
      int64Val: view.int64Val,
      boolVal: view.boolVal,
      uint32Val: view.uint32Val,
      uint64Val: view.uint64Val,
    }),
    what,
  );
}

const PREDICT_INPUTS_FIELD = 2;
const MAP_VALUE_FIELD = 2;

/**
 * TensorProto fields the view does not declare (scomplex_val, dcomplex_val, float8_val): it
 * would skip them unchecked where the regular message parses them and may refuse them.
 */
const UNDECLARED_TENSOR_FIELDS: ReadonlySet<number> = new Set([9, 12, 18]);

/** Repeated fields the view declares as `bytes`: each must come as one packed run. */
const PACKED_RUN_FIELDS: ReadonlySet<number> = new Set([
  TENSOR_FLOAT_VAL_FIELD,
  TENSOR_DOUBLE_VAL_FIELD,
  TENSOR_INT_VAL_FIELD,
]);

/**
 * True when a packed int32 run is whole varints of at most ten bytes each: anything else is
 * left to the regular decoder, so that malformed runs get its answer (an error, or what
 * protobuf-es makes of bytes read past the run), whatever the tensor's dtype.
 */
function isVarintRun(run: Uint8Array): boolean {
  let continued = 0;
  for (let i = 0; i < run.length; i++) {
    if (run[i]! < 0x80) continued = 0;
    else if (++continued >= 10) return false;
  }
  return continued === 0;
}

/**
 * True when every float_val / double_val / int_val of every input is one packed run (so the
 * view decodes it exactly), every int_val run is whole varints, and no field is one the view
 * does not declare.
 */
function tensorIsViewable(bytes: Uint8Array): boolean {
  const reader = new BinaryReader(bytes);
  const runs = new Set<number>();
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (UNDECLARED_TENSOR_FIELDS.has(field)) return false;
    if (PACKED_RUN_FIELDS.has(field)) {
      if (wireType !== WireType.LengthDelimited || runs.has(field)) return false;
      runs.add(field);
      if (field === TENSOR_INT_VAL_FIELD) {
        if (!isVarintRun(reader.bytes())) return false;
        continue;
      }
    }
    reader.skip(wireType, field);
  }
  return true;
}

/**
 * Whether `bytes` (a serialized PredictRequest) can be decoded with
 * PredictRequestViewSchema without changing its meaning: every float_val,
 * double_val and int_val is a single packed run, as every standard protobuf encoder
 * writes them. Unpacked or split fields, a map entry with two values, an int_val run that
 * is not whole varints, fields the view does not declare (complex and float8 values), and
 * undecodable bytes, answer false (decode with the regular message then).
 */
export function predictRequestIsViewable(bytes: Uint8Array): boolean {
  try {
    const reader = new BinaryReader(bytes);
    while (reader.pos < reader.len) {
      const [field, wireType] = reader.tag();
      if (field !== PREDICT_INPUTS_FIELD || wireType !== WireType.LengthDelimited) {
        reader.skip(wireType, field);
        continue;
      }
      const entry = new BinaryReader(reader.bytes());
      let values = 0;
      while (entry.pos < entry.len) {
        const [f, w] = entry.tag();
        if (f === MAP_VALUE_FIELD && w === WireType.LengthDelimited) {
          // Two values in one entry are merged by the regular decoder (their runs joined); the
          // view's byte fields would keep only the last run.
          if (++values > 1 || !tensorIsViewable(entry.bytes())) return false;
        } else {
          entry.skip(w, f);
        }
      }
    }
    return true;
  } catch {
    return false;
  }
}

/** int32 values as a packed run of varints, negative ones in ten bytes (protobuf-es's writer). */
/** The view of a regularly decoded PredictRequest (fallback for unpacked typed fields). */
export function predictRequestViewFrom(request: PredictRequest): PredictRequestView {
  const inputs: Record<string, TensorProtoView> = {};
  for (const [alias, t] of Object.entries(request.inputs)) {
    inputs[alias] = {
      $typeName: 'visionserve.wire.TensorProtoView',
      dtype: t.dtype,
      tensorShape: t.tensorShape,
      versionNumber: t.versionNumber,
      tensorContent: t.tensorContent,
      halfVal: t.halfVal,
      floatVal: new Uint8Array(Float32Array.from(t.floatVal).buffer),
      doubleVal: new Uint8Array(Float64Array.from(t.doubleVal).buffer),
      intVal: packInt32Varints(Int32Array.from(t.intVal)),
      stringVal: t.stringVal,
      int64Val: t.int64Val,
      boolVal: t.boolVal,
      uint32Val: t.uint32Val,
      uint64Val: t.uint64Val,
    };
  }
  return create(PredictRequestViewSchema, {
    ...(request.modelSpec ? { modelSpec: request.modelSpec } : {}),
    inputs,
    outputFilter: request.outputFilter,
  });
}

const PREDICT_INPUTS = 2;
const MAP_VALUE = 2;
const TENSOR_CONTENT = 4;

/**
 * Where the payload of the first input's `tensor_content` (or packed `float_val` /
 * `double_val`) starts inside a serialized PredictRequest, judged from its first bytes
 * only (`head` may be a prefix of the message); undefined when the prefix does not reach
 * it. The gRPC transport places the message so that this offset is aligned, and the tensor
 * then decodes as a view. Never throws: a wrong answer only costs an aligned copy later.
 */
export function predictRequestTensorOffset(head: Uint8Array): number | undefined {
  let pos = 0;
  while (pos < head.length) {
    const tag = readVarint(head, pos);
    if (tag === undefined) return undefined;
    const [field, wireType] = [Math.floor(tag[0] / 8), tag[0] & 7];
    if (field !== PREDICT_INPUTS || wireType !== 2) {
      const next = skipValue(head, tag[1], wireType);
      if (next === undefined) return undefined;
      pos = next;
      continue;
    }
    const entryLen = readVarint(head, tag[1]);
    if (entryLen === undefined) return undefined;
    let p = entryLen[1];
    const entryEnd = p + entryLen[0];
    while (p < Math.min(entryEnd, head.length)) {
      const t = readVarint(head, p);
      if (t === undefined) return undefined;
      const [f, w] = [Math.floor(t[0] / 8), t[0] & 7];
      if (f !== MAP_VALUE || w !== 2) {
        const next = skipValue(head, t[1], w);
        if (next === undefined) return undefined;
        p = next;
        continue;
      }
      const valueLen = readVarint(head, t[1]);
      if (valueLen === undefined) return undefined;
      let q = valueLen[1];
      const valueEnd = q + valueLen[0];
      while (q < Math.min(valueEnd, head.length)) {
        const vt = readVarint(head, q);
        if (vt === undefined) return undefined;
        const [vf, vw] = [Math.floor(vt[0] / 8), vt[0] & 7];
        if (
          vw === 2 &&
          (vf === TENSOR_CONTENT || vf === TENSOR_FLOAT_VAL_FIELD || vf === TENSOR_DOUBLE_VAL_FIELD)
        ) {
          return readVarint(head, vt[1])?.[1];
        }
        const next = skipValue(head, vt[1], vw);
        if (next === undefined) return undefined;
        q = next;
      }
      return undefined;
    }
    return undefined;
  }
  return undefined;
}
