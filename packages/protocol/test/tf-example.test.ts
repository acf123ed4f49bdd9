import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { create, toBinary } from '@bufbuild/protobuf';
import {
  Code,
  type ExampleFeatures,
  type FeatureValues,
  ServingError,
  encodeTfsClassifyResponse,
  encodeTfsRegressResponse,
  examplesToTensors,
  halfToNumber,
  bfloat16ToNumber,
  numberToBfloat16,
  numberToHalf,
  parseTfsExamplesBody,
} from '../src/index.js';
import { ExampleSchema, exampleInputFromProto, parseSerializedExample } from '../src/tfs-proto/index.js';

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);
const ex = (features: Record<string, FeatureValues>): ExampleFeatures => new Map(Object.entries(features));
const floats = (...values: number[]): FeatureValues => ({ kind: 'float', values });

function invalid(fn: () => unknown, message: string | RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ServingError, String(e));
    assert.equal(e.code, Code.INVALID_ARGUMENT);
    if (typeof message === 'string') assert.equal(e.message, message);
    else assert.match(e.message, message);
    return true;
  });
}

void describe('16-bit floats', () => {
  void it('numberToHalf inverts halfToNumber for every finite pattern and rounds ties to even', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      const v = halfToNumber(bits);
      if (Number.isNaN(v)) assert.ok(Number.isNaN(halfToNumber(numberToHalf(v))));
      else assert.equal(numberToHalf(v), bits, `pattern ${bits.toString(16)}`);
    }
    assert.equal(numberToHalf(1 + 2 ** -11), 0x3c00); // halfway between 1 and the next half: even wins
    assert.equal(numberToHalf(1 + 3 * 2 ** -11), 0x3c02);
    // Not a tie in float64, though float32 would round it to one: no double rounding.
    assert.equal(numberToHalf(1 + 2 ** -11 + 2 ** -40), 0x3c01);
    assert.equal(numberToBfloat16(1 + 2 ** -8 + 2 ** -40), 0x3f81);
    assert.equal(numberToHalf(65520), 0x7c00); // rounds past the largest half
    assert.equal(numberToHalf(2 ** -25), 0); // halfway to the smallest subnormal: even (0)
    assert.equal(numberToHalf(2 ** -25 * 1.5), 1);
    assert.equal(numberToHalf(-0), 0x8000);
  });
  void it('numberToBfloat16 inverts bfloat16ToNumber and rounds to nearest even', () => {
    for (let bits = 0; bits < 0x10000; bits += 7) {
      const v = bfloat16ToNumber(bits);
      if (!Number.isNaN(v)) assert.equal(numberToBfloat16(v), bits);
    }
    assert.equal(numberToBfloat16(1 + 2 ** -8), 0x3f80);
    assert.ok(Number.isNaN(bfloat16ToNumber(numberToBfloat16(NaN))));
  });
});

void describe('examplesToTensors (TensorFlow ParseExample rules)', () => {
  const spec = [{ key: 'x', dtype: 'float32' as const, shape: [1] }];
  void it('stacks features, lets examples override the context and falls back to defaults', () => {
    const out = examplesToTensors(
      { examples: [ex({ x: floats(1) }), ex({})], context: ex({ x: floats(7) }) },
      [...spec, { key: 'k', dtype: 'int64', shape: [2], defaultValue: [4, 5] }],
    );
    assert.deepEqual(out['x']!.shape, [2, 1]);
    assert.deepEqual(Array.from(out['x']!.data as Float32Array), [1, 7]);
    assert.deepEqual(Array.from(out['k']!.data as BigInt64Array), [4n, 5n, 4n, 5n]);
  });
  void it('fills other model dtypes, strings and one dynamic dimension', () => {
    const out = examplesToTensors(
      {
        examples: [
          ex({
            u: { kind: 'int64', values: BigInt64Array.of(1n, 255n) },
            s: { kind: 'bytes', values: [Uint8Array.of(65)] },
            h: floats(0.5),
            v: floats(1, 2, 3),
          }),
        ],
      },
      [
        { key: 'u', dtype: 'uint8', shape: [2] },
        { key: 's', dtype: 'string', shape: [] },
        { key: 'h', dtype: 'float16', shape: [] },
        { key: 'v', dtype: 'float32', shape: [-1] },
      ],
    );
    assert.deepEqual(Array.from(out['u']!.data as Uint8Array), [1, 255]);
    assert.deepEqual(out['s']!.data, [Uint8Array.of(65)]);
    assert.deepEqual(Array.from(out['h']!.data as Uint16Array), [0x3800]);
    assert.deepEqual(out['v']!.shape, [1, 3]);
  });
  void it("answers with TensorFlow's messages", () => {
    invalid(() => examplesToTensors({ examples: [] }, spec), 'Input is empty.');
    invalid(
      () => examplesToTensors({ examples: [ex({ y: floats(1) })] }, spec),
      'Name: <unknown>, Feature: x (data type: float) is required but could not be found.',
    );
    invalid(
      () =>
        examplesToTensors({ examples: [ex({ x: { kind: 'int64', values: BigInt64Array.of(1n) } })] }, spec),
      "Name: <unknown>, Key: x, Index: 0.  Data types don't match. Data type: int64 but expected type: float",
    );
    invalid(
      () => examplesToTensors({ examples: [ex({ x: floats(1) }), ex({ x: floats(1, 2) })] }, spec),
      'Name: <unknown>, Key: x, Index: 1.  Number of float values != expected.  Values size: 2 but output shape: [1]',
    );
    invalid(
      () =>
        examplesToTensors({ examples: [ex({ u: { kind: 'number', values: [256] } })] }, [
          { key: 'u', dtype: 'uint8', shape: [] },
        ]),
      /Value 256 does not fit the model input type uint8/,
    );
    invalid(
      () =>
        examplesToTensors({ examples: [ex({ v: floats(1, 2, 3) }), ex({ v: floats(1) })] }, [
          { key: 'v', dtype: 'float32', shape: [-1] },
        ]),
      /Index: 1.  Number of float values != expected/,
    );
    invalid(
      () =>
        examplesToTensors({ examples: [ex({ x: floats(1) })] }, [
          { key: 'x', dtype: 'float32', shape: [65536, 65536] },
        ]),
      /too many elements/,
    );
  });
});

