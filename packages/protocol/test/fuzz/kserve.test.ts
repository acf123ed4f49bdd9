/**
 * Fuzz targets: the Open Inference Protocol (KServe v2) HTTP codec: the inference request
 * decoder (JSON header + binary tensor data extension, Inference-Header-Content-Length,
 * binary_data_size offsets, BYTES length prefixes), the response codec the client uses, the
 * JSON `data` reader and the classification extension. The HTTP API over a socket is fuzzed in
 * packages/server/test/fuzz/kserve-http-api.test.ts.
 */
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Code, elementCount } from '@visionserve/protocol';
import {
  KSERVE_DATATYPES,
  type KServeDatatype,
  type InferResponse,
  classificationTensor,
  datatypeOfDtype,
  decodeBytesElements,
  decodeHttpInferRequest,
  decodeHttpInferResponse,
  dtypeOfDatatype,
  encodeBytesElements,
  encodeHttpInferResponse,
  parseClassificationEntry,
  tensorFromJsonData,
} from '@visionserve/protocol/kserve';
import {
  ALL_DTYPES,
  hostileStringArb,
  mutate,
  mutationArb,
  sameTensor,
} from '@visionserve/testkit/arbitraries';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';
import {
  bodyOf,
  headerLengthArb,
  nameArb,
  requestInitArb,
  tensorOf,
} from '@visionserve/testkit/kserve-requests';

const utf8 = new TextEncoder();

/** JSON values meant to break a decoder that trusts the header's structure. */
const hostileJsonArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(
    null,
    true,
    -1,
    0,
    1.5,
    -0,
    2 ** 31,
    2 ** 32 + 1,
    2 ** 53,
    1e300,
    Number.MAX_SAFE_INTEGER,
    '',
    'FP32',
    'BYTES',
    'BF16',
    'fp32',
    'TYPE_FP32',
    '__proto__',
    [],
    [[]],
    [-1],
    [2 ** 31, 2 ** 31],
    [0, Number.MAX_SAFE_INTEGER],
    [1e9, 1e9, 1e9],
    {},
    { binary_data_size: 2 ** 40 },
    { binary_data_size: -4 },
    { binary_data_size: 1.5 },
    { binary_data_size: '8' },
    { classification: -1 },
    { classification: 2 ** 53 },
    { binary_data: 'yes' },
    JSON.parse('{"__proto__": {"binary_data_size": 4}}') as unknown,
  ),
  fc.jsonValue({ maxDepth: 2 }),
  hostileStringArb,
);

