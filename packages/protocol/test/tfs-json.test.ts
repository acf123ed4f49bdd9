import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mulberry32 } from './seeded-random.js';
import {
  Code,
  JsonWriter,
  ServingError,
  type Tensor,
  encodeTfsPredictRequest,
  encodeTfsPredictResponse,
  parseTfsJsonText,
  parseTfsPredictBody,
  shortestFloat32Slow,
  tfsJsonToTensors,
} from '../src/index.js';

const F = { x: { dtype: 'float32' as const } };
const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

function rejects(fn: () => unknown, code: Code, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ServingError, `not a ServingError: ${String(e)}`);
    assert.equal(e.code, code, e.message);
    assert.match(e.message, pattern);
    return true;
  });
}
const bad = (fn: () => unknown, pattern: RegExp): void => {
  rejects(fn, Code.INVALID_ARGUMENT, pattern);
};

function convert(
  body: string,
  specs: Record<string, { dtype: Tensor['dtype'] }> = F,
): Record<string, Tensor> {
  const parsed = parseTfsPredictBody(parseTfsJsonText(body));
  return tfsJsonToTensors(parsed.format, parsed.value, specs);
}

void describe('parseTfsJsonText', () => {
  void it('rejects bad and truncated JSON with INVALID_ARGUMENT', () => {
    bad(() => parseTfsJsonText('{"instances": [1, 2'), /JSON Parse error/);
    bad(() => parseTfsJsonText(''), /JSON Parse error/);
    bad(() => parseTfsJsonText('{instances: 1}'), /JSON Parse error/);
    bad(() => parseTfsJsonText('[NaNx]'), /JSON Parse error/);
  });
  void it('accepts NaN / Infinity tokens but not inside strings', () => {
    const t = convert('{"instances": [NaN, Infinity, -Infinity, 1]}');
    assert.deepEqual(Array.from(t['x']!.data as Float32Array), [NaN, Infinity, -Infinity, 1]);
    // The rewrite needed for the bare NaN must leave "NaN" inside strings alone.
    const s = convert('{"inputs": {"x": [NaN], "s": ["NaN", "a\\"Infinity"]}}', {
      x: { dtype: 'float32' },
      s: { dtype: 'string' },
    });
    assert.deepEqual(
      (s['s']!.data as Uint8Array[]).map((b) => text(b)),
      ['NaN', 'a"Infinity'],
    );
  });
  void it('parses 100k-deep nesting without overflowing, and the codec refuses it', () => {
    const deep = `{"instances": ${'['.repeat(100_000)}1${']'.repeat(100_000)}}`;
    bad(() => convert(deep), /deeper than 64/);
  });
});

void describe('parseTfsPredictBody', () => {
  void it('gives TF Serving messages for key errors', () => {
    bad(
      () => parseTfsPredictBody({ instances: [1], inputs: [1] }),
      /^Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist$/,
    );
    bad(() => parseTfsPredictBody({}), /^Missing 'inputs' or 'instances' key$/);
    bad(() => parseTfsPredictBody({ instances: [] }), /empty/);
    bad(() => parseTfsPredictBody({ instances: 3 }), /list/);
    bad(() => parseTfsPredictBody([1, 2]), /JSON object/);
    bad(() => parseTfsPredictBody(null), /JSON object/);
    bad(() => parseTfsPredictBody({ instances: [1], signature_name: 3 }), /signature_name/);
  });
  void it('reads signature_name and format', () => {
    assert.deepEqual(parseTfsPredictBody({ signature_name: 's', inputs: 1 }), {
      signatureName: 's',
      format: 'columnar',
      value: 1,
    });
  });
});

