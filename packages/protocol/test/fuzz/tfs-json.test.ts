/**
 * Fuzz targets: the TF Serving REST JSON codec (protocol package) as the REST frontend and
 * /invocations use it: JSON text with NaN/Infinity tokens, predict bodies in row and
 * columnar form for every dtype, b64 strings, deep nesting, and the JSON writer's
 * shortest-float fast path.
 */
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  Code,
  type DType,
  JsonWriter,
  type Tensor,
  type TfsFormat,
  decodeBase64Strict,
  encodeTfsPredictRequest,
  encodeTfsPredictResponse,
  parseTfsJsonText,
  parseTfsPredictBody,
  parseTfsPredictJson,
  checkJsonLimits,
  readFastJsonBody,
  readNumericPredictBody,
  shortestFloat32Slow,
  tfsJsonToTensors,
} from '@visionserve/protocol';
import {
  ALL_DTYPES,
  aliasArb,
  hostileStringArb,
  mutatedTextArb,
  sameTensor,
} from '@visionserve/testkit/arbitraries';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';

/** Dtypes TF Serving's JSON can carry (half and bfloat16 are UNIMPLEMENTED there). */
const JSON_DTYPES: readonly DType[] = ALL_DTYPES.filter((d) => d !== 'float16' && d !== 'bfloat16');

/** Values JSON numbers hold exactly: 64-bit integers within +-(2^53-1). */
function jsonElement(dtype: DType): fc.Arbitrary<number | bigint | boolean | Uint8Array> {
  if (dtype === 'int64') return fc.bigInt({ min: -(2n ** 53n - 1n), max: 2n ** 53n - 1n });
  if (dtype === 'uint64') return fc.bigInt({ min: 0n, max: 2n ** 53n - 1n });
  if (dtype === 'float32') return fc.oneof(fc.float(), fc.constantFrom(NaN, Infinity, -Infinity, -0));
  if (dtype === 'float64') return fc.oneof(fc.double(), fc.constantFrom(NaN, Infinity, -Infinity, -0));
  if (dtype === 'string') return fc.uint8Array({ maxLength: 10 });
  if (dtype === 'bool') return fc.boolean();
  const range: Record<string, [number, number]> = {
    int8: [-128, 127],
    int16: [-32768, 32767],
    int32: [-(2 ** 31), 2 ** 31 - 1],
    uint8: [0, 255],
    uint16: [0, 65535],
    uint32: [0, 2 ** 32 - 1],
  };
  const [min, max] = range[dtype]!;
  return fc.integer({ min, max });
}

/**
 * Shapes that survive JSON: a zero-size dimension erases the ones inside it, so only the
 * innermost dimension may be 0 (and, in row format, never the batch dimension).
 */
function jsonShape(rank: number, batch: number | undefined): fc.Arbitrary<number[]> {
  return fc.array(fc.integer({ min: 1, max: 3 }), { minLength: rank, maxLength: rank }).chain((dims) =>
    fc.boolean().map((zeroLast) => {
      const shape = batch === undefined ? dims : [batch, ...dims.slice(1)];
      if (zeroLast && shape.length > (batch === undefined ? 0 : 1)) shape[shape.length - 1] = 0;
      return shape;
    }),
  );
}

function jsonTensor(dtype: DType, shape: readonly number[]): fc.Arbitrary<Tensor> {
  const n = shape.reduce((a, b) => a * b, 1);
  return fc
    .array(jsonElement(dtype), { minLength: n, maxLength: n })
    .map((values) => buildFromValues(dtype, shape, values));
}

function buildFromValues(dtype: DType, shape: readonly number[], values: readonly unknown[]): Tensor {
  if (dtype === 'string') return { dtype, shape, data: values as Uint8Array[] };
  const ctor = {
    float32: Float32Array,
    float64: Float64Array,
    int8: Int8Array,
    int16: Int16Array,
    int32: Int32Array,
    uint8: Uint8Array,
    uint16: Uint16Array,
    uint32: Uint32Array,
    bool: Uint8Array,
  } as const;
  if (dtype === 'int64') return { dtype, shape, data: BigInt64Array.from(values as bigint[]) };
  if (dtype === 'uint64') return { dtype, shape, data: BigUint64Array.from(values as bigint[]) };
  const C = ctor[dtype as keyof typeof ctor];
  return {
    dtype,
    shape,
    data: C.from(values.map((v) => (typeof v === 'boolean' ? (v ? 1 : 0) : (v as number)))),
  };
}

