/**
 * TF Serving REST JSON <-> Tensor (protocols.md B3/B4), shared by the server's REST
 * frontend and the client.
 *
 * Contracts:
 * - Every malformed input throws a ServingError (INVALID_ARGUMENT); nothing recurses deeper than MAX_JSON_RANK,
 *   and no tensor is allocated before the nesting has been checked to hold its elements.
 * - float16 / bfloat16 inputs take JSON numbers, rounded to the nearest 16-bit value (TF
 *   Serving answers UNIMPLEMENTED for them).
 * - JSON numbers pass through float64 (JSON.parse): int64/uint64 values outside
 *   +-(2^53 - 1) cannot be read exactly and are refused rather than silently rounded.
 */
import { type DType, allocate, numberToBfloat16, numberToHalf } from './dtype.js';
import { type ServingError, invalidArgument } from './errors.js';
import { type Tensor, checkShape } from './tensor.js';
import { PackedNumbers, readNumericPredictBody } from './numeric-json.js';

/** Row (`instances` / `predictions`) or columnar (`inputs` / `outputs`) format. */
export type TfsFormat = 'row' | 'columnar';

/** What the codec needs to know about a signature input or output. */
export interface TfsTensorSpec {
  readonly dtype: DType;
}

/** A predict request body after the top-level checks. */
export interface TfsPredictBody {
  /** `signature_name`, when given. */
  readonly signatureName: string | undefined;
  readonly format: TfsFormat;
  /** The JSON value of `instances` (a non-empty list) or `inputs`. */
  readonly value: unknown;
}

/** Deepest nesting accepted for one tensor value. */
export const MAX_JSON_RANK = 64;

// Bare NaN / Infinity / -Infinity tokens are rewritten to these strings before JSON.parse.
const NAN_TOKEN = '\u0000\uFDD0NaN';
const POS_INF_TOKEN = '\u0000\uFDD0Infinity';
const NEG_INF_TOKEN = '\u0000\uFDD0-Infinity';

/**
 * JSON.parse plus the `NaN`, `Infinity` and `-Infinity` number tokens that TF Serving
 * (and Python's json) accept. Throws INVALID_ARGUMENT for text that is not JSON.
 * V8's parser is iterative, so deeply nested text cannot overflow the stack here.
 */
export function parseTfsJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    if (/NaN|Infinity/.test(text)) {
      const rewritten = rewriteNonFiniteTokens(text);
      if (rewritten !== undefined) {
        try {
          return JSON.parse(rewritten) as unknown;
        } catch {
          // Report the error of the original text below.
        }
      }
    }
    const detail = error instanceof Error ? error.message : String(error);
    throw invalidArgument(`JSON Parse error: ${detail}`);
  }
}

/**
 * A TF Serving predict body from its UTF-8 bytes: the big numeric shapes are read by the
 * fast reader (tensors as PackedNumbers, which the codec below takes like nested lists),
 * everything else by parseTfsJsonText. Same values, same errors.
 */
export function parseTfsPredictJson(bytes: Uint8Array): unknown {
  return (
    readNumericPredictBody(bytes) ??
    parseTfsJsonText(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'))
  );
}

/** Replaces NaN/Infinity/-Infinity tokens outside strings with sentinel strings; undefined if none. */
function rewriteNonFiniteTokens(text: string): string | undefined {
  const parts: string[] = [];
  let from = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
      continue;
    }
    if (c === 34) {
      inString = true;
      continue;
    }
    let token: string | undefined;
    let width = 0;
    if (c === 78 && text.startsWith('NaN', i)) [token, width] = [NAN_TOKEN, 3];
    else if (c === 73 && text.startsWith('Infinity', i)) [token, width] = [POS_INF_TOKEN, 8];
    else if (c === 45 && text.startsWith('-Infinity', i)) [token, width] = [NEG_INF_TOKEN, 9];
    if (token !== undefined) {
      parts.push(text.slice(from, i), JSON.stringify(token));
      i += width - 1;
      from = i + 1;
    }
  }
  if (parts.length === 0) return undefined;
  parts.push(text.slice(from));
  return parts.join('');
}

/**
 * The number a parsed JSON leaf holds: a JSON number, or one of the NaN / Infinity /
 * -Infinity tokens parseTfsJsonText accepts; undefined for anything else.
 */
export function jsonNumberValue(leaf: unknown): number | undefined {
  if (typeof leaf === 'number') return leaf;
  if (leaf === NAN_TOKEN) return NaN;
  if (leaf === POS_INF_TOKEN) return Infinity;
  if (leaf === NEG_INF_TOKEN) return -Infinity;
  return undefined;
}

