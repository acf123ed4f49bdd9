/**
 * The fast reader on KServe v2 inference requests and SageMaker bare JSON lists
 * (readFastJsonBody 'kserve-infer' / 'sagemaker-json'): for every body it takes, the same
 * tensors byte for byte, or the same error, as JSON.parse and the general codec; every body
 * it does not take (truncated, hostile, unusual) gets the general path's answer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  PackedNumbers,
  type Tensor,
  fastBodyFromMessage,
  fastBodyToMessage,
  parseTfsJsonText,
  parseTfsPredictBody,
  readFastJsonBody,
  tfsJsonToTensors,
} from '../src/index.js';
import { type InferRequest, type KServeDatatype, decodeHttpInferRequest } from '../src/kserve/index.js';
import { mulberry32 as rng } from './seeded-random.js';

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

function bytesOf(t: Tensor): number[] {
  if (Array.isArray(t.data)) return t.data.flatMap((b) => [...(b as Uint8Array), -1]);
  const d = t.data as ArrayLike<number> & { buffer: ArrayBufferLike; byteOffset: number; byteLength: number };
  return [...new Uint8Array(d.buffer, d.byteOffset, d.byteLength)];
}

/** A decoded request (or its error) as comparable data. */
function outcome(decode: () => InferRequest): unknown {
  try {
    const request = decode();
    return {
      id: request.id,
      parameters: request.parameters,
      outputs: request.outputs,
      inputs: request.inputs.map((input) => ({
        name: input.name,
        datatype: input.datatype,
        shape: input.shape,
        parameters: input.parameters,
        dtype: input.tensor.dtype,
        tensorShape: input.tensor.shape,
        bytes: bytesOf(input.tensor),
      })),
    };
  } catch (error) {
    const e = error as { code?: unknown; message?: unknown };
    return `${String(e.code)}: ${String(e.message)}`;
  }
}

/** The fast path (in-process and through a thread message) and the general path agree on `text`. */
function assertSameKServe(text: string, taken: boolean | undefined): unknown {
  const body = utf8(text);
  const fast = readFastJsonBody('kserve-infer', body) as Record<string, unknown> | undefined;
  if (taken !== undefined) assert.equal(fast !== undefined, taken, `taken: ${text.slice(0, 300)}`);
  const general = outcome(() => decodeHttpInferRequest(body, undefined, null));
  assert.deepEqual(
    outcome(() => decodeHttpInferRequest(body, undefined)),
    general,
    text.slice(0, 300),
  );
  if (fast !== undefined) {
    // As a decode thread sends it: the tree and the packed arrays, rebuilt over the same bytes.
    const { message } = fastBodyToMessage(fast);
    const rebuilt = fastBodyFromMessage(structuredClone(message), body) as Record<string, unknown>;
    assert.deepEqual(
      outcome(() => decodeHttpInferRequest(body, undefined, rebuilt)),
      general,
    );
  }
  return general;
}

const DATATYPES: KServeDatatype[] = [
  'FP32',
  'FP64',
  'FP16',
  'BF16',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'BOOL',
  'BYTES',
];

/** Numbers as clients and hostile senders spell them. */
function numberText(r: () => number, integers: boolean): string {
  const sign = r() < 0.3 ? '-' : '';
  if (integers) {
    switch (Math.floor(r() * 8)) {
      case 0:
        return `${sign}${Math.floor(r() * 300)}.0`; // an integer written as a float
      case 1:
        return `${sign}${Math.floor(r() * 9)}e${Math.floor(r() * 3)}`;
      case 2:
        return String(Math.floor((r() - 0.5) * 2 ** 33)); // out of range for the 32-bit types
      case 3:
        return `${sign}${Math.floor(r() * 100)}.5`; // not an integer
      case 4:
        return ['9007199254740991', '-9007199254740992', '4294967295', '4294967296', '-0'][
          Math.floor(r() * 5)
        ]!;
      default:
        return String(Math.floor((r() - 0.3) * 300));
    }
  }
  switch (Math.floor(r() * 10)) {
    case 0:
      return String(Math.fround(r() * 4 - 2)); // tritonclient's float32 -> float64 repr
    case 1:
      return sign + (r() * 1000).toExponential(Math.floor(r() * 18));
    case 2:
      return `${sign}${Math.floor(r() * 1000)}E${r() < 0.5 ? '+' : '-'}${Math.floor(r() * 50)}`;
    case 3:
      return [
        '0',
        '-0',
        '-0.0',
        '1e-45',
        '1.4e-45',
        '7e-46',
        '-1.401298464324817e-45',
        '3.4028235e38',
        '3.4028236e38',
        '1e39',
        '1e400',
        '5e-324',
        '65504',
        '65520',
      ][Math.floor(r() * 14)]!;
    case 4:
      return `${sign}${Math.floor(r() * 9)}.0`;
    case 5:
      return `${sign}0.${'0'.repeat(Math.floor(r() * 30))}${Math.floor(r() * 1e9)}`;
    case 6:
      return `${sign}${Math.floor(r() * 1e9)}${Math.floor(r() * 1e9)}.${Math.floor(r() * 1e9)}${Math.floor(r() * 1e9)}`;
    default:
      return String((r() - 0.5) * 10 ** Math.floor(r() * 20 - 10));
  }
}

