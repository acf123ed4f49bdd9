/**
 * Writes a PredictResponse as chunks whose concatenation is the serialized message,
 * without copying tensor bytes: a numeric output sent as `tensor_content`, and a float32 /
 * float64 output sent as TF Serving's default typed `float_val` / `double_val` (a packed
 * repeated float is on the wire exactly the tensor's little-endian bytes), becomes a small
 * prefix followed by a view of the tensor's own data. Other typed outputs are encoded by
 * protobuf-es. Fields are written in protobuf-es's order (field numbers: outputs, then
 * model_spec), so the bytes equal `toBinary(PredictResponseSchema, ...)` of the same message.
 * The small messages around the tensor bytes (a view's dtype and shape, the model spec) are
 * written by hand: protobuf-es's reflective encoder cost more main-thread time per response
 * than the rest of the writer.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { isStringData, type Tensor } from '../tensor.js';
import { toBytes } from '../dtype.js';
import type { ModelSpec } from '../gen/tensorflow_serving/apis/model_pb.js';
import { PredictResponseSchema } from '../gen/tensorflow_serving/apis/predict_pb.js';
import { dataTypeFromDType, tensorToProto } from './tf-tensor-codec.js';
import {
  LENGTH_DELIMITED,
  TENSOR_DOUBLE_VAL_FIELD,
  TENSOR_FLOAT_VAL_FIELD,
  VARINT,
  pushBytesField,
  pushInt64,
  pushStringField,
  pushTag,
  pushVarint,
  varintBytes,
} from './wire-bytes.js';

/** PredictResponse.outputs (field 1), map entry key (1) and value (2), TensorProto.tensor_content (4). */
const OUTPUTS_TAG = 0x0a;
const MAP_KEY_TAG = 0x0a;
const MAP_VALUE_TAG = 0x12;
const TENSOR_CONTENT_FIELD = 4;
/** PredictResponse.model_spec. */
const MODEL_SPEC_FIELD = 2;

/**
 * A TensorProto holding only `dtype` (field 1) and `tensor_shape` (2: dims (2) of `size` (1),
 * or `unknown_rank` (3) when the shape is undefined), as protobuf-es encodes it.
 */
export function tensorHeaderBytes(dtype: number, shape: readonly number[] | undefined): number[] {
  const out: number[] = [];
  if (dtype !== 0) {
    pushTag(out, 1, VARINT);
    pushVarint(out, dtype);
  }
  const dims: number[] = [];
  if (shape === undefined) {
    pushTag(dims, 3, VARINT);
    dims.push(1);
  } else {
    const dim: number[] = [];
    for (const d of shape) {
      dim.length = 0;
      if (d !== 0) {
        pushTag(dim, 1, VARINT);
        pushInt64(dim, d);
      }
      pushBytesField(dims, 2, dim);
    }
  }
  pushBytesField(out, 2, dims);
  return out;
}

/**
 * A ModelSpec as protobuf-es encodes it: name (1), version (2, an Int64Value), signature_name
 * (3), version_label (4), default values left out.
 */
export function modelSpecBytes(spec: ModelSpec): number[] {
  const out: number[] = [];
  pushStringField(out, 1, spec.name);
  const choice = spec.versionChoice;
  if (choice.case === 'version') {
    const value: number[] = [];
    if (choice.value.value !== 0n) {
      pushTag(value, 1, VARINT);
      pushInt64(value, choice.value.value);
    }
    pushBytesField(out, 2, value);
  }
  pushStringField(out, 3, spec.signatureName);
  if (choice.case === 'versionLabel') {
    // A oneof member is written even when it holds its default.
    pushBytesField(out, 4, encoder.encode(choice.value));
  }
  return out;
}

const encoder = new TextEncoder();

/** The field a numeric output's bytes go to without encoding, or undefined when it must be encoded. */
function viewField(t: Tensor, asTensorContent: boolean): number | undefined {
  if (isStringData(t.data) || t.data.byteLength === 0) return undefined;
  if (asTensorContent) return TENSOR_CONTENT_FIELD;
  if (t.dtype === 'float32') return TENSOR_FLOAT_VAL_FIELD;
  if (t.dtype === 'float64') return TENSOR_DOUBLE_VAL_FIELD;
  return undefined;
}

/**
 * `outputs` by alias, in the order given; `modelSpec` as resolved. With `asTensorContent`
 * numeric outputs use `tensor_content` (TF Serving's --enable_serialization_as_tensor_content),
 * otherwise typed fields; strings always `string_val`.
 */
export function writePredictResponse(
  outputs: Readonly<Record<string, Tensor>>,
  modelSpec: ModelSpec | undefined,
  asTensorContent: boolean,
): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  for (const [alias, t] of Object.entries(outputs)) {
    const field = viewField(t, asTensorContent);
    if (field === undefined) {
      // The map field of a response holding only this output is exactly this entry's bytes.
      const proto = tensorToProto(t, { asTensorContent, prepackNumbers: true });
      chunks.push(
        toBinary(PredictResponseSchema, create(PredictResponseSchema, { outputs: { [alias]: proto } })),
      );
      continue;
    }
    const data = toBytes(t.data as Exclude<Tensor['data'], readonly Uint8Array[]>);
    const small = tensorHeaderBytes(dataTypeFromDType(t.dtype), t.shape);
    const key = encoder.encode(alias);
    const dataHeader = [(field << 3) | LENGTH_DELIMITED, ...varintBytes(data.byteLength)];
    const valueLength = small.length + dataHeader.length + data.byteLength;
    const entryHead = [MAP_KEY_TAG, ...varintBytes(key.byteLength)];
    const valueHead = [MAP_VALUE_TAG, ...varintBytes(valueLength)];
    const entryLength = entryHead.length + key.byteLength + valueHead.length + valueLength;
    chunks.push(
      new Uint8Array([
        OUTPUTS_TAG,
        ...varintBytes(entryLength),
        ...entryHead,
        ...key,
        ...valueHead,
        ...small,
        ...dataHeader,
      ]),
      data,
    );
  }
  if (modelSpec !== undefined) {
    const field: number[] = [];
    pushBytesField(field, MODEL_SPEC_FIELD, modelSpecBytes(modelSpec));
    chunks.push(new Uint8Array(field));
  }
  return chunks;
}
