/**
 * The OIP HTTP/REST inference request: `{"id"?, "parameters"?, "inputs": [...],
 * "outputs"?: [...]}`, with the binary tensor data extension. Decoded by the server,
 * encoded by the client.
 */
import { invalidArgument } from '../errors.js';
import { readFastJsonBody } from '../numeric-json.js';
import { type Tensor } from '../tensor.js';
import { binaryOf, tensorFromBinary } from './binary-tensor.js';
import { type KServeDatatype, datatypeOfDtype, isKServeDatatype } from './datatype.js';
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
  writeParameters,
} from './http-framing.js';
import type { InferInputTensor, InferParameters, InferRequest, InferRequestedOutput } from './infer-types.js';
import { tensorFromJsonData, writeJsonData } from './json-data.js';

/** The fast reader's KServe v2 request object for a body without binary data; undefined to parse it. */
function readKServeJsonFast(body: Uint8Array): Record<string, unknown> | undefined {
  return readFastJsonBody('kserve-infer', body) as Record<string, unknown> | undefined;
}

const preview = (name: string): string => (name.length > 64 ? `${name.slice(0, 64)}...` : name);

/**
 * Decodes an inference request body (already decompressed). `headerLength` is the
 * Inference-Header-Content-Length header, if any: the JSON is then that many bytes and the
 * rest is binary tensor data, claimed in order by the inputs with `binary_data_size`.
 *
 * Every malformed input is INVALID_ARGUMENT naming the problem (UNIMPLEMENTED for raw
 * binary requests): a header length that is not a number or lies about the body,
 * structure errors, unknown datatypes, bad shapes, binary sizes beyond the body or not
 * matching the shape, BYTES length prefixes past the end, bytes nobody claims, JSON data
 * whose element count or values do not fit. Numeric tensors from binary data are views
 * of `body` (aligned copies when their offset is not aligned); nothing is allocated for a
 * declared shape before the data is known to hold it.
 *
 * A body without binary data is read by the fast reader (numeric `data` straight into
 * typed arrays, readFastJsonBody 'kserve-infer') when it takes it, else by JSON.parse; the
 * result is the same. `fastHeader` is the fast reader's result when the caller already has
 * it (e.g. from a decode thread; it must describe these bytes), null when the caller's fast
 * reader did not take the body (JSON.parse then reads it without a second try).
 */
export function decodeHttpInferRequest(
  body: Uint8Array,
  headerLength: string | undefined,
  fastHeader?: Record<string, unknown> | null,
): InferRequest {
  const jsonBytes = jsonHeaderLength(headerLength, body.byteLength);
  const root =
    fastHeader ??
    (headerLength === undefined && fastHeader === undefined ? readKServeJsonFast(body) : undefined) ??
    parseJsonHeader(body.subarray(0, jsonBytes), 'Inference request');
  const binary = new BinaryArea(body.subarray(jsonBytes));

  let id = '';
  if (root['id'] !== undefined) {
    if (typeof root['id'] !== 'string') throw invalidArgument('Inference request: "id" must be a string');
    id = root['id'];
  }
  const parameters = readParameters(root['parameters'], 'Inference request');
  const binaryOutput = parameters['binary_data_output'];
  if (binaryOutput !== undefined && typeof binaryOutput !== 'boolean') {
    throw invalidArgument('Inference request: binary_data_output must be true or false');
  }

  const rawInputs = root['inputs'];
  if (!Array.isArray(rawInputs)) throw invalidArgument('Inference request: "inputs" must be a list');
  const seen = new Set<string>();
  const inputs: InferInputTensor[] = [];
  for (let i = 0; i < rawInputs.length; i++) {
    const raw: unknown = rawInputs[i];
    if (!isObject(raw)) throw invalidArgument(`Inference request: input ${i} must be an object`);
    const name = raw['name'];
    if (typeof name !== 'string' || name === '') {
      throw invalidArgument(`Inference request: input ${i} needs a "name"`);
    }
    const what = `Input '${preview(name)}'`;
    if (seen.has(name)) throw invalidArgument(`${what} appears more than once`);
    seen.add(name);
    const datatype = raw['datatype'];
    if (!isKServeDatatype(datatype)) {
      throw invalidArgument(
        `${what}: unknown datatype ${JSON.stringify(typeof datatype === 'string' ? preview(datatype) : (datatype ?? null))}`,
      );
    }
    const { shape, count } = readShape(raw['shape'], what);
    const inputParameters = readParameters(raw['parameters'], what);
    const size = binaryDataSize(inputParameters, what);
    const hasData = raw['data'] !== undefined;
    let tensor: Tensor;
    if (size !== undefined) {
      if (hasData) throw invalidArgument(`${what} has both "data" and binary_data_size`);
      tensor = tensorFromBinary(datatype, shape, count, binary.take(size, what), what);
    } else {
      if (!hasData) throw invalidArgument(`${what} has neither "data" nor binary_data_size`);
      tensor = tensorFromJsonData(datatype, shape, count, raw['data'], what);
    }
    inputs.push({ name, datatype, shape, parameters: inputParameters, tensor });
  }
  binary.finish('Inference request');

  let outputs: InferRequestedOutput[] | undefined;
  const rawOutputs = root['outputs'];
  if (rawOutputs !== undefined) {
    if (!Array.isArray(rawOutputs)) throw invalidArgument('Inference request: "outputs" must be a list');
    const names = new Set<string>();
    outputs = rawOutputs.map((raw: unknown, i): InferRequestedOutput => {
      if (!isObject(raw)) throw invalidArgument(`Inference request: output ${i} must be an object`);
      const name = raw['name'];
      if (typeof name !== 'string' || name === '') {
        throw invalidArgument(`Inference request: output ${i} needs a "name"`);
      }
      const what = `Output '${preview(name)}'`;
      if (names.has(name)) throw invalidArgument(`${what} is requested more than once`);
      names.add(name);
      const outputParameters = readParameters(raw['parameters'], what);
      const binaryData = outputParameters['binary_data'];
      if (binaryData !== undefined && typeof binaryData !== 'boolean') {
        throw invalidArgument(`${what}: binary_data must be true or false`);
      }
      return { name, parameters: outputParameters, classification: classCount(outputParameters, what) };
    });
  }
  return { id, parameters, inputs, outputs };
}

