import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type DType,
  PackedNumbers,
  type Tensor,
  parseTfsJsonText,
  parseTfsPredictBody,
  fastBodyFromMessage,
  parseTfsPredictJson,
  parsedBodyToMessage,
  fastBodyToMessage,
  readFastJsonBody,
  readNumericPredictBody,
  tfsJsonToTensors,
} from '../src/index.js';
import { mulberry32 as rng } from './seeded-random.js';

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

/** What the general path (JSON.parse + codec) and the fast path give: tensors or the error. */
function decode(body: unknown, specs: Record<string, { dtype: DType }>): Record<string, Tensor> | string {
  try {
    const parsed = parseTfsPredictBody(body);
    return tfsJsonToTensors(parsed.format, parsed.value, specs);
  } catch (error) {
    const e = error as { code?: unknown; message?: unknown };
    return `${String(e.code)}: ${String(e.message)}`;
  }
}

function bytesOf(t: Tensor): Uint8Array {
  if (Array.isArray(t.data)) return utf8(JSON.stringify(t.data.map((b) => Array.from(b as Uint8Array))));
  const d = t.data as ArrayLike<number> & { buffer: ArrayBufferLike; byteOffset: number; byteLength: number };
  return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
}

/** decode() with tensor data as bytes, for comparing bit for bit. */
function decodeBytes(body: unknown): unknown {
  const out = decode(body, { x: { dtype: 'float32' } });
  if (typeof out === 'string') return out;
  return Object.entries(out).map(([k, t]) => [k, t.dtype, t.shape, Buffer.from(bytesOf(t)).toString('hex')]);
}

/** Asserts the fast path accepted `text` and gives exactly what the general path gives. */
function assertSame(text: string, specs: Record<string, { dtype: DType }>): void {
  const fast = readNumericPredictBody(utf8(text));
  assert.ok(fast !== undefined, `fast path refused: ${text.slice(0, 200)}`);
  const a = decode(fast, specs);
  const b = decode(parseTfsJsonText(text), specs);
  if (typeof a === 'string' || typeof b === 'string') {
    assert.equal(a, b, text.slice(0, 200));
    return;
  }
  assert.deepEqual(Object.keys(a), Object.keys(b));
  for (const k of Object.keys(a)) {
    assert.equal(a[k]!.dtype, b[k]!.dtype);
    assert.deepEqual(a[k]!.shape, b[k]!.shape);
    assert.deepEqual(bytesOf(a[k]!), bytesOf(b[k]!), `${k} of ${text.slice(0, 200)}`);
  }
}

/** Numbers in the spellings clients produce (Python repr, JS, numpy, exponents, long decimals). */
function numberText(r: () => number): string {
  const pick = Math.floor(r() * 12);
  const sign = r() < 0.3 ? '-' : '';
  switch (pick) {
    case 0:
      return String((r() - 0.5) * 10 ** Math.floor(r() * 40 - 20));
    case 1:
      return String(Math.fround(r() * 2 - 1));
    case 2:
      return String(Math.floor((r() - 0.5) * 2 ** 31));
    case 3:
      return sign + (r() * 1000).toExponential(Math.floor(r() * 18));
    case 4:
      return `${sign}${Math.floor(r() * 1000)}E${r() < 0.5 ? '+' : '-'}${Math.floor(r() * 30)}`;
    case 5:
      return `${sign}0.${'0'.repeat(Math.floor(r() * 5))}${Math.floor(r() * 1e9)}`;
    case 6:
      return `${sign}${String(Math.floor(r() * 1e9))}${String(Math.floor(r() * 1e9))}.${Math.floor(r() * 1e9)}`;
    case 7:
      return [
        '0',
        '-0',
        '0.0',
        '-0.0',
        '5e-324',
        '1.7976931348623157e308',
        '1e400',
        '-1e-400',
        '2.2250738585072014e-308',
      ][Math.floor(r() * 9)]!;
    case 8:
      return `${sign}${(r() * 255).toFixed(Math.floor(r() * 8))}`;
    case 9:
      return `${sign}1${'0'.repeat(Math.floor(r() * 25))}`;
    case 10:
      return `${sign}0.1000000000000000055511151231257827${Math.floor(r() * 10)}`;
    default:
      return String(Math.floor(r() * 256));
  }
}

