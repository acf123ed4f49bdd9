/**
 * Fuzz targets: the Open Inference Protocol (KServe v2) gRPC binding: the ModelInferRequest
 * decoder (raw_input_contents, typed contents, shapes, parameters, classification), the
 * raw-contents offset probe the transport aligns with, the response writer and decoder, and
 * every GRPCInferenceService method's handler fed mutated messages.
 */
import { after, before, describe, it } from 'node:test';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { Code, type Tensor, elementCount, notFound } from '@visionserve/protocol';
import { KSERVE_DATATYPES, binaryOf, datatypeOfDtype, dtypeOfDatatype } from '@visionserve/protocol/kserve';
import {
  type InferParameter,
  InferParameterSchema,
  type InferTensorContents,
  InferTensorContentsSchema,
  ModelInferRequestSchema,
  ModelInferResponseSchema,
  ModelMetadataRequestSchema,
  ModelReadyRequestSchema,
  RepositoryModelLoadRequestSchema,
  RepositoryModelUnloadRequestSchema,
  decodeModelInferRequest,
  decodeModelInferResponse,
  encodeModelInferRequest,
  modelInferRequestRawOffset,
  tensorFromContents,
  writeModelInferResponse,
} from '@visionserve/protocol/kserve-proto';
import { createInferenceStatistics } from '../../src/core/inference-statistics.js';
import type { GrpcMethod } from '../../src/frontends/grpc/grpc-service.js';
import { createKServeGrpcService, createKServeService } from '../../src/frontends/kserve/index.js';
import { findModelDirectory, listModelDirectories } from '../../src/repository/model-roots.js';
import { createJsonLogger } from '../../src/util/logger.js';
import type { ServableAssets } from '../../src/contracts/servable-assets.js';
import type { ModelRegistry } from '../../src/core/model-registry.js';
import type { Signature } from '../../src/core/signature.js';
import { validateInputs, validateOutputFilter } from '../../src/core/validate-inputs.js';
import { CLS, ECHO, HALF } from '../kserve-fakes.js';
import { fakeInferenceService } from '../fakes.js';
import {
  aliasArb,
  hostileStringArb,
  mutate,
  mutatedBytesArb,
  mutationArb,
  sameTensor,
  tensorArb,
} from '@visionserve/testkit/arbitraries';
import { fuzzAsync, fuzzSync, outcome, outcomeAsync, targetOptions } from '@visionserve/testkit/campaign';

const concat = (chunks: readonly Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(chunks));

/** Protobuf strings are UTF-8: lone surrogates cannot travel (they become U+FFFD on the way). */
const protoStringArb = hostileStringArb.map((s) => Buffer.from(s, 'utf8').toString('utf8'));

/** A request as tritonclient sends it: every input's data in raw_input_contents. */
const requestInitArb = fc
  .record({
    modelName: fc.oneof(aliasArb, protoStringArb),
    modelVersion: fc.constantFrom('', '1', '2', '99999999999999999999', 'x'),
    id: fc.string({ maxLength: 8 }),
    names: fc.uniqueArray(
      fc.oneof(
        aliasArb,
        protoStringArb.filter((s) => s !== ''),
      ),
      { maxLength: 4 },
    ),
    outputs: fc.uniqueArray(aliasArb, { maxLength: 3 }),
    classification: fc.integer({ min: 0, max: 4 }),
  })
  .chain(({ names, outputs, classification, ...head }) =>
    fc.tuple(...names.map(() => tensorArb({ maxElements: 24 }))).map((tensors) => ({
      ...head,
      inputs: tensors.map((tensor, i) => ({ name: names[i]!, tensor })),
      outputs: outputs.map((name) => ({ name, classification })),
    })),
  );

const validRequestArb = requestInitArb.map((init) => concat(encodeModelInferRequest(init)));

const hostileShapeArb = fc.oneof(
  fc.array(fc.bigInt({ min: 0n, max: 4n }), { maxLength: 3 }),
  fc.constantFrom<bigint[]>(
    [-1n],
    [2n ** 62n, 2n ** 62n],
    [2n ** 63n - 1n],
    [0n, 2n ** 60n],
    Array.from({ length: 65 }, () => 1n),
  ),
);

const parameterArb: fc.Arbitrary<InferParameter> = fc
  .oneof(
    fc.boolean().map((value) => ({ case: 'boolParam' as const, value })),
    fc
      .bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
      .map((value) => ({ case: 'int64Param' as const, value })),
    fc.string({ maxLength: 6 }).map((value) => ({ case: 'stringParam' as const, value })),
    fc.double().map((value) => ({ case: 'doubleParam' as const, value })),
    fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((value) => ({ case: 'uint64Param' as const, value })),
    fc.constant({ case: undefined }),
  )
  .map((parameterChoice) => create(InferParameterSchema, { parameterChoice }));