/** True for the strings parseTfsJsonText substitutes for NaN / Infinity tokens (never real text). */
export function isNonFiniteToken(leaf: unknown): boolean {
  return leaf === NAN_TOKEN || leaf === POS_INF_TOKEN || leaf === NEG_INF_TOKEN;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof PackedNumbers)
  );
}

function isB64Object(value: unknown): value is { b64: unknown } {
  if (!isPlainObject(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === 'b64';
}

/** Checks the top level of a predict body (already JSON-parsed). */
export function parseTfsPredictBody(body: unknown): TfsPredictBody {
  if (!isPlainObject(body)) {
    throw invalidArgument('Request body must be a JSON object with an "instances" or "inputs" key');
  }
  let signatureName: string | undefined;
  if (Object.hasOwn(body, 'signature_name')) {
    const name = body['signature_name'];
    if (typeof name !== 'string') throw invalidArgument("'signature_name' key must be a string");
    signatureName = name;
  }
  const hasInstances = Object.hasOwn(body, 'instances');
  const hasInputs = Object.hasOwn(body, 'inputs');
  if (hasInstances && hasInputs) {
    throw invalidArgument(
      "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist",
    );
  }
  if (!hasInstances && !hasInputs) throw invalidArgument("Missing 'inputs' or 'instances' key");
  if (hasInputs) return { signatureName, format: 'columnar', value: body['inputs'] };
  const instances = body['instances'];
  if (instances instanceof PackedNumbers && instances.shape.length > 0) {
    if (instances.shape[0] === 0)
      throw invalidArgument("'instances' is an empty list; expecting at least one instance");
    return { signatureName, format: 'row', value: instances };
  }
  if (!Array.isArray(instances)) throw invalidArgument("Expecting 'instances' to be a list");
  if (instances.length === 0)
    throw invalidArgument("'instances' is an empty list; expecting at least one instance");
  return { signatureName, format: 'row', value: instances };
}

/**
 * Converts the `instances` / `inputs` value (or a response's `predictions` / `outputs`)
 * into tensors, one per alias, using the dtypes of `specs`.
 *
 * Row format stacks the instances along a new dimension 0; a list of objects gives one
 * tensor per key (every row must have the same keys). A bare value is accepted only
 * when `specs` has exactly one entry.
 */
export function tfsJsonToTensors(
  format: TfsFormat,
  value: unknown,
  specs: Readonly<Record<string, TfsTensorSpec>>,
): Record<string, Tensor> {
  const aliases = Object.keys(specs);
  const specFor = (alias: string): TfsTensorSpec => {
    if (!Object.hasOwn(specs, alias)) {
      throw invalidArgument(
        `Input alias "${preview(alias)}" not found in signature; expected one of: ${aliases.join(', ')}`,
      );
    }
    return specs[alias]!;
  };
  const single = (): [string, TfsTensorSpec] => {
    if (aliases.length !== 1) {
      throw invalidArgument(
        `A bare value or list can only be used with a single-input signature; this signature has ${aliases.length} inputs (${aliases.join(', ')}): send an object keyed by input name`,
      );
    }
    const alias = aliases[0]!;
    return [alias, specs[alias]!];
  };

  if (format === 'columnar') {
    if (isPlainObject(value) && !isB64Object(value)) {
      return Object.fromEntries(
        Object.entries(value).map(([alias, v]) => [alias, jsonToTensor(v, specFor(alias).dtype, alias)]),
      );
    }
    const [alias, spec] = single();
    return Object.fromEntries([[alias, jsonToTensor(value, spec.dtype, alias)]]);
  }

  if (value instanceof PackedNumbers && value.shape.length > 0 && value.shape[0]! > 0) {
    const [alias, spec] = single();
    return Object.fromEntries([[alias, jsonToTensor(value, spec.dtype, alias)]]);
  }
  if (!Array.isArray(value) || value.length === 0) {
    throw invalidArgument("'instances' must be a non-empty list");
  }
  const rows: unknown[] = value;
  const first = rows[0];
  if (!isPlainObject(first) || isB64Object(first)) {
    const [alias, spec] = single();
    return Object.fromEntries([[alias, jsonToTensor(rows, spec.dtype, alias)]]);
  }
  const keys = Object.keys(first);
  for (const key of keys) specFor(key);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    if (!isPlainObject(row) || isB64Object(row)) {
      throw invalidArgument(`Instance ${i} is not an object; expecting every instance to be an object`);
    }
    const rowKeys = Object.keys(row);
    if (rowKeys.length !== keys.length || !keys.every((k) => Object.hasOwn(row, k))) {
      throw invalidArgument(
        `Instance ${i} has keys {${preview(rowKeys.join(','))}}, expecting the same keys as instance 0: {${keys.join(',')}}`,
      );
    }
  }
  return Object.fromEntries(
    keys.map((key) => [
      key,
      jsonToTensor(
        rows.map((row) => (row as Record<string, unknown>)[key]),
        specFor(key).dtype,
        key,
      ),
    ]),
  );
}

/** Converts one nested-list JSON value to a tensor of `dtype`; shape comes from the nesting. */
export function jsonToTensor(value: unknown, dtype: DType, alias: string): Tensor {
  const what = `Input "${preview(alias)}"`;
  if (value instanceof PackedNumbers) return packedToTensor(value, dtype, what);
  const shape: number[] = [];
  for (let v = value; Array.isArray(v); v = v[0] as unknown) {
    if (shape.length >= MAX_JSON_RANK) {
      throw invalidArgument(`${what}: nested lists deeper than ${MAX_JSON_RANK} levels`);
    }
    shape.push(v.length);
    if (v.length === 0) break;
  }
  const count = checkShape(shape, what);
  // Pass 1 checks every list's size without touching leaves, so a short JSON value can
  // never make us allocate the product of its first-element sizes.
  walkInnermost(value, shape, what, () => undefined);
  const put = leafWriter(dtype, what, count);
  if (shape.length === 0) {
    put.set(0, value);
  } else {
    walkInnermost(value, shape, what, (inner, offset) => {
      for (let i = 0; i < inner.length; i++) {
        const leaf: unknown = inner[i];
        if (Array.isArray(leaf)) {
          throw invalidArgument(`${what}: list found at incorrect level ${shape.length} of the nested list`);
        }
        put.set(offset + i, leaf);
      }
    });
  }
  return { dtype, shape, data: put.data };
}

/** jsonToTensor for numbers the fast reader packed: same checks, same errors, one pass. */
function packedToTensor(packed: PackedNumbers, dtype: DType, what: string): Tensor {
  const shape = [...packed.shape];
  const count = checkShape(shape, what);
  if (dtype === 'float32') return { dtype, shape, data: packed.float32Values() };
  const values = packed.exactValues();
  if (dtype === 'float64') return { dtype, shape, data: values.slice() };
  const put = leafWriter(dtype, what, count);
  for (let i = 0; i < count; i++) put.set(i, values[i]);
  return { dtype, shape, data: put.data };
}

/** Visits the innermost lists of a nested list with their flat offset; checks sizes on the way. */
function walkInnermost(
  value: unknown,
  shape: readonly number[],
  what: string,
  visit: (inner: readonly unknown[], offset: number) => void,
): void {
  const rank = shape.length;
  if (rank === 0) return;
  const rec = (v: unknown, level: number, offset: number): void => {
    if (!Array.isArray(v)) {
      throw invalidArgument(
        `${what}: ${describe(v)} found at incorrect level ${level} of the nested list, expecting a list of size ${shape[level]!}`,
      );
    }
    if (v.length !== shape[level]) {
      throw invalidArgument(
        `${what}: Encountered list at unexpected size: ${v.length} at level ${level}, expecting size: ${shape[level]!}`,
      );
    }
    if (level === rank - 1) {
      visit(v, offset);
      return;
    }
    let stride = 1;
    for (let l = level + 1; l < rank; l++) stride *= shape[l]!;
    for (let i = 0; i < v.length; i++) rec(v[i], level + 1, offset + i * stride);
  };
  rec(value, 0, 0);
}

interface LeafWriter {
  readonly data: Tensor['data'];
  set(index: number, leaf: unknown): void;
}

const INT_RANGES: Partial<Record<DType, readonly [number, number]>> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
  int64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
};