function nested(shape: readonly number[], leaf: () => string, ws: () => string): string {
  if (shape.length === 0) return leaf();
  const items: string[] = [];
  for (let i = 0; i < shape[0]!; i++) items.push(nested(shape.slice(1), leaf, ws));
  return `[${ws()}${items.join(`${ws()},${ws()}`)}${ws()}]`;
}

describe('fast JSON tensor bodies: KServe v2 inference requests', () => {
  it('gives the general codec’s tensors byte for byte: every datatype, shapes, layouts, odd numbers, whitespace', () => {
    const r = rng(7);
    let taken = 0;
    for (let trial = 0; trial < 1500; trial++) {
      const ws = () => [' ', '', '\n  ', '\t', '\r\n'][Math.floor(r() * 5)]!;
      const inputs: string[] = [];
      let ragged = false;
      const n = 1 + Math.floor(r() * 3);
      for (let k = 0; k < n; k++) {
        const datatype = DATATYPES[Math.floor(r() * DATATYPES.length)]!;
        const rank = Math.floor(r() * 4) + 1;
        const shape = Array.from({ length: rank }, () => 1 + Math.floor(r() * 5));
        if (trial % 100 === 0) shape.splice(0, shape.length, 1, 3, 16, 16);
        const count = shape.reduce((a, b) => a * b, 1);
        const integers = datatype.startsWith('INT') || datatype.startsWith('UINT') || r() < 0.2;
        const leaf = () => numberText(r, integers);
        // Mostly the declared count; now and then one off; flat, nested, or ragged but right in total.
        const dataCount = r() < 0.1 ? count + (r() < 0.5 ? -1 : 1) : count;
        const layout = r();
        ragged ||= layout >= 0.9 && dataCount === count && count > 2;
        const data =
          layout < 0.4 || dataCount !== count
            ? nested([Math.max(0, dataCount)], leaf, ws)
            : layout < 0.9 || count <= 2
              ? nested(shape, leaf, ws)
              : `[${nested([1], leaf, ws)},${ws()}${nested([count - 1], leaf, ws)}]`;
        const parameters = r() < 0.3 ? `, "parameters": {"note": "x", "k": 3, "flag": true, "f": 1.5e3}` : '';
        const keys = [
          `"name":${ws()}"in_${k}"`,
          `"datatype": "${datatype}"`,
          `"shape": [${shape.join(', ')}]`,
        ];
        if (r() < 0.5) keys.reverse(); // data is not always last
        inputs.push(`{${keys.join(`,${ws()}`)},${ws()}"data":${ws()}${data}${parameters}}`);
      }
      const outputs = r() < 0.5 ? `, "outputs": [{"name": "out", "parameters": {"binary_data": false}}]` : '';
      const id = r() < 0.3 ? `"id": "req-${trial}", ` : '';
      const pad = ' '.repeat(256); // the reader only takes bodies of 256 bytes or more
      const text = `${ws()}{${id}"inputs":${ws()}[${inputs.join(`,${ws()}`)}]${outputs}${ws()}}${pad}`;
      // The reader takes every body here (no escapes, NaN tokens or duplicate keys) but ragged
      // lists, which the general path reads (it counts leaves only).
      assertSameKServe(text, !ragged);
      if (!ragged) taken++;
    }
    assert.ok(taken > 1000, `${taken} taken`);
  });

  it('reads float32 data bit-identically to Math.fround(JSON.parse(...)) (100,000 numbers)', () => {
    const r = rng(11);
    const texts = Array.from({ length: 100_000 }, () => numberText(r, false));
    const text = `{"inputs":[{"name":"x","datatype":"FP32","shape":[${texts.length}],"data":[${texts.join(',')}]}]}`;
    const request = decodeHttpInferRequest(utf8(text), undefined);
    const data = request.inputs[0]!.tensor.data as Float32Array;
    assert.ok(readFastJsonBody('kserve-infer', utf8(text)) !== undefined);
    for (let i = 0; i < texts.length; i++) {
      const want = Math.fround(JSON.parse(texts[i]!) as number);
      if (!Object.is(data[i], want)) assert.fail(`${texts[i]!}: ${data[i]} vs ${want}`);
    }
  });

  it('leaves unusual bodies to the general path, with its answers', () => {
    const pad = ' '.repeat(300);
    const input = (data: string, extra = '') =>
      `{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":${data}${extra}}]}${pad}`;
    const cases: Array<[string, string]> = [
      ['NaN and Infinity tokens', input('[NaN, Infinity, -Infinity]')],
      ['a string in numeric data', input('[1, "2", 3]')],
      ['booleans for FP32', input('[true, false, true]')],
      ['null in data', input('[1, null, 3]')],
      ['escapes in a name', input('[1,2,3]').replace('"x"', '"x\\u0041"')],
      ['non-ASCII name', input('[1,2,3]').replace('"x"', '"é"')],
      ['duplicate key', input('[1,2,3]', ', "data": [4,5,6]')],
      ['__proto__ key', input('[1,2,3]', ', "__proto__": {"a": 1}')],
      ['leading zero', input('[01, 2, 3]')],
      ['plus sign', input('[+1, 2, 3]')],
      ['bare dot', input('[.5, 2, 3]')],
      ['trailing comma', input('[1, 2, 3,]')],
      ['ragged nesting', input('[[1, 2], [3]]')],
      ['a list for a number', input('[1, [2], 3]')],
      ['trailing text', `${input('[1,2,3]')} x`],
      ['a list at the top', `[${input('[1,2,3]')}]`],
      ['data as an object', input('{"a": 1}')],
    ];
    for (const [why, text] of cases) {
      const answer = assertSameKServe(text, undefined);
      // Data that is not a numeric list is read as JSON.parse reads it (the general codec checks it).
      const plain = why === 'booleans for FP32' || why === 'data as an object';
      assert.equal(readFastJsonBody('kserve-infer', utf8(text)) !== undefined, plain, why);
      assert.ok(answer !== undefined, why);
    }
    // The general answers for some of them: errors stay INVALID_ARGUMENT (code 3).
    assert.match(
      String(assertSameKServe(input('[1, "2", 3]'), false)),
      /^3: .*"2" is not a valid FP32 value/,
    );
    assert.match(String(assertSameKServe(input('[1, 2, 3,]'), false)), /^3: JSON Parse error/);
    assert.match(String(assertSameKServe(input('[true, 1, 2]').replace('FP32', 'BOOL'), true)), /^3: /);
  });

  it('gives the general path’s errors for values the datatype cannot hold', () => {
    const pad = ' '.repeat(300);
    const body = (datatype: string, data: string, shape = 3) =>
      `{"inputs":[{"name":"x","datatype":"${datatype}","shape":[${shape}],"data":${data}}]}${pad}`;
    const errors: Array<[string, RegExp]> = [
      [body('INT8', '[1, 128, 3]'), /128 is not a valid INT8 value \(range \[-128, 127\]\)/],
      [body('UINT8', '[1, -1, 3]'), /-1 is not a valid UINT8 value/],
      [body('INT32', '[1, 2.5, 3]'), /2.5 is not a valid INT32 value/],
      [body('INT64', '[1, 9007199254740992, 3]'), /beyond \+-\(2\^53 - 1\)/],
      [body('UINT32', '[1, 4294967296, 3]'), /4294967296 is not a valid UINT32 value/],
      [body('BOOL', '[1, 0, 1]'), /1 is not a valid BOOL value \(BOOL values are true or false\)/],
      [body('BYTES', '[1, 2, 3]'), /1 is not a valid BYTES value/],
      [body('BF16', '[1, 2, 3]'), /BF16 data cannot be given as JSON/],
      [body('FP32', '[1, 2, 3, 4]'), /data has more than 3 elements, but shape \[3\] needs 3/],
      [body('FP32', '[1, 2]'), /data has 2 elements, but shape \[3\] needs 3/],
      [body('FP32', '[1, 2, 3]', 1_000_000_000), /data has 3 elements/],
      [body('FP32', '[[[1]], [[2]], [[3]]]').replace('[3]', '[-3]'), /shape/],
    ];
    for (const [text, message] of errors) {
      assert.ok(readFastJsonBody('kserve-infer', utf8(text)) !== undefined, text.slice(0, 100));
      assert.match(String(assertSameKServe(text, true)), message);
      assert.match(String(assertSameKServe(text, true)), /^3: /);
    }
    // Integers written as floats and -0 are fine where the general path takes them.
    const ints = assertSameKServe(body('INT32', '[1.0, -0, 2e1]'), true) as { inputs: [{ bytes: number[] }] };
    assert.deepEqual(ints.inputs[0].bytes, [...new Uint8Array(Int32Array.from([1, 0, 20]).buffer)]);
  });

  it('never takes a truncated body, and answers every prefix as the general path does', () => {
    const data = Array.from({ length: 80 }, (_, i) => String(Math.fround(Math.sin(i)))).join(', ');
    const text = `{"id": "t", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 80], "data": [${data}]}], "outputs": [{"name": "y"}]}`;
    assert.ok(readFastJsonBody('kserve-infer', utf8(text)) !== undefined);
    for (let end = 0; end < text.length; end++) {
      const prefix = text.slice(0, end);
      assert.equal(readFastJsonBody('kserve-infer', utf8(prefix)), undefined, prefix);
      const answer = assertSameKServe(prefix, false);
      assert.match(String(answer), /^3: /, prefix);
    }
  });

  it('bounds deep nesting, huge element counts and big bodies with clear errors', () => {
    const pad = ' '.repeat(300);
    const deep = (levels: number) =>
      `{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":${'['.repeat(levels)}1${']'.repeat(levels)}}]}${pad}`;
    // 64 lists are fine for both paths; 65 are refused by both; 100,000 levels never recurse.
    assert.equal(typeof assertSameKServe(deep(64), true), 'object');
    assert.match(String(assertSameKServe(deep(65), false)), /^3: .*nested deeper than 64 lists/);
    assert.match(String(assertSameKServe(deep(100_000), false)), /^3: /);
    // Deep nesting outside data (parameters) falls back and is answered.
    const deepParameters = `{"parameters":{"a":${'['.repeat(5000)}${']'.repeat(5000)}},"inputs":[]}${pad}`;
    assert.match(String(assertSameKServe(deepParameters, false)), /^3: .*parameter "a"/);
    // Two million elements for a declared shape of 4: the count error, after one linear read.
    const many = `{"inputs":[{"name":"x","datatype":"FP32","shape":[4],"data":[${'1,'.repeat(2_000_000)}1]}]}`;
    assert.match(String(assertSameKServe(many, true)), /data has more than 4 elements/);
    // A declared shape of 2^40 elements is refused before anything is allocated.
    const huge = `{"inputs":[{"name":"x","datatype":"FP32","shape":[1048576, 1048576],"data":[1,2,3]}]}${pad}`;
    assert.match(String(assertSameKServe(huge, true)), /^3: /);
  });
});