const contentsArb: fc.Arbitrary<InferTensorContents> = fc
  .record(
    {
      boolContents: fc.array(fc.boolean(), { maxLength: 6 }),
      intContents: fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 6 }),
      int64Contents: fc.array(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), { maxLength: 6 }),
      uintContents: fc.array(fc.integer({ min: 0, max: 2 ** 32 - 1 }), { maxLength: 6 }),
      uint64Contents: fc.array(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), { maxLength: 6 }),
      fp32Contents: fc.array(fc.float(), { maxLength: 6 }),
      fp64Contents: fc.array(fc.double(), { maxLength: 6 }),
      bytesContents: fc.array(fc.uint8Array({ maxLength: 6 }), { maxLength: 6 }),
    },
    { requiredKeys: [] },
  )
  .map((init) => create(InferTensorContentsSchema, init));

/** Messages built field by field with hostile values (protobuf-valid, meaning-invalid). */
const structuredRequestArb: fc.Arbitrary<Uint8Array> = fc
  .record({
    inputs: fc.array(
      fc.record({
        name: fc.oneof(fc.constantFrom('x', 'x', ''), hostileStringArb),
        datatype: fc.oneof(
          fc.constantFrom(...KSERVE_DATATYPES),
          fc.constantFrom('fp32', 'TYPE_FP32', '', 'STRING'),
        ),
        shape: hostileShapeArb,
        parameters: fc.dictionary(fc.constantFrom('binary_data_size', 'x', '__proto__'), parameterArb, {
          maxKeys: 2,
        }),
        contents: fc.option(contentsArb, { nil: undefined }),
      }),
      { maxLength: 3 },
    ),
    raw: fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 4 }),
    outputs: fc.array(
      fc.record({
        name: fc.oneof(fc.constantFrom('y', 'y', ''), hostileStringArb),
        parameters: fc.dictionary(fc.constantFrom('classification', 'binary_data'), parameterArb, {
          maxKeys: 2,
        }),
      }),
      { maxLength: 3 },
    ),
    parameters: fc.dictionary(fc.constantFrom('priority', 'timeout', '__proto__'), parameterArb, {
      maxKeys: 2,
    }),
  })
  .map(({ inputs, raw, outputs, parameters }) =>
    toBinary(
      ModelInferRequestSchema,
      create(ModelInferRequestSchema, {
        modelName: 'half',
        inputs: inputs.map((input) => ({
          ...input,
          ...(input.contents === undefined ? {} : { contents: input.contents }),
        })),
        rawInputContents: raw,
        outputs,
        parameters,
      }),
    ),
  );

function checkDecoded(request: ReturnType<typeof decodeModelInferRequest>): void {
  const names = new Set<string>();
  for (const input of request.inputs) {
    if (names.has(input.name)) throw new Error(`input "${input.name}" decoded twice`);
    names.add(input.name);
    if (input.tensor.dtype !== dtypeOfDatatype(input.datatype)) throw new Error(`${input.datatype}: dtype`);
    if (input.tensor.data.length !== elementCount(input.tensor.shape)) {
      throw new Error(
        `"${input.name}": ${input.tensor.data.length} elements for [${input.tensor.shape.join(',')}]`,
      );
    }
  }
}