function classCount(parameters: InferParameters, what: string): number {
  const k = parameters['classification'];
  if (k === undefined) return 0;
  if (typeof k !== 'number' || !Number.isSafeInteger(k) || k < 0) {
    throw invalidArgument(`${what}: classification must be a non-negative integer`);
  }
  return k;
}

/** One input as a client sends it. */
export interface HttpInferInput {
  readonly name: string;
  readonly tensor: Tensor;
  /** Send the data as binary (binary_data_size) instead of JSON `data`. */
  readonly binary: boolean;
  /** Overrides the datatype derived from the tensor's dtype (e.g. to send uint8 storage as BOOL). */
  readonly datatype?: KServeDatatype;
  readonly parameters?: InferParameters;
}

/** One requested output as a client asks for it. */
export interface HttpRequestedOutput {
  readonly name: string;
  /** `binary_data`; omitted when undefined (the server then uses binary_data_output). */
  readonly binary?: boolean;
  /** Top-K classification (the classification extension); 0 or undefined: the tensor itself. */
  readonly classification?: number;
  readonly parameters?: InferParameters;
}

export interface HttpInferRequestInit {
  readonly id?: string;
  readonly parameters?: InferParameters;
  readonly inputs: readonly HttpInferInput[];
  /** Requested outputs; all outputs when undefined. */
  readonly outputs?: readonly HttpRequestedOutput[];
  /** `binary_data_output` (applies when no outputs are listed). */
  readonly binaryOutput?: boolean;
}

/**
 * Encodes an inference request: the JSON header and the binary inputs' bytes (views of
 * numeric data, no copy). Send Inference-Header-Content-Length = `json.byteLength` when
 * `binaryBytes > 0`.
 */
export function encodeHttpInferRequest(init: HttpInferRequestInit): HttpInferBody {
  let estimate = 256;
  for (const input of init.inputs) if (!input.binary) estimate += input.tensor.data.length * 12;
  const w = newWriter(estimate);
  const binary: Uint8Array[] = [];
  let binaryBytes = 0;
  w.byte(0x7b);
  let comma = false;
  if (init.id !== undefined && init.id !== '') {
    writeKey(w, 'id', comma);
    w.string(init.id);
    comma = true;
  }
  const parameters: Record<string, InferParameters[string]> = { ...init.parameters };
  if (init.binaryOutput !== undefined) parameters['binary_data_output'] = init.binaryOutput;
  if (Object.keys(parameters).length > 0) {
    writeKey(w, 'parameters', comma);
    writeParameters(w, parameters);
    comma = true;
  }
  writeKey(w, 'inputs', comma);
  w.byte(0x5b);
  init.inputs.forEach((input, i) => {
    if (i > 0) w.byte(0x2c);
    w.ascii('{"name":');
    w.string(input.name);
    w.ascii(',"shape":[');
    w.ascii(input.tensor.shape.join(','));
    w.ascii('],"datatype":"');
    w.ascii(input.datatype ?? datatypeOfDtype(input.tensor.dtype));
    w.byte(0x22);
    const inputParameters: Record<string, InferParameters[string]> = { ...input.parameters };
    if (input.binary) {
      const bytes = binaryOf(input.tensor);
      binary.push(bytes);
      binaryBytes += bytes.byteLength;
      inputParameters['binary_data_size'] = bytes.byteLength;
    }
    if (Object.keys(inputParameters).length > 0) {
      w.ascii(',"parameters":');
      writeParameters(w, inputParameters);
    }
    if (!input.binary) {
      w.ascii(',"data":');
      writeJsonData(w, input.tensor, `Input '${input.name}'`);
    }
    w.byte(0x7d);
  });
  w.byte(0x5d);
  if (init.outputs !== undefined) {
    w.ascii(',"outputs":[');
    init.outputs.forEach((output, i) => {
      if (i > 0) w.byte(0x2c);
      w.ascii('{"name":');
      w.string(output.name);
      const outputParameters: Record<string, InferParameters[string]> = { ...output.parameters };
      if (output.binary !== undefined) outputParameters['binary_data'] = output.binary;
      if (output.classification !== undefined && output.classification > 0) {
        outputParameters['classification'] = output.classification;
      }
      if (Object.keys(outputParameters).length > 0) {
        w.ascii(',"parameters":');
        writeParameters(w, outputParameters);
      }
      w.byte(0x7d);
    });
    w.byte(0x5d);
  }
  w.byte(0x7d);
  return { json: finishJson(w, binaryBytes), binary, binaryBytes };
}
