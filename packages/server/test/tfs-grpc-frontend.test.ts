import { modelConfigsFromMessage } from '../src/repository/model-config-file.js';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { create, toBinary } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { Code, ServingError, type Tensor, invalidArgument, notFound } from '@visionserve/protocol';
import {
  tensorFromProto,
  tensorToProto,
  type ModelSpec as ModelSpecProto,
  ModelSpecSchema,
  DataType,
  PredictRequestSchema,
  SignatureDefMapSchema,
  ModelVersionStatus_State,
  TfErrorCode as ErrorCodeProto,
} from '@visionserve/protocol/tfs-proto';
import type {
  CallOptions,
  ModelSpec,
  PredictRequest,
  PredictResponse,
} from '../src/core/inference-service.js';
import { NO_ASSETS, fakeInferenceService } from './fakes.js';
import type { ServableAssets } from '../src/contracts/servable-assets.js';
import type { ModelConfig } from '../src/core/model-config.js';
import type { VersionStatus } from '../src/core/model-state.js';
import type { Signature } from '../src/core/signature.js';
import { createJsonLogger } from '../src/util/logger.js';
import {
  DEFAULT_MAX_FRAME_BYTES,
  type RunningGrpcServer,
  startGrpcServer,
} from '../src/frontends/grpc/index.js';
import { createTfsGrpcServices } from '../src/frontends/tfs-grpc/index.js';
import { modelSpecFromHead } from '../src/frontends/tfs-grpc/tfs-grpc-frontend.js';
import { modelSpecFromProto, modelSpecToProto } from '../src/frontends/tfs-grpc/tfs-messages.js';
import { ModelService, PredictionService, TFS_CLIENT_METHODS, grpcPath } from './grpc-js-methods.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { grpcServerSettings } from '../src/compose/config-settings.js';

const SIGNATURE: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1, 3] } },
  outputs: {
    y: { name: 'y', dtype: 'float32', shape: [-1, 3] },
    z: { name: 'z', dtype: 'float32', shape: undefined },
  },
  methodName: 'tensorflow/serving/predict',
};

/** y = 0.5 * x + 2 and z = x for model "half"; other names exercise error paths. */
function createFakeService(): ReturnType<typeof fakeInferenceService<ServableAssets>> & {
  readonly predictions: PredictRequest[];
  readonly reloads: (readonly ModelConfig[])[];
  /** Resolves with the abort reason a "slow" predict saw. */
  slowAborted: Promise<unknown>;
} {
  const predictions: PredictRequest[] = [];
  const reloads: (readonly ModelConfig[])[] = [];
  const state = { slowAborted: Promise.resolve(undefined as unknown) };
  const service = fakeInferenceService<ServableAssets>({
    resolve(spec) {
      if (!['half', 'slow', 'boom', 'long'].includes(spec.name)) {
        throw notFound(`Servable not found for request: Latest(${spec.name})`);
      }
      return { version: spec.version ?? 3, signature: SIGNATURE, assets: NO_ASSETS };
    },
    run(request: PredictRequest, options?: CallOptions): Promise<PredictResponse> {
      predictions.push(request);
      const name = request.model.name;
      if (name === 'slow') {
        const signal = options?.signal;
        return new Promise((_, reject) => {
          state.slowAborted = new Promise((seen) => {
            signal?.addEventListener('abort', () => {
              seen(signal.reason);
              // Services may reject with a DOM AbortError; the frontend reports the reason.
              reject(new DOMException('aborted', 'AbortError'));
            });
          });
        });
      }
      if (name === 'boom') return Promise.reject(new Error('ENOENT /secret/path/model.onnx'));
      if (name === 'long') return Promise.reject(invalidArgument('x'.repeat(3000)));
      const x = request.inputs.x;
      if (x?.dtype !== 'float32') return Promise.reject(invalidArgument("input 'x' must be float32"));
      const data = x.data as Float32Array;
      const y = new Float32Array(data.length);
      for (let i = 0; i < data.length; i++) y[i] = 0.5 * data[i]! + 2;
      const all: Record<string, Tensor> = { y: { dtype: 'float32', shape: x.shape, data: y }, z: x };
      const filter = request.outputFilter ?? [];
      const outputs = filter.length === 0 ? all : Object.fromEntries(filter.map((k) => [k, all[k]!]));
      return Promise.resolve({
        model: { name, version: request.model.version ?? 3, signatureName: 'serving_default' },
        outputs,
      });
    },
    status(model: ModelSpec): VersionStatus[] {
      if (model.name !== 'half') throw notFound(`no model ${model.name}`);
      return [
        { version: 3, state: 'AVAILABLE' },
        { version: 2, state: 'END', error: { code: Code.INTERNAL, message: 'load failed' } },
      ];
    },
    reloadConfig(configs: readonly ModelConfig[]): Promise<void> {
      reloads.push(configs);
      if (configs.some((c) => c.name === 'bad')) {
        return Promise.reject(new ServingError(Code.FAILED_PRECONDITION, 'bad model'));
      }
      return Promise.resolve();
    },
    modelNames: () => ['half'],
  });
  const fake = Object.assign(service, { predictions, reloads, slowAborted: state.slowAborted });
  Object.defineProperty(fake, 'slowAborted', { get: () => state.slowAborted });
  return fake;
}