describe('fuzz: KServe v2 gRPC codec', () => {
  it(
    'kserve-grpc/request-round-trip: encoded ModelInferRequests decode to the same inputs; the raw offset points at the first input',
    targetOptions('kserve-grpc/request-round-trip'),
    (t) => {
      fuzzSync(
        t,
        'kserve-grpc/request-round-trip',
        fc.property(requestInitArb, fc.nat(), (init, cut) => {
          const bytes = concat(encodeModelInferRequest(init));
          const decoded = decodeModelInferRequest(bytes);
          if (decoded.modelName !== init.modelName || decoded.modelVersion !== init.modelVersion) {
            throw new Error('model name or version changed');
          }
          if (decoded.id !== init.id) throw new Error('id changed');
          if (decoded.inputs.length !== init.inputs.length) throw new Error('input count');
          init.inputs.forEach((input, i) => {
            const got = decoded.inputs[i]!;
            if (got.name !== input.name) throw new Error(`name ${JSON.stringify(got.name)}`);
            if (got.datatype !== datatypeOfDtype(input.tensor.dtype))
              throw new Error(`datatype ${got.datatype}`);
            const diff = sameTensor(got.tensor, input.tensor);
            if (diff !== undefined) throw new Error(`input "${input.name}": ${diff}`);
          });
          const outputs = decoded.outputs ?? [];
          if (outputs.length !== init.outputs.length) throw new Error('output count');
          init.outputs.forEach((o, i) => {
            if (outputs[i]!.name !== o.name || outputs[i]!.classification !== o.classification) {
              throw new Error(`output ${i}: ${outputs[i]!.name} / ${outputs[i]!.classification}`);
            }
          });
          // The probe: the first raw entry's payload, from the whole message or any prefix.
          const offset = modelInferRequestRawOffset(bytes);
          const first = init.inputs[0];
          if (first !== undefined) {
            const data = binaryOf(first.tensor);
            if (offset === undefined) throw new Error('no raw offset for a request with inputs');
            if (!Buffer.from(bytes.subarray(offset, offset + data.byteLength)).equals(Buffer.from(data))) {
              throw new Error(`offset ${offset} does not point at the first input's data`);
            }
          }
          const prefix = modelInferRequestRawOffset(bytes.subarray(0, cut % (bytes.length + 1)));
          if (prefix !== undefined && prefix !== offset)
            throw new Error(`prefix offset ${prefix} != ${offset}`);
        }),
        400,
      );
    },
  );

  it(
    'kserve-grpc/request-hostile: mutated and meaning-invalid ModelInferRequests decode consistently or are INVALID_ARGUMENT',
    targetOptions('kserve-grpc/request-hostile'),
    (t) => {
      let decodedCount = 0;
      fuzzSync(
        t,
        'kserve-grpc/request-hostile',
        fc.property(fc.oneof(mutatedBytesArb(validRequestArb), structuredRequestArb), (bytes) => {
          modelInferRequestRawOffset(bytes); // never throws
          const result = outcome(() => decodeModelInferRequest(bytes));
          if (!result.ok) {
            if (result.error.message.length > 1200) throw new Error('error message is not bounded');
            return;
          }
          decodedCount++;
          checkDecoded(result.value);
          const again = decodeModelInferRequest(
            concat(
              encodeModelInferRequest({
                modelName: result.value.modelName,
                inputs: result.value.inputs.map((i) => ({
                  name: i.name,
                  tensor: i.tensor,
                  datatype: i.datatype,
                })),
              }),
            ),
          );
          result.value.inputs.forEach((input, i) => {
            const diff = sameTensor(again.inputs[i]!.tensor, input.tensor);
            if (diff !== undefined) throw new Error(`re-encoded "${input.name}": ${diff}`);
          });
        }),
        600,
        () => `; ${decodedCount} decoded`,
      );
    },
  );

  it(
    'kserve-grpc/typed-contents: any typed contents for any datatype and shape give that many elements or INVALID_ARGUMENT',
    targetOptions('kserve-grpc/typed-contents'),
    (t) => {
      fuzzSync(
        t,
        'kserve-grpc/typed-contents',
        fc.property(
          fc.constantFrom(...KSERVE_DATATYPES),
          fc.array(fc.integer({ min: 0, max: 6 }), { maxLength: 2 }),
          contentsArb,
          (datatype, shape, contents) => {
            const count = elementCount(shape);
            const result = outcome(() => tensorFromContents(datatype, shape, count, contents, 'Input x'));
            if (!result.ok) return;
            if (result.value.dtype !== dtypeOfDatatype(datatype))
              throw new Error(`dtype ${result.value.dtype}`);
            if (result.value.data.length !== count) throw new Error(`${result.value.data.length} elements`);
          },
        ),
        500,
      );
    },
  );

  it(
    'kserve-grpc/response: the written response equals protobuf-es, decodes back, and mutated ones are INVALID_ARGUMENT',
    targetOptions('kserve-grpc/response'),
    (t) => {
      fuzzSync(
        t,
        'kserve-grpc/response',
        fc.property(
          fc
            .uniqueArray(aliasArb, { maxLength: 4 })
            .chain((names) =>
              fc.tuple(fc.constant(names), fc.tuple(...names.map(() => tensorArb({ maxElements: 24 })))),
            ),
          fc.string({ maxLength: 6 }),
          fc.array(mutationArb, { maxLength: 3 }),
          ([names, tensors], id, edits) => {
            const response = {
              modelName: 'm',
              modelVersion: '3',
              id,
              outputs: tensors.map((tensor: Tensor, i) => ({ name: names[i]!, tensor })),
            };
            const bytes = concat(writeModelInferResponse(response));
            const reference = toBinary(
              ModelInferResponseSchema,
              create(ModelInferResponseSchema, {
                modelName: 'm',
                modelVersion: '3',
                id,
                outputs: response.outputs.map((o) => ({
                  name: o.name,
                  datatype: datatypeOfDtype(o.tensor.dtype),
                  shape: o.tensor.shape.map(BigInt),
                })),
                rawOutputContents: response.outputs.map((o) => binaryOf(o.tensor)),
              }),
            );
            if (!Buffer.from(bytes).equals(Buffer.from(reference)))
              throw new Error('bytes differ from protobuf-es');
            const decoded = decodeModelInferResponse(bytes);
            response.outputs.forEach((o, i) => {
              const diff = sameTensor(decoded.outputs[i]!.tensor, o.tensor);
              if (diff !== undefined) throw new Error(`output ${i}: ${diff}`);
            });
            outcome(() => decodeModelInferResponse(mutate(bytes, edits)));
          },
        ),
        400,
      );
    },
  );
});

