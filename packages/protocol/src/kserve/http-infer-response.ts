/**
 * The OIP HTTP/REST inference response: `{"model_name", "model_version", "id"?,
 * "outputs": [{"name", "datatype", "shape", "parameters"?: {"binary_data_size"}, "data"?}]}`,
 * followed by the binary outputs' bytes in output order. Encoded by the server, decoded
 * by the client.
 */
import { ServingError, Code, invalidArgument } from '../errors.js';
import { type Tensor } from '../tensor.js';
import { binaryOf, tensorFromBinary } from './binary-tensor.js';
import { datatypeOfDtype, isKServeDatatype } from './datatype.js';
import {
  BinaryArea,
  type HttpInferBody,
  binaryDataSize,
  finishJson,
  isObject,
  jsonHeaderLength,
  newWriter,
  parseJsonHeader,
  readParameters,
  readShape,
  writeKey,
} from './http-framing.js';
import type { InferRequest, InferRequestedOutput, InferResponse } from './infer-types.js';
import { tensorFromJsonData, writeJsonData } from './json-data.js';

/**
 * Whether an output goes back as binary data: a listed output by its `binary_data`, else
 * by the request's `binary_data_output`; with no outputs listed, every output by
 * `binary_data_output`. JSON when neither says so (Triton's rule).
 */
export function outputIsBinary(request: InferRequest, requested: InferRequestedOutput | undefined): boolean {
  const own = requested?.parameters['binary_data'];
  if (typeof own === 'boolean') return own;
  return request.parameters['binary_data_output'] === true;
}

/**
 * Encodes a response; `binary[i]` says whether output i is sent as binary data. Binary
 * chunks are views of numeric output data (no copy). Send Inference-Header-Content-Length
 * = `json.byteLength` (and application/octet-stream) only when `binaryBytes > 0`.
 * INVALID_ARGUMENT when a BYTES output that must go as JSON is not UTF-8.
 */
export function encodeHttpInferResponse(response: InferResponse, binary: readonly boolean[]): HttpInferBody {
  let estimate = 256;
  response.outputs.forEach((o, i) => {
    if (binary[i] !== true) estimate += o.tensor.data.length * 12;
  });
  const w = newWriter(estimate);
  const chunks: Uint8Array[] = [];
  let binaryBytes = 0;
  w.ascii('{"model_name":');
  w.string(response.modelName);
  w.ascii(',"model_version":');
  w.string(response.modelVersion);
  if (response.id !== '') {
    writeKey(w, 'id', true);
    w.string(response.id);
  }
  w.ascii(',"outputs":[');
  response.outputs.forEach((output, i) => {
    if (i > 0) w.byte(0x2c);
    const tensor = output.tensor;
    w.ascii('{"name":');
    w.string(output.name);
    w.ascii(',"datatype":"');
    w.ascii(datatypeOfDtype(tensor.dtype));
    w.ascii('","shape":[');
    w.ascii(tensor.shape.join(','));
    w.byte(0x5d);
    if (binary[i] === true) {
      const bytes = binaryOf(tensor);
      chunks.push(bytes);
      binaryBytes += bytes.byteLength;
      w.ascii(`,"parameters":{"binary_data_size":${bytes.byteLength}}`);
    } else {
      w.ascii(',"data":');
      writeJsonData(w, tensor, `Output '${output.name}'`);
    }
    w.byte(0x7d);
  });
  w.ascii(']}');
  return { json: finishJson(w, binaryBytes), binary: chunks, binaryBytes };
}

/** A decoded response as the client sees it. */
export interface HttpInferResult {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id: string;
  /** In response order. */
  readonly outputs: readonly { readonly name: string; readonly tensor: Tensor }[];
}

/**
 * Decodes a response body (already decompressed). A response that does not follow the
 * protocol is INTERNAL (the server's fault, not the caller's), naming the problem.
 */
export function decodeHttpInferResponse(body: Uint8Array, headerLength: string | undefined): HttpInferResult {
  try {
    const jsonBytes = jsonHeaderLength(headerLength, body.byteLength);
    const root = parseJsonHeader(body.subarray(0, jsonBytes), 'Inference response');
    const binary = new BinaryArea(body.subarray(jsonBytes));
    const rawOutputs = root['outputs'];
    if (!Array.isArray(rawOutputs)) throw invalidArgument('"outputs" is not a list');
    const outputs = rawOutputs.map((raw: unknown, i) => {
      if (!isObject(raw) || typeof raw['name'] !== 'string') throw invalidArgument(`output ${i} has no name`);
      const name = raw['name'];
      const what = `output '${name}'`;
      const datatype = raw['datatype'];
      if (!isKServeDatatype(datatype)) throw invalidArgument(`${what} has an unknown datatype`);
      const { shape, count } = readShape(raw['shape'], what);
      const size = binaryDataSize(readParameters(raw['parameters'], what), what);
      const tensor =
        size === undefined
          ? tensorFromJsonData(datatype, shape, count, raw['data'], what, { bf16FromNumbers: true })
          : tensorFromBinary(datatype, shape, count, binary.take(size, what), what);
      return { name, tensor };
    });
    binary.finish('Inference response');
    return {
      modelName: typeof root['model_name'] === 'string' ? root['model_name'] : '',
      modelVersion: typeof root['model_version'] === 'string' ? root['model_version'] : '',
      id: typeof root['id'] === 'string' ? root['id'] : '',
      outputs,
    };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ServingError(Code.INTERNAL, `Malformed inference response: ${message}`, { cause: error });
  }
}