/** Inputs by alias that one predict request can carry in `format`. */
function jsonInputsArb(format: TfsFormat): fc.Arbitrary<Record<string, Tensor>> {
  return fc
    .tuple(fc.uniqueArray(aliasArb, { minLength: 1, maxLength: 3 }), fc.integer({ min: 1, max: 3 }))
    .chain(([aliases, batch]) =>
      fc
        .tuple(
          ...aliases.map((alias) =>
            fc
              .tuple(fc.constantFrom(...JSON_DTYPES), fc.integer({ min: format === 'row' ? 1 : 0, max: 3 }))
              .chain(([dtype, rank]) =>
                jsonShape(rank, format === 'row' ? batch : undefined).chain((shape) =>
                  jsonTensor(dtype, shape),
                ),
              )
              .map((tensor) => [alias, tensor] as const),
          ),
        )
        .map((entries) => Object.fromEntries(entries)),
    );
}

const specsOf = (inputs: Record<string, Tensor>): Record<string, { dtype: DType }> =>
  Object.fromEntries(Object.entries(inputs).map(([alias, t]) => [alias, { dtype: t.dtype }]));

function sameInputs(a: Record<string, Tensor>, b: Record<string, Tensor>): string | undefined {
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  if (ka.join('\u0001') !== kb.join('\u0001')) return `aliases {${ka.join(',')}} != {${kb.join(',')}}`;
  for (const k of ka) {
    const d = sameTensor(a[k]!, b[k]!);
    if (d !== undefined) return `${k}: ${d}`;
  }
  return undefined;
}

/** Random signatures for hostile bodies: 1-3 aliases of any dtype. */
const specsArb = fc.dictionary(
  fc.oneof(fc.constantFrom('x', 'b64', 'inputs', 'instances', '__proto__'), aliasArb),
  fc.constantFrom(...ALL_DTYPES).map((dtype) => ({ dtype })),
  { minKeys: 1, maxKeys: 3 },
);

/** JSON text of predict bodies: valid ones, mutations of them, and hand-made hostile pieces. */
const predictTextArb: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 5,
    arbitrary: mutatedTextArb(
      fc
        .tuple(fc.constantFrom<TfsFormat>('row', 'columnar'), fc.boolean())
        .chain(([format, sig]) =>
          jsonInputsArb(format).map((inputs) =>
            Buffer.from(
              encodeTfsPredictRequest(inputs, format, sig ? 'serving_default' : undefined),
            ).toString('utf8'),
          ),
        ),
      [
        'NaN',
        '-Infinity',
        'Infinity',
        '{"b64":"',
        '[[[[',
        ']]',
        ',',
        '"',
        '\\',
        '1e999',
        '-0',
        '\u0000',
        '𝕏',
        '{}',
        'null',
      ],
    ),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({
        key: fc.constantFrom('instances', 'inputs', 'signature_name', 'examples', 'x'),
        value: fc.jsonValue({ maxDepth: 4 }),
        extra: fc.dictionary(
          fc.constantFrom('instances', 'inputs', 'signature_name'),
          fc.jsonValue({ maxDepth: 2 }),
          { maxKeys: 2 },
        ),
      })
      .map(({ key, value, extra }) => JSON.stringify({ ...extra, [key]: value })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.integer({ min: 1, max: 100_000 }),
        fc.constantFrom('instances', 'inputs'),
        fc.constantFrom('1', '', 'NaN', '{"b64":"AA=="}'),
      )
      .map(([depth, key, leaf]) => `{"${key}":${'['.repeat(depth)}${leaf}${']'.repeat(depth)}}`),
  },
  { weight: 1, arbitrary: hostileStringArb },
);

