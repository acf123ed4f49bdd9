/**
 * `inference.ModelInferRequest`, the gRPC inference request: decoded by the server into the
 * protocol-neutral InferRequest (raw contents as views of the message), encoded by the
 * client with raw contents written as views of the tensors (no copy).
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { invalidArgument } from '../errors.js';
import { type Tensor, checkShape } from '../tensor.js';
import { binaryOf, tensorFromBinary } from '../kserve/binary-tensor.js';
import { type KServeDatatype, datatypeOfDtype, isKServeDatatype } from '../kserve/datatype.js';
import type {
  InferInputTensor,
  InferParameters,
  InferRequest,
  InferRequestedOutput,
} from '../kserve/infer-types.js';
import {
  type InferParameter,
  ModelInferRequestSchema,
  type ModelInferRequest_InferRequestedOutputTensor,
} from '../gen/inference/inference_pb.js';
import { readVarint, skipValue, varintBytes } from '../tfs-proto/wire-bytes.js';
import { parametersFromProto, parametersToProto } from './grpc-parameters.js';
import { tensorFromContents } from './tensor-contents.js';

/** A decoded gRPC inference request: the model it names and the protocol-neutral request. */
export interface GrpcInferRequest extends InferRequest {
  readonly modelName: string;
  /** "" when the server picks the version. */
  readonly modelVersion: string;
}

/** ModelInferRequest.raw_input_contents. */
const RAW_INPUT_CONTENTS_FIELD = 7;
const LENGTH_DELIMITED = 2;
/** Most dimensions a declared shape may have. */
const MAX_RANK = 64;

const preview = (name: string): string => (name.length > 64 ? `${name.slice(0, 64)}...` : name);

/** A declared shape as numbers; INVALID_ARGUMENT for negative or huge dimensions. */
export function declaredShape(dims: readonly bigint[], what: string): { shape: number[]; count: number } {
  if (dims.length > MAX_RANK) throw invalidArgument(`${what}: shape has more than ${MAX_RANK} dimensions`);
  const shape = dims.map((d) => (d >= 0n && d <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(d) : Number.NaN));
  for (let i = 0; i < shape.length; i++) {
    if (Number.isNaN(shape[i])) {
      throw invalidArgument(`${what}: invalid dimension ${dims[i]!.toString()} in shape`);
    }
  }
  return { shape, count: checkShape(shape, what) };
}

/** The classification extension over gRPC: an int64_param `classification` (Triton refuses other types). */
function classCount(parameters: Readonly<Record<string, InferParameter>>, what: string): number {
  const parameter = parameters['classification'];
  if (parameter === undefined) return 0;
  const choice = parameter.parameterChoice;
  if (choice.case !== 'int64Param') {
    throw invalidArgument(`${what}: the classification parameter must be an int64_param`);
  }
  if (choice.value < 0n || choice.value > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw invalidArgument(`${what}: classification must be a non-negative integer`);
  }
  return Number(choice.value);
}

function requestedOutput(
  output: ModelInferRequest_InferRequestedOutputTensor,
  i: number,
): InferRequestedOutput {
  if (output.name === '') throw invalidArgument(`Inference request: output ${i} needs a name`);
  const what = `Output '${preview(output.name)}'`;
  return {
    name: output.name,
    parameters: parametersFromProto(output.parameters, what),
    classification: classCount(output.parameters, what),
  };
}

/**
 * Decodes a ModelInferRequest. Every input takes its data from `raw_input_contents` (one
 * entry per input, in input order, as tritonclient sends it) or from its typed `contents`,
 * never both. INVALID_ARGUMENT naming the problem for undecodable bytes, a raw contents
 * count that differs from the input count, raw and typed data together, an input without
 * data, unknown datatypes, bad shapes, raw sizes that do not match the shape and datatype,
 * BYTES length prefixes past the end, typed values of the wrong field or count, duplicate
 * names, and a classification parameter that is not an int64. Numeric raw contents become
 * views of `bytes` (aligned copies where their offset is not aligned); nothing is allocated
 * for a declared shape before the data is known to hold it.
 */
export function decodeModelInferRequest(bytes: Uint8Array): GrpcInferRequest {
  let message;
  try {
    message = fromBinary(ModelInferRequestSchema, bytes);
  } catch (error) {
    const reason = error instanceof Error ? error.message : 'undecodable bytes';
    throw invalidArgument(`Malformed inference.ModelInferRequest: ${reason}`);
  }
  const raw = message.rawInputContents;
  if (raw.length > 0 && raw.length !== message.inputs.length) {
    throw invalidArgument(
      `Inference request: ${raw.length} raw_input_contents for ${message.inputs.length} inputs (one per input, in input order)`,
    );
  }
  const seen = new Set<string>();
  const inputs: InferInputTensor[] = message.inputs.map((input, i) => {
    if (input.name === '') throw invalidArgument(`Inference request: input ${i} needs a name`);
    const what = `Input '${preview(input.name)}'`;
    if (seen.has(input.name)) throw invalidArgument(`${what} appears more than once`);
    seen.add(input.name);
    const datatype = input.datatype;
    if (!isKServeDatatype(datatype)) {
      throw invalidArgument(`${what}: unknown datatype ${JSON.stringify(preview(datatype))}`);
    }
    const { shape, count } = declaredShape(input.shape, what);
    const parameters = parametersFromProto(input.parameters, what);
    let tensor: Tensor;
    if (raw.length > 0) {
      if (input.contents !== undefined) {
        throw invalidArgument(`${what}: contents must not be given when the request uses raw_input_contents`);
      }
      tensor = tensorFromBinary(datatype, shape, count, raw[i]!, what);
    } else if (input.contents !== undefined) {
      tensor = tensorFromContents(datatype, shape, count, input.contents, what);
    } else {
      throw invalidArgument(`${what}: no data (neither raw_input_contents nor contents)`);
    }
    return { name: input.name, datatype, shape, parameters, tensor };
  });
  const names = new Set<string>();
  const outputs = message.outputs.map((output, i) => {
    const requested = requestedOutput(output, i);
    if (names.has(requested.name)) {
      throw invalidArgument(`Output '${preview(requested.name)}' is requested more than once`);
    }
    names.add(requested.name);
    return requested;
  });
  return {
    modelName: message.modelName,
    modelVersion: message.modelVersion,
    id: message.id,
    parameters: parametersFromProto(message.parameters, 'Inference request'),
    inputs,
    outputs: outputs.length === 0 ? undefined : outputs,
  };
}

