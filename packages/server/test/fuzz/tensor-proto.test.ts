/**
 * Fuzz targets: TensorProto and PredictRequest/PredictResponse protobuf decoding (typed
 * fields, tensor_content at every alignment, the packed-float view fast path, the
 * tensor-offset probe the gRPC transport uses for alignment) and the TF Serving gRPC
 * Predict / ModelService handlers that decode them.
 */
import { modelConfigsFromMessage } from '../../src/repository/model-config-file.js';
import { describe, it } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { Code, type Tensor, bytesPerElement, isStringData } from '@visionserve/protocol';
import {
  PredictRequestSchema,
  PredictRequestViewSchema,
  PredictResponseSchema,
  ReloadConfigRequestSchema,
  TensorProtoSchema,
  decodePredictResponseFast,
  predictRequestIsViewable,
  predictRequestTensorOffset,
  predictRequestViewFrom,
  tensorFromProto,
  tensorFromProtoView,
  tensorToProto,
  writePredictRequest,
  writePredictResponse,
} from '@visionserve/protocol/tfs-proto';
import type { PredictRequest as CorePredictRequest } from '../../src/core/inference-service.js';
import { validateConfigs } from '../../src/core/validate-configs.js';
import { createTfsGrpcServices } from '../../src/frontends/tfs-grpc/index.js';
import type { GrpcMethod } from '../../src/frontends/grpc/index.js';
import { silentLogger } from '../../src/util/logger.js';
import { FAKE_SIGNATURE, NO_ASSETS, fakeInferenceService } from '../fakes.js';
import type { ServableAssets } from '../../src/contracts/servable-assets.js';
import { NUMERIC_DTYPES, aliasArb, mutatedBytesArb, sameTensor, tensorArb } from '@visionserve/testkit/arbitraries';
import { fuzzAsync, fuzzSync, outcome, outcomeAsync, targetOptions } from '@visionserve/testkit/campaign';

const concat = (chunks: readonly Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(chunks));

/** Copies `bytes` to offset `shift` of a fresh buffer (to reach every alignment of tensor_content). */
function shifted(bytes: Uint8Array, shift: number): Uint8Array {
  const buffer = new ArrayBuffer(bytes.byteLength + shift);
  const out = new Uint8Array(buffer, shift, bytes.byteLength);
  out.set(bytes);
  return out;
}

const inputsArb = fc.dictionary(aliasArb, tensorArb(), { minKeys: 1, maxKeys: 3 });
const specArb = fc.record({
  name: fc.string({ maxLength: 8 }),
  version: fc.option(fc.bigInt({ min: -2n, max: 2n ** 63n - 1n }), { nil: undefined }),
  label: fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
  signatureName: fc.string({ maxLength: 6 }),
});

function requestBytes(
  inputs: Record<string, Tensor>,
  spec: { name: string; version: bigint | undefined; label: string | undefined; signatureName: string },
  mode: 'typed' | 'content' | 'chunks' | 'chunks-typed',
  outputFilter: string[],
): Uint8Array {
  const head = create(PredictRequestSchema, {
    modelSpec: {
      name: spec.name,
      signatureName: spec.signatureName,
      versionChoice:
        spec.version !== undefined
          ? { case: 'version', value: { value: spec.version } }
          : spec.label !== undefined
            ? { case: 'versionLabel', value: spec.label }
            : { case: undefined },
    },
    outputFilter,
  });
  if (mode === 'chunks' || mode === 'chunks-typed') {
    return concat(writePredictRequest(head, inputs, mode === 'chunks'));
  }
  for (const [alias, t] of Object.entries(inputs)) {
    head.inputs[alias] = tensorToProto(t, { asTensorContent: mode === 'content' });
  }
  return toBinary(PredictRequestSchema, head);
}

const validRequestArb = fc
  .tuple(
    inputsArb,
    specArb,
    fc.constantFrom('typed' as const, 'content' as const, 'chunks' as const, 'chunks-typed' as const),
    fc.array(aliasArb, { maxLength: 2 }),
  )
  .map(([inputs, spec, mode, filter]) => requestBytes(inputs, spec, mode, filter));

/** The general decoder: protobuf-es's PredictRequest, then tensorFromProto per input. */
/** The alias decodeGeneral and decodeFast answer for bytes that are not a PredictRequest. */
const MALFORMED = '\u0000malformed';

