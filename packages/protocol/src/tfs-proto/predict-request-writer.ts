/**
 * Writes a PredictRequest as chunks whose concatenation is the message, without copying
 * tensor bytes: each numeric input sent as `tensor_content` becomes a small prefix (map
 * entry, dtype, shape, the field-4 tag and length) followed by a view of the tensor's own
 * bytes. Protobuf fields may come in any order, so the result decodes exactly like
 * protobuf-es's own encoding of the same message.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import type { Tensor } from '../tensor.js';
import { TensorProtoSchema } from '../gen/tensorflow/core/framework/tensor_pb.js';
import { type PredictRequest, PredictRequestSchema } from '../gen/tensorflow_serving/apis/predict_pb.js';
import { tensorToProto } from './tf-tensor-codec.js';
import { varintBytes } from './wire-bytes.js';

/** PredictRequest.inputs (field 2), map entry key (field 1) and value (field 2), TensorProto.tensor_content (field 4). */
const INPUTS_TAG = 0x12;
const MAP_KEY_TAG = 0x0a;
const MAP_VALUE_TAG = 0x12;
const TENSOR_CONTENT_TAG = 0x22;

const encoder = new TextEncoder();

/**
 * `head` carries everything but the inputs (model_spec, output_filter). With
 * `asTensorContent` false the inputs are written as typed fields (floats pre-packed) in
 * one chunk; otherwise numeric inputs are zero-copy chunks as described above.
 */
export function writePredictRequest(
  head: PredictRequest,
  inputs: Readonly<Record<string, Tensor>>,
  asTensorContent: boolean,
): Uint8Array[] {
  if (!asTensorContent) {
    const whole = create(PredictRequestSchema, head);
    for (const [alias, t] of Object.entries(inputs))
      whole.inputs[alias] = tensorToProto(t, { asTensorContent, prepackNumbers: true });
    return [toBinary(PredictRequestSchema, whole)];
  }
  const chunks: Uint8Array[] = [toBinary(PredictRequestSchema, head)];
  for (const [alias, t] of Object.entries(inputs)) {
    const proto = tensorToProto(t, { asTensorContent: true });
    const content = proto.tensorContent;
    if (t.dtype === 'string' || content.byteLength === 0) {
      // The map field of a request holding only this input is exactly this entry's bytes.
      chunks.push(
        toBinary(PredictRequestSchema, create(PredictRequestSchema, { inputs: { [alias]: proto } })),
      );
      continue;
    }
    proto.tensorContent = new Uint8Array(0);
    const small = toBinary(TensorProtoSchema, proto);
    const key = encoder.encode(alias);
    const contentHeader = [TENSOR_CONTENT_TAG, ...varintBytes(content.byteLength)];
    const valueLength = small.byteLength + contentHeader.length + content.byteLength;
    const entryHead = [MAP_KEY_TAG, ...varintBytes(key.byteLength)];
    const valueHead = [MAP_VALUE_TAG, ...varintBytes(valueLength)];
    const entryLength = entryHead.length + key.byteLength + valueHead.length + valueLength;
    const prefix = new Uint8Array([
      INPUTS_TAG,
      ...varintBytes(entryLength),
      ...entryHead,
      ...key,
      ...valueHead,
      ...small,
      ...contentHeader,
    ]);
    chunks.push(prefix, content);
  }
  return chunks;
}
