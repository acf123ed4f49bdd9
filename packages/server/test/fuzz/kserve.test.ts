/**
 * Fuzz targets: the Open Inference Protocol (KServe v2) HTTP binding: the inference request
 * decoder (JSON header + binary tensor data extension, Inference-Header-Content-Length,
 * binary_data_size offsets, BYTES length prefixes), the response codec the client uses, the
 * JSON `data` reader, the classification extension, and the whole HTTP API over a real
 * socket (hostile paths, methods, headers, compressed bodies, repository loads that try to
 * leave the model roots).
 */
import { after, before, describe, it } from 'node:test';
import { request as httpRequest, Agent } from 'node:http';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { Code, type DType, type Tensor, elementCount, notFound } from '@visionserve/protocol';
import {
  KSERVE_DATATYPES,
  type KServeDatatype,
  type HttpInferInput,
  type HttpInferRequestInit,
  type InferResponse,
  classificationTensor,
  datatypeOfDtype,
  decodeBytesElements,
  decodeHttpInferRequest,
  decodeHttpInferResponse,
  dtypeOfDatatype,
  encodeBytesElements,
  encodeHttpInferRequest,
  encodeHttpInferResponse,
  parseClassificationEntry,
  tensorFromJsonData,
} from '@visionserve/protocol/kserve';
import type { ServableAssets } from '../../src/contracts/servable-assets.js';
import type { CallOptions, ModelSpec, PredictRequest } from '../../src/core/inference-service.js';
import type { ModelConfig } from '../../src/core/model-config.js';
import type { ModelRegistry } from '../../src/core/model-registry.js';
import type { Signature } from '../../src/core/signature.js';
import { validateInputs, validateOutputFilter } from '../../src/core/validate-inputs.js';
import { createHttpEdge } from '../../src/frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from '../../src/frontends/http/start-http-server.js';
import { createKServeHttpApi, createKServeService } from '../../src/frontends/kserve/index.js';
import { createInferenceStatistics } from '../../src/core/inference-statistics.js';
import { findModelDirectory, listModelDirectories } from '../../src/repository/model-roots.js';
import { createJsonLogger } from '../../src/util/logger.js';
import { fakeInferenceService } from '../fakes.js';
import {
  ALL_DTYPES,
  buildTensor,
  hostileStringArb,
  mutate,
  mutationArb,
  sameTensor,
  shapeArb,
} from '@visionserve/testkit/arbitraries';
import { fuzzAsync, fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';

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

function tensorOf(dtype: DType, json: boolean, maxElements = 24, rank?: number): fc.Arbitrary<Tensor> {
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
const nameArb: fc.Arbitrary<string> = fc.oneof(
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

const requestInitArb: fc.Arbitrary<HttpInferRequestInit> = fc
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
function bodyOf(init: HttpInferRequestInit): { body: Uint8Array; headerLength: string | undefined } {
  const encoded = encodeHttpInferRequest(init);
  return {
    body: Buffer.concat([encoded.json, ...encoded.binary]),
    headerLength: encoded.binaryBytes > 0 ? String(encoded.json.byteLength) : undefined,
  };
}

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

/** Header lengths: the true one, off by a little or a lot, absent, or not a number. */
function headerLengthArb(
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

// ---------------------------------------------------------------------------------------
// The HTTP API over a real socket, with fake models.

const PREDICT = 'tensorflow/serving/predict';
const HALF: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1] } },
  outputs: { y: { name: 'y', dtype: 'float32', shape: [-1] } },
  methodName: PREDICT,
};
const ECHO: Signature = {
  inputs: Object.fromEntries(ALL_DTYPES.map((d) => [`in_${d}`, { name: `in_${d}`, dtype: d, shape: [-1] }])),
  outputs: Object.fromEntries(
    ALL_DTYPES.map((d) => [`out_${d}`, { name: `out_${d}`, dtype: d, shape: [-1] }]),
  ),
  methodName: PREDICT,
};
const CONFIGURED = ['half', 'echo'];