void describe('tfsJsonToTensors', () => {
  void it('stacks row instances along dim 0', () => {
    const t = convert('{"instances": [[1, 2], [3, 4], [5, 6]]}')['x']!;
    assert.deepEqual(t.shape, [3, 2]);
    assert.deepEqual(Array.from(t.data as Float32Array), [1, 2, 3, 4, 5, 6]);
  });
  void it('accepts columnar scalars, lists and named objects', () => {
    assert.deepEqual(convert('{"inputs": 7}')['x']!.shape, []);
    assert.deepEqual(convert('{"inputs": {"x": [[1]]}}')['x']!.shape, [1, 1]);
    const two = { a: { dtype: 'int32' as const }, b: { dtype: 'string' as const } };
    const r = convert('{"inputs": {"a": [1, 2], "b": "hi"}}', two);
    assert.deepEqual(Array.from(r['a']!.data as Int32Array), [1, 2]);
    assert.deepEqual(r['b']!.shape, []);
    assert.equal(text((r['b']!.data as Uint8Array[])[0]!), 'hi');
  });
  void it('handles multi-input rows and checks their keys', () => {
    const two = { a: { dtype: 'int32' as const }, b: { dtype: 'float64' as const } };
    const r = convert('{"instances": [{"a": 1, "b": [0.5]}, {"b": [1.5], "a": 2}]}', two);
    assert.deepEqual(r['a']!.shape, [2]);
    assert.deepEqual(r['b']!.shape, [2, 1]);
    bad(() => convert('{"instances": [{"a": 1, "b": [0.5]}, {"a": 2}]}', two), /same keys/);
    bad(() => convert('{"instances": [{"a": 1, "b": [0.5]}, {"a": 2, "c": 1}]}', two), /same keys/);
    bad(() => convert('{"instances": [{"a": 1, "b": [0.5]}, 3]}', two), /not an object/);
    bad(() => convert('{"instances": [{"a": 1, "zz": [0.5]}]}', two), /"zz" not found/);
    bad(() => convert('{"instances": [1, 2]}', two), /single-input/);
    bad(() => convert('{"inputs": [1, 2]}', two), /single-input/);
  });
  void it('refuses unknown aliases, including prototype names', () => {
    bad(() => convert('{"inputs": {"y": 1}}'), /"y" not found/);
    bad(() => convert('{"inputs": {"__proto__": 1}}'), /"__proto__" not found/);
    bad(() => convert('{"inputs": {"constructor": 1}}'), /"constructor" not found/);
    bad(() => convert('{"instances": [{"toString": 1}]}'), /"toString" not found/);
  });
  void it('refuses ragged lists and depth mismatches', () => {
    bad(() => convert('{"instances": [[1, 2], [3]]}'), /unexpected size: 1 at level 1/);
    bad(() => convert('{"instances": [[1, 2], 3]}'), /3 found at incorrect level 1/);
    bad(() => convert('{"instances": [1, [2]]}'), /list found at incorrect level/);
    bad(() => convert('{"instances": [[[1]], [[1, 2]]]}'), /unexpected size/);
    bad(() => convert('{"instances": [[], [1]]}'), /unexpected size/);
  });
  void it('does not allocate for a large declared shape with little data', () => {
    // First-element chain declares 100000 x 100000 = 1e10 elements; refused by size.
    const wide = `[${'0,'.repeat(99_999)}0]`;
    bad(() => convert(`{"instances": [${wide}, [1]]}`), /too many elements|unexpected size/);
    // 30000 x 30000 x 2 fits the bound but the data is not there: refused before allocation.
    const row = `[${'[0,0],'.repeat(29_999)}[0,0]]`;
    bad(() => convert(`{"instances": [${row}, [[1,1]]]}`), /unexpected size/);
  });
  void it('checks value types', () => {
    bad(() => convert('{"instances": ["a"]}'), /"a" not formatted correctly for type: float32/);
    bad(() => convert('{"instances": [true]}'), /true not formatted correctly/);
    bad(() => convert('{"instances": [null]}'), /null not formatted/);
    bad(() => convert('{"instances": [{"b64": "AAAA"}]}'), /an object not formatted/);
    bad(() => convert('{"inputs": {"x": {"y": 1}}}'), /an object not formatted/);
    const b = { x: { dtype: 'bool' as const } };
    assert.deepEqual(Array.from(convert('{"instances": [true, false]}', b)['x']!.data as Uint8Array), [1, 0]);
    bad(() => convert('{"instances": [1]}', b), /type: bool/);
  });
  void it('range-checks integers and refuses NaN / fractions', () => {
    const i8 = { x: { dtype: 'int8' as const } };
    assert.deepEqual(
      Array.from(convert('{"instances": [-128, 127]}', i8)['x']!.data as Int8Array),
      [-128, 127],
    );
    bad(() => convert('{"instances": [128]}', i8), /out of range/);
    bad(() => convert('{"instances": [1.5]}', i8), /1.5 not formatted/);
    bad(() => convert('{"instances": [NaN]}', i8), /NaN not formatted correctly for type: int8/);
    bad(() => convert('{"instances": [-1]}', { x: { dtype: 'uint8' } }), /out of range/);
    bad(() => convert('{"instances": [65536]}', { x: { dtype: 'uint16' } }), /out of range/);
    bad(() => convert('{"instances": [4294967296]}', { x: { dtype: 'uint32' } }), /out of range/);
    bad(() => convert('{"instances": [2147483648]}', { x: { dtype: 'int32' } }), /out of range/);
    const i64 = convert('{"instances": [-9007199254740991, 5]}', { x: { dtype: 'int64' } })['x']!;
    assert.deepEqual(Array.from(i64.data as BigInt64Array), [-9007199254740991n, 5n]);
    bad(() => convert('{"instances": [9223372036854775807]}', { x: { dtype: 'int64' } }), /out of range/);
    bad(() => convert('{"instances": [-1]}', { x: { dtype: 'uint64' } }), /out of range/);
    bad(() => convert('{"instances": [1e400]}', { x: { dtype: 'int32' } }), /not formatted/);
  });
  void it('decodes strings and strict base64', () => {
    const s = { x_bytes: { dtype: 'string' as const } };
    const r = convert('{"instances": [{"b64": "aGk="}, "hé", {"b64": "aGk"}, {"b64": ""}]}', s)['x_bytes']!;
    assert.deepEqual(
      (r.data as Uint8Array[]).map((b) => text(b)),
      ['hi', 'hé', 'hi', ''],
    );
    for (const b64 of ['a', '!!!!', 'aGk=aGk=', 'aG k=', 'aGk===', 5, 'aGk=\n']) {
      bad(() => tfsJsonToTensors('row', [{ b64 }], s), /Unable to base64 decode/);
    }
    bad(() => convert('{"instances": [NaN]}', s), /NaN not formatted correctly for type: string/);
    bad(() => convert('{"instances": [1]}', s), /type: string/);
  });
  void it('takes JSON numbers for float16 / bfloat16 inputs and writes them back as short numbers', () => {
    const half = convert('{"instances": [1, 0.1, -2.5e-3, 65504, 1e9, NaN]}', { x: { dtype: 'float16' } })[
      'x'
    ]!;
    assert.equal(half.dtype, 'float16');
    assert.deepEqual(Array.from(half.data as Uint16Array), [0x3c00, 0x2e66, 0x991f, 0x7bff, 0x7c00, 0x7e00]);
    assert.equal(
      text(encodeTfsPredictResponse({ x: half }, 'row')),
      '{"predictions":[1,0.1,-0.0025,65500,Infinity,NaN]}',
    );
    const bf = convert('{"inputs": [[1.5, 3.14159]]}', { x: { dtype: 'bfloat16' } })['x']!;
    assert.deepEqual(Array.from(bf.data as Uint16Array), [0x3fc0, 0x4049]);
    assert.equal(text(encodeTfsPredictResponse({ x: bf }, 'columnar')), '{"outputs":[[1.5,3.14]]}');
    bad(
      () => convert('{"instances": ["a"]}', { x: { dtype: 'float16' } }),
      /not formatted correctly for type: float16/,
    );
  });
});

