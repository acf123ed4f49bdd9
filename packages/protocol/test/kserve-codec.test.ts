import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError, type Tensor, bfloat16ToNumber, halfToNumber } from '../src/index.js';
import {
  KSERVE_DATATYPES,
  classificationTensor,
  configDataTypeName,
  datatypeOfDtype,
  decodeBytesElements,
  decodeHttpInferRequest,
  decodeHttpInferResponse,
  dtypeOfDatatype,
  encodeBytesElements,
  encodeHttpInferRequest,
  encodeHttpInferResponse,
  formatFixed6,
  numberToBfloat16,
  numberToHalf,
  outputIsBinary,
  parseClassificationEntry,
} from '../src/kserve/index.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

function rejects(fn: () => unknown, code: Code, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ServingError, `expected a ServingError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    assert.match(e.message, pattern);
    return true;
  });
}

/** A request body: JSON header plus binary parts; returns the body and the header length. */
function body(json: unknown, ...binary: Uint8Array[]): { bytes: Uint8Array; header: string | undefined } {
  const head = enc.encode(JSON.stringify(json));
  if (binary.length === 0) return { bytes: head, header: undefined };
  const total = head.byteLength + binary.reduce((s, b) => s + b.byteLength, 0);
  const out = new Uint8Array(total);
  out.set(head);
  let at = head.byteLength;
  for (const b of binary) {
    out.set(b, at);
    at += b.byteLength;
  }
  return { bytes: out, header: String(head.byteLength) };
}

const f32 = (...v: number[]): Uint8Array => new Uint8Array(Float32Array.from(v).buffer);

function join(parts: { json: Uint8Array; binary: readonly Uint8Array[] }): Uint8Array {
  const out = new Uint8Array(parts.json.byteLength + parts.binary.reduce((s, b) => s + b.byteLength, 0));
  out.set(parts.json);
  let at = parts.json.byteLength;
  for (const b of parts.binary) {
    out.set(b, at);
    at += b.byteLength;
  }
  return out;
}

describe('KServe datatypes', () => {
  it('map both ways and name config types', () => {
    for (const dt of KSERVE_DATATYPES) assert.equal(datatypeOfDtype(dtypeOfDatatype(dt)), dt);
    assert.equal(configDataTypeName('string'), 'TYPE_STRING');
    assert.equal(configDataTypeName('float32'), 'TYPE_FP32');
    assert.equal(configDataTypeName('bool'), 'TYPE_BOOL');
  });
});

describe('FP16 conversion', () => {
  it('rounds to nearest even and round-trips every half', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      const v = halfToNumber(bits);
      if (Number.isNaN(v)) continue;
      assert.equal(numberToHalf(v), bits, `bits ${bits.toString(16)} (${v})`);
    }
    assert.equal(numberToHalf(65504), 0x7bff);
    assert.equal(numberToHalf(65519.99), 0x7bff);
    assert.equal(numberToHalf(65520), 0x7c00);
    assert.equal(numberToHalf(-1e9), 0xfc00);
    assert.equal(numberToHalf(2 ** -25), 0); // tie between 0 and the smallest subnormal: even
    assert.equal(numberToHalf(2 ** -25 * 1.5), 1);
    assert.equal(numberToHalf(2 ** -24 * 1.5), 2); // tie between subnormals 1 and 2: even
    assert.equal(numberToHalf(1 + 2 ** -11), 0x3c00); // tie: even mantissa
    assert.equal(numberToHalf(1 + 3 * 2 ** -11), 0x3c02);
    assert.equal(numberToHalf(NaN) & 0x7c00, 0x7c00);
    assert.equal(numberToHalf(-0), 0x8000);
  });
});

describe('BYTES elements', () => {
  it('round-trips, empty elements included', () => {
    const elements = [enc.encode(''), enc.encode('abc'), enc.encode('h\u00e9llo'), Uint8Array.of(0, 255)];
    const bytes = encodeBytesElements(elements);
    assert.equal(bytes.byteLength, 4 * 4 + 0 + 3 + 6 + 2);
    assert.deepEqual(decodeBytesElements(bytes, 4, 'x'), elements);
  });

  it('rejects cut prefixes, lengths past the end, wrong counts', () => {
    const good = encodeBytesElements([enc.encode('ab'), enc.encode('c')]);
    rejects(() => decodeBytesElements(good.subarray(0, 3), 1, 'in'), Code.INVALID_ARGUMENT, /cannot hold 1/);
    rejects(
      () => decodeBytesElements(good.subarray(0, 8), 2, 'in'),
      Code.INVALID_ARGUMENT,
      /element 1 has no complete 4-byte/,
    );
    rejects(
      () => decodeBytesElements(good.subarray(0, 5), 1, 'in'),
      Code.INVALID_ARGUMENT,
      /declares 2 bytes/,
    );
    rejects(() => decodeBytesElements(good, 1, 'in'), Code.INVALID_ARGUMENT, /left over/);
    rejects(() => decodeBytesElements(good, 3, 'in'), Code.INVALID_ARGUMENT, /no complete|cannot hold/);
    const huge = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 1, 2);
    rejects(() => decodeBytesElements(huge, 1, 'in'), Code.INVALID_ARGUMENT, /declares 4294967295 bytes/);
    // A shape of 2^31-1 BYTES elements over 8 bytes is refused before anything is allocated.
    rejects(
      () => decodeBytesElements(good.subarray(0, 8), 2 ** 31 - 1, 'in'),
      Code.INVALID_ARGUMENT,
      /cannot hold/,
    );
  });
});

describe('HTTP infer request decoding', () => {
  it('reads JSON data, flat and nested, for every datatype', () => {
    const { bytes } = body({
      id: 'r1',
      parameters: { binary_data_output: true, custom: 'x' },
      inputs: [
        {
          name: 'f',
          shape: [2, 2],
          datatype: 'FP32',
          data: [
            [1.5, 2],
            [NaN, 4],
          ],
        },
        { name: 'b', shape: [3], datatype: 'BOOL', data: [true, false, true] },
        { name: 'u8', shape: [2], datatype: 'UINT8', data: [0, 255] },
        { name: 'u64', shape: [1], datatype: 'UINT64', data: [9007199254740991] },
        { name: 'i64', shape: [1], datatype: 'INT64', data: [-5] },
        { name: 'h', shape: [2], datatype: 'FP16', data: [1.0, -2.5] },
        { name: 's', shape: [2], datatype: 'BYTES', data: ['abc', '\u00e9'] },
      ],
      outputs: [{ name: 'y', parameters: { binary_data: false, classification: 3 } }],
    });
    const text = dec.decode(bytes).replace('null', 'NaN');
    const req = decodeHttpInferRequest(enc.encode(text), undefined);
    assert.equal(req.id, 'r1');
    assert.equal(req.parameters['custom'], 'x');
    const byName = Object.fromEntries(req.inputs.map((i) => [i.name, i.tensor]));
    assert.deepEqual(byName['f']!.shape, [2, 2]);
    assert.ok(Number.isNaN((byName['f']!.data as Float32Array)[2]));
    assert.deepEqual([...(byName['b']!.data as Uint8Array)], [1, 0, 1]);
    assert.equal(byName['b']!.dtype, 'bool');
    assert.deepEqual([...(byName['u64']!.data as BigUint64Array)], [9007199254740991n]);
    assert.deepEqual([...(byName['i64']!.data as BigInt64Array)], [-5n]);
    assert.deepEqual([...(byName['h']!.data as Uint16Array)], [0x3c00, 0xc100]);
    assert.deepEqual(
      (byName['s']!.data as Uint8Array[]).map((b) => dec.decode(b)),
      ['abc', '\u00e9'],
    );
    assert.deepEqual(req.outputs, [
      { name: 'y', parameters: { binary_data: false, classification: 3 }, classification: 3 },
    ]);
  });

  it('reads binary data as views when aligned, copies when not, BYTES length-prefixed', () => {
    const strings = encodeBytesElements([enc.encode('a'), enc.encode('')]);
    const json = {
      inputs: [
        { name: 'x', shape: [2], datatype: 'FP32', parameters: { binary_data_size: 8 } },
        { name: 's', shape: [2], datatype: 'BYTES', parameters: { binary_data_size: strings.byteLength } },
      ],
    };
    // Pad the JSON so that the first tensor starts at an offset that is a multiple of 4.
    let head = JSON.stringify(json);
    while (head.length % 4 !== 0) head += ' ';
    const { bytes } = body(JSON.parse(head) as unknown, f32(1, 2), strings);
    const aligned = new Uint8Array(head.length + 8 + strings.byteLength);
    aligned.set(enc.encode(head));
    aligned.set(bytes.subarray(bytes.byteLength - 8 - strings.byteLength), head.length);
    const req = decodeHttpInferRequest(aligned, String(head.length));
    const x = req.inputs[0]!.tensor.data as Float32Array;
    assert.deepEqual([...x], [1, 2]);
    assert.equal(x.buffer, aligned.buffer, 'aligned binary data is a view of the body');
    assert.deepEqual(
      (req.inputs[1]!.tensor.data as Uint8Array[]).map((b) => dec.decode(b)),
      ['a', ''],
    );

    const shifted = new Uint8Array(aligned.byteLength + 1).subarray(1);
    shifted.set(aligned);
    const copy = decodeHttpInferRequest(shifted, String(head.length)).inputs[0]!.tensor.data as Float32Array;
    assert.deepEqual([...copy], [1, 2]);
    assert.notEqual(copy.buffer, shifted.buffer, 'misaligned binary data is copied');
  });

  const bad = (json: unknown, header: string | undefined, pattern: RegExp, ...binary: Uint8Array[]): void => {
    const b = body(json, ...binary);
    rejects(() => decodeHttpInferRequest(b.bytes, header ?? b.header), Code.INVALID_ARGUMENT, pattern);
  };
  const x = (extra: Record<string, unknown>): unknown => ({
    inputs: [{ name: 'x', shape: [2], datatype: 'FP32', ...extra }],
  });

  it('rejects malformed structure with clear messages', () => {
    rejects(() => decodeHttpInferRequest(enc.encode('{not json'), undefined), Code.INVALID_ARGUMENT, /JSON/);
    rejects(() => decodeHttpInferRequest(enc.encode('[1]'), undefined), Code.INVALID_ARGUMENT, /JSON object/);
    rejects(() => decodeHttpInferRequest(new Uint8Array(0), undefined), Code.INVALID_ARGUMENT, /JSON/);
    bad({}, undefined, /"inputs" must be a list/);
    bad({ inputs: [1] }, undefined, /input 0 must be an object/);
    bad({ inputs: [{ shape: [1], datatype: 'FP32', data: [1] }] }, undefined, /needs a "name"/);
    bad({ id: 5, inputs: [] }, undefined, /"id" must be a string/);
    bad({ parameters: { a: [1] }, inputs: [] }, undefined, /parameter "a"/);
    bad({ parameters: { binary_data_output: 'yes' }, inputs: [] }, undefined, /binary_data_output/);
    bad(x({ datatype: 'FLOAT', data: [1, 2] }), undefined, /unknown datatype "FLOAT"/);
    bad(x({ shape: [-1], data: [] }), undefined, /invalid dimension -1/);
    bad(x({ shape: [2.5], data: [] }), undefined, /invalid dimension 2.5/);
    bad(x({ shape: 'abc', data: [] }), undefined, /"shape" must be a list/);
    bad(x({}), undefined, /neither "data" nor binary_data_size/);
    bad(
      x({ data: [1, 2], parameters: { binary_data_size: 8 } }),
      undefined,
      /both "data" and binary_data_size/,
    );
    bad(
      {
        inputs: [
          { name: 'x', shape: [1], datatype: 'FP32', data: [1] },
          { name: 'x', shape: [1], datatype: 'FP32', data: [1] },
        ],
      },
      undefined,
      /appears more than once/,
    );
    bad({ inputs: [], outputs: [{ name: 'y' }, { name: 'y' }] }, undefined, /requested more than once/);
    bad(
      { inputs: [], outputs: [{ name: 'y', parameters: { classification: -1 } }] },
      undefined,
      /classification/,
    );
    bad(
      { inputs: [], outputs: [{ name: 'y', parameters: { classification: 'top' } }] },
      undefined,
      /classification/,
    );
    bad(
      { inputs: [], outputs: [{ name: 'y', parameters: { binary_data: 1 } }] },
      undefined,
      /binary_data must/,
    );
  });

  it('rejects JSON data that does not fit the shape or the datatype', () => {
    bad(x({ data: [1, 2, 3] }), undefined, /more than 2 elements.*needs 2/);
    bad(x({ data: [1] }), undefined, /data has 1 elements.*needs 2/);
    bad(x({ data: [1, 'a'] }), undefined, /"a" is not a valid FP32/);
    bad({ inputs: [{ name: 'b', shape: [1], datatype: 'BOOL', data: [1] }] }, undefined, /true or false/);
    bad(
      { inputs: [{ name: 'i', shape: [1], datatype: 'INT8', data: [128] }] },
      undefined,
      /range \[-128, 127\]/,
    );
    bad(
      { inputs: [{ name: 'i', shape: [1], datatype: 'INT32', data: [1.5] }] },
      undefined,
      /not a valid INT32/,
    );
    bad({ inputs: [{ name: 'i', shape: [1], datatype: 'UINT64', data: [2 ** 60] }] }, undefined, /2\^53/);
    bad(
      { inputs: [{ name: 's', shape: [1], datatype: 'BYTES', data: [5] }] },
      undefined,
      /not a valid BYTES/,
    );
    bad(
      { inputs: [{ name: 'h', shape: [1], datatype: 'BF16', data: [1] }] },
      undefined,
      /BF16 data cannot be given as JSON/,
    );
    // Deep nesting is refused without recursion; a huge declared shape with tiny data allocates nothing.
    const deep = `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":${'['.repeat(100000)}1${']'.repeat(100000)}}]}`;
    rejects(
      () => decodeHttpInferRequest(enc.encode(deep), undefined),
      Code.INVALID_ARGUMENT,
      /nested deeper/,
    );
    bad(
      { inputs: [{ name: 'x', shape: [2 ** 31 - 1], datatype: 'FP64', data: [1] }] },
      undefined,
      /needs 2147483647/,
    );
    bad(
      { inputs: [{ name: 'x', shape: [2 ** 20, 2 ** 20], datatype: 'FP32', data: [] }] },
      undefined,
      /too many elements/,
    );
  });

  it('rejects lying header lengths and binary sizes', () => {
    const json = x({ parameters: { binary_data_size: 8 } });
    const good = body(json, f32(1, 2));
    assert.deepEqual(
      [...(decodeHttpInferRequest(good.bytes, good.header).inputs[0]!.tensor.data as Float32Array)],
      [1, 2],
    );
    rejects(() => decodeHttpInferRequest(good.bytes, 'abc'), Code.INVALID_ARGUMENT, /non-negative integer/);
    rejects(() => decodeHttpInferRequest(good.bytes, '-1'), Code.INVALID_ARGUMENT, /non-negative integer/);
    rejects(() => decodeHttpInferRequest(good.bytes, '1e3'), Code.INVALID_ARGUMENT, /non-negative integer/);
    rejects(
      () => decodeHttpInferRequest(good.bytes, '99999999999'),
      Code.INVALID_ARGUMENT,
      /larger than the body/,
    );
    rejects(() => decodeHttpInferRequest(good.bytes, '0'), Code.UNIMPLEMENTED, /Raw binary requests/);
    rejects(
      () => decodeHttpInferRequest(good.bytes, String(Number(good.header) - 3)),
      Code.INVALID_ARGUMENT,
      /JSON/,
    );
    // Without the header the JSON parse fails on the trailing bytes.
    rejects(() => decodeHttpInferRequest(good.bytes, undefined), Code.INVALID_ARGUMENT, /JSON/);
    bad(json, undefined, /runs past the end/, f32(1));
    bad(
      x({ parameters: { binary_data_size: 4 } }),
      undefined,
      /4 bytes of binary data, but FP32 shape \[2\] takes 8/,
      f32(1),
    );
    bad(x({ parameters: { binary_data_size: 8 } }), undefined, /no tensor claims/, f32(1, 2, 3));
    bad(
      x({ parameters: { binary_data_size: -8 } }),
      undefined,
      /binary_data_size must be a non-negative integer/,
      f32(1, 2),
    );
    bad(x({ parameters: { binary_data_size: 2 ** 60 } }), undefined, /non-negative integer/, f32(1, 2));
    bad(x({ parameters: { binary_data_size: 2 ** 40 } }), undefined, /runs past the end/, f32(1, 2));
    const s = encodeBytesElements([enc.encode('abc')]);
    s[0] = 200;
    bad(
      {
        inputs: [
          { name: 's', shape: [1], datatype: 'BYTES', parameters: { binary_data_size: s.byteLength } },
        ],
      },
      undefined,
      /declares 200 bytes/,
      s,
    );
  });
});