function nested(r: () => number, shape: readonly number[], leaf: () => string, ws: () => string): string {
  if (shape.length === 0) return leaf();
  const items: string[] = [];
  for (let i = 0; i < shape[0]!; i++) items.push(nested(r, shape.slice(1), leaf, ws));
  return `[${ws()}${items.join(`${ws()},${ws()}`)}${ws()}]`;
}

describe('fast numeric JSON reader', () => {
  void it("reads a body's first tensor into the caller's scratch array, reused from body to body", () => {
    const scratch = new Float64Array(4096);
    const rand = rng(7);
    const list = (n: number): number[] => Array.from({ length: n }, () => Math.fround(rand() * 4 - 2));
    const inputs = (body: unknown): Record<string, Float64Array> => {
      const { message } = fastBodyToMessage(body, (values) => values.slice());
      return Object.fromEntries(message.packed.map((p) => [p.path.join('.'), p.parts.values]));
    };
    for (const n of [300, 1000, 300, 5000]) {
      const a = list(n);
      const b = list(7);
      const text = JSON.stringify({ inputs: { a, b } });
      const fast = readNumericPredictBody(utf8(text), scratch) as { inputs: Record<string, PackedNumbers> };
      // The first tensor views the scratch array when it fits, the second has its own.
      assert.equal(fast.inputs['a']!.exactValues().buffer === scratch.buffer, n <= scratch.length);
      assert.notEqual(fast.inputs['b']!.exactValues().buffer, scratch.buffer);
      assert.deepEqual(Array.from(fast.inputs['a']!.exactValues()), a);
      assert.deepEqual(Array.from(fast.inputs['b']!.exactValues()), b);
      const sent = inputs(fast);
      assert.deepEqual(Array.from(sent['inputs.a']!), a);
      // The next body reuses the scratch array (what `fast` viewed is gone): same tensors.
      assert.deepEqual(
        decodeBytes({ instances: a }),
        decodeBytes(readFastJsonBody('tfs-predict', utf8(JSON.stringify({ instances: a })), scratch)),
      );
    }
    // The scratch array is never moved away by fastBodyToMessage when `place` copies.
    assert.equal(scratch.byteLength, 4096 * 8);
  });

  it('reads every number exactly as JSON.parse does (200,000 spellings)', () => {
    const r = rng(1);
    const texts: string[] = [];
    for (let i = 0; i < 200_000; i++) texts.push(numberText(r));
    const body = `{"inputs": [${texts.join(',')}]}`;
    const fast = readNumericPredictBody(utf8(body));
    assert.ok(fast !== undefined);
    const packed = fast['inputs'] as PackedNumbers;
    assert.deepEqual(packed.shape, [texts.length]);
    const f32 = new Float32Array(packed.length);
    packed.toFloat32(f32);
    const values = packed.exactValues();
    for (let i = 0; i < texts.length; i++) {
      const want = JSON.parse(texts[i]!) as number;
      if (!Object.is(values[i], want)) assert.fail(`${texts[i]!}: ${values[i]} vs ${want}`);
      if (!Object.is(f32[i], Math.fround(want)))
        assert.fail(`float32 of ${texts[i]!}: ${f32[i]} vs ${Math.fround(want)}`);
    }
  });

  it('rounds to float32 as fround(JSON.parse) does next to every kind of float32 rounding boundary', () => {
    const r = rng(3);
    const f32 = new Float32Array(2);
    const u32 = new Uint32Array(f32.buffer);
    const texts: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      // A random float32 and its upper neighbour (powers of two included); their midpoint is
      // a double; numbers just around it, written with 16 to 19 significant digits.
      u32[0] = (Math.floor(r() * 250) + 2) * 2 ** 23 + (r() < 0.1 ? 0 : Math.floor(r() * 2 ** 23));
      u32[1] = u32[0] + 1;
      const mid = (f32[0]! + f32[1]!) / 2;
      const below = (f32[0]! - (f32[1]! - f32[0]!) / 2) / 1; // a boundary under a power of two too
      for (const v of [mid, below]) {
        const ulp = Math.abs(v) * 2 ** -52;
        const x = v + Math.round((r() - 0.5) * 8) * ulp;
        texts.push((r() < 0.5 ? '-' : '') + x.toPrecision(16 + Math.floor(r() * 4)));
      }
    }
    const body = `{"inputs": [${texts.join(',')}]}`;
    const packed = readNumericPredictBody(utf8(body))!['inputs'] as PackedNumbers;
    const out = new Float32Array(packed.length);
    packed.toFloat32(out);
    for (let i = 0; i < texts.length; i++) {
      const want = Math.fround(JSON.parse(texts[i]!) as number);
      if (!Object.is(out[i], want)) assert.fail(`float32 of ${texts[i]!}: ${out[i]} vs ${want}`);
    }
  });

  it('gives the general codec’s tensors byte for byte: random shapes, dtypes, layouts and whitespace', () => {
    const r = rng(2);
    const dtypes: DType[] = [
      'float32',
      'float64',
      'int32',
      'int64',
      'uint8',
      'int8',
      'uint32',
      'bool',
      'string',
      // JSON numbers for 16-bit floats (docs/tensorflow-users.md): the packed path rounds them too.
      'float16',
      'bfloat16',
    ];
    for (let trial = 0; trial < 600; trial++) {
      const rank = Math.floor(r() * 5);
      const shape = Array.from({ length: rank }, (_, d) => Math.floor(r() * (d === 0 ? 4 : 6)));
      if (trial % 50 === 0) shape.splice(0, shape.length, 2, 3, 32, 32); // a larger one now and then
      const dtype = dtypes[Math.floor(r() * dtypes.length)]!;
      const integers = r() < 0.5;
      const leaf = integers ? () => String(Math.floor((r() - 0.3) * 300)) : () => numberText(r);
      const ws = () => [' ', '', '\n  ', '\t', '\r\n'][Math.floor(r() * 5)]!;
      const tensor = nested(r, shape, leaf, ws);
      const sig = r() < 0.3 ? `"signature_name" : "serving_default",${ws()}` : '';
      const pad = ' '.repeat(256); // the reader only takes bodies of 256 bytes or more
      const layout = Math.floor(r() * 3);
      if (layout === 0 && rank > 0) {
        assertSame(`${pad}{${sig}"instances":${ws()}${tensor}}${ws()}`, { x: { dtype } });
      } else if (layout === 1) {
        assertSame(
          `{${ws()}"inputs": ${tensor}${ws()}, ${sig.replace(/,\s*$/, '') || '"signature_name": ""'}}${pad}`,
          {
            x: { dtype },
          },
        );
      } else {
        const other = nested(r, [2, 3], () => String(Math.floor(r() * 9)), ws);
        assertSame(`{"inputs": {"a": ${tensor}, "b_2": ${other}}}${pad}`, {
          a: { dtype },
          b_2: { dtype: 'int32' },
        });
      }
    }
  });

  it('leaves every other body to the general path (undefined, never a throw or a different answer)', () => {
    const pad = ' '.repeat(300);
    const refused = [
      '{"instances": [NaN, 1]}',
      '{"instances": [Infinity]}',
      '{"instances": [1, "a"]}',
      '{"instances": [[1, 2], [3]]}',
      '{"instances": [[1, 2], 3]}',
      '{"instances": [1, [2]]}',
      '{"instances": [[], [1]]}',
      '{"instances": [[1, 2], [[3], [4]]]}',
      '{"instances": [[[1], [2]], [3, 4]]}',
      '{"instances": [[[1], [2]], [[3], []]]}',
      '{"instances": [{"a": [1]}]}',
      '{"instances": 5}',
      '{"instances": [1], "instances": [2]}',
      '{"inputs": {"a": [1], "a": [2]}}',
      '{"inputs": {"__proto__": [1]}}',
      '{"inputs": {"b64": [1]}}',
      '{"inputs": {}}',
      '{"inputs": [1], "parameters": {}}',
      '{"inputs": [01]}',
      '{"inputs": [1.]}',
      '{"inputs": [.5]}',
      '{"inputs": [+1]}',
      '{"inputs": [-]}',
      '{"inputs": [1e]}',
      '{"inputs": [1,]}',
      '{"inputs": [,1]}',
      '{"inputs": [1 2]}',
      '{"in\\u0070uts": [1]}',
      '{"inputs": [1]} x',
      '\uFEFF{"inputs": [1]}',
      '[1, 2, 3]',
      `{"inputs": ${'['.repeat(65)}1${']'.repeat(65)}}`,
      `{"inputs": ${'['.repeat(100_000)}`,
    ];
    for (const body of refused) {
      assert.equal(readNumericPredictBody(utf8(body + pad)), undefined, body.slice(0, 80));
    }
    // Bodies under 256 bytes are never tried.
    assert.equal(readNumericPredictBody(utf8('{"inputs": [1, 2, 3]}')), undefined);
  });

  it('a body of many small tensors costs time linear in its size (no per-tensor estimate of the whole body)', () => {
    const body = (n: number): Uint8Array => {
      const parts: string[] = [];
      for (let i = 0; i < n; i++) parts.push(`"a${i}":[[${i}],[${-i}]]`);
      return Buffer.from(`{"inputs":{${parts.join(',')}}}`);
    };
    readNumericPredictBody(body(2000)); // compiled
    const big = body(40_000);
    const started = performance.now();
    const read = readNumericPredictBody(big);
    const ms = performance.now() - started;
    assert.equal(Object.keys((read as { inputs: Record<string, unknown> }).inputs).length, 40_000);
    // Linear: ~0.3 s on a quiet 2-core box; sizing every tensor from the rest of the body took 4.3 s.
    assert.ok(ms < 2500, `${big.length} bytes, 40,000 tensors: ${ms.toFixed(0)} ms`);
  });

  it('never accepts a truncated body: every prefix of a valid one is refused', () => {
    const body = `{"signature_name": "s", "inputs": {"a": [[1.5, -2e3, 0], [4, 5, 6]], "b": [7]}}${' '.repeat(200)}`;
    const full = utf8(body);
    assert.ok(readNumericPredictBody(full) !== undefined);
    const end = body.trimEnd().length;
    for (let n = 0; n < end; n++)
      assert.equal(readNumericPredictBody(full.subarray(0, n)), undefined, String(n));
  });

  it('random mutations of valid bodies: refused, or read exactly as the general path reads them', () => {
    const r = rng(7);
    const alphabet = [
      '[',
      ']',
      ',',
      '-',
      '.',
      'e',
      'E',
      '+',
      '0',
      '1',
      '9',
      ' ',
      '"',
      '{',
      '}',
      ':',
      'N',
      '\n',
    ];
    let accepted = 0;
    for (let trial = 0; trial < 3000; trial++) {
      const rank = 1 + Math.floor(r() * 4);
      const shape = Array.from({ length: rank }, () => 1 + Math.floor(r() * 4));
      const tensor = nested(
        r,
        shape,
        () => numberText(r),
        () => (r() < 0.2 ? ' ' : ''),
      );
      let text = `{"instances": ${tensor}}${' '.repeat(256)}`;
      const edits = 1 + Math.floor(r() * 3);
      for (let e = 0; e < edits; e++) {
        const at = Math.floor(r() * text.trimEnd().length);
        const op = Math.floor(r() * 3);
        const ch = alphabet[Math.floor(r() * alphabet.length)]!;
        if (op === 0) text = text.slice(0, at) + text.slice(at + 1);
        else if (op === 1) text = text.slice(0, at) + ch + text.slice(at);
        else text = text.slice(0, at) + ch + text.slice(at + 1);
      }
      let general: unknown;
      try {
        general = parseTfsJsonText(text);
      } catch {
        assert.equal(readNumericPredictBody(utf8(text)), undefined, text.slice(0, 200));
        continue;
      }
      const fast = readNumericPredictBody(utf8(text));
      if (fast === undefined) continue;
      accepted++;
      assert.deepEqual(decodeBytes(fast), decodeBytes(general), text.slice(0, 200));
    }
    assert.ok(accepted > 100, `only ${accepted} mutated bodies were still valid`);
  });

  it('parsedBodyToMessage: the codec reads the rebuilt body as the parsed one (deep, odd and b64 bodies)', () => {
    const r = rng(11);
    const big = nested(
      r,
      [2, 3, 4],
      () => numberText(r),
      () => '',
    );
    const deepList = `${'['.repeat(5000)}1${']'.repeat(5000)}`;
    const deepObject = `${'{"x":'.repeat(5000)}1${'}'.repeat(5000)}`;
    const bodies: [string, Record<string, { dtype: DType }>][] = [
      [`{"instances": ${big}, "extra": ${deepObject}}`, { x: { dtype: 'float32' } }],
      [`{"instances": ${deepList}}`, { x: { dtype: 'float32' } }],
      [`{"instances": [${deepObject}]}`, { x: { dtype: 'float32' } }],
      [`{"instances": [{"a": ${deepList}}]}`, { a: { dtype: 'int32' } }],
      [
        `{"instances": [{"a": ${big}, "b": {"b64": "QUJD"}}, {"a": ${big}, "b": {"b64": ${deepObject}}}]}`,
        { a: { dtype: 'float64' }, b: { dtype: 'string' } },
      ],
      [
        `{"inputs": {"a": ${big}, "__proto__": [1], "b64": [2]}, "signature_name": "s"}`,
        { a: { dtype: 'float32' }, b64: { dtype: 'int32' } },
      ],
      [`{"inputs": {"b64": [1, 2]}}`, { x: { dtype: 'string' } }],
      [`{"inputs": {"b64": "QUJD"}}`, { x: { dtype: 'string' } }],
      [`{"inputs": ${big}, "__proto__": {"instances": [1]}}`, { x: { dtype: 'float32' } }],
      [`{"instances": [NaN, -0, 1e400, -1e-400]}`, { x: { dtype: 'float32' } }],
      [`{"instances": [[1, 2], [3]]}`, { x: { dtype: 'float32' } }],
      [`{"instances": [[-0, 2.5], [3, 1e300]]}`, { x: { dtype: 'float64' } }],
      [`{"instances": [[]]}`, { x: { dtype: 'float32' } }],
      [`[1, 2]`, { x: { dtype: 'float32' } }],
      [`{"inputs": ${deepList.replace('1', '[]')}}`, { x: { dtype: 'bool' } }],
    ];
    for (const [text, specs] of bodies) {
      const { message } = parsedBodyToMessage(parseTfsJsonText(text));
      const rebuilt = fastBodyFromMessage(structuredClone(message), new Uint8Array(0));
      assert.deepEqual(decode(rebuilt, specs), decode(parseTfsJsonText(text), specs), text.slice(0, 120));
    }
  });

  it('parseTfsPredictJson: errors and values as before for what the fast path refuses', () => {
    assert.throws(
      () => parseTfsPredictJson(utf8('{"instances": [1, 2')),
      (e: unknown) => (e as Error).message.startsWith('JSON Parse error'),
    );
    const nan = parseTfsPredictJson(utf8(`{"instances": [NaN, 1]}${' '.repeat(300)}`));
    const t = decode(nan, { x: { dtype: 'float32' } });
    assert.ok(typeof t !== 'string' && Number.isNaN((t['x']!.data as Float32Array)[0]));
    const big = parseTfsPredictJson(utf8(`{"instances": [[0.5, 1.25]]}${' '.repeat(300)}`));
    assert.ok((big as { instances: unknown }).instances instanceof PackedNumbers);
  });
});