/**
 * Base64 sent to a numeric input is usually an encoded image: TF Serving's message alone
 * does not say where images go.
 */
function b64Hint(leaf: unknown, dtype: DType): string {
  if (dtype === 'string' || typeof leaf !== 'object' || leaf === null || !('b64' in leaf)) return '';
  return (
    ` ({"b64": ...} is bytes, for string inputs; this input takes ${dtype} values. To send an encoded` +
    ' image, post its bytes to /invocations with Content-Type: image/jpeg or image/png (decoded per the' +
    " model's visionserve.json), or decode and resize it on the client into a tensor)"
  );
}

function leafWriter(dtype: DType, what: string, count: number): LeafWriter {
  const bad = (leaf: unknown, extra = ''): ServingError =>
    invalidArgument(
      `${what}: JSON Value: ${describe(leaf)} not formatted correctly for type: ${dtype}${extra || b64Hint(leaf, dtype)}`,
    );
  switch (dtype) {
    case 'float32':
    case 'float64': {
      const data = allocate(dtype, count);
      return {
        data,
        set(i, leaf) {
          if (typeof leaf === 'number') data[i] = leaf;
          else if (leaf === NAN_TOKEN) data[i] = NaN;
          else if (leaf === POS_INF_TOKEN) data[i] = Infinity;
          else if (leaf === NEG_INF_TOKEN) data[i] = -Infinity;
          else throw bad(leaf);
        },
      };
    }
    case 'int64':
    case 'uint64': {
      const data = allocate(dtype, count);
      const [lo, hi] = INT_RANGES[dtype]!;
      return {
        data,
        set(i, leaf) {
          if (typeof leaf !== 'number' || !Number.isInteger(leaf)) throw bad(leaf);
          if (leaf < lo || leaf > hi) {
            throw bad(
              leaf,
              ` (out of range; values beyond +-(2^53-1) cannot be represented exactly in JSON)`,
            );
          }
          data[i] = BigInt(leaf);
        },
      };
    }
    case 'int8':
    case 'int16':
    case 'int32':
    case 'uint8':
    case 'uint16':
    case 'uint32': {
      const data = allocate(dtype, count);
      const [lo, hi] = INT_RANGES[dtype]!;
      return {
        data,
        set(i, leaf) {
          if (typeof leaf !== 'number' || !Number.isInteger(leaf)) throw bad(leaf);
          if (leaf < lo || leaf > hi) throw bad(leaf, ` (out of range [${lo}, ${hi}])`);
          data[i] = leaf;
        },
      };
    }
    case 'bool': {
      const data = allocate('bool', count);
      return {
        data,
        set(i, leaf) {
          if (typeof leaf !== 'boolean') throw bad(leaf);
          data[i] = leaf ? 1 : 0;
        },
      };
    }
    case 'string': {
      const data: Uint8Array[] = new Array<Uint8Array>(count);
      const encoder = new TextEncoder();
      return {
        data,
        set(i, leaf) {
          if (typeof leaf === 'string') {
            if (leaf.startsWith('\u0000\uFDD0')) throw bad(leaf);
            data[i] = encoder.encode(leaf);
          } else if (isB64Object(leaf)) {
            data[i] = decodeBase64Strict(leaf.b64, what);
          } else {
            throw bad(leaf);
          }
        },
      };
    }
    case 'float16':
    case 'bfloat16': {
      // TF Serving refuses these in JSON; numbers round to the nearest 16-bit value here.
      const data = allocate(dtype, count);
      const toBits = dtype === 'float16' ? numberToHalf : numberToBfloat16;
      return {
        data,
        set(i, leaf) {
          let n: number;
          if (typeof leaf === 'number') n = leaf;
          else if (leaf === NAN_TOKEN) n = NaN;
          else if (leaf === POS_INF_TOKEN) n = Infinity;
          else if (leaf === NEG_INF_TOKEN) n = -Infinity;
          else throw bad(leaf);
          data[i] = toBits(n);
        },
      };
    }
  }
}

