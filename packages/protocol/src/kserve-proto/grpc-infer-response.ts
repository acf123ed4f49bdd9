/**
 * `inference.ModelInferResponse`, the gRPC inference response: written by the server with
 * every output's data in `raw_output_contents` (one entry per output, in output order, as
 * Triton answers and tritonclient reads), numeric data as views of the output tensors (no
 * copy); decoded by the client.
 */
import { fromBinary } from '@bufbuild/protobuf';
import { invalidArgument } from '../errors.js';
import { type Tensor, checkShape } from '../tensor.js';
import { binaryOf, tensorFromBinary } from '../kserve/binary-tensor.js';
import { datatypeOfDtype, isKServeDatatype } from '../kserve/datatype.js';
import type { InferResponse } from '../kserve/infer-types.js';
import { ModelInferResponseSchema } from '../gen/inference/inference_pb.js';
import { pushBytesField, pushInt64, pushStringField, varintBytes } from '../tfs-proto/wire-bytes.js';
import { tensorFromContents } from './tensor-contents.js';

/** ModelInferResponse.raw_output_contents. */
const RAW_OUTPUT_CONTENTS_TAG = (6 << 3) | 2;

/**
 * Writes a ModelInferResponse as chunks whose concatenation is the serialized message:
 * the small fields written by hand (model_name 1, model_version 2, id 3, then each output's
 * name 1, datatype 2 and packed shape 3 in outputs 5; protobuf-es's reflective encoder cost
 * more than the rest of the call), then one `raw_output_contents` entry per output (a tag
 * and length, then a view of numeric data or the length-prefixed BYTES). Fields stay in
 * field-number order, so the bytes equal protobuf-es's encoding of the same message.
 */
export function writeModelInferResponse(response: InferResponse): Uint8Array[] {
  const head: number[] = [];
  pushStringField(head, 1, response.modelName);
  pushStringField(head, 2, response.modelVersion);
  pushStringField(head, 3, response.id);
  const output: number[] = [];
  const shape: number[] = [];
  for (const o of response.outputs) {
    output.length = 0;
    pushStringField(output, 1, o.name);
    pushStringField(output, 2, datatypeOfDtype(o.tensor.dtype));
    if (o.tensor.shape.length > 0) {
      shape.length = 0;
      for (const d of o.tensor.shape) pushInt64(shape, d);
      pushBytesField(output, 3, shape);
    }
    pushBytesField(head, 5, output);
  }
  const chunks: Uint8Array[] = [new Uint8Array(head)];
  for (const o of response.outputs) {
    const data = binaryOf(o.tensor);
    chunks.push(new Uint8Array([RAW_OUTPUT_CONTENTS_TAG, ...varintBytes(data.byteLength)]));
    if (data.byteLength > 0) chunks.push(data);
  }
  return chunks;
}

/**
 * Decodes a ModelInferResponse: output i takes `raw_output_contents[i]` when present, else
 * its typed `contents` (an output of no elements may have neither). Numeric raw data are
 * views of `bytes` where aligned. INVALID_ARGUMENT for undecodable bytes and for data that
 * does not match an output's datatype and shape.
 */
export function decodeModelInferResponse(bytes: Uint8Array): InferResponse {
  let message;
  try {
    message = fromBinary(ModelInferResponseSchema, bytes);
  } catch (error) {
    const reason = error instanceof Error ? error.message : 'undecodable bytes';
    throw invalidArgument(`Malformed inference.ModelInferResponse: ${reason}`);
  }
  const raw = message.rawOutputContents;
  const outputs = message.outputs.map((output, i) => {
    const what = `Output '${output.name.slice(0, 64)}'`;
    if (!isKServeDatatype(output.datatype)) {
      throw invalidArgument(`${what}: unknown datatype ${JSON.stringify(output.datatype.slice(0, 32))}`);
    }
    const shape = output.shape.map((d) => {
      if (d < 0n || d > BigInt(Number.MAX_SAFE_INTEGER)) {
        throw invalidArgument(`${what}: invalid dimension ${d.toString()}`);
      }
      return Number(d);
    });
    const count = checkShape(shape, what);
    let tensor: Tensor;
    if (i < raw.length) tensor = tensorFromBinary(output.datatype, shape, count, raw[i]!, what);
    else if (output.contents !== undefined) {
      tensor = tensorFromContents(output.datatype, shape, count, output.contents, what);
    } else if (count === 0) {
      tensor = tensorFromBinary(output.datatype, shape, 0, new Uint8Array(0), what);
    } else throw invalidArgument(`${what}: the response carries no data for it`);
    return { name: output.name, tensor };
  });
  return { modelName: message.modelName, modelVersion: message.modelVersion, id: message.id, outputs };
}

/** ModelStreamInferResponse.infer_response. */
const STREAM_INFER_RESPONSE_TAG = (2 << 3) | 2;

/**
 * A `ModelStreamInferResponse` (the messages of `ModelStreamInfer`) carrying one answer: the
 * ModelInferResponse chunks (writeModelInferResponse) behind the field's tag and length.
 */
export function writeModelStreamInferResponse(inferResponse: readonly Uint8Array[]): Uint8Array[] {
  let length = 0;
  for (const c of inferResponse) length += c.byteLength;
  return [new Uint8Array([STREAM_INFER_RESPONSE_TAG, ...varintBytes(length)]), ...inferResponse];
}

/**
 * A `ModelStreamInferResponse` reporting a failed request: `error_message`, and the request's
 * id in `infer_response` when it had one (so that a client can tell which request failed).
 */
export function writeModelStreamInferError(message: string, id: string): Uint8Array {
  const out: number[] = [];
  pushStringField(out, 1, message);
  if (id !== '') {
    const inner: number[] = [];
    pushStringField(inner, 3, id);
    pushBytesField(out, 2, inner);
  }
  return new Uint8Array(out);
}