/**
 * Where the payload of the first `raw_input_contents` entry starts inside a serialized
 * ModelInferRequest, judged from its first bytes only (`head` may be a prefix of the
 * message); undefined when the prefix does not reach it. The gRPC transport places the
 * message so that this offset is 8-byte aligned, so that the first input decodes as a
 * view. Never throws: a wrong answer only costs an aligned copy later.
 */
export function modelInferRequestRawOffset(head: Uint8Array): number | undefined {
  let pos = 0;
  while (pos < head.length) {
    const tag = readVarint(head, pos);
    if (tag === undefined) return undefined;
    const field = Math.floor(tag[0] / 8);
    const wireType = tag[0] & 7;
    if (field === RAW_INPUT_CONTENTS_FIELD && wireType === LENGTH_DELIMITED) {
      return readVarint(head, tag[1])?.[1];
    }
    const next = skipValue(head, tag[1], wireType);
    if (next === undefined) return undefined;
    pos = next;
  }
  return undefined;
}

/** ModelInferRequest.model_name and model_version. */
const MODEL_NAME_FIELD = 1;
const MODEL_VERSION_FIELD = 2;

/**
 * The model a serialized ModelInferRequest names, read from its first bytes only (`head`
 * may be a prefix of the message), for admission before the rest arrives. Known once a
 * field after model_name and model_version starts inside `head` (clients write fields in
 * number order); undefined before that, or when the prefix is malformed. Never throws: the
 * full decode later is what judges the message.
 */
export function modelInferRequestModel(head: Uint8Array): { name: string; version: string } | undefined {
  let name: string | undefined;
  let version = '';
  let pos = 0;
  while (pos < head.length) {
    const tag = readVarint(head, pos);
    if (tag === undefined) return undefined;
    const field = Math.floor(tag[0] / 8);
    const wireType = tag[0] & 7;
    if (field !== MODEL_NAME_FIELD && field !== MODEL_VERSION_FIELD) {
      return name === undefined ? undefined : { name, version };
    }
    if (wireType !== LENGTH_DELIMITED) return undefined;
    const length = readVarint(head, tag[1]);
    if (length === undefined || length[1] + length[0] > head.length) return undefined;
    const text = textDecoder.decode(head.subarray(length[1], length[1] + length[0]));
    if (field === MODEL_NAME_FIELD) name = text;
    else version = text;
    pos = length[1] + length[0];
  }
  return undefined;
}

const textDecoder = new TextDecoder();

/** One input as a client sends it. */
export interface GrpcInferInput {
  readonly name: string;
  readonly tensor: Tensor;
  /** Overrides the datatype derived from the tensor's dtype (e.g. to send uint8 storage as BOOL). */
  readonly datatype?: KServeDatatype;
  readonly parameters?: InferParameters;
}

/** One requested output as a client asks for it. */
export interface GrpcRequestedOutput {
  readonly name: string;
  /** Top-K classification (the classification extension); 0 or undefined: the tensor itself. */
  readonly classification?: number;
  readonly parameters?: InferParameters;
}

export interface GrpcInferRequestInit {
  readonly modelName: string;
  /** "" or undefined: the server picks. */
  readonly modelVersion?: string;
  readonly id?: string;
  readonly parameters?: InferParameters;
  readonly inputs: readonly GrpcInferInput[];
  /** Requested outputs; all outputs when undefined. */
  readonly outputs?: readonly GrpcRequestedOutput[];
}

/**
 * Encodes a ModelInferRequest as chunks whose concatenation is the message: every input's
 * data goes to `raw_input_contents` (as tritonclient sends it), numeric data as a view of
 * the tensor (no copy), BYTES length-prefixed.
 */
export function encodeModelInferRequest(init: GrpcInferRequestInit): Uint8Array[] {
  const head = toBinary(
    ModelInferRequestSchema,
    create(ModelInferRequestSchema, {
      modelName: init.modelName,
      modelVersion: init.modelVersion ?? '',
      id: init.id ?? '',
      parameters: parametersToProto(init.parameters),
      inputs: init.inputs.map((input) => ({
        name: input.name,
        datatype: input.datatype ?? datatypeOfDtype(input.tensor.dtype),
        shape: input.tensor.shape.map(BigInt),
        parameters: parametersToProto(input.parameters),
      })),
      outputs: (init.outputs ?? []).map((output) => {
        const parameters: Record<string, InferParameters[string]> = { ...output.parameters };
        if (output.classification !== undefined && output.classification > 0) {
          parameters['classification'] = BigInt(output.classification);
        }
        return { name: output.name, parameters: parametersToProto(parameters) };
      }),
    }),
  );
  const chunks: Uint8Array[] = [head];
  for (const input of init.inputs) {
    const data = binaryOf(input.tensor);
    chunks.push(
      new Uint8Array([(RAW_INPUT_CONTENTS_FIELD << 3) | LENGTH_DELIMITED, ...varintBytes(data.byteLength)]),
      data,
    );
  }
  return chunks;
}