describe('HTTP infer response encoding', () => {
  const outputs: { name: string; tensor: Tensor }[] = [
    { name: 'y', tensor: { dtype: 'float32', shape: [1, 2], data: Float32Array.of(0.1, -2) } },
    { name: 's', tensor: { dtype: 'string', shape: [2], data: [enc.encode('a'), enc.encode('')] } },
    { name: 'b', tensor: { dtype: 'bool', shape: [2], data: Uint8Array.of(1, 0) } },
    {
      name: 'l',
      tensor: { dtype: 'int64', shape: [2], data: BigInt64Array.of(-(2n ** 53n) + 1n, 2n ** 62n) },
    },
    { name: 'h', tensor: { dtype: 'float16', shape: [1], data: Uint16Array.of(0x3c00) } },
  ];

  it('writes JSON outputs that the client decoder reads back', () => {
    const encoded = encodeHttpInferResponse(
      { modelName: 'm', modelVersion: '3', id: 'q', outputs },
      outputs.map(() => false),
    );
    assert.equal(encoded.binaryBytes, 0);
    const json = JSON.parse(dec.decode(encoded.json)) as Record<string, unknown>;
    assert.equal(json['model_name'], 'm');
    assert.equal(json['model_version'], '3');
    assert.equal(json['id'], 'q');
    assert.match(dec.decode(encoded.json), /"data":\[0.1,-2\]/);
    assert.match(dec.decode(encoded.json), /"data":\[true,false\]/);
    assert.match(dec.decode(encoded.json), /"data":\[-9007199254740991,4611686018427387904\]/);
    // Beyond 2^53 JSON cannot carry int64 exactly: the decoder says so instead of rounding.
    rejects(() => decodeHttpInferResponse(encoded.json, undefined), Code.INTERNAL, /2\^53/);
    const exact = encodeHttpInferResponse(
      { modelName: 'm', modelVersion: '3', id: 'q', outputs },
      outputs.map((o) => o.name === 'l'),
    );
    const back = decodeHttpInferResponse(join(exact), String(exact.json.byteLength));
    assert.deepEqual([...(back.outputs[3]!.tensor.data as BigInt64Array)], [-(2n ** 53n) + 1n, 2n ** 62n]);
    assert.deepEqual([...(back.outputs[0]!.tensor.data as Float32Array)], [Math.fround(0.1), -2]);
    assert.deepEqual(back.outputs[1]!.tensor.data, [enc.encode('a'), enc.encode('')]);
    assert.deepEqual([...(back.outputs[4]!.tensor.data as Uint16Array)], [0x3c00]);
  });

  it('writes binary outputs in order with binary_data_size, views for numeric data', () => {
    const encoded = encodeHttpInferResponse({ modelName: 'm', modelVersion: '1', id: '', outputs }, [
      true,
      true,
      false,
      true,
      true,
    ]);
    assert.equal(encoded.binary[0]!.buffer, (outputs[0]!.tensor.data as Float32Array).buffer);
    assert.equal(encoded.binaryBytes, 8 + 9 + 16 + 2);
    const json = JSON.parse(dec.decode(encoded.json)) as { id?: string; outputs: { parameters?: unknown }[] };
    assert.equal(json.id, undefined, 'an empty id is left out');
    assert.deepEqual(json.outputs[0]!.parameters, { binary_data_size: 8 });
    const back = decodeHttpInferResponse(join(encoded), String(encoded.json.byteLength));
    assert.deepEqual(
      back.outputs.map((o) => o.tensor),
      outputs.map((o) => o.tensor),
    );
  });

  it('refuses non-UTF-8 BYTES as JSON', () => {
    const t: Tensor = { dtype: 'string', shape: [1], data: [Uint8Array.of(0xff)] };
    rejects(
      () =>
        encodeHttpInferResponse(
          { modelName: 'm', modelVersion: '1', id: '', outputs: [{ name: 'o', tensor: t }] },
          [false],
        ),
      Code.INVALID_ARGUMENT,
      /not UTF-8.*binary_data/,
    );
  });

  it('client decoder: a malformed response is INTERNAL', () => {
    rejects(
      () =>
        decodeHttpInferResponse(
          enc.encode(
            '{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}',
          ),
          undefined,
        ),
      Code.INTERNAL,
      /runs past the end/,
    );
    rejects(() => decodeHttpInferResponse(enc.encode('nope'), undefined), Code.INTERNAL, /Malformed/);
  });

  it('binary output rule: own binary_data, else binary_data_output', () => {
    const req = (parameters: Record<string, boolean>) => ({
      id: '',
      parameters,
      inputs: [],
      outputs: undefined,
    });
    const out = (binary?: boolean) => ({
      name: 'y',
      classification: 0,
      parameters: binary === undefined ? {} : { binary_data: binary },
    });
    assert.equal(outputIsBinary(req({}), undefined), false);
    assert.equal(outputIsBinary(req({ binary_data_output: true }), undefined), true);
    assert.equal(outputIsBinary(req({ binary_data_output: true }), out(false)), false);
    assert.equal(outputIsBinary(req({}), out(true)), true);
    assert.equal(outputIsBinary(req({ binary_data_output: true }), out()), true);
  });
});

