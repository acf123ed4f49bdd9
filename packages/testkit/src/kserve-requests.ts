/**
 * Open Inference Protocol (KServe v2) HTTP request generators shared by the fuzz targets of the
 * codec (packages/protocol/test/fuzz/kserve.test.ts) and of the HTTP API over a socket
 * (packages/server/test/fuzz/kserve-http-api.test.ts): tensors with the values JSON or binary
 * data carry, requests the client writes, and lies about the JSON header's length. Not a test
 * file.
 */
import fc from 'fast-check';
import { type DType, type Tensor, elementCount } from '@visionserve/protocol';
import {
  type HttpInferInput,
  type HttpInferRequestInit,
  encodeHttpInferRequest,
} from '@visionserve/protocol/kserve';
import { ALL_DTYPES, buildTensor, hostileStringArb, shapeArb } from './arbitraries.js';

const utf8 = new TextEncoder();

/** Element values per dtype; `json` restricts them to what JSON `data` carries exactly. */
function elementArb(dtype: DType, json: boolean): fc.Arbitrary<number | bigint | boolean | Uint8Array> {
  switch (dtype) {
    case 'float32':
      return fc.oneof(fc.float(), fc.constantFrom(NaN, Infinity, -Infinity, -0, 3.4028234663852886e38));
    case 'float64':
      return fc.oneof(fc.double(), fc.constantFrom(NaN, Infinity, -Infinity, -0, 5e-324));
    case 'float16':
      // JSON carries a half as a number: every value but NaN payloads (which become 0x7e00).
      return json
        ? fc.integer({ min: 0, max: 0xffff }).filter((v) => (v & 0x7c00) !== 0x7c00 || (v & 0x3ff) === 0)
        : fc.integer({ min: 0, max: 0xffff });
    case 'bfloat16':
      // Also NaN payloads aside (they become 0x7fc0).
      return json
        ? fc.integer({ min: 0, max: 0xffff }).filter((v) => (v & 0x7f80) !== 0x7f80 || (v & 0x7f) === 0)
        : fc.integer({ min: 0, max: 0xffff });
    case 'uint16':
      return fc.integer({ min: 0, max: 0xffff });
    case 'int8':
      return fc.integer({ min: -128, max: 127 });
    case 'int16':
      return fc.integer({ min: -32768, max: 32767 });
    case 'int32':
      return fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
    case 'uint8':
      return fc.integer({ min: 0, max: 255 });
    case 'uint32':
      return fc.integer({ min: 0, max: 2 ** 32 - 1 });
    case 'int64':
      return json
        ? fc.bigInt({ min: -(2n ** 53n - 1n), max: 2n ** 53n - 1n })
        : fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
    case 'uint64':
      return json ? fc.bigInt({ min: 0n, max: 2n ** 53n - 1n }) : fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
    case 'bool':
      return fc.boolean();
    case 'string':
      // JSON strings are text: UTF-8 only. Binary BYTES may be anything.
      return json
        ? fc.string({ unit: 'binary', maxLength: 8 }).map((s) => utf8.encode(s))
        : fc.uint8Array({ maxLength: 12 });
  }
}

/** A tensor of `dtype` (shape of `rank` when given) with values {@link elementArb} gives. */
export function tensorOf(dtype: DType, json: boolean, maxElements = 24, rank?: number): fc.Arbitrary<Tensor> {
  const shape =
    rank === undefined
      ? shapeArb(maxElements)
      : fc
          .array(fc.integer({ min: 0, max: 6 }), { minLength: rank, maxLength: rank })
          .filter((dims) => elementCount(dims) <= maxElements);
  return shape.chain((shape) =>
    fc
      .array(elementArb(dtype, json), { minLength: elementCount(shape), maxLength: elementCount(shape) })
      .map((values) => buildTensor(dtype, shape, values)),
  );
}

/** Input names: identifiers mostly, any text (lone surrogates, NUL, `__proto__`) sometimes. */
export const nameArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,7}$/) },
  { weight: 1, arbitrary: hostileStringArb.filter((s) => s !== '') },
);

/** One input: binary data for any dtype, JSON data for those JSON can carry (BF16 never). */
const inputArb: fc.Arbitrary<Omit<HttpInferInput, 'name'>> = fc
  .tuple(fc.constantFrom(...ALL_DTYPES), fc.boolean())
  .chain(([dtype, binaryWanted]) => {
    const binary = binaryWanted || dtype === 'bfloat16';
    return tensorOf(dtype, !binary).map((tensor) => ({ tensor, binary }));
  });

const parametersArb = fc.dictionary(
  fc.stringMatching(/^[a-z_]{1,10}$/).filter((k) => !/binary|classification/.test(k)),
  fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean()),
  { maxKeys: 2 },
);

/** A client's request: 0-4 inputs (JSON or binary), id, parameters, requested outputs. */
export const requestInitArb: fc.Arbitrary<HttpInferRequestInit> = fc
  .record({
    names: fc.uniqueArray(nameArb, { minLength: 0, maxLength: 4 }),
    id: fc.option(fc.string({ unit: 'binary', maxLength: 12 }), { nil: undefined }),
    parameters: fc.option(parametersArb, { nil: undefined }),
    binaryOutput: fc.option(fc.boolean(), { nil: undefined }),
    outputs: fc.option(
      fc.uniqueArray(nameArb, { maxLength: 3 }).chain((names) =>
        fc.tuple(
          ...names.map((name) =>
            fc.record({
              name: fc.constant(name),
              binary: fc.option(fc.boolean(), { nil: undefined }),
              classification: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
            }),
          ),
        ),
      ),
      { nil: undefined },
    ),
  })
  .chain(({ names, id, parameters, binaryOutput, outputs }) =>
    fc.tuple(...names.map(() => inputArb)).map((inputs) => ({
      ...(id === undefined ? {} : { id }),
      ...(parameters === undefined ? {} : { parameters }),
      ...(binaryOutput === undefined ? {} : { binaryOutput }),
      ...(outputs === undefined
        ? {}
        : {
            outputs: outputs.map((o) => ({
              name: o.name,
              ...(o.binary === undefined ? {} : { binary: o.binary }),
              ...(o.classification === undefined ? {} : { classification: o.classification }),
            })),
          }),
      inputs: inputs.map((input, i) => ({ name: names[i]!, ...input })),
    })),
  );

/** A request body as the client sends it: JSON header, then the binary inputs. */
export function bodyOf(init: HttpInferRequestInit): { body: Uint8Array; headerLength: string | undefined } {
  const encoded = encodeHttpInferRequest(init);
  return {
    body: Buffer.concat([encoded.json, ...encoded.binary]),
    headerLength: encoded.binaryBytes > 0 ? String(encoded.json.byteLength) : undefined,
  };
}

/** Header lengths: the true one, off by a little or a lot, absent, or not a number. */
export function headerLengthArb(
  trueLength: number | undefined,
  bodyLength: number,
): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant(trueLength === undefined ? undefined : String(trueLength)) },
    {
      weight: 2,
      arbitrary: fc.integer({ min: -8, max: 8 }).map((d) => String((trueLength ?? bodyLength) + d)),
    },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: bodyLength + 2 }).map(String) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '',
        ' ',
        '0',
        '-1',
        '1e3',
        '0x10',
        '+8',
        '8.0',
        ' 16 ',
        '99999999999999999999',
        'NaN',
        '\u00b9\u00b2',
      ),
    },
  );
}
