/**
 * Fuzz targets: the TF Serving gRPC Predict and ModelService handlers on mutated messages (the
 * codec under them is fuzzed in packages/protocol/test/fuzz/tensor-proto.test.ts).
 */
import { describe, it } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { Code, type Tensor } from '@visionserve/protocol';
import {
  PredictResponseSchema,
  ReloadConfigRequestSchema,
  decodePredictResponseFast,
  tensorFromProto,
} from '@visionserve/protocol/tfs-proto';
import { concat, mutatedBytesArb } from '@visionserve/testkit/arbitraries';
import { fuzzAsync, outcome, outcomeAsync, targetOptions } from '@visionserve/testkit/campaign';
import { DEFAULTS } from '../../src/config/server-config.js';
import { decodeGeneral, sameInputs, shifted, validRequestArb } from '@visionserve/testkit/tfs-requests';
import type { ServableAssets } from '../../src/contracts/servable-assets.js';
import type { PredictRequest as CorePredictRequest } from '../../src/core/inference-service.js';
import { validateConfigs } from '../../src/core/validate-configs.js';
import type { GrpcMethod } from '../../src/frontends/grpc/index.js';
import { createTfsGrpcServices } from '../../src/frontends/tfs-grpc/index.js';
import { modelConfigsFromMessage } from '../../src/repository/model-config-file.js';
import { silentLogger } from '../../src/util/logger.js';
import { FAKE_SIGNATURE, NO_ASSETS, fakeInferenceService } from '../fakes.js';

/** A Predict handler over a fake core that echoes its inputs as outputs. */
function echoPredict(): { method: GrpcMethod; seen: CorePredictRequest[] } {
  const seen: CorePredictRequest[] = [];
  const service = fakeInferenceService<ServableAssets>({
    resolve: () => ({ version: 1, signature: FAKE_SIGNATURE, assets: NO_ASSETS }),
    run(request) {
      seen.push(request);
      return Promise.resolve({
        model: { ...request.model, version: 1, signatureName: 'serving_default' },
        outputs: request.inputs,
      });
    },
    status: () => [{ version: 1, state: 'AVAILABLE' }],
    reloadConfig: (configs) => {
      validateConfigs(configs);
      return Promise.resolve();
    },
  });
  const services = createTfsGrpcServices({
    serializeAsTensorContent: DEFAULTS.serializeAsTensorContent,
    service,
    logger: silentLogger,
    readModelServerConfig: modelConfigsFromMessage,
  });
  return { method: services[0]!.methods['Predict']!, seen };
}

const context = {
  signal: new AbortController().signal,
  deadline: undefined,
  metadata: {},
  credentials: () => ({ authorization: undefined, peer: () => undefined }),
};

describe('fuzz: TF Serving gRPC handlers', () => {
  it(
    'grpc-predict/hostile: the Predict handler answers INVALID_ARGUMENT or echoes exactly what the general codec decodes',
    targetOptions('grpc-predict/hostile'),
    async (t) => {
      const { method, seen } = echoPredict();
      await fuzzAsync(
        t,
        'grpc-predict/hostile',
        fc.asyncProperty(
          mutatedBytesArb(validRequestArb),
          fc.integer({ min: 0, max: 7 }),
          async (raw, shift) => {
            const bytes = shifted(raw, shift);
            const expected = outcome(() => decodeGeneral(bytes));
            seen.length = 0;
            const result = await outcomeAsync(async () =>
              concat(await method.handler(bytes, { ...context, messageBuffer: bytes.buffer as ArrayBuffer })),
            );
            if (!result.ok) return;
            if (!expected.ok)
              throw new Error(`handler answered OK where the general codec fails: ${expected.error.message}`);
            const response = fromBinary(PredictResponseSchema, result.value);
            const outputs: Record<string, Tensor> = {};
            for (const [alias, proto] of Object.entries(response.outputs))
              outputs[alias] = tensorFromProto(proto, alias);
            const diff =
              sameInputs(expected.value, outputs) ?? sameInputs(expected.value, seen[0]?.inputs ?? {});
            if (diff !== undefined) throw new Error(diff);
            const fast = decodePredictResponseFast(result.value);
            const fastDiff = sameInputs(outputs, fast.outputs);
            if (fastDiff !== undefined) throw new Error(`decodePredictResponseFast: ${fastDiff}`);
          },
        ),
        400,
      );
    },
  );

  it(
    'grpc-model-service/hostile: GetModelStatus, GetModelMetadata and HandleReloadConfigRequest refuse bad bytes cleanly',
    targetOptions('grpc-model-service/hostile'),
    async (t) => {
      const service = fakeInferenceService<ServableAssets>({
        resolve: () => ({ version: 1, signature: FAKE_SIGNATURE, assets: NO_ASSETS }),
        run: () => Promise.reject(new Error('not used')),
        status: () => [{ version: 1, state: 'AVAILABLE' }],
        reloadConfig: (configs) => {
          validateConfigs(configs);
          return Promise.resolve();
        },
      });
      const [prediction, model] = createTfsGrpcServices({
        serializeAsTensorContent: DEFAULTS.serializeAsTensorContent,
        service,
        logger: silentLogger,
        readModelServerConfig: modelConfigsFromMessage,
      });
      const methods = [
        prediction!.methods['GetModelMetadata']!,
        model!.methods['GetModelStatus']!,
        model!.methods['HandleReloadConfigRequest']!,
      ];
      const reload = fc
        .array(
          fc.record({
            name: fc.string({ maxLength: 6 }),
            basePath: fc.string({ maxLength: 8 }),
            labels: fc.dictionary(fc.string({ maxLength: 4 }), fc.bigInt({ min: -3n, max: 2n ** 60n })),
            policy: fc.oneof(
              fc.constant({ case: undefined }),
              fc.record({ case: fc.constant('all' as const), value: fc.constant({}) }),
              fc.record({
                case: fc.constant('latest' as const),
                value: fc.record({ numVersions: fc.integer({ min: 0, max: 5 }) }),
              }),
              fc.record({
                case: fc.constant('specific' as const),
                value: fc.record({
                  versions: fc.array(fc.bigInt({ min: -2n, max: 2n ** 62n }), { maxLength: 3 }),
                }),
              }),
            ),
          }),
          { maxLength: 3 },
        )
        .map((configs) =>
          toBinary(
            ReloadConfigRequestSchema,
            create(ReloadConfigRequestSchema, {
              config: {
                config: {
                  case: 'modelConfigList',
                  value: {
                    config: configs.map((c) => ({
                      name: c.name,
                      basePath: c.basePath,
                      versionLabels: c.labels,
                      modelVersionPolicy: { policyChoice: c.policy } as never,
                    })),
                  },
                },
              },
            }),
          ),
        );
      await fuzzAsync(
        t,
        'grpc-model-service/hostile',
        fc.asyncProperty(
          fc.integer({ min: 0, max: 2 }),
          mutatedBytesArb(fc.oneof(reload, validRequestArb)),
          async (which, bytes) => {
            await outcomeAsync(
              async () =>
                concat(
                  await methods[which]!.handler(bytes, {
                    ...context,
                    messageBuffer: bytes.buffer as ArrayBuffer,
                  }),
                ),
              [Code.INVALID_ARGUMENT, Code.UNIMPLEMENTED],
            );
          },
        ),
        400,
      );
    },
  );
});
