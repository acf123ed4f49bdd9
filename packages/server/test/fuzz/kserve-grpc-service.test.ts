/**
 * Fuzz target: every GRPCInferenceService method's handler (Open Inference Protocol, KServe v2
 * gRPC) fed mutated messages, over fake models that check their inputs as the real core does.
 * The codec under them is fuzzed in packages/protocol/test/fuzz/kserve-grpc.test.ts.
 */
import { after, before, describe, it } from 'node:test';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { Code, type Tensor, notFound } from '@visionserve/protocol';
import {
  ModelMetadataRequestSchema,
  ModelReadyRequestSchema,
  RepositoryModelLoadRequestSchema,
  RepositoryModelUnloadRequestSchema,
  decodeModelInferResponse,
  encodeModelInferRequest,
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
import { concat, mutate, mutationArb } from '@visionserve/testkit/arbitraries';
import { fuzzAsync, outcomeAsync, targetOptions } from '@visionserve/testkit/campaign';
import { DEFAULTS } from '../../src/config/server-config.js';
import { structuredGrpcRequestArb, validGrpcRequestArb } from '@visionserve/testkit/kserve-grpc-requests';

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
      dynamicBatching: DEFAULTS.enableBatching,
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
      validGrpcRequestArb,
      structuredGrpcRequestArb,
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
