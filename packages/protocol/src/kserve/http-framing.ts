/**
 * Pieces shared by the request and response framing of the OIP HTTP/REST binding with
 * the binary tensor data extension: a JSON header, optionally followed by the tensors'
 * bytes in the order their JSON entries name a `binary_data_size`.
 */
import { Code, ServingError, invalidArgument } from '../errors.js';
import { JsonWriter } from '../json-writer.js';
import { checkShape } from '../tensor.js';
import { parseTfsJsonText } from '../tfs-json-decode.js';
import type { InferParameterValue, InferParameters } from './infer-types.js';

/** Header giving the length of the JSON part when binary tensor data follows it. */
export const INFERENCE_HEADER_CONTENT_LENGTH = 'Inference-Header-Content-Length';

/** A body ready to send: the JSON header, then binary chunks (views, written as they are). */
export interface HttpInferBody {
  readonly json: Uint8Array;
  readonly binary: readonly Uint8Array[];
  /** Sum of the binary chunks' lengths. */
  readonly binaryBytes: number;
}

/** Bytes of the JSON part of `body` given the Inference-Header-Content-Length value (all when absent). */
export function jsonHeaderLength(value: string | undefined, bodyLength: number): number {
  if (value === undefined) return bodyLength;
  const text = value.trim();
  if (!/^\d{1,16}$/.test(text)) {
    throw invalidArgument(
      `${INFERENCE_HEADER_CONTENT_LENGTH} must be a non-negative integer, got "${text.slice(0, 32)}"`,
    );
  }
  const length = Number(text);
  if (length > bodyLength) {
    throw invalidArgument(
      `${INFERENCE_HEADER_CONTENT_LENGTH} (${length}) is larger than the body (${bodyLength} bytes)`,
    );
  }
  if (length === 0) {
    throw new ServingError(
      Code.UNIMPLEMENTED,
      `Raw binary requests (${INFERENCE_HEADER_CONTENT_LENGTH}: 0) are not supported; send a JSON header with binary_data_size`,
    );
  }
  return length;
}

const utf8 = new TextDecoder();

/** Parses the JSON part (NaN / Infinity tokens allowed) and requires an object. */
export function parseJsonHeader(bytes: Uint8Array, what: string): Record<string, unknown> {
  const json = parseTfsJsonText(utf8.decode(bytes));
  if (!isObject(json)) throw invalidArgument(`${what} must be a JSON object`);
  return json;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A `parameters` object: string, number or boolean values; INVALID_ARGUMENT otherwise. */
export function readParameters(value: unknown, what: string): InferParameters {
  if (value === undefined) return {};
  if (!isObject(value)) throw invalidArgument(`${what}: "parameters" must be an object`);
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
      throw invalidArgument(`${what}: parameter "${key.slice(0, 64)}" must be a string, number or boolean`);
    }
  }
  return value as InferParameters;
}

/** A declared `shape`: a list of non-negative integers with a bounded element count. */
export function readShape(value: unknown, what: string): { shape: number[]; count: number } {
  if (!Array.isArray(value)) throw invalidArgument(`${what}: "shape" must be a list of integers`);
  if (value.length > 64) throw invalidArgument(`${what}: shape has more than 64 dimensions`);
  const shape = value as unknown[];
  for (const d of shape) {
    if (typeof d !== 'number') throw invalidArgument(`${what}: "shape" must be a list of integers`);
  }
  const dims = shape as number[];
  return { shape: dims, count: checkShape(dims, what) };
}

/** `binary_data_size` of a parameters object: a non-negative integer, or undefined. */
export function binaryDataSize(parameters: InferParameters, what: string): number | undefined {
  const v = parameters['binary_data_size'];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw invalidArgument(`${what}: binary_data_size must be a non-negative integer`);
  }
  return v;
}

/** Reads the binary area tensor by tensor; complains about sizes past its end or bytes left over. */
export class BinaryArea {
  private at = 0;
  constructor(private readonly bytes: Uint8Array) {}

  take(size: number, what: string): Uint8Array {
    const left = this.bytes.byteLength - this.at;
    if (size > left) {
      throw invalidArgument(
        `${what}: binary_data_size ${size} runs past the end of the body (${left} bytes of binary data left)`,
      );
    }
    const out = this.bytes.subarray(this.at, this.at + size);
    this.at += size;
    return out;
  }

  finish(what: string): void {
    const left = this.bytes.byteLength - this.at;
    if (left !== 0) {
      throw invalidArgument(`${what}: ${left} bytes of binary data follow the JSON that no tensor claims`);
    }
  }
}

/** Writes a parameters object (bigint values as JSON integers). */
export function writeParameters(
  w: JsonWriter,
  parameters: Readonly<Record<string, InferParameterValue>>,
): void {
  w.byte(0x7b);
  let first = true;
  for (const [key, value] of Object.entries(parameters)) {
    if (!first) w.byte(0x2c);
    first = false;
    w.string(key);
    w.byte(0x3a);
    if (typeof value === 'string') w.string(value);
    else if (typeof value === 'bigint') w.ascii(value.toString());
    else if (typeof value === 'boolean') w.ascii(value ? 'true' : 'false');
    else w.float64(value);
  }
  w.byte(0x7d);
}

/** Writes `"key":` (key known to need no escaping). */
export function writeKey(w: JsonWriter, key: string, comma: boolean): void {
  if (comma) w.byte(0x2c);
  w.byte(0x22);
  w.ascii(key);
  w.ascii('":');
}

export function newWriter(bytes: number): JsonWriter {
  return new JsonWriter(bytes);
}

/**
 * Pads the JSON with trailing spaces (valid JSON whitespace) to a multiple of 8 bytes when
 * binary data follows, so that the first binary tensor starts 8-byte aligned in a body
 * buffer that is: the receiver can then view it instead of copying it.
 */
export function finishJson(w: JsonWriter, binaryBytes: number): Uint8Array {
  if (binaryBytes > 0) while (w.length % 8 !== 0) w.byte(0x20);
  return w.bytes();
}