describe('fast JSON tensor bodies: SageMaker bare JSON lists', () => {
  /** What serve-invocation.ts does with a JSON body, minus the server: tensors or the error. */
  function decode(predictBody: unknown): unknown {
    try {
      const parsed = parseTfsPredictBody(predictBody);
      const tensors = tfsJsonToTensors(parsed.format, parsed.value, { x: { dtype: 'float32' } });
      return Object.entries(tensors).map(([k, t]) => [k, t.shape, bytesOf(t)]);
    } catch (error) {
      const e = error as { code?: unknown; message?: unknown };
      return `${String(e.code)}: ${String(e.message)}`;
    }
  }
  /** jsonToPredictBody (server) for the bodies here: a list of lists is the instances, else one instance. */
  function general(text: string): unknown {
    const value = parseTfsJsonText(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value;
    return { instances: Array.isArray(value) && Array.isArray(value[0]) ? value : [value] };
  }

  it('reads bare lists as SageMaker’s JSON handler does: same tensors byte for byte', () => {
    const r = rng(5);
    for (let trial = 0; trial < 300; trial++) {
      const rank = 1 + Math.floor(r() * 4);
      const shape = Array.from({ length: rank }, () => 1 + Math.floor(r() * 6));
      const ws = () => [' ', '', '\n'][Math.floor(r() * 3)]!;
      const text = `${ws()}${nested(shape, () => numberText(r, r() < 0.3), ws)}${' '.repeat(256)}`;
      const fast = readFastJsonBody('sagemaker-json', utf8(text));
      assert.ok(fast !== undefined, text.slice(0, 200));
      assert.ok((fast as { instances: unknown }).instances instanceof PackedNumbers);
      assert.deepEqual(decode(fast), decode(general(text)), text.slice(0, 200));
    }
    // TF Serving shaped objects take the predict-body reader, as before.
    const object = `{"instances": ${nested(
      [2, 40],
      () => '0.5',
      () => ' ',
    )}}`;
    assert.deepEqual(decode(readFastJsonBody('sagemaker-json', utf8(object))), decode(general(object)));
  });

  it('leaves other bare values to the general path', () => {
    const pad = ' '.repeat(300);
    for (const text of [
      `[]${pad}`,
      `[1, "a"]${pad}`,
      `[[1], [2, 3]]${pad}`,
      `5${pad}`,
      `"x"${pad}`,
      `[1, 2]\n[3, 4]${pad}`,
    ]) {
      assert.equal(readFastJsonBody('sagemaker-json', utf8(text)), undefined, text);
    }
  });
});