type Method<Req, Res> = grpc.MethodDefinition<Req, Res>;

function connect(port: number): grpc.Client {
  return new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  });
}

function call<Req, Res>(
  client: grpc.Client,
  method: Method<Req, Res>,
  request: Req,
  options: grpc.CallOptions = {},
): Promise<Res> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      request,
      new grpc.Metadata(),
      options,
      (error, response) => {
        if (error) reject(error);
        else resolve(response!);
      },
    );
  });
}

function versionOf(spec: ModelSpecProto | undefined): bigint | undefined {
  return spec?.versionChoice.case === 'version' ? spec.versionChoice.value.value : undefined;
}

/** Sends bytes as they are, bypassing the request serializer. */
function callRaw<Res>(
  client: grpc.Client,
  method: Pick<Method<never, Res>, 'path' | 'responseDeserialize'>,
  bytes: Buffer,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      method.path,
      (b: Buffer) => b,
      method.responseDeserialize,
      bytes,
      (error, response) => {
        if (error) reject(error);
        else resolve(response!);
      },
    );
  });
}

async function rejectsWith(promise: Promise<unknown>, code: grpc.status, details?: RegExp): Promise<void> {
  await assert.rejects(promise, (e: unknown) => {
    const error = e as grpc.ServiceError;
    assert.equal(error.code, code, `got ${grpc.status[error.code]}: ${error.details}`);
    if (details) assert.match(error.details, details);
    return true;
  });
}

function predictRequest(
  name: string,
  x: Tensor,
  init: { asTensorContent?: boolean; outputFilter?: string[]; version?: bigint; label?: string } = {},
): ReturnType<typeof create<typeof PredictRequestSchema>> {
  return create(PredictRequestSchema, {
    modelSpec: {
      name,
      versionChoice:
        init.version !== undefined
          ? { case: 'version', value: { value: init.version } }
          : init.label !== undefined
            ? { case: 'versionLabel', value: init.label }
            : { case: undefined },
    },
    inputs: { x: tensorToProto(x, { asTensorContent: init.asTensorContent ?? false }) },
    outputFilter: init.outputFilter ?? [],
  });
}

const X: Tensor = { dtype: 'float32', shape: [2, 3], data: Float32Array.of(0, 1, 2, -2, 4, 10) };
const Y = [2, 2.5, 3, 1, 4, 7];