/** Fake models that check their inputs as the real core does (then echo or halve them). */
const MODELS = new Map<string, Signature>([
  ['half', HALF],
  ['cls', CLS],
  ['echo', ECHO],
]);
const signatureOf = (name: string, version: number | undefined): Signature => {
  const signature = MODELS.get(name);
  if (signature === undefined || (version !== undefined && version !== 1)) {
    throw notFound(`Servable not found for request: Latest(${name})`);
  }
  return signature;
};
const service = fakeInferenceService<ServableAssets>({
  resolve: (spec) => ({ version: 1, signature: signatureOf(spec.name, spec.version) }),
  run(request) {
    const signature = signatureOf(request.model.name, undefined);
    validateInputs(signature, request.inputs);
    const filter = validateOutputFilter(signature, request.outputFilter);
    const outputs: Record<string, Tensor> = {};
    for (const [alias, tensor] of Object.entries(request.inputs)) {
      const out =
        Object.keys(signature.outputs).find((o) => o.startsWith(alias)) ?? Object.keys(signature.outputs)[0]!;
      outputs[out] = tensor;
    }
    const kept =
      filter.length > 0
        ? Object.fromEntries(Object.entries(outputs).filter(([k]) => filter.includes(k)))
        : outputs;
    return Promise.resolve({
      model: { ...request.model, version: 1, signatureName: 'serving_default' },
      outputs: kept,
    });
  },
  status(spec) {
    signatureOf(spec.name, spec.version);
    return [{ version: 1, state: 'AVAILABLE' }];
  },
  modelNames: () => [...MODELS.keys()],
});
const registry: ModelRegistry = {
  modelConfig: (name) =>
    MODELS.has(name)
      ? {
          name,
          basePath: `/models/${name}`,
          versionPolicy: { kind: 'latest', numVersions: 1 },
          versionLabels: {},
        }
      : undefined,
  addModel(config) {
    MODELS.set(config.name, HALF);
    return Promise.resolve();
  },
  removeModel(name) {
    if (!MODELS.delete(name)) return Promise.reject(notFound(`no ${name}`));
    return Promise.resolve();
  },
};