function decodeGeneral(bytes: Uint8Array): Record<string, Tensor> {
  let request;
  try {
    request = fromBinary(PredictRequestSchema, bytes);
  } catch {
    return { [MALFORMED]: { dtype: 'bool', shape: [], data: new Uint8Array(1) } };
  }
  const out: Record<string, Tensor> = {};
  for (const [alias, proto] of Object.entries(request.inputs)) out[alias] = tensorFromProto(proto, alias);
  return out;
}

/** What the frontend decodes: the view when viewable, else the general message as a view. */
function decodeFast(bytes: Uint8Array): Record<string, Tensor> {
  let view;
  try {
    view = predictRequestIsViewable(bytes)
      ? fromBinary(PredictRequestViewSchema, bytes)
      : predictRequestViewFrom(fromBinary(PredictRequestSchema, bytes));
  } catch {
    return { [MALFORMED]: { dtype: 'bool', shape: [], data: new Uint8Array(1) } };
  }
  const out: Record<string, Tensor> = {};
  for (const [alias, proto] of Object.entries(view.inputs)) out[alias] = tensorFromProtoView(proto, alias);
  return out;
}

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

describe('fuzz: TensorProto and PredictRequest decoding', () => {
  it(
    'tensor-proto/round-trip: tensorToProto -> wire -> tensorFromProto is the identity',
    targetOptions('tensor-proto/round-trip'),
    (t) => {
      fuzzSync(
        t,
        'tensor-proto/round-trip',
        fc.property(
          tensorArb(),
          fc.boolean(),
          fc.boolean(),
          fc.integer({ min: 0, max: 7 }),
          (tensor, content, prepack, shift) => {
            const proto = tensorToProto(tensor, { asTensorContent: content, prepackNumbers: prepack });
            const wire = shifted(toBinary(TensorProtoSchema, proto), shift);
            const back = tensorFromProto(fromBinary(TensorProtoSchema, wire), 'x');
            const diff = sameTensor(tensor, back);
            if (diff !== undefined) throw new Error(diff);
          },
        ),
        300,
      );
    },
  );

  it(
    'tensor-proto/prepacked: the pre-packed float_val, double_val and int_val bytes equal protobuf-es encoding',
    targetOptions('tensor-proto/prepacked'),
    (t) => {
      fuzzSync(
        t,
        'tensor-proto/prepacked',
        fc.property(
          tensorArb({ dtypes: ['float32', 'float64', 'int8', 'int16', 'int32', 'uint8', 'uint16'] }),
          (tensor) => {
            const fast = toBinary(
              TensorProtoSchema,
              tensorToProto(tensor, { asTensorContent: false, prepackNumbers: true }),
            );
            const plain = toBinary(TensorProtoSchema, tensorToProto(tensor, { asTensorContent: false }));
            if (Buffer.compare(Buffer.from(fast), Buffer.from(plain)) !== 0) throw new Error('bytes differ');
          },
        ),
        300,
      );
    },
  );

  it(
    'tensor-proto/hostile: mutated TensorProtos decode or fail with INVALID_ARGUMENT',
    targetOptions('tensor-proto/hostile'),
    (t) => {
      const valid = tensorArb().map((tensor) =>
        toBinary(
          TensorProtoSchema,
          tensorToProto(tensor, { asTensorContent: tensor.shape.length % 2 === 0 }),
        ),
      );
      fuzzSync(
        t,
        'tensor-proto/hostile',
        fc.property(mutatedBytesArb(valid), fc.integer({ min: 0, max: 7 }), (bytes, shift) => {
          let proto;
          try {
            proto = fromBinary(TensorProtoSchema, shifted(bytes, shift));
          } catch {
            return; // undecodable wire bytes: the frontends answer INVALID_ARGUMENT for these
          }
          const result = outcome(() => tensorFromProto(proto, 'x'));
          if (result.ok) checkWellFormed(result.value);
        }),
        500,
      );
    },
  );

  it(
    'predict-request/fast-equals-general: the view fast path decodes exactly like the general codec',
    targetOptions('predict-request/fast-equals-general'),
    (t) => {
      fuzzSync(
        t,
        'predict-request/fast-equals-general',
        fc.property(mutatedBytesArb(validRequestArb), fc.integer({ min: 0, max: 7 }), (raw, shift) => {
          const bytes = shifted(raw, shift);
          const general = outcome(() => decodeGeneral(bytes));
          const fast = outcome(() => decodeFast(bytes));
          // Refused: bytes that are no PredictRequest, or a tensor that is INVALID_ARGUMENT (where a
          // path notices the problem may differ: a half double_val is a parse error for one, a
          // tensor error for the other).
          const refused = (r: typeof general): boolean => !r.ok || MALFORMED in r.value;
          if (refused(general) !== refused(fast)) {
            throw new Error(
              `general ${refused(general) ? 'refused' : 'decoded'}, fast ${fast.ok ? (refused(fast) ? 'refused' : 'decoded') : `failed: ${fast.error.message}`}`,
            );
          }
          if (general.ok && fast.ok && !refused(general)) {
            const diff = sameInputs(general.value, fast.value);
            if (diff !== undefined) throw new Error(diff);
            for (const tensor of Object.values(fast.value)) checkWellFormed(tensor);
          }
        }),
        600,
      );
    },
  );

  it(
    'predict-request/round-trip: every request writer decodes back to its inputs',
    targetOptions('predict-request/round-trip'),
    (t) => {
      fuzzSync(
        t,
        'predict-request/round-trip',
        fc.property(
          inputsArb,
          specArb,
          fc.constantFrom('typed' as const, 'content' as const, 'chunks' as const, 'chunks-typed' as const),
          fc.integer({ min: 0, max: 7 }),
          (inputs, spec, mode, shift) => {
            const bytes = shifted(requestBytes(inputs, spec, mode, []), shift);
            const diff = sameInputs(inputs, decodeFast(bytes)) ?? sameInputs(inputs, decodeGeneral(bytes));
            if (diff !== undefined) throw new Error(`${mode}: ${diff}`);
          },
        ),
        300,
      );
    },
  );

  it(
    'predict-request/offset-probe: never throws; points at the tensor bytes of a one-input request',
    targetOptions('predict-request/offset-probe'),
    (t) => {
      const oneInput = fc
        .tuple(aliasArb, tensorArb({ dtypes: NUMERIC_DTYPES }), specArb)
        .filter(([, tensor]) => !isStringData(tensor.data) && tensor.data.byteLength > 0);
      fuzzSync(
        t,
        'predict-request/offset-probe',
        fc.property(
          fc.oneof(
            oneInput.map(([alias, tensor, spec]) => ({
              kind: 'one' as const,
              alias,
              tensor,
              bytes: requestBytes({ [alias]: tensor }, spec, 'chunks', []),
            })),
            mutatedBytesArb(validRequestArb).map((bytes) => ({ kind: 'any' as const, bytes })),
          ),
          fc.nat(),
          (input, cut) => {
            const prefix = input.bytes.subarray(
              0,
              input.kind === 'one' ? input.bytes.length : cut % (input.bytes.length + 1),
            );
            const probed = outcome(() => predictRequestTensorOffset(prefix), []);
            const offset = probed.ok ? probed.value : undefined;
            if (offset !== undefined && (!Number.isSafeInteger(offset) || offset < 0))
              throw new Error(`offset ${offset}`);
            if (input.kind === 'one') {
              const data = input.tensor.data as Exclude<Tensor['data'], readonly Uint8Array[]>;
              const expected = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
              if (offset === undefined) throw new Error('no offset for a one-input tensor_content request');
              const at = Buffer.from(input.bytes.subarray(offset, offset + expected.byteLength));
              if (Buffer.compare(at, expected) !== 0)
                throw new Error(`offset ${offset} does not point at the tensor bytes`);
            }
          },
        ),
        400,
      );
    },
  );

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
    'predict-response/writer-equals-protobuf-es: the zero-copy response writer is byte-identical',
    targetOptions('predict-response/writer-equals-protobuf-es'),
    (t) => {
      fuzzSync(
        t,
        'predict-response/writer-equals-protobuf-es',
        fc.property(inputsArb, fc.boolean(), (outputs, content) => {
          const fast = concat(writePredictResponse(outputs, undefined, content));
          const message = create(PredictResponseSchema, {});
          for (const [alias, tensor] of Object.entries(outputs))
            message.outputs[alias] = tensorToProto(tensor, { asTensorContent: content });
          const plain = toBinary(PredictResponseSchema, message);
          if (Buffer.compare(Buffer.from(fast), Buffer.from(plain)) !== 0) throw new Error('bytes differ');
        }),
        300,
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

/** Data length matches the shape and dtype. */
function checkWellFormed(tensor: Tensor): void {
  let n = 1;
  for (const d of tensor.shape) {
    if (!Number.isSafeInteger(d) || d < 0) throw new Error(`bad dimension ${d}`);
    n *= d;
  }
  if (tensor.data.length !== n)
    throw new Error(`${tensor.data.length} elements for shape [${tensor.shape.join(',')}]`);
  if (!isStringData(tensor.data) && tensor.data.byteLength !== n * bytesPerElement(tensor.dtype)) {
    throw new Error('byte length does not match the dtype');
  }
}