describe('HTTP infer request encoding (client)', () => {
  it('round-trips through the server decoder, binary and JSON inputs mixed', () => {
    const encoded = encodeHttpInferRequest({
      id: 'abc',
      inputs: [
        { name: 'x', tensor: { dtype: 'float32', shape: [2], data: Float32Array.of(1, 2) }, binary: true },
        { name: 'n', tensor: { dtype: 'int32', shape: [1], data: Int32Array.of(7) }, binary: false },
        { name: 's', tensor: { dtype: 'string', shape: [1], data: [enc.encode('\u00e9')] }, binary: true },
      ],
      outputs: [{ name: 'y', binary: true, classification: 2 }],
    });
    assert.equal(encoded.json.byteLength % 8, 0, 'JSON padded so that binary data starts aligned');
    const body = join(encoded);
    const req = decodeHttpInferRequest(body, String(encoded.json.byteLength));
    assert.equal((req.inputs[0]!.tensor.data as Float32Array).buffer, body.buffer, 'decoded as a view');
    assert.equal(req.id, 'abc');
    assert.deepEqual([...(req.inputs[0]!.tensor.data as Float32Array)], [1, 2]);
    assert.deepEqual([...(req.inputs[1]!.tensor.data as Int32Array)], [7]);
    assert.deepEqual(req.inputs[2]!.tensor.data, [enc.encode('\u00e9')]);
    assert.deepEqual(req.outputs, [
      { name: 'y', parameters: { binary_data: true, classification: 2 }, classification: 2 },
    ]);
  });
});