/** A path into a JSON value: list indices and object keys, resolved modulo what is there. */
function replaceAt(root: unknown, path: readonly number[], value: unknown): unknown {
  if (path.length === 0 || typeof root !== 'object' || root === null) return value;
  const [head, ...rest] = path as [number, ...number[]];
  if (Array.isArray(root)) {
    if (root.length === 0) return [value];
    const copy = [...(root as unknown[])];
    const i = head % (copy.length + 1);
    if (i === copy.length) copy.push(value);
    else copy[i] = replaceAt(copy[i], rest, value);
    return copy;
  }
  const record = root as Record<string, unknown>;
  const keys = Object.keys(record);
  const copy: Record<string, unknown> = { ...record };
  const fields = ['inputs', 'outputs', 'parameters', 'id', 'name', 'shape', 'datatype', 'data'];
  if (keys.length === 0 || head % 4 === 3) {
    Object.defineProperty(copy, fields[head % fields.length]!, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    return copy;
  }
  const key = keys[head % keys.length]!;
  copy[key] = replaceAt(record[key], rest, value);
  return copy;
}
/** Hostile requests: structure edits of valid headers, byte edits of whole bodies, header lies. */
const hostileRequestArb: fc.Arbitrary<{ body: Uint8Array; headerLength: string | undefined }> = requestInitArb
  .map(bodyOf)
  .chain(({ body, headerLength }) => {
    const jsonLength = headerLength === undefined ? body.byteLength : Number(headerLength);
    const header = JSON.parse(
      Buffer.from(body.subarray(0, jsonLength))
        .toString('utf8')
        .replace(/NaN|-?Infinity/g, '0'),
    ) as unknown;
    const binary = body.subarray(jsonLength);
    const structural = fc
      .tuple(
        fc.array(fc.tuple(fc.array(fc.nat(), { maxLength: 6 }), hostileJsonArb), {
          minLength: 1,
          maxLength: 3,
        }),
        fc.array(mutationArb, { maxLength: 2 }),
      )
      .map(([edits, binaryEdits]) => {
        let json = header;
        for (const [path, value] of edits) json = replaceAt(json, path, value);
        const text = utf8.encode(JSON.stringify(json) ?? 'null');
        return Buffer.concat([text, mutate(binary, binaryEdits)]);
      });
    const bytes = fc
      .array(mutationArb, { minLength: 1, maxLength: 4 })
      .map((edits) => Buffer.from(mutate(body, edits)));
    return fc
      .oneof(structural, bytes, fc.constant(Buffer.from(body)))
      .chain((mutated) =>
        headerLengthArb(headerLength === undefined ? undefined : jsonLength, mutated.byteLength).map(
          (length) => ({ body: new Uint8Array(mutated), headerLength: length }),
        ),
      );
  });

function checkDecoded(request: ReturnType<typeof decodeHttpInferRequest>): void {
  const names = new Set<string>();
  for (const input of request.inputs) {
    if (names.has(input.name)) throw new Error(`input "${input.name}" decoded twice`);
    names.add(input.name);
    const t = input.tensor;
    if (t.dtype !== dtypeOfDatatype(input.datatype)) throw new Error(`${input.datatype} became ${t.dtype}`);
    if (t.shape !== input.shape && t.shape.join() !== input.shape.join()) throw new Error('shape changed');
    if (t.data.length !== elementCount(t.shape)) {
      throw new Error(`"${input.name}": ${t.data.length} elements for shape [${t.shape.join(',')}]`);
    }
  }
}

describe('fuzz: KServe v2 HTTP codec', () => {
  it(
    'kserve-http/request-round-trip: encoded requests decode to the same inputs, outputs and parameters',
    targetOptions('kserve-http/request-round-trip'),
    (t) => {
      fuzzSync(
        t,
        'kserve-http/request-round-trip',
        fc.property(requestInitArb, (init) => {
          const { body, headerLength } = bodyOf(init);
          const decoded = decodeHttpInferRequest(body, headerLength);
          if (decoded.id !== (init.id ?? '')) throw new Error(`id ${JSON.stringify(decoded.id)}`);
          if (decoded.inputs.length !== init.inputs.length) throw new Error('input count');
          init.inputs.forEach((input, i) => {
            const got = decoded.inputs[i]!;
            if (got.name !== input.name) throw new Error(`name ${JSON.stringify(got.name)}`);
            if (got.datatype !== datatypeOfDtype(input.tensor.dtype))
              throw new Error(`datatype ${got.datatype}`);
            const diff = sameTensor(got.tensor, input.tensor);
            if (diff !== undefined)
              throw new Error(`input "${input.name}" (binary ${input.binary}): ${diff}`);
          });
          if ((decoded.outputs === undefined) !== (init.outputs === undefined)) throw new Error('outputs');
          init.outputs?.forEach((o, i) => {
            const got = decoded.outputs![i]!;
            if (got.name !== o.name) throw new Error(`output name ${JSON.stringify(got.name)}`);
            if (got.classification !== (o.classification ?? 0)) throw new Error('classification');
            if (got.parameters['binary_data'] !== o.binary) throw new Error('binary_data');
          });
          if (decoded.parameters['binary_data_output'] !== init.binaryOutput)
            throw new Error('binary_data_output');
          checkDecoded(decoded);
        }),
        400,
      );
    },
  );

  it(
    'kserve-http/request-hostile: any body and header length decode consistently or fail with INVALID_ARGUMENT / UNIMPLEMENTED',
    targetOptions('kserve-http/request-hostile'),
    (t) => {
      let decodedCount = 0;
      fuzzSync(
        t,
        'kserve-http/request-hostile',
        fc.property(
          fc.oneof(
            { weight: 9, arbitrary: hostileRequestArb },
            {
              weight: 1,
              arbitrary: fc.record({
                body: fc.uint8Array({ maxLength: 256 }),
                headerLength: fc.option(fc.nat({ max: 300 }).map(String), { nil: undefined }),
              }),
            },
          ),
          ({ body, headerLength }) => {
            const result = outcome(
              () => decodeHttpInferRequest(body, headerLength),
              [Code.INVALID_ARGUMENT, Code.UNIMPLEMENTED],
            );
            if (!result.ok) {
              if (result.error.message.length > 1200) throw new Error('error message is not bounded');
              return;
            }
            decodedCount++;
            checkDecoded(result.value);
            // What decoded re-encodes (all binary) and decodes to the same tensors.
            const again = bodyOf({ inputs: result.value.inputs.map((i) => ({ ...i, binary: true })) });
            const twice = decodeHttpInferRequest(again.body, again.headerLength);
            result.value.inputs.forEach((input, i) => {
              const diff = sameTensor(twice.inputs[i]!.tensor, input.tensor);
              if (diff !== undefined) throw new Error(`re-encoded "${input.name}": ${diff}`);
            });
          },
        ),
        600,
        () => `; ${decodedCount} decoded`,
      );
    },
  );

  it(
    'kserve-http/json-data: any JSON data for any datatype and shape gives that many elements or INVALID_ARGUMENT',
    targetOptions('kserve-http/json-data'),
    (t) => {
      const leaf = fc.oneof(
        fc.double(),
        fc.integer(),
        fc.boolean(),
        fc.string({ maxLength: 4 }),
        fc.constantFrom(null, 2 ** 53, -(2 ** 63), 1e300, {}, '\u0000\uFDD0NaN'),
      );
      const dataArb = fc.letrec<{ data: unknown }>((tie) => ({
        data: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('data'), { maxLength: 5 })),
      })).data;
      fuzzSync(
        t,
        'kserve-http/json-data',
        fc.property(
          fc.constantFrom(...KSERVE_DATATYPES),
          fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
          fc.oneof(
            dataArb,
            fc.integer({ min: 0, max: 200 }).map((depth) => nest(depth)),
          ),
          (datatype: KServeDatatype, shape, data) => {
            const count = elementCount(shape);
            const result = outcome(() => tensorFromJsonData(datatype, shape, count, data, 'Input x'));
            if (!result.ok) return;
            const t = result.value;
            if (t.dtype !== dtypeOfDatatype(datatype)) throw new Error(`dtype ${t.dtype}`);
            if (t.data.length !== count) throw new Error(`${t.data.length} elements, expected ${count}`);
          },
        ),
        500,
      );
    },
  );

  it(
    'kserve-http/bytes-elements: length-prefixed BYTES split exactly or fail with INVALID_ARGUMENT',
    targetOptions('kserve-http/bytes-elements'),
    (t) => {
      fuzzSync(
        t,
        'kserve-http/bytes-elements',
        fc.property(
          fc.array(fc.uint8Array({ maxLength: 9 }), { maxLength: 6 }),
          fc.array(mutationArb, { maxLength: 3 }),
          fc.integer({ min: -2, max: 2 }),
          (elements, edits, countDelta) => {
            const encoded = encodeBytesElements(elements);
            const bytes = mutate(encoded, edits);
            const count = Math.max(0, elements.length + countDelta);
            const result = outcome(() => decodeBytesElements(bytes, count, 'Input s'));
            if (!result.ok) {
              if (edits.length === 0 && countDelta === 0)
                throw new Error(`valid data refused: ${result.error.message}`);
              return;
            }
            if (result.value.length !== count) throw new Error(`${result.value.length} elements`);
            if (!Buffer.from(encodeBytesElements(result.value)).equals(Buffer.from(bytes)))
              throw new Error('decoded elements do not re-encode to the input');
          },
        ),
        500,
      );
    },
  );

  it(
    'kserve-http/response-round-trip: encoded responses decode to the same outputs (JSON and binary)',
    targetOptions('kserve-http/response-round-trip'),
    (t) => {
      const outputArb = fc
        .tuple(fc.constantFrom(...ALL_DTYPES), fc.boolean())
        .chain(([dtype, binary]) => tensorOf(dtype, !binary).map((tensor) => ({ tensor, binary })));
      fuzzSync(
        t,
        'kserve-http/response-round-trip',
        fc.property(
          fc
            .uniqueArray(nameArb, { maxLength: 4 })
            .chain((names) =>
              fc.tuple(
                fc.constant(names),
                fc.tuple(...names.map(() => outputArb)),
                fc.string({ maxLength: 8 }),
              ),
            ),
          ([names, outputs, id]) => {
            const response: InferResponse = {
              modelName: 'm',
              modelVersion: '1',
              id,
              outputs: outputs.map((o, i) => ({ name: names[i]!, tensor: o.tensor })),
            };
            const encoded = encodeHttpInferResponse(
              response,
              outputs.map((o) => o.binary),
            );
            const body = Buffer.concat([encoded.json, ...encoded.binary]);
            const decoded = decodeHttpInferResponse(
              body,
              encoded.binaryBytes > 0 ? String(encoded.json.byteLength) : undefined,
            );
            if (decoded.id !== id) throw new Error('id');
            outputs.forEach((o, i) => {
              const diff = sameTensor(decoded.outputs[i]!.tensor, o.tensor);
              if (diff !== undefined) throw new Error(`output ${i} (binary ${o.binary}): ${diff}`);
            });
          },
        ),
        300,
      );
    },
  );

  it(
    'kserve-http/response-hostile: the client decoder fails only with INTERNAL on a malformed response',
    targetOptions('kserve-http/response-hostile'),
    (t) => {
      fuzzSync(
        t,
        'kserve-http/response-hostile',
        fc.property(hostileRequestArb, ({ body, headerLength }) => {
          // A request body is a close relative of a response body: same framing, other keys.
          const text = Buffer.from(body).toString('latin1').replace('"inputs"', '"outputs"');
          outcome(() => decodeHttpInferResponse(Buffer.from(text, 'latin1'), headerLength), [Code.INTERNAL]);
        }),
        400,
      );
    },
  );

  it(
    'kserve/classification: top-K of any scores is ordered (NaN last, ties by index) or INVALID_ARGUMENT',
    targetOptions('kserve/classification'),
    (t) => {
      fuzzSync(
        t,
        'kserve/classification',
        fc.property(
          fc.constantFrom(...ALL_DTYPES).chain((dtype) => tensorOf(dtype, false, 40)),
          fc.integer({ min: 1, max: 50 }),
          fc.boolean(),
          fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
          (scores, k, batched, label) => {
            const result = outcome(() =>
              classificationTensor(scores, k, {
                batched,
                ...(label === undefined ? {} : { label: () => label }),
              }),
            );
            if (!result.ok) return;
            const out = result.value;
            const isBatched = batched && scores.shape.length > 0;
            const batch = isBatched ? scores.shape[0]! : 1;
            const items = batch === 0 ? 0 : elementCount(scores.shape) / batch;
            const take = Math.min(k, items);
            const shape = isBatched ? [batch, take] : [take];
            if (out.shape.join() !== shape.join()) throw new Error(`shape [${out.shape.join(',')}]`);
            const entries = (out.data as Uint8Array[]).map((b) =>
              parseClassificationEntry(Buffer.from(b).toString('utf8')),
            );
            for (let b = 0; b < batch; b++) {
              const row = entries.slice(b * take, (b + 1) * take);
              const values = Array.from(
                { length: items },
                (_, i) => scores.data[b * items + i] as number | bigint,
              );
              const nan = (v: number | bigint): boolean => typeof v === 'number' && Number.isNaN(v);
              const expected = [...values.keys()].sort((i, j) => {
                const [x, y] = [values[i]!, values[j]!];
                if (nan(x) || nan(y)) return nan(x) === nan(y) ? i - j : nan(x) ? 1 : -1;
                return x === y ? i - j : y > x ? 1 : -1;
              });
              row.forEach((entry, r) => {
                if (entry.index !== expected[r])
                  throw new Error(`row ${b} rank ${r}: index ${entry.index}, expected ${expected[r]}`);
                if (entry.label !== label) throw new Error(`label ${String(entry.label)}`);
              });
            }
          },
        ),
        400,
      );
    },
  );
});

/** `depth` nested lists around one number. */
function nest(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}