void describe('encodeTfsPredictResponse', () => {
  const y: Tensor = { dtype: 'float32', shape: [3], data: new Float32Array([2.5, 3, 4.5]) };
  void it('writes row and columnar single outputs', () => {
    assert.equal(text(encodeTfsPredictResponse({ y }, 'row')), '{"predictions":[2.5,3,4.5]}');
    assert.equal(text(encodeTfsPredictResponse({ y }, 'columnar')), '{"outputs":[2.5,3,4.5]}');
    const scalar: Tensor = { dtype: 'int64', shape: [], data: new BigInt64Array([2n ** 62n]) };
    assert.equal(text(encodeTfsPredictResponse({ scalar }, 'columnar')), '{"outputs":4611686018427387904}');
  });
  void it('writes several outputs as a list of objects / an object', () => {
    const a: Tensor = { dtype: 'int32', shape: [2, 2], data: new Int32Array([1, 2, 3, 4]) };
    const b: Tensor = { dtype: 'bool', shape: [2], data: new Uint8Array([1, 0]) };
    assert.equal(
      text(encodeTfsPredictResponse({ a, b }, 'row')),
      '{"predictions":[{"a":[1,2],"b":true},{"a":[3,4],"b":false}]}',
    );
    assert.equal(
      text(encodeTfsPredictResponse({ a, b }, 'columnar')),
      '{"outputs":{"a":[[1,2],[3,4]],"b":[true,false]}}',
    );
    bad(() => encodeTfsPredictResponse({ a, y }, 'row'), /Tensor name: y has inconsistent batch size/);
  });
  void it('writes non-finite floats as tokens and strings as text or b64', () => {
    const f: Tensor = {
      dtype: 'float32',
      shape: [4],
      data: new Float32Array([NaN, Infinity, -Infinity, 0.1]),
    };
    assert.equal(
      text(encodeTfsPredictResponse({ f }, 'columnar')),
      '{"outputs":[NaN,Infinity,-Infinity,0.1]}',
    );
    const enc = new TextEncoder();
    const s: Tensor = { dtype: 'string', shape: [1], data: [enc.encode('a"\n')] };
    assert.equal(text(encodeTfsPredictResponse({ s }, 'row')), '{"predictions":["a\\"\\n"]}');
    assert.equal(text(encodeTfsPredictResponse({ s_bytes: s }, 'row')), '{"predictions":[{"b64":"YSIK"}]}');
  });
  void it('round-trips a request through the codec', () => {
    const body = encodeTfsPredictRequest({ x: y }, 'row', 'sig');
    assert.equal(text(body), '{"signature_name":"sig","instances":[2.5,3,4.5]}');
    const back = convert(text(body));
    assert.deepEqual(Array.from(back['x']!.data as Float32Array), [2.5, 3, 4.5]);
  });
});