/** Decodes standard-alphabet base64 (padding optional, no whitespace) into a fresh buffer. */
export function decodeBase64Strict(value: unknown, what = 'Value'): Uint8Array {
  const fail = (): ServingError =>
    invalidArgument(`${what}: Unable to base64 decode: ${describe(value)} is not valid base64`);
  if (typeof value !== 'string') throw fail();
  let end = value.length;
  let pad = 0;
  while (end > 0 && value.charCodeAt(end - 1) === 61 && pad < 2) {
    end--;
    pad++;
  }
  if (pad > 0 && value.length % 4 !== 0) throw fail();
  if (end % 4 === 1) throw fail();
  for (let i = 0; i < end; i++) {
    const c = value.charCodeAt(i);
    const ok = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 43 || c === 47;
    if (!ok) throw fail();
  }
  const decoded = Buffer.from(value, 'base64');
  // Copy out of Buffer's shared pool: tensor buffers may be transferred to a worker.
  const out = new Uint8Array(decoded.byteLength);
  out.set(decoded);
  return out;
}

/** A short description of a JSON value for error messages (never the whole value). */
function describe(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  if (value === NAN_TOKEN) return 'NaN';
  if (value === POS_INF_TOKEN) return 'Infinity';
  if (value === NEG_INF_TOKEN) return '-Infinity';
  if (typeof value === 'string') return preview(JSON.stringify(value));
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return typeof value;
}

function preview(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}...` : text;
}