/** Number texts: every JSON form (signs, exponents, long mantissas, float32 reprs) and near misses. */
const numberTextArb: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .double({ noNaN: true, noDefaultInfinity: true })
      .map((v) => (Object.is(v, -0) ? '-0' : String(v))),
  },
  {
    weight: 4,
    arbitrary: fc.float({ noNaN: true, noDefaultInfinity: true }).map((v) => String(Math.fround(v))),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.boolean(),
        fc.oneof(
          { weight: 4, arbitrary: fc.stringMatching(/^(0|[1-9][0-9]{0,11})$/) },
          { weight: 1, arbitrary: fc.stringMatching(/^[1-9][0-9]{12,24}$/) },
        ),
        fc.option(fc.stringMatching(/^[0-9]{1,19}$/), { nil: undefined }),
        fc.option(fc.tuple(fc.constantFrom('e', 'E', 'e+', 'e-', 'E-'), fc.integer({ min: 0, max: 400 })), {
          nil: undefined,
        }),
      )
      .map(
        ([neg, int, frac, exp]) =>
          `${neg ? '-' : ''}${int}${frac === undefined ? '' : `.${frac}`}${exp === undefined ? '' : `${exp[0]}${exp[1]}`}`,
      ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '0',
      '-0',
      '0.0',
      '0e0',
      '1e-400',
      '1e400',
      '-1e309',
      '3.4028235677973366e38',
      '3.4028234663852886e38',
      '1.1754943508222875e-38',
      '1.401298464324817e-45',
      '0.1',
      '16777217',
      '9007199254740993',
      '123456789012345678',
      '01',
      '1.',
      '.5',
      '+1',
      '1e',
      '--1',
      '0x10',
      'NaN',
      'Infinity',
      '-Infinity',
      'true',
      'null',
      '"1"',
    ),
  },
);

/** A rectangular nested list of number texts, with odd whitespace between tokens. */
const numericListArb: fc.Arbitrary<string> = fc
  .tuple(
    fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 }),
    fc.constantFrom('', ' ', '\n', '\t', '\r\n  '),
  )
  .chain(([shape, ws]) => {
    const n = shape.reduce((a, b) => a * b, 1);
    return fc.array(numberTextArb, { minLength: n, maxLength: n }).map((numbers) => {
      let at = 0;
      const build = (depth: number): string =>
        depth === shape.length
          ? numbers[at++]!
          : `[${ws}${Array.from({ length: shape[depth]! }, () => build(depth + 1)).join(`${ws},${ws}`)}${ws}]`;
      return build(0);
    });
  });

/** Predict bodies of the shapes the fast reader takes, near misses of them, and edits of both. */
const numericBodyShapesArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: numericListArb.map((x) => `{"instances": ${x}}`) },
  { weight: 3, arbitrary: numericListArb.map((x) => `{"inputs":${x}}`) },
  {
    weight: 3,
    arbitrary: fc.tuple(numericListArb, numericListArb).map(([a, b]) => `{"inputs": {"a": ${a}, "b": ${b}}}`),
  },
  fc
    .tuple(numericListArb, fc.constantFrom('"serving_default"', '"x\\u0041"', '1', 'null'))
    .map(([x, name]) => `{"signature_name": ${name}, "instances": ${x}}`),
  fc.tuple(numericListArb, numericListArb).map(([a, b]) => `{"inputs": ${a}, "inputs": ${b}}`),
  fc.tuple(numericListArb, numericListArb).map(([a, b]) => `{"instances": ${a}, "inputs": ${b}}`),
  numericListArb.map((x) => `{"inputs": {"a\\"b": ${x}, "__proto__": ${x}}}`),
  numericListArb.map((x) => `\uFEFF{"instances": ${x}} `),
);
/** The reader only takes bodies of 256 bytes and more: most bodies get JSON whitespace around them. */
const paddedBodyArb: fc.Arbitrary<string> = fc
  .tuple(numericBodyShapesArb, fc.constantFrom(0, 1, 2, 3), fc.integer({ min: 0, max: 300 }))
  .map(([body, where, n]) =>
    where === 0
      ? body
      : where === 1
        ? body + ' '.repeat(n)
        : where === 2
          ? '\n'.repeat(n) + body
          : `\t${body}${' '.repeat(256)}`,
  );
const numericBodyArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 2, arbitrary: paddedBodyArb },
  {
    weight: 1,
    arbitrary: mutatedTextArb(paddedBodyArb, [
      ',',
      ']',
      '[',
      '-',
      '.',
      'e',
      '0',
      ' ',
      '"',
      '}',
      '{',
      '\u0000',
      '1e999',
    ]),
  },
);

const numericSpecsArb = fc.array(
  fc.constantFrom<DType>('float32', 'float64', 'int32', 'int64', 'uint8', 'float16'),
  { minLength: 1, maxLength: 2 },
);

/** Depth, most keys of one object and values of a parsed JSON value, as json-limits.ts counts them. */
function jsonCounts(value: unknown, level = 1): { depth: number; keys: number; values: number } {
  if (typeof value !== 'object' || value === null) return { depth: 0, keys: 0, values: 1 };
  const children: unknown[] = Array.isArray(value) ? value : Object.values(value);
  let depth = level;
  let keys = Array.isArray(value) ? 0 : children.length;
  let values = 1;
  for (const child of children) {
    const c = jsonCounts(child, level + 1);
    depth = Math.max(depth, c.depth);
    keys = Math.max(keys, c.keys);
    values += c.values;
  }
  return { depth, keys, values };
}

/** Any JSON value, a few levels deep, with strings that hold brackets, quotes and escapes. */
const jsonValueArb: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.oneof(
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
    ),
    fc.string({ unit: fc.constantFrom('a', '[', ']', '{', '}', '"', '\\', ',', ':', ' ', '\n', 'é') }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(fc.string({ maxLength: 4 }), tie('value'), { maxKeys: 5 }),
  ),
})).value;