describe('fuzz: KServe v2 HTTP API over a socket', () => {
  const models = new Map<string, { signature: Signature; config: ModelConfig }>();
  const configOf = (name: string, basePath = `/models/${name}`): ModelConfig => ({
    name,
    basePath,
    versionPolicy: { kind: 'latest', numVersions: 1 },
    versionLabels: {},
  });
  const resolve = (spec: ModelSpec): { version: number; signature: Signature } => {
    const m = models.get(spec.name);
    if (m === undefined) throw notFound(`Servable not found for request: Latest(${spec.name})`);
    if (spec.version !== undefined && spec.version !== 1) {
      throw notFound(`Servable not found for request: Specific(${spec.name}, ${spec.version})`);
    }
    return { version: 1, signature: m.signature };
  };
  const run = (req: PredictRequest, _options?: CallOptions) => {
    const { signature } = resolve(req.model);
    // What the real core checks before a run.
    validateInputs(signature, req.inputs);
    validateOutputFilter(signature, req.outputFilter);
    const outputs: Record<string, Tensor> = {};
    if (signature === ECHO) {
      for (const [k, t] of Object.entries(req.inputs)) outputs[k.replace(/^in_/, 'out_')] = t;
    } else {
      const x = req.inputs['x']!;
      outputs['y'] = { dtype: 'float32', shape: x.shape, data: (x.data as Float32Array).map((v) => v / 2) };
    }
    const filter = req.outputFilter;
    const kept =
      filter !== undefined && filter.length > 0
        ? Object.fromEntries(Object.entries(outputs).filter(([k]) => filter.includes(k)))
        : outputs;
    return Promise.resolve({
      model: { name: req.model.name, version: 1, signatureName: 'serving_default' },
      outputs: kept,
    });
  };
  const service = fakeInferenceService<ServableAssets>({
    resolve,
    run,
    status(spec) {
      resolve(spec);
      return [{ version: 1, state: 'AVAILABLE' }];
    },
    modelNames: () => [...models.keys()],
  });
  const registry: ModelRegistry = {
    modelConfig: (name) => models.get(name)?.config,
    addModel(config) {
      models.set(config.name, { signature: HALF, config });
      return Promise.resolve();
    },
    removeModel(name) {
      if (!models.delete(name)) return Promise.reject(notFound(`no ${name}`));
      return Promise.resolve();
    },
  };

  let server: StartedHttpServer;
  let roots: string;
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const logs: string[] = [];

  before(async () => {
    roots = await mkdtemp(join(tmpdir(), 'vs-fuzz-kserve-'));
    await mkdir(join(roots, 'extra', '1'), { recursive: true });
    await mkdir(join(tmpdir(), 'vs-fuzz-kserve-outside', '1'), { recursive: true });
    await symlink(join(tmpdir(), 'vs-fuzz-kserve-outside'), join(roots, 'escape'));
    models.set('half', { signature: HALF, config: configOf('half') });
    models.set('echo', { signature: ECHO, config: configOf('echo') });
    const logger = createJsonLogger({ level: 'warn', write: (line) => logs.push(line) });
    const kserve = createKServeService({
      service,
      registry,
      statistics: createInferenceStatistics(),
      roots: { list: () => listModelDirectories([roots]), resolve: (n) => findModelDirectory([roots], n) },
      modelControl: 'explicit',
      serverVersion: '0.0.0',
      maxBatchSize: 8,
      instanceCount: 1,
      logger,
    });
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      edge: createHttpEdge({
        apis: [
          createKServeHttpApi({
            kserve,
            bodyLimitBytes: 256 * 1024,
            decompressedBodyLimitBytes: 1 << 20,
            requestTimeoutMs: 5_000,
          }),
        ],
        logger,
        notFoundMessage: (method, path) => `No handler for ${method} ${path}`,
      }),
    });
  });

  after(async () => {
    agent.destroy();
    await server.close(0);
    await rm(roots, { recursive: true, force: true });
    await rm(join(tmpdir(), 'vs-fuzz-kserve-outside'), { recursive: true, force: true });
  });

  interface Reply {
    status: number;
    headers: Record<string, string | string[] | undefined>;
    body: Buffer;
  }

  function send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: Uint8Array,
  ): Promise<Reply> {
    return new Promise((resolvePromise, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port: server.port, method, path, headers, agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            resolvePromise({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks),
            });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
      // An explicit length: node's client sends a DELETE body with neither Content-Length nor chunking.
      const bytes = method === 'GET' || method === 'HEAD' ? Buffer.alloc(0) : Buffer.from(body);
      if (bytes.byteLength > 0) req.setHeader('Content-Length', String(bytes.byteLength));
      req.end(bytes);
    });
  }

  /** Model path segments: configured, in the roots, escaping them, percent-encoded hostile text. */
  const segmentArb = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('half', 'echo', 'extra', 'escape', 'nope', 'half%20') },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '..',
        '%2e%2e',
        '%2E%2E%2Fetc',
        '%2F',
        '%',
        '%zz',
        '%00',
        '%C0%AE',
        '.',
        '%5C..',
      ),
    },
    {
      weight: 2,
      arbitrary: hostileStringArb.map((s) => encodeURIComponent(s.replace(/[\uD800-\uDFFF]/g, 'x'))),
    },
  );
  const versionArb = fc.constantFrom(
    '',
    '/versions/1',
    '/versions/2',
    '/versions/0',
    '/versions/99999999999999999999',
    '/versions/01',
    '/versions/-1',
    '/versions/',
  );
  const pathArb = fc.oneof(
    fc.constantFrom(
      '/v2',
      '/v2/',
      '/v2/health/live',
      '/v2/health/ready',
      '/v2/models/stats',
      '/v2//models',
      '/v2/models',
    ),
    fc
      .tuple(
        segmentArb,
        versionArb,
        fc.constantFrom('', '/ready', '/config', '/stats', '/infer', '/infer/', '/x'),
      )
      .map(([m, v, s]) => `/v2/models/${m}${v}${s}`),
    fc
      .tuple(segmentArb, fc.constantFrom('load', 'unload', 'index'))
      .map(([m, a]) => `/v2/repository/models/${m}/${a}`),
    fc.tuple(segmentArb).map(([r]) => `/v2/repository/${r}/index`),
    fc.constant('/v2/repository/index'),
  );

  /** Bodies: encoded infer requests for the fake models, mutated; repository bodies; garbage. */
  const echoInitArb: fc.Arbitrary<HttpInferRequestInit> = fc
    .constant(ALL_DTYPES)
    .chain((dtypes) =>
      fc.tuple(
        ...dtypes.map((dtype) =>
          fc.boolean().chain((b) => {
            const binary = b || dtype === 'bfloat16';
            return tensorOf(dtype, !binary, 12, 1).map((tensor) => ({ name: `in_${dtype}`, tensor, binary }));
          }),
        ),
      ),
    )
    .chain((inputs) =>
      fc.record({
        inputs: fc.constant(inputs),
        binaryOutput: fc.boolean(),
        outputs: fc.option(
          fc.subarray(inputs.map((i) => ({ name: i.name.replace(/^in_/, 'out_'), classification: 0 }))),
          { nil: undefined },
        ),
      }),
    )
    .map((r) => ({
      inputs: r.inputs,
      binaryOutput: r.binaryOutput,
      ...(r.outputs ? { outputs: r.outputs } : {}),
    }));
  const halfInitArb: fc.Arbitrary<HttpInferRequestInit> = fc
    .tuple(fc.array(fc.float(), { maxLength: 8 }), fc.boolean(), fc.integer({ min: 0, max: 3 }))
    .map(([values, binary, k]) => ({
      inputs: [
        {
          name: 'x',
          tensor: { dtype: 'float32', shape: [values.length], data: Float32Array.from(values) },
          binary,
        },
      ],
      ...(k > 0 ? { outputs: [{ name: 'y', classification: k }] } : {}),
    }));
  /** Encoded bodies from `inits`: as encoded (about half), or with byte edits and header-length lies. */
  const bodiesOf = (
    inits: fc.Arbitrary<HttpInferRequestInit>,
  ): fc.Arbitrary<{ body: Uint8Array; headerLength: string | undefined }> =>
    inits.map(bodyOf).chain(({ body, headerLength }) =>
      fc.oneof(
        fc.constant({ body, headerLength }),
        fc
          .tuple(
            fc.array(mutationArb, { maxLength: 3 }),
            headerLengthArb(headerLength === undefined ? undefined : Number(headerLength), body.byteLength),
          )
          .map(([edits, length]) => ({ body: mutate(body, edits), headerLength: length })),
      ),
    );
  const inferBodyArb = bodiesOf(fc.oneof(echoInitArb, halfInitArb, requestInitArb));
  const controlBodyArb = fc
    .oneof(
      fc.constantFrom(
        '',
        '{}',
        '{"ready": true}',
        '{"ready": "yes"}',
        '{"parameters": {"config": "{}"}}',
        '{"parameters": {"unload_dependents": 1}}',
        '[]',
        'null',
        '{"parameters": []}',
        '{',
        'NaN',
      ),
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
    )
    .map((text) => ({ body: utf8.encode(text), headerLength: undefined }));

  const encodingArb = fc.constantFrom(
    undefined,
    'gzip',
    'deflate',
    'br',
    'gzip, gzip',
    'identity',
    'GZIP',
    'x-unknown',
  );
  /** The body as sent: compressed per the declared encoding, except the lies (1: not compressed, 2: a bomb). */
  const compressed = (body: Uint8Array, encoding: string | undefined, lie: number): Uint8Array => {
    if (lie === 1) return body;
    const gzip = encoding === 'gzip' || encoding === 'GZIP';
    // A bomb: 4 MiB of zeros in ~4 KB, past the 1 MiB decompressed limit.
    const content = lie === 2 && (gzip || encoding === 'deflate') ? Buffer.alloc(4 << 20) : body;
    if (gzip) return gzipSync(content);
    if (encoding === 'deflate') return deflateSync(content);
    return body;
  };

  const ALLOWED = new Set([200, 400, 404, 405, 411, 413, 415, 501, 503]);

  it(
    'kserve-http/api-hostile: every request gets a clear answer (never 500), the server stays up, loads stay in the roots',
    targetOptions('kserve-http/api-hostile', 300_000),
    async (t) => {
      const statuses = new Map<number, number>();
      await fuzzAsync(
        t,
        'kserve-http/api-hostile',
        fc.asyncProperty(
          fc.oneof(
            {
              weight: 2,
              arbitrary: fc.tuple(
                fc.constantFrom('GET', 'POST', 'POST', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH'),
                pathArb,
                fc.oneof({ weight: 3, arbitrary: inferBodyArb }, { weight: 1, arbitrary: controlBodyArb }),
              ),
            },
            {
              // Aimed at inference on a served model, where the decoders run.
              weight: 3,
              arbitrary: fc
                .tuple(
                  fc.constant('POST'),
                  fc.constantFrom('', '/versions/1'),
                  fc.oneof(
                    bodiesOf(halfInitArb).map((b) => ['half', b] as const),
                    bodiesOf(echoInitArb).map((b) => ['echo', b] as const),
                  ),
                )
                .map(
                  ([method, version, [model, body]]) =>
                    [method, `/v2/models/${model}${version}/infer`, body] as const,
                ),
            },
          ),
          fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: encodingArb }),
          fc.integer({ min: 0, max: 5 }),
          fc.constantFrom(undefined, 'gzip', 'deflate, gzip', '*', 'identity;q=0', 'br'),
          async ([method, path, { body, headerLength }], encoding, lie, acceptEncoding) => {
            const headers: Record<string, string> = {};
            if (headerLength !== undefined) headers['Inference-Header-Content-Length'] = headerLength;
            if (encoding !== undefined) headers['Content-Encoding'] = encoding;
            if (acceptEncoding !== undefined) headers['Accept-Encoding'] = acceptEncoding;
            if (lie === 3) headers['Content-Type'] = 'application/octet-stream';
            const reply = await send(method, path, headers, compressed(body, encoding, lie));
            statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
            const text = reply.body.toString('utf8');
            if (!ALLOWED.has(reply.status)) {
              throw new Error(
                `${method} ${path}: status ${reply.status}: ${text.slice(0, 300)}\nlog: ${logs.slice(-2).join('\n')}`,
              );
            }
            if (reply.status !== 200 && method !== 'HEAD') {
              const json = JSON.parse(text) as { error?: unknown };
              if (typeof json.error !== 'string' || json.error === '') {
                throw new Error(
                  `${method} ${path}: ${reply.status} without an "error" string: ${text.slice(0, 200)}`,
                );
              }
            }
            if (
              reply.status === 200 &&
              method === 'POST' &&
              /\/infer$/.test(path) &&
              reply.headers['content-encoding'] === undefined
            ) {
              const length = reply.headers['inference-header-content-length'];
              // Our client reads what the server wrote, except 64-bit integers past 2^53 in JSON
              // (exact digits on the wire; a JSON number cannot hold them, so it refuses).
              try {
                decodeHttpInferResponse(reply.body, typeof length === 'string' ? length : undefined);
              } catch (error) {
                if (!(error instanceof Error) || !/JSON cannot carry it exactly/.test(error.message))
                  throw error;
              }
            }
            for (const name of models.keys()) {
              if (!CONFIGURED.includes(name) && name !== 'extra')
                throw new Error(`model "${name}" was loaded`);
            }
          },
        ),
        200,
        () =>
          `; statuses ${[...statuses.entries()]
            .sort((a, b) => a[0] - b[0])
            .map(([s, n]) => `${s}x${n}`)
            .join(' ')}`,
        false,
      );
      const live = await send('GET', '/v2/health/live', {}, new Uint8Array());
      if (live.status !== 200) throw new Error(`server not live after the campaign: ${live.status}`);
      const errors = logs.filter((l) => /"level":"error"/.test(l));
      if (errors.length > 0) throw new Error(`error logs: ${errors.slice(0, 3).join('\n')}`);
    },
  );
});