describe('classification extension', () => {
  const s = (t: Tensor): string[] => (t.data as Uint8Array[]).map((b) => dec.decode(b));

  it('formats like std::to_string and ranks best first, ties by index', () => {
    const scores: Tensor = { dtype: 'float32', shape: [1, 5], data: Float32Array.of(0.5, 2, -3.25, 2, 0.7) };
    const labels = ['a', 'b', 'c', 'd'];
    const t = classificationTensor(scores, 3, { batched: true, label: (i) => labels[i] });
    assert.deepEqual(t.shape, [1, 3]);
    assert.equal(t.dtype, 'string');
    assert.deepEqual(s(t), ['2.000000:1:b', '2.000000:3:d', '0.700000:4']);
    const flat = classificationTensor(scores, 10, { batched: false });
    assert.deepEqual(flat.shape, [5]);
    assert.deepEqual(s(flat).at(-1), '-3.250000:2');
  });

  it('ranks each batch item on its own', () => {
    const scores: Tensor = { dtype: 'int32', shape: [2, 3], data: Int32Array.of(1, 9, 3, 7, 0, 7) };
    const t = classificationTensor(scores, 2, { batched: true });
    assert.deepEqual(t.shape, [2, 2]);
    assert.deepEqual(s(t), ['9:1', '3:2', '7:0', '7:2']);
    const u64: Tensor = { dtype: 'uint64', shape: [2], data: BigUint64Array.of(5n, 2n ** 63n) };
    assert.deepEqual(s(classificationTensor(u64, 1, { batched: false })), ['9223372036854775808:1']);
  });

  it('puts NaN last and refuses unsupported types', () => {
    const scores: Tensor = { dtype: 'float64', shape: [3], data: Float64Array.of(NaN, -1, 1e22) };
    assert.deepEqual(s(classificationTensor(scores, 3, { batched: false })), [
      '10000000000000000000000.000000:2',
      '-1.000000:1',
      'nan:0',
    ]);
    for (const dtype of ['float16', 'bool'] as const) {
      rejects(
        () => classificationTensor({ dtype, shape: [1], data: Uint8Array.of(1) }, 1, { batched: false }),
        Code.INVALID_ARGUMENT,
        /unsupported type/,
      );
    }
  });

  it('formatFixed6 and the entry parser agree', () => {
    assert.equal(formatFixed6(0.7), '0.700000');
    assert.equal(formatFixed6(-1e-9), '-0.000000');
    assert.equal(formatFixed6(12), '12.000000');
    assert.deepEqual(parseClassificationEntry('0.700000:1'), { score: 0.7, index: 1, label: undefined });
    assert.deepEqual(parseClassificationEntry('-3.250000:7:a:b'), { score: -3.25, index: 7, label: 'a:b' });
    rejects(() => parseClassificationEntry('nope'), Code.INVALID_ARGUMENT, /Not a classification entry/);
  });
});