void describe('JsonWriter.float32', () => {
  void it('writes the shortest decimal that round-trips through float64 -> float32', () => {
    const random = mulberry32(0x5eed_f32);
    const bits = new Uint32Array(200_000);
    for (let i = 0; i < bits.length; i++) bits[i] = (random() * 2 ** 32) >>> 0;
    const values = Array.from(new Float32Array(bits.buffer)).filter(Number.isFinite);
    values.push(0.1, 1e-7, 1e-6, 123456.7, 16777216, 3.4028234663852886e38, 1.401298464324817e-45, 9.999999);
    const w = new JsonWriter();
    values.forEach((v, i) => {
      if (i > 0) w.byte(44);
      w.float32(Math.fround(v));
    });
    const parts = text(w.bytes()).split(',');
    values.forEach((v, i) => {
      const f = Math.fround(v);
      const got = parts[i]!;
      assert.equal(Math.fround(Number(got)), f, `${f} -> ${got}`);
      if (i < 20_000)
        assert.ok(got.length <= shortestFloat32Slow(f).length, `${f}: ${got} vs ${shortestFloat32Slow(f)}`);
    });
    // The fast path's range (1e-12 to 1e12), where image tensors live, at every magnitude.
    const scaled = new Float32Array(60_000);
    for (let i = 0; i < scaled.length; i++) scaled[i] = (random() - 0.5) * 2 ** ((i % 81) - 40);
    const s = new JsonWriter();
    scaled.forEach((f, i) => {
      if (i > 0) s.byte(44);
      s.float32(f);
    });
    text(s.bytes())
      .split(',')
      .forEach((got, i) => {
        const f = scaled[i]!;
        assert.equal(Math.fround(Number(got)), f, `${f} -> ${got}`);
        assert.ok(got.length <= shortestFloat32Slow(f).length, `${f}: ${got} vs ${shortestFloat32Slow(f)}`);
      });
    const z = new JsonWriter();
    z.float32(-0);
    z.float32(0);
    assert.equal(text(z.bytes()), '-00');
  });
});