describe('fuzz: KServe v2 gRPC service handlers', () => {
  let roots: string;
  const logs: string[] = [];
  let methods: Record<string, GrpcMethod>;

  before(async () => {
    roots = await mkdtemp(join(tmpdir(), 'vs-fuzz-kserve-grpc-'));
    await mkdir(join(roots, 'extra', '1'), { recursive: true });
    const logger = createJsonLogger({ level: 'warn', write: (line) => logs.push(line) });
    const kserve = createKServeService({
      service,
      registry,
      statistics: createInferenceStatistics(),
      roots: {
        list: () => listModelDirectories([roots]),
        resolve: (n: string) => findModelDirectory([roots], n),
      },
      modelControl: 'explicit',
      serverVersion: '0.0.0',
      maxBatchSize: 8,
      instanceCount: 1,
      logger,
    });
    methods = createKServeGrpcService({ kserve }).methods;
  });

  after(async () => {
    await rm(roots, { recursive: true, force: true });
  });

  /** Small valid messages of every other method, to be mutated. */
  const otherArb = fc.oneof(
    fc.constantFrom('half', 'echo', 'nope', '..', 'extra', '').map((name) => ({
      method: 'ModelMetadata',
      bytes: toBinary(ModelMetadataRequestSchema, create(ModelMetadataRequestSchema, { name })),
    })),
    fc.constantFrom('half', 'cls', 'nope').map((name) => ({
      method: 'ModelReady',
      bytes: toBinary(ModelReadyRequestSchema, create(ModelReadyRequestSchema, { name, version: '2' })),
    })),
    fc.constantFrom('extra', '../extra', 'nope', '%2e%2e').map((modelName) => ({
      method: 'RepositoryModelLoad',
      bytes: toBinary(
        RepositoryModelLoadRequestSchema,
        create(RepositoryModelLoadRequestSchema, { modelName }),
      ),
    })),
    fc.constantFrom('extra', 'nope').map((modelName) => ({
      method: 'RepositoryModelUnload',
      bytes: toBinary(
        RepositoryModelUnloadRequestSchema,
        create(RepositoryModelUnloadRequestSchema, { modelName }),
      ),
    })),
    fc
      .constantFrom(
        'ServerLive',
        'ServerReady',
        'ServerMetadata',
        'ModelConfig',
        'ModelStatistics',
        'RepositoryIndex',
      )
      .map((method) => ({ method, bytes: new Uint8Array(0) })),
  );

  /** ModelInfer messages aimed at the fake models. */
  const inferArb = fc
    .oneof(
      fc.array(fc.float(), { maxLength: 8 }).map((v) =>
        concat(
          encodeModelInferRequest({
            modelName: 'half',
            inputs: [
              { name: 'x', tensor: { dtype: 'float32', shape: [v.length], data: Float32Array.from(v) } },
            ],
          }),
        ),
      ),
      fc.array(fc.float(), { minLength: 4, maxLength: 4 }).chain((v) =>
        fc.integer({ min: 0, max: 6 }).map((k) =>
          concat(
            encodeModelInferRequest({
              modelName: 'cls',
              inputs: [
                { name: 'x', tensor: { dtype: 'float32', shape: [1, 4], data: Float32Array.from(v) } },
              ],
              outputs: [{ name: 'scores', classification: k }],
            }),
          ),
        ),
      ),
      validRequestArb,
      structuredRequestArb,
    )
    .map((bytes) => ({ method: 'ModelInfer', bytes }));

  it(
    'kserve-grpc/service-hostile: every method answers or refuses mutated messages with a client status, never INTERNAL',
    targetOptions('kserve-grpc/service-hostile'),
    async (t) => {
      const codes = new Map<string, number>();
      await fuzzAsync(
        t,
        'kserve-grpc/service-hostile',
        fc.asyncProperty(
          fc.oneof({ weight: 3, arbitrary: inferArb }, { weight: 2, arbitrary: otherArb }),
          fc.array(mutationArb, { maxLength: 3 }),
          fc.integer({ min: 0, max: 7 }),
          async ({ method, bytes }, edits, shift) => {
            const mutated = mutate(bytes, edits);
            // At an odd offset of its buffer, as the transport may place it.
            const buffer = new ArrayBuffer(mutated.byteLength + shift);
            const placed = new Uint8Array(buffer, shift, mutated.byteLength);
            placed.set(mutated);
            const result = await outcomeAsync(
              async () =>
                concat(
                  await methods[method]!.handler(placed, {
                    signal: new AbortController().signal,
                    deadline: undefined,
                    metadata: {},
                    messageBuffer: buffer,
                    credentials: () => ({ authorization: undefined, peer: () => undefined }),
                  }),
                ),
              [
                Code.INVALID_ARGUMENT,
                Code.NOT_FOUND,
                Code.UNIMPLEMENTED,
                Code.FAILED_PRECONDITION,
                Code.UNAVAILABLE,
                Code.ALREADY_EXISTS,
              ],
            );
            const key = `${method}:${result.ok ? 'OK' : Code[result.error.code]}`;
            codes.set(key, (codes.get(key) ?? 0) + 1);
            if (result.ok && method === 'ModelInfer') decodeModelInferResponse(result.value);
            for (const name of MODELS.keys()) {
              if (!['half', 'cls', 'echo', 'extra'].includes(name))
                throw new Error(`model "${name}" was loaded`);
            }
          },
        ),
        300,
        () =>
          `; ${[...codes.entries()]
            .sort()
            .map(([k, n]) => `${k}x${n}`)
            .join(' ')}`,
      );
      const errors = logs.filter((l) => /"level":"error"/.test(l));
      if (errors.length > 0) throw new Error(`error logs: ${errors.slice(0, 3).join('\n')}`);
    },
  );
});