describe('BF16 conversion and BF16 outputs as JSON', () => {
  it('rounds to nearest even and round-trips every bfloat16', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      const v = bfloat16ToNumber(bits);
      if (Number.isNaN(v)) continue;
      assert.equal(numberToBfloat16(v), bits, `bits ${bits.toString(16)} (${v})`);
    }
    assert.equal(numberToBfloat16(1 + 2 ** -8), 0x3f80); // tie: even mantissa
    assert.equal(numberToBfloat16(1 + 3 * 2 ** -8), 0x3f82);
    assert.equal(numberToBfloat16(1 + 2 ** -8 + 2 ** -40), 0x3f81); // no double rounding through float32
    assert.equal(numberToBfloat16(3.4e38), 0x7f80);
    assert.equal(numberToBfloat16(-Infinity), 0xff80);
    assert.equal(numberToBfloat16(2 ** -134), 0); // tie between 0 and the smallest subnormal: even
    assert.equal(numberToBfloat16(NaN), 0x7fc0);
    assert.equal(numberToBfloat16(-0), 0x8000);
  });

  it('the client reads BF16 outputs the server wrote as JSON numbers (found by fuzzing)', () => {
    const tensor: Tensor = { dtype: 'bfloat16', shape: [3], data: Uint16Array.of(0x3f80, 0xc2f7, 0x0001) };
    const encoded = encodeHttpInferResponse(
      { modelName: 'm', modelVersion: '1', id: '', outputs: [{ name: 'y', tensor }] },
      [false],
    );
    const back = decodeHttpInferResponse(encoded.json, undefined);
    assert.deepEqual([...(back.outputs[0]!.tensor.data as Uint16Array)], [0x3f80, 0xc2f7, 0x0001]);
    // Requests still refuse BF16 in JSON, as Triton does.
    rejects(
      () =>
        decodeHttpInferRequest(
          enc.encode('{"inputs":[{"name":"x","datatype":"BF16","shape":[1],"data":[1]}]}'),
          undefined,
        ),
      Code.INVALID_ARGUMENT,
      /BF16 data cannot be given as JSON/,
    );
  });
});