void describe('tf.Example messages', () => {
  void it('parses serialized examples and Input messages, refusing garbage with TF wording', () => {
    const bytes = toBinary(
      ExampleSchema,
      create(ExampleSchema, {
        features: { feature: { x: { kind: { case: 'floatList', value: { value: [2] } } } } },
      }),
    );
    const parsed = parseSerializedExample(bytes);
    assert.deepEqual(Array.from(parsed.get('x')!.values as ArrayLike<number>), [2]);
    invalid(
      () => parseSerializedExample(Uint8Array.of(0xff, 0xff, 0xff)),
      /^Could not parse example input, value: /,
    );
    invalid(
      () => parseSerializedExample(bytes.subarray(0, bytes.length - 1)),
      /^Could not parse example input/,
    );
    assert.deepEqual(exampleInputFromProto(undefined), { examples: [] });
  });
});

void describe('REST classify / regress bodies', () => {
  void it('reads examples, context and values the way TF Serving does', () => {
    const { signatureName, input } = parseTfsExamplesBody({
      signature_name: 's',
      context: { c: 'text' },
      examples: [{ x: 1.5, k: [1, 2], b: { b64: 'AAE=' }, t: true }],
    });
    assert.equal(signatureName, 's');
    assert.deepEqual(input.context!.get('c'), { kind: 'bytes', values: [new TextEncoder().encode('text')] });
    assert.deepEqual(input.examples[0]!.get('k'), { kind: 'number', values: [1, 2] });
    assert.deepEqual(input.examples[0]!.get('b'), { kind: 'bytes', values: [Uint8Array.of(0, 1)] });
    assert.deepEqual(input.examples[0]!.get('t'), { kind: 'number', values: [1] });
  });
  void it('refuses malformed bodies with TF Serving messages', () => {
    invalid(
      () => parseTfsExamplesBody({}),
      "When method is classify, key 'examples' is expected and was not found",
    );
    invalid(() => parseTfsExamplesBody({ examples: {} }), "Expecting 'examples' value to be an list/array");
    invalid(() => parseTfsExamplesBody({ examples: [] }), "'examples' value is an empty array");
    invalid(() => parseTfsExamplesBody({ examples: [1] }), 'Example must be JSON object but got JSON number');
    invalid(
      () => parseTfsExamplesBody({ examples: [{ x: [1, 'a'] }] }),
      'Unexpected element type in feature: x expecting type: float',
    );
    invalid(
      () => parseTfsExamplesBody({ examples: [{ x: [[1]] }] }),
      'Feature: x has element with unexpected JSON type: array',
    );
    invalid(
      () => parseTfsExamplesBody({ examples: [{ x: null }] }),
      'Feature: x has element with unexpected JSON type: null',
    );
    invalid(() => parseTfsExamplesBody({ examples: [{ x: { b64: '!!' } }] }), /Unable to base64 decode/);
    invalid(() => parseTfsExamplesBody([]), /JSON object/);
  });
  void it('writes {"results": ...} answers', () => {
    assert.equal(
      text(
        encodeTfsClassifyResponse([
          [
            { label: 'neg', score: 0.25 },
            { label: 'p"s', score: 0.75 },
          ],
        ]),
      ),
      '{"results":[[["neg",0.25],["p\\"s",0.75]]]}',
    );
    assert.equal(text(encodeTfsRegressResponse(Float32Array.of(2.5, 0.1))), '{"results":[2.5,0.1]}');
  });
});