describe('fuzz: TF Serving REST JSON', () => {
  it(
    'rest-json/round-trip: encodeTfsPredictRequest -> parse -> tensors is the identity (row and columnar, every JSON dtype)',
    targetOptions('rest-json/round-trip'),
    (t) => {
      fuzzSync(
        t,
        'rest-json/round-trip',
        fc.property(
          fc
            .constantFrom<TfsFormat>('row', 'columnar')
            .chain((format) => jsonInputsArb(format).map((inputs) => ({ format, inputs }))),
          fc.option(fc.string({ maxLength: 8 }), { nil: undefined }),
          ({ format, inputs }, signature) => {
            const text = Buffer.from(encodeTfsPredictRequest(inputs, format, signature)).toString('utf8');
            const body = parseTfsPredictBody(parseTfsJsonText(text));
            if (body.format !== format || body.signatureName !== signature)
              throw new Error('format or signature lost');
            const back = tfsJsonToTensors(body.format, body.value, specsOf(inputs));
            const diff = sameInputs(inputs, back);
            if (diff !== undefined) throw new Error(`${diff}\n${text.slice(0, 400)}`);
          },
        ),
        400,
      );
    },
  );

  it(
    'rest-json/limits: the structure scan counts depth, keys and values as the parsed tree has them; the fast readers never take a body past a limit',
    targetOptions('rest-json/limits'),
    (t) => {
      const formats = ['tfs-predict', 'kserve-infer', 'sagemaker-json'] as const;
      fuzzSync(
        t,
        'rest-json/limits',
        fc.property(
          jsonValueArb,
          fc.boolean(),
          fc.constantFrom(...formats),
          fc.nat({ max: 2 }),
          fc.boolean(),
          (value, pretty, format, tighten, wrap) => {
            // Wrapped as a predict body often enough for the fast readers to take part.
            const body = wrap ? { inputs: value } : value;
            const text = JSON.stringify(body, null, pretty ? 1 : undefined);
            const bytes = Buffer.from(text.length < 256 ? text + ' '.repeat(256 - text.length) : text);
            const c = jsonCounts(body);
            const exact = { maxDepth: c.depth, maxObjectKeys: c.keys, maxValues: c.values };
            checkJsonLimits(bytes, exact);
            const key = (['maxDepth', 'maxObjectKeys', 'maxValues'] as const)[tighten]!;
            if (exact[key] === 0) return;
            const tighter = { ...exact, [key]: exact[key] - 1 };
            const refused = outcome(() => {
              checkJsonLimits(bytes, tighter);
            });
            if (refused.ok) throw new Error(`${key} ${tighter[key]} not refused: ${text.slice(0, 200)}`);
            if (readFastJsonBody(format, bytes, undefined, tighter) !== undefined) {
              throw new Error(`${format} took a body past ${key} ${tighter[key]}: ${text.slice(0, 200)}`);
            }
          },
        ),
        2000,
      );
    },
  );

  it(
    'rest-json/response-round-trip: encodeTfsPredictResponse reads back as the outputs',
    targetOptions('rest-json/response-round-trip'),
    (t) => {
      // Response strings are UTF-8 text unless the alias ends in _bytes; keep them valid UTF-8.
      const utf8 = (inputs: Record<string, Tensor>): Record<string, Tensor> =>
        Object.fromEntries(
          Object.entries(inputs).map(([alias, tensor]) => [
            tensor.dtype === 'string' ? `${alias}_bytes` : alias,
            tensor,
          ]),
        );
      fuzzSync(
        t,
        'rest-json/response-round-trip',
        fc.property(
          fc
            .constantFrom<TfsFormat>('row', 'columnar')
            .chain((format) => jsonInputsArb(format).map((inputs) => ({ format, inputs: utf8(inputs) }))),
          ({ format, inputs }) => {
            const text = Buffer.from(encodeTfsPredictResponse(inputs, format)).toString('utf8');
            const parsed = parseTfsJsonText(text) as Record<string, unknown>;
            const value = format === 'row' ? parsed['predictions'] : parsed['outputs'];
            const back = tfsJsonToTensors(format, value, specsOf(inputs));
            const diff = sameInputs(inputs, back);
            if (diff !== undefined) throw new Error(`${diff}\n${text.slice(0, 400)}`);
          },
        ),
        300,
      );
    },
  );

  it(
    'rest-json/hostile: any body text ends in tensors of the signature dtypes or INVALID_ARGUMENT / UNIMPLEMENTED',
    targetOptions('rest-json/hostile'),
    (t) => {
      fuzzSync(
        t,
        'rest-json/hostile',
        fc.property(predictTextArb, specsArb, (text, specs) => {
          const result = outcome(() => {
            const body = parseTfsPredictBody(parseTfsJsonText(text));
            return tfsJsonToTensors(body.format, body.value, specs);
          }, [Code.INVALID_ARGUMENT, Code.UNIMPLEMENTED]);
          if (!result.ok) return;
          for (const [alias, tensor] of Object.entries(result.value)) {
            if (!Object.hasOwn(specs, alias)) throw new Error(`alias ${alias} is not in the signature`);
            if (tensor.dtype !== specs[alias]!.dtype) throw new Error(`${alias}: dtype ${tensor.dtype}`);
            const n = tensor.shape.reduce((a, b) => a * b, 1);
            if (tensor.data.length !== n)
              throw new Error(`${alias}: ${tensor.data.length} elements for [${tensor.shape.join(',')}]`);
          }
        }),
        500,
      );
    },
  );

  it(
    'rest-json/non-finite-tokens: NaN / Infinity tokens are numbers outside strings and text inside them',
    targetOptions('rest-json/non-finite-tokens'),
    (t) => {
      const token = fc.constantFrom('NaN', 'Infinity', '-Infinity');
      const tricky = fc.constantFrom('NaN', 'Infinity', '-Infinity', '"', '\\', '\\"NaN', 'a"b', '\\\\');
      const leaf = fc.oneof(
        token.map((tok) => ({ tok })),
        fc.array(tricky, { maxLength: 3 }).map((parts) => parts.join('')),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
      );
      fuzzSync(
        t,
        'rest-json/non-finite-tokens',
        fc.property(fc.array(leaf, { minLength: 1, maxLength: 8 }), (leaves) => {
          const literal = (l: (typeof leaves)[number]): string =>
            typeof l === 'object' ? l.tok : Object.is(l, -0) ? '-0' : JSON.stringify(l);
          const text = `{"inputs":[${leaves.map(literal).join(',')}]}`;
          const parsed = parseTfsJsonText(text) as { inputs: unknown[] };
          leaves.forEach((l, i) => {
            const got = parsed.inputs[i];
            if (typeof l === 'object') {
              if (typeof got !== 'string' || !got.startsWith('\u0000\uFDD0') || !got.endsWith(l.tok)) {
                throw new Error(`token ${l.tok} read as ${JSON.stringify(got)}`);
              }
            } else if (!Object.is(got, l)) {
              throw new Error(`${JSON.stringify(l)} read as ${JSON.stringify(got)}`);
            }
          });
          if (leaves.every((l) => typeof l === 'object' || typeof l === 'number')) {
            const tensor = tfsJsonToTensors('columnar', parsed.inputs, { x: { dtype: 'float64' } })['x']!;
            leaves.forEach((l, i) => {
              const expected =
                typeof l === 'object'
                  ? l.tok === 'NaN'
                    ? NaN
                    : l.tok === 'Infinity'
                      ? Infinity
                      : -Infinity
                  : l;
              if (!Object.is(tensor.data[i], expected)) throw new Error(`element ${i}`);
            });
          }
        }),
        400,
      );
    },
  );

  it(
    'rest-json/text-parser: parseTfsJsonText agrees with JSON.parse and fails only with INVALID_ARGUMENT',
    targetOptions('rest-json/text-parser'),
    (t) => {
      fuzzSync(
        t,
        'rest-json/text-parser',
        fc.property(
          fc.oneof(fc.json({ maxDepth: 4 }), predictTextArb, fc.string({ unit: 'binary' })),
          (text) => {
            let reference: unknown;
            let valid = true;
            try {
              reference = JSON.parse(text);
            } catch {
              valid = false;
            }
            const result = outcome(() => parseTfsJsonText(text));
            if (valid && (!result.ok || !deepEqualIterative(result.value, reference))) {
              throw new Error('differs from JSON.parse on valid JSON');
            }
          },
        ),
        400,
      );
    },
  );

  it(
    'rest-json/float32-writer: the shortest-float fast path reads back exactly and is never longer than the reference',
    targetOptions('rest-json/float32-writer'),
    (t) => {
      fuzzSync(
        t,
        'rest-json/float32-writer',
        fc.property(
          fc.oneof(
            fc
              .integer({ min: 0, max: 2 ** 32 - 1 })
              .map((bits) => new Float32Array(Uint32Array.of(bits).buffer)[0]!),
            fc.float(),
          ),
          (value) => {
            const w = new JsonWriter(16);
            w.float32(value);
            const text = Buffer.from(w.bytes()).toString('latin1');
            if (Number.isNaN(value)) {
              if (text !== 'NaN') throw new Error(text);
              return;
            }
            const back = text === 'Infinity' ? Infinity : text === '-Infinity' ? -Infinity : Number(text);
            if (!Object.is(Math.fround(back), value)) throw new Error(`${value} written as ${text}`);
            const digits = (s: string): number =>
              s.replace(/^-/, '').replace(/e.*$/, '').replace('.', '').replace(/^0+/, '').length;
            if (Number.isFinite(value) && digits(text) > digits(shortestFloat32Slow(value))) {
              throw new Error(`${value}: ${text} is longer than ${shortestFloat32Slow(value)}`);
            }
          },
        ),
        2000,
      );
    },
  );

  it(
    'rest-json/base64: strict base64 decoding matches the standard alphabet and round-trips',
    targetOptions('rest-json/base64'),
    (t) => {
      fuzzSync(
        t,
        'rest-json/base64',
        fc.property(
          fc.oneof(
            fc.uint8Array({ maxLength: 40 }).chain((bytes) =>
              fc.constantFrom('pad', 'nopad', 'url').map((style) => {
                const b64 = Buffer.from(bytes).toString(style === 'url' ? 'base64url' : 'base64');
                return { bytes, text: style === 'nopad' ? b64.replace(/=+$/, '') : b64 };
              }),
            ),
            fc.string({ maxLength: 30 }).map((text) => ({ bytes: undefined, text })),
          ),
          ({ bytes, text }) => {
            const result = outcome(() => decodeBase64Strict(text));
            if (!result.ok) {
              if (bytes !== undefined && /^[A-Za-z0-9+/]*={0,2}$/.test(text))
                throw new Error(`refused valid base64 ${text}`);
              return;
            }
            if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw new Error(`accepted ${JSON.stringify(text)}`);
            if (Buffer.compare(Buffer.from(result.value), Buffer.from(text, 'base64')) !== 0)
              throw new Error('differs from Buffer');
            if (bytes !== undefined && Buffer.compare(Buffer.from(result.value), Buffer.from(bytes)) !== 0)
              throw new Error('not the encoded bytes');
          },
        ),
        600,
      );
    },
  );

  it(
    'rest-json/numeric-reader: the fast numeric reader gives what JSON.parse and the general codec give, or steps aside',
    targetOptions('rest-json/numeric-reader'),
    (t) => {
      let taken = 0;
      fuzzSync(
        t,
        'rest-json/numeric-reader',
        fc.property(numericBodyArb, numericSpecsArb, (text, dtypes) => {
          const bytes = new Uint8Array(Buffer.from(text, 'utf8'));
          // Never throws: it reads a body or answers undefined.
          const fast = readNumericPredictBody(bytes);
          if (fast !== undefined) taken++;
          const tensors = (json: () => unknown) =>
            outcome(() => {
              const body = parseTfsPredictBody(json());
              const aliases =
                body.format === 'columnar' &&
                typeof body.value === 'object' &&
                body.value !== null &&
                !Array.isArray(body.value) &&
                Object.getPrototypeOf(body.value) === Object.prototype
                  ? Object.keys(body.value)
                  : ['x'];
              const specs = Object.fromEntries(
                aliases.map((alias, i) => [alias, { dtype: dtypes[i % dtypes.length]! }]),
              );
              return tfsJsonToTensors(body.format, body.value, specs);
            }, [Code.INVALID_ARGUMENT, Code.UNIMPLEMENTED]);
          const general = tensors(() => parseTfsJsonText(text));
          const served = tensors(() => parseTfsPredictJson(bytes));
          if (!general.ok || !served.ok) {
            const a = general.ok ? 'decoded' : general.error.message;
            const b = served.ok ? 'decoded' : served.error.message;
            if (a !== b) throw new Error(`general: ${a}; with the fast reader: ${b}`);
            return;
          }
          const keys = Object.keys(general.value).sort();
          if (keys.join() !== Object.keys(served.value).sort().join()) throw new Error('aliases differ');
          for (const alias of keys) {
            const diff = sameTensor(served.value[alias]!, general.value[alias]!);
            if (diff !== undefined) throw new Error(`${alias}: ${diff}`);
          }
        }),
        600,
        () => `; ${taken} bodies taken by the fast reader`,
      );
    },
  );
});

/** Deep equality without recursion (bodies may nest 200,000 levels). */
function deepEqualIterative(a: unknown, b: unknown): boolean {
  const stack: [unknown, unknown][] = [[a, b]];
  while (stack.length > 0) {
    const [x, y] = stack.pop()!;
    if (Array.isArray(x) || Array.isArray(y)) {
      if (!Array.isArray(x) || !Array.isArray(y) || x.length !== y.length) return false;
      for (let i = 0; i < x.length; i++) stack.push([x[i], y[i]]);
    } else if (typeof x === 'object' && x !== null && typeof y === 'object' && y !== null) {
      const kx = Object.keys(x);
      const ky = Object.keys(y);
      if (kx.length !== ky.length) return false;
      for (const k of kx) {
        if (!Object.hasOwn(y, k)) return false;
        stack.push([(x as Record<string, unknown>)[k], (y as Record<string, unknown>)[k]]);
      }
    } else if (!Object.is(x, y)) {
      return false;
    }
  }
  return true;
}
