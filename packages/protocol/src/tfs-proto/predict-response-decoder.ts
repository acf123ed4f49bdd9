/**
 * Fast decoding of a TF Serving PredictResponse. Part of the lazily loaded gRPC codec.
 *
 * TF Serving answers with typed fields by default (`float_val`, `double_val`), and a packed
 * repeated float is on the wire exactly what `tensor_content` is: little-endian IEEE values
 * back to back. protobuf-es would turn each one into a JS number first (9 M floats: ~1.5 s
 * and a 72 MB array), so this decoder walks the message itself, lifts packed
 * `float_val` / `double_val` runs out as bytes, lets protobuf-es decode the small rest of
 * each TensorProto, and hands the bytes to tensorFromProto as `tensor_content`.
 *
 * Contract: the result equals `tensorFromProto(fromBinary(PredictResponseSchema, bytes))`
 * for every input. Anything unusual (a run count that needs TF's broadcast-the-last-value
 * rule, a dtype that is not the field's, malformed bytes) falls back to the plain decoder.
 */
import { fromBinary } from '@bufbuild/protobuf';
import type { Tensor } from '../tensor.js';
import { tensorFromProto } from './tf-tensor-codec.js';
import { type ModelSpec, ModelSpecSchema } from '../gen/tensorflow_serving/apis/model_pb.js';
import { PredictResponseSchema } from '../gen/tensorflow_serving/apis/predict_pb.js';
import { TensorProtoSchema } from '../gen/tensorflow/core/framework/tensor_pb.js';
import { DataType } from '../gen/tensorflow/core/framework/types_pb.js';

class WireError extends Error {}

/** Reads a varint at `pos`; returns [value, next position]. Values above 2^53 are not needed here. */
function varint(buf: Uint8Array, pos: number): [number, number] {
  let result = 0;
  let shift = 1;
  for (let i = 0; i < 10; i++) {
    if (pos >= buf.length) throw new WireError('truncated varint');
    const b = buf[pos++]!;
    result += (b & 0x7f) * shift;
    if (b < 0x80) return [result, pos];
    shift *= 128;
  }
  throw new WireError('varint too long');
}

interface Field {
  readonly number: number;
  readonly wireType: number;
  /** Start of the whole field (tag included) and end of it. */
  readonly start: number;
  readonly end: number;
  /** Payload of a length-delimited field. */
  readonly payloadStart: number;
}

/** The fields of a message, in order, without decoding their payloads. */
function fields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const start = pos;
    const [tag, afterTag] = varint(buf, pos);
    const number = Math.floor(tag / 8);
    const wireType = tag & 7;
    let end: number;
    let payloadStart = afterTag;
    switch (wireType) {
      case 0:
        end = varint(buf, afterTag)[1];
        break;
      case 1:
        end = afterTag + 8;
        break;
      case 2: {
        const [length, p] = varint(buf, afterTag);
        payloadStart = p;
        end = p + length;
        break;
      }
      case 5:
        end = afterTag + 4;
        break;
      default:
        throw new WireError(`unsupported wire type ${wireType}`);
    }
    if (number === 0 || end > buf.length) throw new WireError('malformed field');
    out.push({ number, wireType, start, end, payloadStart });
    pos = end;
  }
  return out;
}

const FLOAT_VAL = 5;
const DOUBLE_VAL = 6;

/** Decodes one TensorProto's bytes into a tensor, lifting packed float/double runs out as raw bytes. */
function decodeTensor(bytes: Uint8Array, what: string): Tensor {
  const all = fields(bytes);
  const packed = all.filter((f) => f.wireType === 2 && (f.number === FLOAT_VAL || f.number === DOUBLE_VAL));
  if (packed.length === 0 || packed.some((f) => f.number !== packed[0]!.number)) {
    return tensorFromProto(fromBinary(TensorProtoSchema, bytes), what);
  }
  // The rest of the message (dtype, shape, anything else) is small: let protobuf-es decode it.
  let restLength = 0;
  for (const f of all) if (!packed.includes(f)) restLength += f.end - f.start;
  const rest = new Uint8Array(restLength);
  let offset = 0;
  for (const f of all) {
    if (packed.includes(f)) continue;
    rest.set(bytes.subarray(f.start, f.end), offset);
    offset += f.end - f.start;
  }
  const proto = fromBinary(TensorProtoSchema, rest);
  const isFloat = packed[0]!.number === FLOAT_VAL;
  const expectedType = isFloat ? DataType.DT_FLOAT : DataType.DT_DOUBLE;
  const size = isFloat ? 4 : 8;
  const total = packed.reduce((n, f) => n + (f.end - f.payloadStart), 0);
  const elements = proto.tensorShape?.dim.reduce((n, d) => n * Number(d.size), 1) ?? 1;
  if (
    proto.dtype !== expectedType ||
    proto.tensorContent.byteLength > 0 ||
    total !== elements * size ||
    total === 0
  ) {
    return tensorFromProto(fromBinary(TensorProtoSchema, bytes), what);
  }
  // One run: a view (tensorFromProto copies it if unaligned); several runs: concatenated.
  let content: Uint8Array;
  if (packed.length === 1) {
    content = bytes.subarray(packed[0]!.payloadStart, packed[0]!.end);
  } else {
    content = new Uint8Array(total);
    let o = 0;
    for (const f of packed) {
      content.set(bytes.subarray(f.payloadStart, f.end), o);
      o += f.end - f.payloadStart;
    }
  }
  proto.tensorContent = content;
  return tensorFromProto(proto, what);
}

/** Decodes a PredictResponse into output tensors and its model_spec. */
export function decodePredictResponseFast(bytes: Uint8Array): {
  outputs: Record<string, Tensor>;
  modelSpec: ModelSpec | undefined;
} {
  try {
    const outputs: Record<string, Tensor> = {};
    let modelSpec: ModelSpec | undefined;
    const decoder = new TextDecoder('utf-8', { fatal: true });
    for (const f of fields(bytes)) {
      if (f.number === 1 && f.wireType === 2) {
        // map<string, TensorProto> entry: key = 1, value = 2.
        const entry = bytes.subarray(f.payloadStart, f.end);
        let key = '';
        let value: Uint8Array | undefined;
        for (const e of fields(entry)) {
          if (e.number === 1 && e.wireType === 2) key = decoder.decode(entry.subarray(e.payloadStart, e.end));
          else if (e.number === 2 && e.wireType === 2) value = entry.subarray(e.payloadStart, e.end);
        }
        outputs[key] = decodeTensor(value ?? new Uint8Array(0), `output '${key}'`);
      } else if (f.number === 2 && f.wireType === 2) {
        modelSpec = fromBinary(ModelSpecSchema, bytes.subarray(f.payloadStart, f.end));
      }
    }
    return { outputs, modelSpec };
  } catch (error) {
    if (!(error instanceof WireError)) throw error;
    // Let the reference decoder report malformed input in its own words.
    const response = fromBinary(PredictResponseSchema, bytes);
    const outputs: Record<string, Tensor> = {};
    for (const [alias, proto] of Object.entries(response.outputs))
      outputs[alias] = tensorFromProto(proto, `output '${alias}'`);
    return { outputs, modelSpec: response.modelSpec };
  }
}
