/**
 * TF Serving REST `:classify` / `:regress` bodies (docs/tensorflow-users.md): the request
 * `{"signature_name"?, "context"?: {feature: value|list}, "examples": [{feature: value|list}]}`
 * and the `{"results": ...}` answers. Messages follow TF Serving's JSON codec.
 */
import { invalidArgument } from './errors.js';
import { JsonWriter } from './json-writer.js';
import type { ExampleFeatures, ExampleInput, FeatureValues } from './tf-example.js';
import { decodeBase64Strict } from './tfs-json-decode.js';

/** A classify or regress request body after the top-level checks. */
export interface TfsExamplesBody {
  readonly signatureName: string | undefined;
  readonly input: ExampleInput;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return 'object';
  return typeof value;
}

/**
 * One feature from a JSON value or list of values, with TF Serving's element-type checks.
 * JSON.parse cannot tell `1.0` from `1`, so numbers (and booleans, as 0/1) stay `number`
 * values, which fit float and int64 features alike.
 */
function featureFromJson(name: string, content: unknown): FeatureValues {
  const items: readonly unknown[] = Array.isArray(content) ? content : [content];
  let kind: 'bytes' | 'number' | undefined;
  const bytes: Uint8Array[] = [];
  const numbers: number[] = [];
  const encoder = new TextEncoder();
  const want = (k: 'bytes' | 'number'): void => {
    if (kind !== undefined && kind !== k) {
      throw invalidArgument(
        `Unexpected element type in feature: ${name} expecting type: ${kind === 'bytes' ? 'bytes' : 'float'}`,
      );
    }
    kind = k;
  };
  for (const item of items) {
    if (typeof item === 'string') {
      want('bytes');
      bytes.push(encoder.encode(item));
    } else if (isPlainObject(item) && Object.keys(item).length === 1 && Object.hasOwn(item, 'b64')) {
      want('bytes');
      bytes.push(decodeBase64Strict(item['b64'], `Feature: ${name}`));
    } else if (typeof item === 'boolean' || typeof item === 'number') {
      want('number');
      numbers.push(typeof item === 'boolean' ? Number(item) : item);
    } else {
      throw invalidArgument(`Feature: ${name} has element with unexpected JSON type: ${jsonType(item)}`);
    }
  }
  return kind === 'bytes' ? { kind: 'bytes', values: bytes } : { kind: 'number', values: numbers };
}

function exampleFromJson(value: unknown): ExampleFeatures {
  if (!isPlainObject(value)) {
    throw invalidArgument(`Example must be JSON object but got JSON ${jsonType(value)}`);
  }
  const features = new Map<string, FeatureValues>();
  for (const [name, content] of Object.entries(value)) features.set(name, featureFromJson(name, content));
  return features;
}

/**
 * Checks a parsed `:classify` / `:regress` body and converts its examples. TF Serving's
 * wording: `When method is classify, key 'examples' is expected and was not found` (also
 * for regress), `Expecting 'examples' value to be an list/array`, `'examples' value is
 * an empty array`, `Example must be JSON object but got JSON ...`, `Unexpected element
 * type in feature: ...`.
 */
export function parseTfsExamplesBody(body: unknown): TfsExamplesBody {
  if (!isPlainObject(body)) throw invalidArgument('Request body must be a JSON object');
  let signatureName: string | undefined;
  if (Object.hasOwn(body, 'signature_name')) {
    const name = body['signature_name'];
    if (typeof name !== 'string') throw invalidArgument("'signature_name' key must be a string");
    signatureName = name;
  }
  const context = Object.hasOwn(body, 'context') ? exampleFromJson(body['context']) : undefined;
  if (!Object.hasOwn(body, 'examples')) {
    throw invalidArgument("When method is classify, key 'examples' is expected and was not found");
  }
  const examples = body['examples'];
  if (!Array.isArray(examples)) throw invalidArgument("Expecting 'examples' value to be an list/array");
  if (examples.length === 0) throw invalidArgument("'examples' value is an empty array");
  return { signatureName, input: { examples: examples.map(exampleFromJson), context } };
}

/** One class of a classification: its label (may be empty) and score. */
export interface TfsClass {
  readonly label: string;
  readonly score: number;
}

/** `{"results": [[[label, score], ...], ...]}` (one list of classes per example). */
export function encodeTfsClassifyResponse(results: readonly (readonly TfsClass[])[]): Uint8Array {
  const w = new JsonWriter(64 + results.length * 64);
  w.ascii('{"results":[');
  results.forEach((classes, i) => {
    if (i > 0) w.byte(44);
    w.byte(91);
    classes.forEach((c, j) => {
      if (j > 0) w.byte(44);
      w.byte(91);
      w.string(c.label);
      w.byte(44);
      w.float32(c.score);
      w.byte(93);
    });
    w.byte(93);
  });
  w.ascii(']}');
  return w.bytes();
}

/** `{"results": [value, ...]}` (one value per example). */
export function encodeTfsRegressResponse(values: ArrayLike<number>): Uint8Array {
  const w = new JsonWriter(64 + values.length * 16);
  w.ascii('{"results":[');
  for (let i = 0; i < values.length; i++) {
    if (i > 0) w.byte(44);
    w.float32(values[i]!);
  }
  w.ascii(']}');
  return w.bytes();
}