describe('TF Serving gRPC frontend', () => {
  const service = createFakeService();
  const logLines: string[] = [];
  const logger = createJsonLogger({ level: 'debug', write: (line) => logLines.push(line) });
  let typed: RunningGrpcServer;
  let raw: RunningGrpcServer;
  let client: grpc.Client;
  let rawClient: grpc.Client;

  before(async () => {
    typed = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      services: createTfsGrpcServices({
        serializeAsTensorContent: DEFAULTS.serializeAsTensorContent,
        service,
        logger,
        readModelServerConfig: modelConfigsFromMessage,
      }),
      logger,
    });
    raw = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      services: createTfsGrpcServices({
        service,
        logger,
        readModelServerConfig: modelConfigsFromMessage,
        serializeAsTensorContent: true,
      }),
      logger,
    });
    client = connect(typed.port);
    rawClient = connect(raw.port);
  });

  after(async () => {
    client.close();
    rawClient.close();
    await Promise.all([typed.close(1000), raw.close(1000)]);
  });

  it('serves the exact TF Serving method paths', () => {
    assert.equal(grpcPath(PredictionService.method.predict), '/tensorflow.serving.PredictionService/Predict');
    assert.equal(TFS_CLIENT_METHODS.classify.path, '/tensorflow.serving.PredictionService/Classify');
    assert.equal(TFS_CLIENT_METHODS.regress.path, '/tensorflow.serving.PredictionService/Regress');
    assert.equal(
      TFS_CLIENT_METHODS.multiInference.path,
      '/tensorflow.serving.PredictionService/MultiInference',
    );
    assert.equal(
      TFS_CLIENT_METHODS.getModelMetadata.path,
      '/tensorflow.serving.PredictionService/GetModelMetadata',
    );
    assert.equal(
      grpcPath(ModelService.method.getModelStatus),
      '/tensorflow.serving.ModelService/GetModelStatus',
    );
    assert.equal(
      TFS_CLIENT_METHODS.handleReloadConfigRequest.path,
      '/tensorflow.serving.ModelService/HandleReloadConfigRequest',
    );
  });

  it('Predict with float_val returns typed outputs and the resolved model_spec', async () => {
    const response = await call(client, TFS_CLIENT_METHODS.predict, predictRequest('half', X));
    assert.equal(response.modelSpec?.name, 'half');
    assert.equal(response.modelSpec.signatureName, 'serving_default');
    assert.equal(response.modelSpec.versionChoice.case, 'version');
    assert.equal(versionOf(response.modelSpec), 3n);
    const y = response.outputs.y!;
    assert.equal(y.dtype, DataType.DT_FLOAT);
    assert.equal(y.tensorContent.byteLength, 0);
    assert.deepEqual(y.floatVal, Y);
    assert.deepEqual(
      y.tensorShape?.dim.map((d) => d.size),
      [2n, 3n],
    );
    assert.deepEqual(Object.keys(response.outputs).sort(), ['y', 'z']);
  });

  it('Predict with tensor_content input, version and output_filter', async () => {
    const response = await call(
      client,
      TFS_CLIENT_METHODS.predict,
      predictRequest('half', X, { asTensorContent: true, outputFilter: ['y'], version: 7n }),
    );
    assert.deepEqual(Object.keys(response.outputs), ['y']);
    assert.deepEqual(response.outputs.y!.floatVal, Y);
    assert.equal(versionOf(response.modelSpec), 7n);
    const seen = service.predictions.at(-1)!;
    assert.deepEqual(seen.outputFilter, ['y']);
    assert.equal(seen.model.version, 7);
    assert.equal(seen.model.label, undefined);
    assert.equal(seen.model.signatureName, undefined);
  });

  it('lets clients send DATA frames up to 1 MiB (SETTINGS_MAX_FRAME_SIZE)', async () => {
    const session = http2.connect(`http://127.0.0.1:${typed.port}`);
    try {
      const settings = await new Promise<http2.Settings>((resolve, reject) => {
        session.once('remoteSettings', resolve);
        session.once('error', reject);
      });
      assert.equal(DEFAULT_MAX_FRAME_BYTES, 1024 * 1024);
      assert.equal(settings.maxFrameSize, DEFAULT_MAX_FRAME_BYTES);
    } finally {
      session.close();
    }
  });

  it('passes a version label through', async () => {
    await call(client, TFS_CLIENT_METHODS.predict, predictRequest('half', X, { label: 'stable' }));
    const seen = service.predictions.at(-1)!;
    assert.equal(seen.model.label, 'stable');
    assert.equal(seen.model.version, undefined);
  });

  it('sheds a Predict on the head of its message, before the tensors are read', async () => {
    const named: ModelSpec[] = [];
    let released = 0;
    const admit = service.admit.bind(service);
    service.admit = (spec) => {
      named.push(spec);
      if (spec.label === 'busy') {
        throw new ServingError(Code.UNAVAILABLE, 'Server is overloaded: model half is busy', {
          reason: 'overloaded',
        });
      }
      return () => {
        released++;
      };
    };
    try {
      const handled = service.predictions.length;
      const big: Tensor = { dtype: 'float32', shape: [100_000, 3], data: new Float32Array(300_000) };
      await rejectsWith(
        call(
          client,
          TFS_CLIENT_METHODS.predict,
          predictRequest('half', big, { asTensorContent: true, label: 'busy' }),
        ),
        grpc.status.UNAVAILABLE,
        /overloaded: model half is busy/,
      );
      assert.equal(service.predictions.length, handled, 'refused before the handler');
      const response = await call(
        client,
        TFS_CLIENT_METHODS.predict,
        predictRequest('half', X, { version: 7n }),
      );
      assert.deepEqual(response.outputs.y!.floatVal, Y);
      assert.deepEqual(
        named.map((m) => [m.name, m.version, m.label]),
        [
          ['half', undefined, 'busy'],
          ['half', 7, undefined],
        ],
      );
      for (let i = 0; i < 100 && released === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(released, 1, 'the admitted call was released when it ended');
    } finally {
      service.admit = admit;
    }
  });

  it('reads the model_spec from the head of a PredictRequest only when it comes first and whole', () => {
    const bytes = (init: Parameters<typeof predictRequest>[2]) =>
      toBinary(PredictRequestSchema, predictRequest('half', X, init));
    assert.deepEqual(modelSpecFromHead(bytes({ version: 4n })), {
      name: 'half',
      version: 4,
      label: undefined,
      signatureName: undefined,
    });
    assert.equal(modelSpecFromHead(bytes({ label: 'stable' }).subarray(0, 1024))?.label, 'stable');
    assert.equal(modelSpecFromHead(bytes({}).subarray(0, 4)), undefined, 'cut inside the model_spec');
    // Inputs first (field 2), model_spec after: not in the head's first field.
    const reordered = Buffer.concat([
      toBinary(
        PredictRequestSchema,
        create(PredictRequestSchema, { inputs: predictRequest('half', X).inputs }),
      ),
      toBinary(PredictRequestSchema, create(PredictRequestSchema, { modelSpec: { name: 'half' } })),
    ]);
    assert.equal(modelSpecFromHead(reordered), undefined);
    assert.equal(modelSpecFromHead(Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0xff)), undefined);
    assert.equal(modelSpecFromHead(new Uint8Array(0)), undefined);
  });

  it('reads every model_spec from the head as the general decoder does', () => {
    const names = ['', 'm', 'mobilenet', 'ü-ñ', 'x'.repeat(300)];
    const versions = [0n, 1n, 127n, 128n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 62n, -1n];
    let n = 0;
    for (const name of names)
      for (const signatureName of ['', 'serving_default'])
        for (const choice of [
          { case: undefined },
          ...versions.map((value) => ({ case: 'version' as const, value: { value } })),
          { case: 'versionLabel' as const, value: '' },
          { case: 'versionLabel' as const, value: 'stable' },
        ]) {
          const spec = create(ModelSpecSchema, { name, signatureName, versionChoice: choice });
          const head = toBinary(PredictRequestSchema, create(PredictRequestSchema, { modelSpec: spec }));
          let expected: ModelSpec | undefined;
          try {
            expected = modelSpecFromProto(spec);
          } catch {
            expected = undefined;
          }
          assert.deepEqual(
            modelSpecFromHead(head),
            expected,
            `${name} ${signatureName} ${String(choice.case)}`,
          );
          n++;
        }
    assert.ok(n > 100);
    // Not UTF-8, a repeated field, both oneof members: decided as by protobuf-es.
    const odd = (spec: number[]) => Uint8Array.of(0x0a, spec.length, ...spec);
    assert.equal(modelSpecFromHead(odd([0x0a, 0x01, 0xff])), undefined, 'invalid UTF-8');
    assert.equal(modelSpecFromHead(odd([0x0a, 0x01, 0x61, 0x0a, 0x01, 0x62]))?.name, 'b', 'last name wins');
    assert.deepEqual(modelSpecFromHead(odd([0x12, 0x02, 0x08, 0x05, 0x22, 0x01, 0x4c])), {
      name: '',
      version: undefined,
      label: 'L',
      signatureName: undefined,
    });
  });

  it('builds response model_specs equal to the messages protobuf-es creates', () => {
    for (const [model, signatureName] of [
      [{ name: 'm', version: 3, signatureName: 'serving_default' }, 'serving_default'],
      [{ name: '', version: 0, signatureName: 'x' }, undefined],
    ] as const) {
      const expected = create(ModelSpecSchema, {
        name: model.name,
        versionChoice: { case: 'version', value: { value: BigInt(model.version) } },
        signatureName: signatureName ?? '',
      });
      const literal = modelSpecToProto(model, signatureName);
      assert.deepEqual(literal, expected);
      assert.deepEqual(toBinary(ModelSpecSchema, literal), toBinary(ModelSpecSchema, expected));
    }
  });

  it('answers with tensor_content when serializeAsTensorContent is set', async () => {
    const response = await call(rawClient, TFS_CLIENT_METHODS.predict, predictRequest('half', X));
    const y = response.outputs.y!;
    assert.equal(y.floatVal.length, 0);
    assert.equal(y.tensorContent.byteLength, 24);
    assert.deepEqual([...(tensorFromProto(y, 'y').data as Float32Array)], Y);
  });

  it('maps core errors: NOT_FOUND, INVALID_ARGUMENT, truncation, INTERNAL without details', async () => {
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.predict, predictRequest('nope', X)),
      grpc.status.NOT_FOUND,
      /^Servable not found for request: Latest\(nope\)$/,
    );
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.predict, create(PredictRequestSchema, {})),
      grpc.status.INVALID_ARGUMENT,
      /model_spec/,
    );
    const bad = predictRequest('half', X);
    bad.inputs.x!.floatVal = [1, 2, 3, 4, 5, 6, 7];
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.predict, bad),
      grpc.status.INVALID_ARGUMENT,
      /input 'x': float_val has 7 values/,
    );
    await assert.rejects(
      call(client, TFS_CLIENT_METHODS.predict, predictRequest('long', X)),
      (e: unknown) => {
        const error = e as grpc.ServiceError;
        assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
        assert.equal(error.details, `${'x'.repeat(1024)}...TRUNCATED`);
        return true;
      },
    );
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.predict, predictRequest('boom', X)),
      grpc.status.INTERNAL,
      /^Internal error$/,
    );
    assert.ok(
      logLines.some((line) => line.includes('/secret/path')),
      'the real error is logged',
    );
  });

  it('checks Classify, Regress and MultiInference requests as TF Serving does', async () => {
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.classify, create(TFS_CLIENT_METHODS_SCHEMAS.classify)),
      grpc.status.INVALID_ARGUMENT,
      /^Missing ModelSpec$/,
    );
    await rejectsWith(
      call(
        client,
        TFS_CLIENT_METHODS.regress,
        create(TFS_CLIENT_METHODS_SCHEMAS.regress, { modelSpec: { name: 'half' } }),
      ),
      grpc.status.INVALID_ARGUMENT,
      /No regression outputs found in SignatureDef/,
    );
    await rejectsWith(
      call(
        client,
        TFS_CLIENT_METHODS.classify,
        create(TFS_CLIENT_METHODS_SCHEMAS.classify, { modelSpec: { name: 'half', signatureName: 'nope' } }),
      ),
      grpc.status.INVALID_ARGUMENT,
      /No signature was found with the name: nope/,
    );
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.multiInference, create(TFS_CLIENT_METHODS_SCHEMAS.multiInference)),
      grpc.status.NOT_FOUND,
    );
  });

  it('GetModelMetadata packs a SignatureDefMap in an Any', async () => {
    const response = await call(
      client,
      TFS_CLIENT_METHODS.getModelMetadata,
      create(PredictionService.method.getModelMetadata.input, {
        modelSpec: { name: 'half' },
        metadataField: ['signature_def'],
      }),
    );
    assert.equal(response.modelSpec?.name, 'half');
    assert.equal(versionOf(response.modelSpec), 3n);
    const any = response.metadata.signature_def!;
    assert.equal(any.typeUrl, 'type.googleapis.com/tensorflow.serving.SignatureDefMap');
    const map = anyUnpack(any, SignatureDefMapSchema)!;
    const def = map.signatureDef.serving_default!;
    assert.equal(def.methodName, 'tensorflow/serving/predict');
    const x = def.inputs.x!;
    assert.deepEqual(x.encoding, { case: 'name', value: 'x' });
    assert.equal(x.dtype, DataType.DT_FLOAT);
    assert.deepEqual(
      x.tensorShape?.dim.map((d) => d.size),
      [-1n, 3n],
    );
    assert.equal(def.outputs.z!.tensorShape?.unknownRank, true);
  });

  it('GetModelMetadata requires metadata_field ["signature_def"]', async () => {
    const request = (fields: string[]) =>
      create(PredictionService.method.getModelMetadata.input, {
        modelSpec: { name: 'half' },
        metadataField: fields,
      });
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.getModelMetadata, request([])),
      grpc.status.INVALID_ARGUMENT,
      /signature_def/,
    );
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.getModelMetadata, request(['signature_def', 'graph'])),
      grpc.status.INVALID_ARGUMENT,
      /"graph" is not supported/,
    );
    await rejectsWith(
      call(
        client,
        TFS_CLIENT_METHODS.getModelMetadata,
        create(PredictionService.method.getModelMetadata.input, {
          modelSpec: { name: 'x' },
          metadataField: ['signature_def'],
        }),
      ),
      grpc.status.NOT_FOUND,
    );
  });

  it('GetModelStatus lists versions with states and status', async () => {
    const response = await call(
      client,
      TFS_CLIENT_METHODS.getModelStatus,
      create(ModelService.method.getModelStatus.input, { modelSpec: { name: 'half' } }),
    );
    const [available, ended] = response.modelVersionStatus;
    assert.equal(available?.version, 3n);
    assert.equal(available.state, ModelVersionStatus_State.AVAILABLE);
    assert.equal(available.state, 30);
    assert.equal(available.status?.errorCode, ErrorCodeProto.OK);
    assert.equal(ended?.state, 50);
    assert.equal(ended.status?.errorCode, ErrorCodeProto.INTERNAL);
    assert.equal(ended.status.errorMessage, 'load failed');
    await rejectsWith(
      call(
        client,
        TFS_CLIENT_METHODS.getModelStatus,
        create(ModelService.method.getModelStatus.input, { modelSpec: { name: 'x' } }),
      ),
      grpc.status.NOT_FOUND,
    );
  });

  it('HandleReloadConfigRequest hands the model_config_list to the service', async () => {
    const reload = ModelService.method.handleReloadConfigRequest.input;
    const response = await call(
      client,
      TFS_CLIENT_METHODS.handleReloadConfigRequest,
      create(reload, {
        config: {
          config: {
            case: 'modelConfigList',
            value: {
              config: [
                {
                  name: 'a',
                  basePath: '/models/a',
                  modelVersionPolicy: { policyChoice: { case: 'latest', value: { numVersions: 2 } } },
                  versionLabels: { stable: 3n },
                },
                {
                  name: 'b',
                  basePath: '/models/b',
                  modelVersionPolicy: { policyChoice: { case: 'specific', value: { versions: [1n, 2n] } } },
                },
                {
                  name: 'c',
                  basePath: '/models/c',
                  modelVersionPolicy: { policyChoice: { case: 'all', value: {} } },
                },
                { name: 'd', basePath: '/models/d' },
              ],
            },
          },
        },
      }),
    );
    assert.equal(response.status?.errorCode, ErrorCodeProto.OK);
    assert.deepEqual(service.reloads.at(-1), [
      {
        name: 'a',
        basePath: '/models/a',
        versionPolicy: { kind: 'latest', numVersions: 2 },
        versionLabels: { stable: 3 },
      },
      {
        name: 'b',
        basePath: '/models/b',
        versionPolicy: { kind: 'specific', versions: [1, 2] },
        versionLabels: {},
      },
      { name: 'c', basePath: '/models/c', versionPolicy: { kind: 'all' }, versionLabels: {} },
      {
        name: 'd',
        basePath: '/models/d',
        versionPolicy: { kind: 'latest', numVersions: 1 },
        versionLabels: {},
      },
    ]);
  });

  it('HandleReloadConfigRequest errors are gRPC statuses', async () => {
    const reload = ModelService.method.handleReloadConfigRequest.input;
    await rejectsWith(
      call(
        client,
        TFS_CLIENT_METHODS.handleReloadConfigRequest,
        create(reload, { config: { config: { case: 'customModelConfig', value: { typeUrl: 'x' } } } }),
      ),
      grpc.status.UNIMPLEMENTED,
      /custom_model_config/,
    );
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.handleReloadConfigRequest, create(reload, {})),
      grpc.status.INVALID_ARGUMENT,
      /model_config_list/,
    );
    await rejectsWith(
      call(
        client,
        TFS_CLIENT_METHODS.handleReloadConfigRequest,
        create(reload, {
          config: {
            config: { case: 'modelConfigList', value: { config: [{ name: 'bad', basePath: '/b' }] } },
          },
        }),
      ),
      grpc.status.FAILED_PRECONDITION,
      /bad model/,
    );
  });

  it('answers undecodable request bytes with INVALID_ARGUMENT and keeps serving', async () => {
    const good = Buffer.from(
      toBinary(PredictRequestSchema, predictRequest('half', X, { asTensorContent: true })),
    );
    const sendRaw = (bytes: Buffer) => callRaw(client, TFS_CLIENT_METHODS.predict, bytes);
    await rejectsWith(
      sendRaw(good.subarray(0, good.length - 7)),
      grpc.status.INVALID_ARGUMENT,
      /Malformed tensorflow\.serving\.PredictRequest: /,
    );
    await rejectsWith(
      sendRaw(Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff])),
      grpc.status.INVALID_ARGUMENT,
    );
    await rejectsWith(
      callRaw(client, TFS_CLIENT_METHODS.getModelStatus, Buffer.from([0x0a, 0x50, 1])),
      grpc.status.INVALID_ARGUMENT,
    );
    const response = await sendRaw(good);
    assert.deepEqual(response.outputs.y!.floatVal, Y);
  });

  it('aborts the service with DEADLINE_EXCEEDED when the deadline passes', async () => {
    const started = Date.now();
    await rejectsWith(
      call(client, TFS_CLIENT_METHODS.predict, predictRequest('slow', X), { deadline: Date.now() + 300 }),
      grpc.status.DEADLINE_EXCEEDED,
    );
    assert.ok(Date.now() - started < 5000);
    const reason = await service.slowAborted;
    assert.ok(reason instanceof ServingError);
    assert.equal(reason.code, Code.DEADLINE_EXCEEDED);
  });

  it('aborts the service with CANCELLED when the client cancels', async () => {
    const promise = new Promise<grpc.ServiceError | null>((resolve) => {
      const pending = client.makeUnaryRequest(
        TFS_CLIENT_METHODS.predict.path,
        TFS_CLIENT_METHODS.predict.requestSerialize,
        TFS_CLIENT_METHODS.predict.responseDeserialize,
        predictRequest('slow', X),
        (error) => {
          resolve(error);
        },
      );
      setTimeout(() => {
        pending.cancel();
      }, 200);
    });
    assert.equal((await promise)?.code, grpc.status.CANCELLED);
    const reason = await service.slowAborted;
    assert.ok(reason instanceof ServingError);
    assert.equal(reason.code, Code.CANCELLED);
  });

  it('round-trips a 100 MB+ request and response', { timeout: 60_000 }, async () => {
    const n = 27 * 1024 * 1024; // 108 MiB of float32
    const data = new Float32Array(n);
    for (let i = 0; i < n; i += 1021) data[i] = i % 1000;
    const big: Tensor = { dtype: 'float32', shape: [n], data };
    const response = await call(
      rawClient,
      TFS_CLIENT_METHODS.predict,
      predictRequest('half', big, { asTensorContent: true, outputFilter: ['y'] }),
    );
    const y = tensorFromProto(response.outputs.y!, 'y').data as Float32Array;
    assert.equal(y.length, n);
    for (const i of [0, 1, 1021, 2042, n - 1, 1021 * 5000]) assert.equal(y[i], 0.5 * data[i]! + 2);
  });
});

const TFS_CLIENT_METHODS_SCHEMAS = {
  classify: PredictionService.method.classify.input,
  regress: PredictionService.method.regress.input,
  multiInference: PredictionService.method.multiInference.input,
} as const;
